"""Static evaluation of SGLang's ``ForwardMode`` predicates and of each backend's ``shared_read_ends`` per mode.

The evaluator is a small path-sensitive interpreter over a body's ``ast``: the mode is known, so ``fm.is_decode()``,
``fm == ForwardMode.EXTEND`` and ``fm in (...)`` fold to booleans through ``ForwardMode``'s own methods; a test it
cannot decide (a setting such as ``self.model_runner.spec_algorithm.is_dspark()``) splits the result into
conditional rows naming the condition. ``super()`` and ``self`` calls follow the subject class's MRO; a child
backend's declaration (``self.backend.shared_read_ends(fm)``) is a delegation, ``SharedReadEnds.max_of`` over
children a composite. Anything else is ``Unresolved`` with its reason; nothing is guessed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from fencecheck.vocab import SharedReadEnds

from .tree import ClassInfo, Tree

ENDS = tuple(e.name for e in SharedReadEnds)  # ordered by lateness, as the vocabulary orders them
_ORDER = {e.name: int(e) for e in SharedReadEnds}


class Unresolved(Exception):
    def __init__(self, reason: str, line: int | None = None):
        super().__init__(reason)
        self.reason, self.line = reason, line


# --- values -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class End:
    name: str

    def text(self) -> str:
        return self.name


@dataclass(frozen=True)
class Opaque:
    """An expression the evaluator does not interpret (a setting, a child object)."""

    src: str
    line: int | None = field(default=None, compare=False)  # the ``return`` that returned it, if one did


@dataclass(frozen=True)
class Odd:
    """A value returned that is no declaration and no test (a number, ``None``, a string, a tuple)."""

    src: str
    line: int | None = None


@dataclass(frozen=True)
class Child:
    """The declaration of a child backend held in ``src`` (``self.backend``), or of each of a list of children."""

    src: str
    many: bool = False
    cls: ClassInfo | None = None

    def text(self) -> str:
        return f"delegate({self.src})"


@dataclass(frozen=True)
class MaxOf:
    items: tuple

    def text(self) -> str:
        return "max_of(" + ", ".join(("*" + i.src) if isinstance(i, Child) and i.many else
                                     (i.src if isinstance(i, Child) else i.text()) for i in self.items) + ")"


@dataclass(frozen=True)
class Mode:
    name: str
    src: str = field(default="the forward mode", compare=False)
    line: int | None = field(default=None, compare=False)  # the ``return`` that returned it, if one did


def end_text(v) -> str:
    return v.text()


# --- ForwardMode --------------------------------------------------------------------------------------------------
class Modes:
    """``ForwardMode``'s members (in definition order) and its boolean methods, evaluated per member."""

    def __init__(self, tree: Tree):
        cands = [c for c in tree.classes_named("ForwardMode") if c.file.endswith("forward_batch_info.py")] or \
            tree.classes_named("ForwardMode")
        if not cands:
            from .tree import NotSGLang

            raise NotSGLang(str(tree.root), "", "not an SGLang tree: no ForwardMode class found" + tree.skipped_text())
        self.cls = cands[0]
        self.members, unread = enum_members(self.cls)
        self._memo: dict = {}
        at = f"{self.cls.name} ({self.cls.file}:{self.cls.line})"
        for line, text in unread:
            tree.note(self.cls.file, line, f"{self.cls.name} members not read: `{text}` (a member is `NAME = value`): "
                                           "no mode of theirs is checked")
        if not self.members:
            tree.note(self.cls.file, self.cls.line, f"{at} has no member the reader can read (`NAME = value`): no "
                                                    "forward mode is checked, so no read is")
        from ..vocab import ForwardMode as Known

        for m in self.members:
            if m not in Known.__members__:
                tree.note(self.cls.file, self.cls.line, f"forward mode {m} is not one fencecheck's vocabulary knows "
                                                        "(fencecheck/vocab.py ForwardMode): its reads and findings are "
                                                        "listed as read, no scenario decides them", False)

    @property
    def file(self) -> str:
        return self.cls.file

    @property
    def line(self) -> int:
        return self.cls.line

    def predicate(self, method: str, member: str, kwargs: dict | None = None) -> bool | None:
        """``ForwardMode.<member>.<method>(**kwargs)`` as a boolean, or None when the body is not a plain boolean
        expression over ``self``."""
        key = (method, member, tuple(sorted((kwargs or {}).items())))
        if key in self._memo:
            return self._memo[key]
        active = self.__dict__.setdefault("_active", [])
        if key in active:  # a predicate calling itself never returns: every one on the cycle is not known
            self.__dict__.setdefault("_cyclic", set()).update(active[active.index(key):])
            return None
        active.append(key)
        try:
            result = self._predicate(method, member, kwargs)
        finally:
            active.pop()
        if key in self.__dict__.get("_cyclic", ()):
            result = None
        self._memo[key] = result
        return result

    def _predicate(self, method: str, member: str, kwargs: dict | None) -> bool | None:
        fn = self.cls.methods.get(method)
        result = None
        if fn is not None:
            env = {}
            args = fn.args.args[1:]
            defaults = [None] * (len(args) - len(fn.args.defaults)) + list(fn.args.defaults)
            for a, d in zip(args, defaults):
                if isinstance(d, ast.Constant):
                    env[a.arg] = d.value
            env.update(kwargs or {})
            body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
                result = self._eval(body[0].value, member, env)
                if not isinstance(result, bool):
                    result = None
        return result

    def _member_of(self, e: ast.expr) -> str | None:
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == self.cls.name \
                and e.attr in self.members:
            return e.attr
        return None

    def _eval(self, e, member, env):
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, ast.Name):
            return env.get(e.id, None)
        if isinstance(e, ast.BoolOp):
            vals = [self._eval(v, member, env) for v in e.values]
            if isinstance(e.op, ast.And):
                if any(v is False for v in vals):
                    return False
                return True if all(v is True for v in vals) else None
            if any(v is True for v in vals):
                return True
            return False if all(v is False for v in vals) else None
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            v = self._eval(e.operand, member, env)
            return None if v is None else not v
        if isinstance(e, ast.IfExp):
            t = self._eval(e.test, member, env)
            if t is None:
                return None
            return self._eval(e.body if t else e.orelse, member, env)
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.left, ast.Name) and e.left.id == "self":
            return compare_mode(self, member, e.ops[0], e.comparators[0])
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Name) \
                and e.func.value.id == "self" and not e.args:
            kw = {}
            for k in e.keywords:
                v = self._eval(k.value, member, env)
                if k.arg is None or v is None:
                    return None
                kw[k.arg] = v
            return self.predicate(e.func.attr, member, kw)
        return None


def enum_members(ci: ClassInfo) -> tuple[list[str], list[tuple[int, str]]]:
    """The members of the enum class ``ci`` in definition order (``NAME = value`` or ``NAME: type = value``, upper
    case), and (line, source) of each statement assigning upper-case names otherwise (``A, B = 1, 2``): members the
    reader does not read."""
    members, unread = [], []
    for node in ci.node.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id.isupper():
                members.append(node.targets[0].id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            if node.target.id.isupper():
                members.append(node.target.id)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and any(
                isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id.isupper() for n in ast.walk(node)):
            unread.append((node.lineno, ast.unparse(node)[:80]))
    return members, unread


def compare_mode(modes: Modes, member: str, op: ast.cmpop, right: ast.expr) -> bool | None:
    if isinstance(op, (ast.Eq, ast.Is, ast.NotEq, ast.IsNot)):
        m = modes._member_of(right)
        if m is None:
            return None
        return (m == member) if isinstance(op, (ast.Eq, ast.Is)) else (m != member)
    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
        ms = [modes._member_of(x) for x in right.elts]
        if any(m is None for m in ms):
            return None
        return (member in ms) if isinstance(op, ast.In) else (member not in ms)
    return None


# --- declarations ---------------------------------------------------------------------------------------------------
MAX_DEPTH = 12


class DeclEval:
    """Evaluates ``shared_read_ends`` (and the prefill snapshot) of a subject class for one mode. Results are lists
    of (conditions, value): conditions a tuple of source texts (``not X`` for the else branch)."""

    def __init__(self, tree: Tree, modes: Modes, attr_types):
        self.tree, self.modes = tree, modes
        self.attr_types = attr_types  # (ClassInfo) -> {attr: ClassInfo}

    def method(self, subject: ClassInfo, name: str, mode: str, after: ClassInfo | None = None, depth: int = 0):
        """The rows of ``subject``'s ``name`` for ``mode``: each value a declaration (``End``, ``Child``,
        ``MaxOf``); anything else returned raises ``Unresolved`` quoting it."""
        hit = self.tree.lookup(subject, name, after)
        if hit is None:
            raise Unresolved(f"{name} not found on {subject.name}'s MRO")
        owner, fn = hit
        rows = self.call(subject, owner, fn, mode, [Mode(mode)], depth)
        for _, v in rows:
            if not isinstance(v, (End, Child, MaxOf)):
                raise Unresolved(f"returns {_quote(v)}, not a SharedReadEnds member", getattr(v, "line", None))
        return rows

    def call(self, subject, owner, fn: ast.FunctionDef, mode, args, depth, stack=()):
        if depth > MAX_DEPTH:
            raise Unresolved(f"calls nested deeper than {MAX_DEPTH} (declare.MAX_DEPTH)", fn.lineno)
        if id(fn) in stack:
            raise Unresolved(f"{owner.name}.{fn.name} calls itself: it never returns a value", fn.lineno)
        env = {}
        params = [a.arg for a in fn.args.args[1:]] + [a.arg for a in fn.args.kwonlyargs]
        for p, v in zip(params, args):
            env[p] = v
        ctx = _Ctx(subject, owner, fn, mode, depth, stack + (id(fn),))
        rows = self._block(fn.body, env, (), ctx)
        if rows is None or not rows:
            raise Unresolved(f"{owner.name}.{fn.name} does not return on every path", fn.lineno)
        return rows

    # statements: returns list of (conds, value) for paths that return, or raises
    def _block(self, stmts, env, conds, ctx):
        out = []
        for i, s in enumerate(stmts):
            if isinstance(s, ast.Return):
                if s.value is None:
                    raise Unresolved("returns None", s.lineno)
                for c, v in self._expr(s.value, env, ctx):
                    out.append((conds + c, _returned(v, s)))
                return out
            if isinstance(s, ast.If) and not any(isinstance(n, (ast.Return, ast.Raise)) for n in ast.walk(s)) \
                    and not _stores_used(s, stmts[i + 1:]):
                # a branch for its effects only (building a cache): no row depends on it; its locals become opaque
                for n in ast.walk(s):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        env[n.id] = Opaque(n.id)
                continue
            if isinstance(s, ast.If):
                for c, t in self._test(s.test, env, ctx):
                    if t is True:
                        sub = self._block(list(s.body) + list(stmts[i + 1:]), dict(env), conds + c, ctx)
                    elif t is False:
                        sub = self._block(list(s.orelse) + list(stmts[i + 1:]), dict(env), conds + c, ctx)
                    else:
                        sub = self._block(list(s.body) + list(stmts[i + 1:]), dict(env), conds + c + (t,), ctx) + \
                            self._block(list(s.orelse) + list(stmts[i + 1:]), dict(env), conds + c + (negate(t),), ctx)
                    out.extend(sub)
                return out
            if isinstance(s, (ast.Expr, ast.Pass, ast.Assert)):
                continue  # a docstring or a call for its effect (a snapshot build): no value
            if isinstance(s, (ast.Assign, ast.AnnAssign)):
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                if len(targets) == 1 and isinstance(targets[0], ast.Name) and s.value is not None:
                    vals = self._expr(s.value, env, ctx)
                    if len(vals) == 1 and not vals[0][0]:
                        env[targets[0].id] = vals[0][1]
                        continue
                    for c, v in vals:  # a value that depends on a condition: the rest of the body once per row
                        out.extend(self._block(list(stmts[i + 1:]), {**env, targets[0].id: v}, conds + c, ctx))
                    return out
                if all(isinstance(t, ast.Attribute) for t in targets):
                    continue  # a side effect on self (a cache): no value
            raise Unresolved(f"cannot evaluate a {type(s).__name__} statement", s.lineno)
        return out

    def _test(self, e, env, ctx):
        """[(conds, True | False | condition text)]."""
        out = []
        for c, v in self._expr(e, env, ctx, boolean=True):
            if isinstance(v, bool):
                out.append((c, v))
            elif isinstance(v, Opaque):
                out.append((c, v.src))
            else:
                raise Unresolved(f"a test on {type(v).__name__}", getattr(e, "lineno", None))
        return out

    def _expr(self, e, env, ctx, boolean=False):
        """[(conds, value)] for an expression."""
        ev = lambda x: self._expr(x, env, ctx)  # noqa: E731
        if isinstance(e, ast.Constant):
            return [((), e.value)]
        if isinstance(e, ast.Name):
            if e.id in env:
                return [((), env[e.id])]
            return [((), Opaque(e.id))]
        if isinstance(e, ast.Attribute):
            if isinstance(e.value, ast.Name) and e.value.id == "SharedReadEnds" and e.attr in ENDS:
                return [((), End(e.attr))]
            if e.attr == "forward_mode":  # forward_batch.forward_mode in a snapshot hook: the mode
                return [((), Mode(ctx.mode))]
            if isinstance(e.value, ast.Name) and e.value.id == "self":
                cls = self.attr_types(ctx.subject).get(e.attr)
                if cls is not None:
                    return [((), Opaque(f"self.{e.attr}"))]
            return [((), Opaque(ast.unparse(e)))]
        if isinstance(e, ast.BoolOp):
            vals = [self._test(v, env, ctx) for v in e.values]
            if any(len(v) != 1 or v[0][0] for v in vals):
                raise Unresolved("a conditional value inside a boolean operation", e.lineno)
            flat = [v[0][1] for v in vals]
            if isinstance(e.op, ast.And):
                if any(x is False for x in flat):
                    return [((), False)]
                rest = [x for x in flat if x is not True]
                return [((), True if not rest else Opaque(" and ".join(rest)))]
            if any(x is True for x in flat):
                return [((), True)]
            rest = [x for x in flat if x is not False]
            return [((), False if not rest else Opaque(" or ".join(rest)))]
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            return [(c, (not v) if isinstance(v, bool) else Opaque(negate(v)))
                    for c, v in self._test(e.operand, env, ctx)]
        if isinstance(e, ast.IfExp):
            out = []
            for c, t in self._test(e.test, env, ctx):
                if t is True:
                    out += [(c + c2, v) for c2, v in ev(e.body)]
                elif t is False:
                    out += [(c + c2, v) for c2, v in ev(e.orelse)]
                else:
                    out += [(c + (t,) + c2, v) for c2, v in ev(e.body)]
                    out += [(c + (negate(t),) + c2, v) for c2, v in ev(e.orelse)]
            return out
        if isinstance(e, ast.Compare) and len(e.ops) == 1:
            left = ev(e.left)
            if len(left) == 1 and isinstance(left[0][1], Mode):
                r = compare_mode(self.modes, left[0][1].name, e.ops[0], e.comparators[0])
                if r is not None:
                    return [((), r)]
                raise Unresolved(f"a comparison of the mode: {ast.unparse(e)}", e.lineno)
            return [((), Opaque(ast.unparse(e)))]
        if isinstance(e, ast.Call):
            return self._call(e, env, ctx, boolean)
        raise Unresolved(f"cannot evaluate {ast.unparse(e)[:80]}", getattr(e, "lineno", None))

    def _call(self, e: ast.Call, env, ctx, boolean):
        f = e.func
        # mode predicates: fm.is_x(...)
        if isinstance(f, ast.Attribute):
            recv = self._expr(f.value, env, ctx) if not _is_super(f.value) else None
            if recv and len(recv) == 1 and isinstance(recv[0][1], Mode):
                kw = {k.arg: k.value.value for k in e.keywords if isinstance(k.value, ast.Constant)}
                r = self.modes.predicate(f.attr, recv[0][1].name, kw)
                if r is None:
                    raise Unresolved(f"ForwardMode.{f.attr} is not a plain predicate", e.lineno)
                return [((), r)]
            if f.attr == "max_of" and isinstance(f.value, ast.Name) and f.value.id == "SharedReadEnds":
                return self._max_of(e, env, ctx)
            if _is_super(f.value):
                args = [v for a in e.args for _, v in self._expr(a, env, ctx)]
                hit = self.tree.lookup(ctx.subject, f.attr, ctx.owner)
                if hit is None:
                    raise Unresolved(f"super().{f.attr} not found on the MRO", e.lineno)
                return self.call(ctx.subject, hit[0], hit[1], ctx.mode, args, ctx.depth + 1, ctx.stack)
            if isinstance(f.value, ast.Name) and f.value.id == "self":
                hit = self.tree.lookup(ctx.subject, f.attr)
                if hit is not None:
                    args = []
                    for a in e.args:
                        vs = self._expr(a, env, ctx)
                        args.append(vs[0][1] if len(vs) == 1 and not vs[0][0] else Opaque(ast.unparse(a)))
                    return self.call(ctx.subject, hit[0], hit[1], ctx.mode, args, ctx.depth + 1, ctx.stack)
            if f.attr in ("shared_read_ends", "_snapshot_prefill_shared_reads"):
                out = []
                for c, v in (recv or []):
                    out.append((c, self._child(v, f.value, ctx)))
                return out
        if boolean:
            return [((), Opaque(ast.unparse(e)))]
        return [((), Opaque(ast.unparse(e)))]

    def _child(self, v, src_node, ctx) -> Child:
        src = v.src if isinstance(v, Opaque) else ast.unparse(src_node)
        cls = None
        if src.startswith("self.") and src.count(".") == 1:
            cls = self.attr_types(ctx.subject).get(src[5:])
        if isinstance(v, Child):
            return v
        return Child(src, cls=cls)

    def _max_of(self, e: ast.Call, env, ctx):
        if len(e.args) != 1:
            raise Unresolved("max_of with other than one argument", e.lineno)
        a = e.args[0]
        items = []
        if isinstance(a, (ast.GeneratorExp, ast.ListComp)) and len(a.generators) == 1:
            gen = a.generators[0]
            elt = a.elt
            if not (isinstance(gen.target, ast.Name) and isinstance(elt, ast.Call)
                    and isinstance(elt.func, ast.Attribute) and elt.func.attr == "shared_read_ends" and isinstance(elt.func.value, ast.Name)
                    and elt.func.value.id == gen.target.id):
                raise Unresolved(f"max_of over {ast.unparse(a)[:80]}", e.lineno)
            it = gen.iter
            if isinstance(it, (ast.Tuple, ast.List)):
                for x in it.elts:
                    if isinstance(x, ast.Starred):
                        items.append(Child(ast.unparse(x.value), many=True))
                    elif isinstance(x, ast.Name) and x.id == "self":  # the subject's own declaration: a call
                        call = ast.Call(ast.Attribute(x, elt.func.attr, ast.Load()), elt.args, elt.keywords)
                        items.append(self._item(ast.copy_location(call, x), env, ctx, e))
                    else:
                        items.append(self._child(Opaque(ast.unparse(x)), x, ctx))
            else:
                items.append(Child(ast.unparse(it), many=True))
        elif isinstance(a, (ast.List, ast.Tuple)):
            for x in a.elts:
                items.append(self._item(x, env, ctx, e))
        else:
            raise Unresolved(f"max_of over {ast.unparse(a)[:80]}", e.lineno)
        if all(isinstance(i, End) for i in items):
            return [((), End(max((i.name for i in items), key=_ORDER.get)))]
        return [((), MaxOf(tuple(items)))]


    def _item(self, x, env, ctx, e):
        """One item of ``max_of``: a declaration, unconditional; else ``Unresolved`` quoting it."""
        vs = self._expr(x, env, ctx)
        if len(vs) != 1 or vs[0][0]:
            raise Unresolved("a conditional item in max_of", e.lineno)
        v = vs[0][1]
        if not isinstance(v, (End, Child, MaxOf)):
            raise Unresolved(f"max_of over `{ast.unparse(x)[:80]}`, not a SharedReadEnds member", e.lineno)
        return v


def _returned(v, ret: ast.Return):
    """``v`` as returned by ``ret``: a value that is no declaration and no test keeps the ``return``'s line (and
    source) for the reason that quotes it."""
    if isinstance(v, (End, Child, MaxOf, bool)):
        return v
    if isinstance(v, (Opaque, Mode)):
        return v if v.line is not None else replace(v, line=ret.lineno, **({"src": ast.unparse(ret.value)[:80]}
                                                                          if isinstance(v, Mode) else {}))
    return Odd(ast.unparse(ret.value)[:80], ret.lineno)


def _quote(v) -> str:
    if isinstance(v, (Opaque, Odd)):
        return f"`{v.src}`"
    if isinstance(v, Mode):
        return f"`{v.src}` (the forward mode)"
    return f"`{v!r}`"


def _stores_used(s: ast.If, rest) -> bool:
    """Whether a local ``s`` assigns is read by the statements after it (then its branches decide a value)."""
    stored = {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return bool(stored) and any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in stored
                                for r in rest for n in ast.walk(r))


@dataclass
class _Ctx:
    subject: ClassInfo
    owner: ClassInfo
    fn: ast.FunctionDef
    mode: str
    depth: int
    stack: tuple = ()  # the functions being evaluated (a call of one of them again never returns)


def _is_super(e) -> bool:
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "super"


def negate(cond: str) -> str:
    """``not cond``, parenthesised when ``cond`` has spaces; the negation of a negation made here is the original."""
    if cond.startswith("not (") and cond.endswith(")"):
        return cond[5:-1]
    if cond.startswith("not ") and " " not in cond[4:]:
        return cond[4:]
    return f"not ({cond})" if " " in cond else f"not {cond}"


def max_end(ends) -> str:
    return max(ends, key=_ORDER.get)
