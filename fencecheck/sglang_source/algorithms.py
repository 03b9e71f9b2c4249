"""Each speculative algorithm of an SGLang tree, read statically: the worker class ``create_worker`` returns for it,
the ordered phases of one decode step (which runner runs, in which forward mode, under which condition), the worker's
publisher (joined from the ``workers`` rows) and the worker's reads of scheduler-shared state after the publisher's
runner has returned.

The algorithms are the members of ``SpeculativeAlgorithm`` (its ``is_*`` predicates evaluated per member with the
forward-mode evaluator of ``declare.Modes``); ``create_worker``'s ``if`` chain is followed per member: a test the
predicates decide picks its branch, any other test (a server setting) becomes the row's condition.

A decode step enters the worker's ``forward_batch_generation`` with the batch in ``DECODE`` and no extend in the
batch (``is_extend_in_batch`` false). Its statements are followed in order through ``self`` methods (the MRO), the
worker's sub-workers (``self.x = Cls(...)``, and properties returning such a field), ``super()`` and helper functions
(resolved through the module's imports and the function's own imports). A runner call is ``<r>.execute/replay/forward``
on a receiver whose name says ``runner``, or ``<w>.forward_batch_generation`` on any receiver but ``self`` (the target
worker's model runner). The phase's mode is the last ``ForwardMode`` member assigned to a ``forward_mode`` (or passed
as ``forward_mode=``) on the path before the call; forward-mode tests are decided for that mode. A call of the
scheduler's ``on_publish`` callback is listed as a phase with runner ``on_publish``.

Each runner phase publishes as its runner class does (``phase_publish``: the ``runners`` rows, joined through the
class of the attribute called, the runner classes it can be built from, or the model runner's decode graph runner
or eager runner). A worker read after the publisher is a read of a scheduler-shared map (``reads.SHARED_ATTRS`` and
the translator methods) found by ``reads.ReadWalker`` on the worker whose call chain comes after the call chain of
the publisher's runner call: the last phase on the publisher's side (draft or target, from the names) that can put
an event into its mailbox, else the last phase on that side. A read whose data is copied to the host at once
(``.tolist()``, ``.item()``, ``.cpu()``, ``.numpy()`` on it) completes before the worker returns, before the
scheduler issues its next write: not a finding. Every other read gets a scenario (``worker_read_scenario``) and
stays ``unresolved`` until ``decide_workers`` (a command-layer module: this one runs no oracle) decides it with the
simulator and ``settle`` sets its status: a race at the read is a ``worker_read_after_publish`` finding, a proof is
not a finding (the reason says why the fence covers it).
"""

from __future__ import annotations

import ast

from .declare import Modes, enum_members
from .reads import HOST_SYNC_METHODS, ReadWalker
from .tree import ClassInfo, FuncInfo, Tree

ENTRY = "forward_batch_generation"
STEP_MODE = "DECODE"
RUNNER_METHODS = ("execute", "replay", "forward")
MAX_DEPTH = 7


class Algorithms(Modes):
    """``SpeculativeAlgorithm``'s members and its boolean ``is_*`` methods, evaluated per member (``Modes``'s
    evaluator over another enum)."""

    def __init__(self, ci: ClassInfo):  # noqa: super().__init__ looks up ForwardMode
        self.cls = ci
        self.members = enum_members(ci)[0]
        self._memo = {}


def _registry(tree: Tree) -> Algorithms | None:
    cands = [c for c in tree.classes_named("SpeculativeAlgorithm") if "create_worker" in c.methods]
    return Algorithms(sorted(cands, key=lambda c: c.file)[0]) if cands else None


def _local_imports(tree: Tree, mod, stmts) -> dict:
    """name -> what the last function-local ``from X import Y`` in ``stmts`` binds it to (``Tree.local_imports``)."""
    return {k: v[-1] for k, v in tree.local_imports(mod, stmts).items()}


def _residual(algos: Algorithms, test: ast.expr, member: str):
    """(value, texts): True/False when the predicates decide ``test`` for ``member``; else None and the texts of the
    parts they do not decide (the parts of an ``and`` that hold are dropped)."""
    v = algos._eval(test, member, {})
    if v is not None:
        return v, ()
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        rest = tuple(ast.unparse(x) for x in test.values if algos._eval(x, member, {}) is not True)
        return None, rest
    return None, (ast.unparse(test),)


def _neg(text: str) -> str:
    return f"not ({text})" if " " in text else f"not {text}"


def dispatch(tree: Tree, algos: Algorithms) -> tuple[list[dict], dict[str, list[str]]]:
    """Rows, one per (member, worker class) ``create_worker`` returns: name, condition texts, worker ClassInfo, line
    of the ``return``; and per member the returns that are no class of the tree."""
    owner = algos.cls
    fn = owner.methods["create_worker"]
    rows, notes = [], {}
    for m in algos.members:
        if algos.predicate("is_none", m) is True:
            continue
        notes[m] = []
        _dispatch_block(tree, algos, owner, list(fn.body), m, (), rows, notes[m])
    return rows, notes


def _dispatch_block(tree, algos, owner, stmts, m, conds, rows, notes) -> bool:
    """Appends ``m``'s rows of ``stmts``; True when every path returns."""
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Raise):
            return True
        if isinstance(s, ast.Return) and s.value is not None:
            r = _local_imports(tree, owner.module, stmts[:i]).get(getattr(s.value, "id", None)) \
                if isinstance(s.value, ast.Name) else None
            if r is None and isinstance(s.value, ast.Name):
                r = tree.resolve(owner.module, s.value.id)
            if isinstance(r, ClassInfo):
                rows.append({"name": m, "conditions": conds, "worker": r, "line": s.lineno})
            else:
                notes.append(f"create_worker returns `{ast.unparse(s.value)}` ({owner.file}:{s.lineno})"
                             + (f" when {' and '.join(conds)}" if conds else "")
                             + ": not a class of the tree (known only at run time)")
            return True
        if isinstance(s, ast.If):
            v, texts = _residual(algos, s.test, m)
            if v is True:
                if _dispatch_block(tree, algos, owner, list(s.body), m, conds, rows, notes):
                    return True
                continue
            if v is False:
                if _dispatch_block(tree, algos, owner, list(s.orelse), m, conds, rows, notes):
                    return True
                continue
            text = " and ".join(texts)
            n_rows = len(rows)
            body_ends = _dispatch_block(tree, algos, owner, list(s.body), m, conds + (text,), rows, notes)
            dynamic = len(rows) == n_rows  # the branch returned no class of the tree: not a condition of the rest
            rest = conds if dynamic else conds + (_neg(text),)
            if _dispatch_block(tree, algos, owner, list(s.orelse), m, rest, rows, notes) and body_ends:
                return True
            if body_ends:
                conds = rest
    return False


# --- phases ---------------------------------------------------------------------------------------------------------
class _AttrTypes:
    """``types(ci)``: ``self.x`` -> the class every ``self.x = Cls(...)`` (or ``Cls(...) if c else None``) of the
    lowest class on ``ci``'s MRO that assigns ``x`` names (when just one), plus properties returning such a field;
    runners, backends and target workers (an attribute named ``*target*``) are left out: their work is the runners'
    phases, not the worker's. ``raw(ci)`` keeps them (the runner classes a phase's publish behaviour is read from).

    A field assigned from a parameter of ``__init__`` (``self.x = x``) takes the class of the argument at every
    construction of the class in the tree (``Cls(..., x=self.y)`` or positionally, ``self.y`` a field of the
    constructing class, or ``Other(...)``), when all of them agree on one class."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self._raw: dict[int, dict] = {}
        self._types: dict[int, dict] = {}
        self._ctor: dict[int, list] = {}

    def __call__(self, ci: ClassInfo) -> dict:
        if id(ci) not in self._types:
            self._types[id(ci)] = {a: k for a, k in self.raw(ci).items()
                                   if not k.name.endswith(("Runner", "Backend")) and "target" not in a}
        return self._types[id(ci)]

    def _class_of_call(self, mod, fn, value, local) -> ClassInfo | None:
        r = self.tree.resolve_expr(mod, value.func)
        if r is None and isinstance(value.func, ast.Name):
            if local[0] is None:
                local[0] = _local_imports(self.tree, mod, fn.body)
            r = local[0].get(value.func.id)
        return r if isinstance(r, ClassInfo) else None

    def raw(self, ci: ClassInfo) -> dict:
        if id(ci) in self._raw:
            return self._raw[id(ci)]
        self._raw[id(ci)] = {}
        seen: dict[str, set] = {}
        props: dict[str, str] = {}
        for c in self.tree.mro(ci):
            own: dict[str, set] = {}
            for fn in c.methods.values():
                local = [None]
                params = [a.arg for a in fn.args.args[1:]] if fn.name == "__init__" else []
                kwonly = [a.arg for a in fn.args.kwonlyargs] if fn.name == "__init__" else []
                for node in self.tree.walk(fn):
                    if not isinstance(node, ast.Assign):
                        continue
                    value = node.value
                    if isinstance(value, ast.IfExp):  # ``Cls(...) if hosts else None``: Cls or nothing
                        sides = [x for x in (value.body, value.orelse)
                                 if not (isinstance(x, ast.Constant) and x.value is None)]
                        value = sides[0] if len(sides) == 1 else value
                    if isinstance(value, ast.Call):
                        k = self._class_of_call(c.module, fn, value, local)
                    elif isinstance(value, ast.Name) and value.id in params + kwonly:
                        k = self._from_constructions(c, value.id, params.index(value.id)
                                                     if value.id in params else None)
                    else:
                        continue
                    for t in node.targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            own.setdefault(t.attr, set()).add(k)
                body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                if any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list) and len(body) == 1 \
                        and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Attribute) \
                        and isinstance(body[0].value.value, ast.Name) and body[0].value.value.id == "self":
                    props.setdefault(fn.name, body[0].value.attr)
            for a, cs in own.items():  # the lowest class on the MRO that assigns a field decides its class
                seen.setdefault(a, cs)
        out = {}
        for a, cs in seen.items():
            if len(cs) == 1:
                (k,) = cs
                if k is not None:
                    out[a] = k
        for p, a in props.items():
            if a in out and p not in out:
                out[p] = out[a]
        self._raw[id(ci)] = out
        return out

    def _constructions(self, ci: ClassInfo) -> list:
        """(constructing class, call) for each ``ci(...)`` in a method of a class under ``sglang/srt``."""
        if id(ci) not in self._ctor:
            out = []
            for m in self.tree.modules_containing(ci.name + "(", under="sglang.srt"):
                mod = self.tree.module(m)
                for c in (mod.classes.values() if mod else ()):
                    for fn in c.methods.values():
                        local = [None]
                        for node in self.tree.walk(fn):
                            if isinstance(node, ast.Call) and _src(node.func).rsplit(".", 1)[-1] == ci.name \
                                    and self._class_of_call(c.module, fn, node, local) is ci:
                                out.append((c, node))
            self._ctor[id(ci)] = out
        return self._ctor[id(ci)]

    def _from_constructions(self, ci: ClassInfo, param: str, index: int | None) -> ClassInfo | None:
        found = set()
        for creator, call in self._constructions(ci):
            arg = next((k.value for k in call.keywords if k.arg == param), None)
            if arg is None and index is not None and index < len(call.args) \
                    and not any(isinstance(a, ast.Starred) for a in call.args[:index + 1]):
                arg = call.args[index]
            if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "self":
                found.add(self.raw(creator).get(arg.attr))
            elif isinstance(arg, ast.Call):
                found.add(self._class_of_call(creator.module, None, arg, [{}]))
            else:
                found.add(None)
        return found.pop() if len(found) == 1 else None


def worker_attr_types(tree: Tree) -> _AttrTypes:
    """The classes of workers' fields (``_AttrTypes``)."""
    return _AttrTypes(tree)


class _Walk:
    """One decode step of one worker: the phases in order, the unresolved calls."""

    def __init__(self, tree: Tree, modes: Modes, types):
        self.tree, self.modes, self.types = tree, modes, types
        self.phases: list[dict] = []
        self.unresolved: list[str] = []

    def fn(self, subject, owner, node, module, mode, conds, chain, loop, depth, stack):
        """Walks one function; returns the mode in force after it (None: the paths disagree)."""
        key = f"{owner.key}.{node.name}" if owner is not None else f"{module.name}.{node.name}"
        if depth > MAX_DEPTH or key in stack:
            if self.may_phase(subject, owner, node, module):
                at = f"`{key}` ({(owner.module if owner else module).rel}:{node.lineno})"
                self.unresolved.append(
                    f"{at} is more than {MAX_DEPTH} calls below {ENTRY} (algorithms.MAX_DEPTH): its phases are not "
                    "followed" if depth > MAX_DEPTH else
                    f"{at} calls itself: its phases repeat a number of times known only at run time")
            return mode
        ctx = {"subject": subject, "module": module, "file": (owner.module if owner else module).rel,
               "key": key, "chain": chain, "stack": stack + (key,), "depth": depth,
               "imports": _local_imports(self.tree, module, node.body), "aliases": {}, "loop": loop}
        mode, _ = self.block(node.body, mode, conds, ctx)
        return mode

    def block(self, stmts, mode, conds, ctx):
        for s in stmts:
            mode, conds, dead = self.stmt(s, mode, conds, ctx)
            if dead:
                return mode, True
        return mode, False

    def stmt(self, s, mode, conds, ctx):
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return mode, conds, False
        if isinstance(s, ast.Raise):
            return mode, conds, True
        if isinstance(s, ast.Return):
            if s.value is not None:
                mode = self.exprs(s.value, mode, conds, ctx)
            return mode, conds, True
        if isinstance(s, ast.If):
            mode = self.exprs(s.test, mode, conds, ctx)
            t = self.test(s.test, mode)
            if t is not None:
                m2, dead = self.block(s.body if t else s.orelse, mode, conds, ctx)
                return m2, conds, dead
            text = _src(s.test)
            m1, d1 = self.block(s.body, mode, conds + (text,), ctx)
            m2, d2 = self.block(s.orelse, mode, conds + (_neg(text),), ctx)
            if d1 and d2:
                return mode, conds, True
            if d1:
                return m2, conds + (_neg(text),), False
            if d2:
                return m1, conds + (text,), False
            return (m1 if m1 == m2 else None), conds, False
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            head = s.test if isinstance(s, ast.While) else s.iter
            mode = self.exprs(head, mode, conds, ctx)
            inner = dict(ctx, loop=f"{'while' if isinstance(s, ast.While) else 'for'} {ast.unparse(head)[:80]} "
                                   f"({ctx['file']}:{s.lineno})")
            m1, _ = self.block(s.body, mode, conds, inner)
            return (m1 if m1 == mode else None), conds, False
        if isinstance(s, (ast.With, ast.AsyncWith)):
            for it in s.items:
                mode = self.exprs(it.context_expr, mode, conds, ctx)
            m1, dead = self.block(s.body, mode, conds, ctx)
            return m1, conds, dead
        if isinstance(s, ast.Try):
            m1, dead = self.block(s.body, mode, conds, ctx)
            m1, _ = self.block(s.finalbody, m1, conds, ctx)
            return m1, conds, False
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            value = s.value
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            if value is not None:
                mode = self.exprs(value, mode, conds, ctx)
                for t in targets:
                    if isinstance(t, ast.Attribute) and t.attr == "forward_mode":
                        m = self.mode_of(value, mode)
                        if m is not None:
                            mode = m
                    elif isinstance(t, ast.Name):
                        text = _src(value)
                        if "runner" in text.rsplit(".", 1)[-1].lower() and not isinstance(value, ast.Call):
                            ctx["aliases"][t.id] = text
            return mode, conds, False
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.expr):
                mode = self.exprs(child, mode, conds, ctx)
        return mode, conds, False

    def mode_of(self, e, mode):
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == self.modes.cls.name \
                and e.attr in self.modes.members:
            return e.attr
        if isinstance(e, ast.IfExp):
            t = self.test(e.test, mode)
            if t is not None:
                return self.mode_of(e.body if t else e.orelse, mode)
        return None

    def test(self, e, mode):
        from .declare import compare_mode
        from .reads import _is_mode_expr

        if mode is None:
            return None
        if isinstance(e, ast.Attribute) and e.attr == "is_extend_in_batch":
            return False
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            t = self.test(e.operand, mode)
            return None if t is None else not t
        if isinstance(e, ast.BoolOp):
            vals = [self.test(v, mode) for v in e.values]
            if isinstance(e.op, ast.And):
                return False if False in vals else (True if all(v is True for v in vals) else None)
            return True if True in vals else (False if all(v is False for v in vals) else None)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and _is_mode_expr(e.func.value):
            kw = {k.arg: k.value.value for k in e.keywords if isinstance(k.value, ast.Constant)}
            return self.modes.predicate(e.func.attr, mode, kw)
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and _is_mode_expr(e.left):
            return compare_mode(self.modes, mode, e.ops[0], e.comparators[0])
        return None

    def exprs(self, node, mode, conds, ctx):
        """Follows the calls under ``node`` (arguments before the call that takes them); returns the mode after."""
        for c in _calls_postorder(node):
            for k in c.keywords:
                if k.arg == "forward_mode":
                    m = self.mode_of(k.value, mode)
                    if m is not None:
                        mode = m
            mode = self.call(c, mode, conds, ctx)
        return mode

    def _phase(self, c, runner, mode, conds, ctx, kind="runner", recv=None):
        attr = recv[len("self."):] if recv and recv.startswith("self.") and recv[5:].isidentifier() else None
        self.phases.append({"runner": runner, "call": ast.unparse(c.func), "mode": mode if kind == "runner" else None,
                            "kind": kind, "conditions": tuple(conds), "file": ctx["file"], "line": c.lineno,
                            "chain": ctx["chain"] + ((ctx["key"], c.lineno),), "loop": ctx["loop"],
                            "subject": ctx["subject"].name if ctx["subject"] else None,
                            "subject_ci": ctx["subject"], "attr": attr})

    def call(self, c, mode, conds, ctx):
        f, tree, subject = c.func, self.tree, ctx["subject"]
        if isinstance(f, ast.Name) and f.id == "on_publish":
            self._phase(c, "on_publish", mode, conds, ctx, kind="publish")
            return mode
        if isinstance(f, ast.Attribute):
            recv = f.value
            rtext = ctx["aliases"].get(recv.id, _src(recv)) if isinstance(recv, ast.Name) else _src(recv)
            shown = rtext.replace("self.", f"{subject.name}.", 1) if subject and rtext.startswith("self.") else rtext
            is_self = isinstance(recv, ast.Name) and recv.id == "self"
            if f.attr in RUNNER_METHODS and "runner" in rtext.rsplit(".", 1)[-1].lower():
                self._phase(c, shown, mode, conds, ctx, recv=rtext)
                return mode
            if f.attr == ENTRY and not is_self:
                self._phase(c, shown, mode, conds, ctx, recv=rtext)
                return mode
            if isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and recv.value.id == "self" \
                    and subject is not None and self.types(subject).get(recv.attr) is None \
                    and "worker" in recv.attr.lower() and "target" not in recv.attr:
                self.unresolved.append(f"`{ast.unparse(f)}` ({ctx['file']}:{c.lineno}): the class of "
                                       f"`{rtext}` is not known statically; its phases are not followed")
        target = self.target(c, subject, ctx["key"], ctx["module"], ctx["imports"])
        if target is None:
            return mode
        cls, owner, node, module = target
        return self.fn(cls, owner, node, module, mode, conds, ctx["chain"] + ((ctx["key"], c.lineno),), ctx["loop"],
                       ctx["depth"] + 1, ctx["stack"])

    def target(self, c, subject, key, module, imports):
        """(subject, owner, def, module) of the function the call ``c`` enters (``owner`` None for a module-level
        function), or None: ``super()`` and ``self`` calls on the subject's MRO, a method of a sub-worker of known
        class, a helper function resolved through the module's or the function's own imports."""
        f, tree = c.func, self.tree
        if isinstance(f, ast.Attribute):
            recv = f.value
            hit, cls = None, subject
            if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and recv.func.id == "super" and subject:
                owner_key = key.rsplit(".", 1)[0]
                owner = next((k for k in tree.mro(subject) if k.key == owner_key), None)
                hit = tree.lookup(subject, f.attr, owner)
            elif isinstance(recv, ast.Name) and recv.id == "self" and subject is not None:
                hit = tree.lookup(subject, f.attr)
            elif isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and recv.value.id == "self" \
                    and subject is not None:
                cls = self.types(subject).get(recv.attr)
                hit = tree.lookup(cls, f.attr) if cls is not None else None
            elif isinstance(recv, ast.Name):
                r = imports.get(recv.id) or tree.resolve(module, recv.id)
                if isinstance(r, tuple) and r[0] == "module":
                    m = tree.module(r[1])
                    fi = m.functions.get(f.attr) if m else None
                    if fi is not None:
                        return None, None, fi.node, fi.module
            if hit is not None:
                return cls, hit[0], hit[1], hit[0].module
            return None
        if isinstance(f, ast.Name):
            r = imports.get(f.id) or tree.resolve(module, f.id)
            if isinstance(r, FuncInfo):
                return None, None, r.node, r.module
        return None

    def may_phase(self, subject, owner, node, module) -> bool:
        """Whether ``node`` or a function it reaches through the calls the walk follows (any depth) has a call that
        may be a phase (a runner method, ``forward_batch_generation``, ``on_publish``) or sets a forward mode."""
        start = (subject.key if subject else None, f"{owner.key}.{node.name}" if owner else f"{module.name}.{node.name}")
        memo = self.__dict__.setdefault("_may", {})
        if start in memo:
            return memo[start]
        seen, todo = {start}, [(subject, start[1], node, module)]
        while todo:
            subj, key, fn, mod = todo.pop()
            imports = _local_imports(self.tree, mod, fn.body)
            aliases = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and not isinstance(n.value, ast.Call)
                       and "runner" in _src(n.value).rsplit(".", 1)[-1].lower()
                       for t in n.targets if isinstance(t, ast.Name)}
            for n in ast.walk(fn):
                if _phase_like(n, aliases):
                    memo[start] = True
                    return True
                if not isinstance(n, ast.Call):
                    continue
                t = self.target(n, subj, key, mod, imports)
                if t is None:
                    continue
                cls, own, d, m = t
                k = (cls.key if cls else None, f"{own.key}.{d.name}" if own else f"{m.name}.{d.name}")
                if memo.get(k) is True:
                    memo[start] = True
                    return True
                if k not in seen and k not in memo:
                    seen.add(k)
                    todo.append((cls, k[1], d, m))
        for k in seen:  # everything reachable was seen, and none of it may be a phase
            memo[k] = False
        return False


def _phase_like(n, aliases) -> bool:
    """Whether ``n`` may be a phase of a decode step or set its mode (what ``_Walk.call`` and ``stmt`` act on);
    ``aliases``: the function's locals bound to a runner."""
    if isinstance(n, ast.Call):
        f = n.func
        if isinstance(f, ast.Name) and f.id == "on_publish":
            return True
        if isinstance(f, ast.Attribute):
            recv = f.value
            if f.attr == ENTRY and not (isinstance(recv, ast.Name) and recv.id == "self"):
                return True
            if f.attr in RUNNER_METHODS and ((isinstance(recv, ast.Name) and recv.id in aliases)
                                             or "runner" in _src(recv).rsplit(".", 1)[-1].lower()):
                return True
        return any(k.arg == "forward_mode" for k in n.keywords)
    if isinstance(n, ast.Assign):
        return any(isinstance(t, ast.Attribute) and t.attr == "forward_mode" for t in n.targets)
    return False


_MEMO: dict[tuple[str, int], tuple] = {}


def _memo(kind: str, node, make):
    """``make(node)`` computed once per node (kept with the node itself, so a reused id is never a stale hit)."""
    hit = _MEMO.get((kind, id(node)))
    if hit is not None and hit[0] is node:
        return hit[1]
    out = make(node)
    _MEMO[kind, id(node)] = (node, out)
    return out


def _src(node) -> str:
    return _memo("src", node, ast.unparse)


def _calls_postorder(node):
    def make(root):
        out = []

        def visit(n):
            for k in ast.iter_child_nodes(n):
                if not isinstance(k, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    visit(k)
            if isinstance(n, ast.Call):
                out.append(n)

        visit(root)
        return out

    return _memo("calls", node, make)


# --- reads after the publisher ----------------------------------------------------------------------------------------
def _position(read) -> list[tuple[str, int]]:
    """(function, line) pairs from the entry down to the read: the line of the call (or the read) in each."""
    hops = read.via
    return [(hops[i].key, hops[i + 1].line) for i in range(len(hops) - 1)] + [(hops[-1].key, read.line)]


def _after(pos, chain) -> bool | None:
    """Whether ``pos`` comes after the call chain ``chain`` in one step (None: on other paths)."""
    for (k1, l1), (k2, l2) in zip(pos, chain):
        if k1 != k2:
            return None
        if l1 != l2:
            return l1 > l2
    return False  # the same call, or inside the runner's call


def _side(text: str) -> str:
    return "draft" if "draft" in text.lower() else "target"


def _host_copy(walker: ReadWalker, read) -> str | None:
    """``file:line`` of a host copy taken straight from the read (``x[i].tolist()``), or None."""
    node = walker.functions.get(read.via[-1].key, (None,))[0]
    if node is None:
        return None
    for n in ast.walk(node):
        if getattr(n, "lineno", None) == read.line and ast.unparse(n)[:120] == read.what:
            p = getattr(n, "_fc_parent", None)
            while isinstance(p, (ast.Subscript, ast.Attribute, ast.Call)):
                if isinstance(p, ast.Call) and isinstance(p.func, ast.Attribute) and p.func.attr in HOST_SYNC_METHODS:
                    return f"{read.file}:{p.lineno}"
                p = getattr(p, "_fc_parent", None)
    return None


def _cond_text(conds) -> str | None:
    return " and ".join(conds) if conds else None


def read_algorithms(tree: Tree, modes: Modes, workers: list[dict], runners: list[dict] = (),
                    scenarios: dict | None = None, rule: str | None = None) -> list[dict]:
    """The ``algorithms`` rows of the tree (empty when it has no ``SpeculativeAlgorithm``). ``runners``: the
    ``runners`` rows (each phase's publish behaviour is read from them). Each worker read after the publisher that is
    not copied to the host gets its scenario (``worker_read_scenario``; added to ``scenarios``, name -> Scenario,
    when given) and stays ``unresolved`` until ``decide_workers.decide_worker_reads`` decides it."""
    algos = _registry(tree)
    if algos is None:
        return []
    types = worker_attr_types(tree)
    walker = ReadWalker(tree, modes, types)
    ctx = {"tree": tree, "types": types, "runners": {(r["class"], r["file"]): r for r in runners},
           "by_name": {r["class"]: r for r in runners}, "scenarios": scenarios if scenarios is not None else {},
           "decided": {}, "rule": rule}
    out, per_worker = [], {}
    rows, notes = dispatch(tree, algos)
    for row in rows:
        ci = row["worker"]
        if id(ci) not in per_worker:
            try:
                per_worker[id(ci)] = _worker_step(tree, modes, types, walker, ci, workers, ctx, row["name"])
            except RecursionError:
                tree.note(ci.file, ci.line, f"{ci.name}: nested too deeply to walk its decode step (Python's "
                                            "recursion limit)")
                per_worker[id(ci)] = ([], [f"{ci.name} ({ci.file}:{ci.line}): nested too deeply to walk its decode "
                                           "step (Python's recursion limit)"], [], [])
        phases, unresolved, publisher, reads = per_worker[id(ci)]
        out.append({"name": row["name"], "condition": _cond_text(row["conditions"]),
                    "dispatch": {"file": algos.cls.file, "line": row["line"]},
                    "worker": {"class": ci.name, "file": ci.file, "line": ci.line},
                    "phases": phases, "publisher": publisher, "reads_after_publisher": reads,
                    "unresolved": notes[row["name"]] + unresolved})
    for m, why in notes.items():
        if not any(r["name"] == m for r in rows):
            out.append({"name": m, "condition": None, "dispatch": None, "worker": None, "phases": [],
                        "publisher": [], "reads_after_publisher": [],
                        "unresolved": why or ["create_worker returns no worker class for it"]})
    return sorted(out, key=lambda a: (a["name"], a["condition"] or ""))


# --- publish behaviour of a phase ------------------------------------------------------------------------------------
#: The reader's runner ``publish`` values as the scenario's ``PublishPolicy``.
POLICY = {"resolve": "resolve", "clear_then_resolve": "clear_then_resolve", "publish_unconditionally":
          "always_pre_replay", "prefill_publish": "prefill", "never": "never"}
#: The runner a model runner's ``forward`` replays for a decode-step mode, and the one it runs eagerly.
GRAPH_RUNNER, EAGER_RUNNER = "DecodeCudaGraphRunner", "EagerRunner"


def _no_decode_graphs(tree: Tree, ci: ClassInfo | None) -> str | None:
    """``file:line`` of an ``init_cuda_graphs(..., capture_decode_cuda_graph=False)`` call in a method of ``ci``'s
    MRO (the worker sets its model runner up without decode graphs), or None."""
    for c in (tree.mro(ci) if ci is not None else ()):
        for fn in c.methods.values():
            for n in ast.walk(fn):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "init_cuda_graphs" \
                        and any(k.arg == "capture_decode_cuda_graph" and isinstance(k.value, ast.Constant)
                                and k.value.value is False for k in n.keywords):
                    return f"{c.file}:{n.lineno}"
    return None


def _runner_candidates(tree: Tree, ci: ClassInfo, attr: str, runners: dict) -> list[dict]:
    """The runner rows of the classes ``self.<attr> = f(...)`` can build in a method of ``ci``'s MRO: the runner
    classes named in ``f`` or in what the local names ``f`` uses were assigned (a table of classes per device, a
    selector's candidates), followed through the function's own assignments."""
    found: dict = {}
    for c in tree.mro(ci):
        for fn in c.methods.values():
            assigns: dict[str, list] = {}
            for n in tree.walk(fn):
                if isinstance(n, ast.Assign):
                    for t in n.targets:
                        if isinstance(t, ast.Name):
                            assigns.setdefault(t.id, []).append(n.value)
            local = None

            def collect(expr, seen, depth=0):
                nonlocal local
                for n in ast.walk(expr):
                    if not isinstance(n, ast.Name) or n.id in seen or depth > 6:
                        continue
                    seen.add(n.id)
                    if n.id in assigns:
                        for v in assigns[n.id]:
                            collect(v, seen, depth + 1)
                        continue
                    r = tree.resolve(c.module, n.id)
                    if r is None:
                        if local is None:
                            local = _local_imports(tree, c.module, fn.body)
                        r = local.get(n.id)
                    if isinstance(r, ClassInfo) and (r.name, r.file) in runners:
                        found[(r.name, r.file)] = runners[(r.name, r.file)]

            for n in tree.walk(fn):
                if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and any(
                        isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
                        and t.value.id == "self" for t in n.targets):
                    collect(n.value.func, set())
    return [found[k] for k in sorted(found)]


def _row_text(row) -> str:
    m = row["method"]
    return f"{row['class']}: publish {row['publish']} ({m['file']}:{m['line']})"


def phase_publish(ctx, p, side) -> dict:
    """How the runner phase ``p`` publishes into its side's mailbox: ``policy`` (a ``PublishPolicy`` value),
    ``execution`` (``graph`` / ``eager``) and ``why`` (the source it was read from); ``policy`` None when the
    runner's class is not known statically."""
    tree, types = ctx["tree"], ctx["types"]
    k = types.raw(p["subject_ci"]).get(p["attr"]) if p["subject_ci"] is not None and p["attr"] else None
    row = ctx["runners"].get((k.name, k.file)) if k is not None else None
    if row is not None:
        return {"policy": POLICY[row["publish"]], "execution": "graph", "why": _row_text(row)}
    if k is None and p["subject_ci"] is not None and p["attr"]:
        rows = _runner_candidates(tree, p["subject_ci"], p["attr"], ctx["runners"])
        policies = {r["publish"] for r in rows}
        publishing = policies - {"never"}
        if rows and len(publishing) <= 1:
            # candidates that disagree (one per device): the one that publishes, under which a later read races
            chosen = publishing.pop() if publishing else "never"
            return {"policy": POLICY[chosen], "execution": "graph",
                    "why": f"`self.{p['attr']}` is built from one of " + ", ".join(_row_text(r) for r in rows)
                           + (f" (taken as {chosen}, the one that publishes)" if len(policies) > 1 else "")}
    model_runner = p["call"].endswith("." + ENTRY) or (p["call"].endswith(".forward") and k is None)
    if model_runner:
        eager = _no_decode_graphs(tree, p["subject_ci"]) if side == "draft" else None
        if eager is not None:
            row = ctx["by_name"].get(EAGER_RUNNER)
            return {"policy": POLICY[row["publish"]] if row else "never", "execution": "eager",
                    "why": f"the worker sets its model runner up without decode graphs ({eager}): the mode runs "
                           f"eagerly" + (f"; {_row_text(row)}" if row else "")}
        row = ctx["by_name"].get(GRAPH_RUNNER)
        if row is not None:
            return {"policy": POLICY[row["publish"]], "execution": "graph",
                    "why": f"the model runner replays its decode graph runner; {_row_text(row)}"}
    what = f"`{p['call']}` ({p['file']}:{p['line']})"
    return {"policy": None, "execution": "graph",
            "why": f"the runner class of {what} is not known statically"}


def _may_publish(p) -> bool:
    """Whether the runner phase ``p`` can put an event into its mailbox in a decode step (the simulator decides
    whether it does: ``clear_then_resolve`` and ``resolve`` ask the backend)."""
    pub = p["publish"]
    if pub["policy"] == "never" or (pub["policy"] == "prefill" and p["mode"] != "EXTEND"):
        return False
    return not (pub["execution"] == "eager" and pub["policy"] != "prefill")


def _worker_step(tree, modes, types, walker, ci, workers, ctx, algorithm):
    hit = tree.lookup(ci, ENTRY)
    if hit is None:
        return [], [f"{ci.name} ({ci.file}:{ci.line}) has no {ENTRY}"], [], []
    owner, node = hit
    w = _Walk(tree, modes, types)
    w.fn(ci, owner, node, owner.module, STEP_MODE, (), (), None, 0, ())
    unresolved = list(dict.fromkeys(w.unresolved))
    phases = []
    for p in w.phases:
        side = None if p["kind"] == "publish" else _side(f"{p['subject'] or ''} {p['runner']}")
        p["side"] = side
        p["publish"] = phase_publish(ctx, p, side) if p["kind"] == "runner" else None
        if p["kind"] == "runner" and p["mode"] is None:
            unresolved.append(f"the mode of `{p['call']}` ({p['file']}:{p['line']}) is not known statically "
                              f"(the paths before it set different modes)")
        if p["loop"]:
            unresolved.append(f"`{p['call']}` ({p['file']}:{p['line']}) runs inside {p['loop']}: "
                              f"a count known only at run time")
        if p["publish"] is not None and p["publish"]["policy"] is None:
            unresolved.append(f"{p['publish']['why']}: its publish behaviour is taken as `resolve`")
        phases.append({"runner": p["runner"], "call": p["call"], "mode": p["mode"], "kind": p["kind"],
                       "side": side, "condition": _cond_text(p["conditions"]), "conditions": list(p["conditions"]), "repeat": p["loop"],
                       "publish": p["publish"], "file": p["file"], "line": p["line"]})
    publisher = [{"publisher": r["publisher"], "condition": r["condition"], "side": _side(r["publisher"]),
                  "file": r["returns_at"]["file"], "line": r["returns_at"]["line"]}
                 for r in workers if r["class"] == ci.name and r["file"] == ci.file]
    if not publisher:
        unresolved.append(f"{ci.name} has no last_shared_read_runner: no publisher to order its reads against")
    reads = _reads_after(walker, ci, w.phases, publisher, unresolved, ctx, algorithm)
    return phases, unresolved, publisher, reads


def _reads_after(walker, ci, phases, publisher, unresolved, ctx, algorithm) -> list[dict]:
    """The worker's reads after the publisher's runner, each decided on its scenario. The ordering point is the last
    phase on the publisher's side that can publish into its mailbox (the runner call that records the read-done
    event); when none can, the last phase on that side, and the reads are covered by the coarse barrier."""
    all_reads, cuts = walker.method_walk(ci, ENTRY, STEP_MODE)
    for c in cuts:
        if c.host_sync is None:
            unresolved.append(f"a read path of {ci.name} cut: {c.text()}; via "
                              + " -> ".join(h.func for h in c.via))
    runs = [p for p in phases if p["kind"] == "runner"]
    out = {}
    for pub in publisher:
        mine = [p for p in runs if p["side"] == pub["side"]]
        if not mine:
            unresolved.append(f"no phase runs on the publisher `{pub['publisher']}`'s side ({pub['side']})")
            continue
        publishing = [p for p in mine if _may_publish(p)]
        last = (publishing or mine)[-1]
        for r in all_reads:
            pos = _position(r)
            if not _after(pos, last["chain"]):
                continue
            k = (r.file, r.line, r.location)
            if k in out:
                continue
            copy = _host_copy(walker, r)
            row = {"location": r.location, "file": r.file, "line": r.line, "what": r.what,
                   "via": [h.text() for h in r.via], "condition": _cond_text(r.conditions),
                   "publisher": pub["publisher"], "publisher_condition": pub["condition"],
                   "after": {"call": last["call"], "file": last["file"], "line": last["line"],
                             "condition": _cond_text(last["conditions"]), "mode": last["mode"]}}
            if copy is not None:
                row["after"]["can_publish"] = bool(publishing)
                row |= {"finding": None, "why": f"copied to the host at {copy} (a synchronous copy: it completes "
                                                f"before the worker returns, before the scheduler's next write)"}
            else:
                before = [p for p in runs if _after(pos, p["chain"])]
                row["after"]["can_publish"] = bool(publishing)
                row |= _pending_read(ctx, ci, pub, r, before)
            out[k] = row
    return [out[k] for k in sorted(out)]


# --- deciding a worker read ------------------------------------------------------------------------------------------
def worker_read_scenario(name: str, ci: ClassInfo, pub: dict, location: str, before: list,
                         rule: str | None = None) -> dict | None:
    """The scenario table of a worker read of ``location`` after the runner phases ``before`` (in step order): the
    two model runners own the mailboxes (``target``, ``draft``), each phase runs on a runner of its own that
    publishes into its side's mailbox as its runner class does, with an attention backend under the base rule
    (``AttentionBackend.shared_read_ends``) that reads nothing; the worker reads ``location`` on the forward stream
    after the last phase (``worker_reads_after``); the publisher is ``pub``'s side; the overlap scheduler's barrier.
    None when a phase's mode is not one the scenarios model."""
    from ..vocab import ForwardMode

    seen, phases, runners = set(), [], {"target": {"publish": "never", "fresh_events": True},
                                        "draft": {"publish": "never", "fresh_events": True}}
    for p in before:
        if p["mode"] not in ForwardMode.__members__:
            return None
        if (p["file"], p["line"], p["mode"]) in seen:
            continue
        seen.add((p["file"], p["line"], p["mode"]))
        pname = f"{p['side']}-{p['mode'].lower().replace('_', '-')}-{p['line']}"
        while any(x["name"] == pname for x in phases):
            pname += "x"
        runners[pname] = {"publish": p["publish"]["policy"] or "resolve", "mailbox": p["side"], "fresh_events": True}
        phases.append({"name": pname, "runner": pname, "mode": p["mode"], "backend": "attn",
                       **({"execution": "eager"} if p["publish"]["execution"] == "eager" else {})})
    if not phases:
        return None
    phases[-1]["worker_reads_after"] = [location]
    cites = [f"{p['file']}:{p['line']}: {p['side']} {p['mode']} by `{p['call']}`: {p['publish']['why']}"
             for p in before]
    return {"name": name,
            "description": f"{ci.name} as read from the sources: the runner phases of its decode step before its "
                           f"read of {location}, which follows them on the forward stream; the publisher is "
                           f"`{pub['publisher']}` ({pub['side']}); each phase's attention backend declares the "
                           f"base rule.",
            "cites": cites + [f"{pub['file']}:{pub['line']}: publisher {pub['publisher']}"],
            "resolution": rule or "declaration_only", "steps": 2,
            "backends": {"attn": {}}, "runners": runners,
            "algorithm": {"name": slug(ci.name), "publisher": pub["side"], "steps": {"normal": phases}}}


def slug(text: str) -> str:
    """A class or map name as a scenario-name fragment: ``DSparkWorkerV2`` -> ``d-spark-worker-v2`` (the reader's
    scenario names, backend findings' and worker reads' alike)."""
    import re

    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", text)
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _pending_read(ctx, ci, pub, r, before) -> dict:
    """``finding`` (``unresolved`` until decided) and ``why`` of a device read after the publisher, with its scenario
    built and kept in ``ctx["scenarios"]`` (each distinct configuration once)."""
    from fencecheck.files.scenario_io import scenario_from_dict

    base = f"sglang-{slug(ci.name)}-reads-{slug(r.location)}-{r.line}"
    data = worker_read_scenario(base, ci, pub, r.location, before, ctx.get("rule"))
    pending = {"kind": "worker_read_after_publish", "status": "unresolved", "scenario": None}
    if data is None:
        return {"finding": pending, "why": "a phase before the read runs in a mode the scenarios do not model"}
    key = repr((data["runners"], data["algorithm"]["steps"], data["algorithm"]["publisher"]))
    if key not in ctx["decided"]:
        name = data["name"]
        while name in ctx["scenarios"]:
            name += "-b"
        data["name"] = name
        ctx["scenarios"][name] = scenario_from_dict(data, name)
        ctx["decided"][key] = name
    name = ctx["decided"][key]
    return {"finding": dict(pending, scenario=name),
            "why": f"not decided yet: `fencecheck sglang` decides it on scenario {name} with the simulator"}


def settle(row: dict, scenario, verdict: str, races: list[str], at_read: bool) -> None:
    """Sets the decided ``finding`` and ``why`` of a pending read ``row`` from the simulator's answer on its
    ``scenario``: ``verdict``, the distinct ``races`` (``location@phase/site``) and whether one is at the read (its
    location, the last phase before it, ``worker_after``). A race at the read is a finding, ``confirmed`` when
    neither the read, the publisher nor the publisher's runner call depends on a condition, else ``plausible``; a
    proof is no finding (the reason says why the fence covers it); anything else stays ``unresolved``."""
    name = row["finding"]["scenario"]
    follows = scenario.algorithm.steps[next(iter(scenario.algorithm.steps))][-1]
    decided = {"scenario": name, "verdict": verdict, "races": races, "mode": follows.mode.value}
    after, pub = row["after"], row["publisher"]
    where = f"`{after['call']}` ({after['file']}:{after['line']})"
    if verdict == "counterexample" and at_read:
        status = "plausible" if (row["condition"] or row["publisher_condition"] or after["condition"]) \
            else "confirmed"
        row["finding"] = {"kind": "worker_read_after_publish", "status": status, **decided}
        row["why"] = (f"read on the forward stream after {where} published the read-done event into `{pub}`'s "
                      f"mailbox: the scheduler's next write waits only for that event")
    elif verdict == "proved":
        if not after["can_publish"]:
            reason = (f"nothing publishes into the mailbox of the publisher `{pub}` (no runner on its side publishes "
                      f"in these modes): the barrier waits for all of the forward stream")
        else:
            reason = (f"no read-done event precedes the read in `{pub}`'s mailbox when the barrier reads it ({where} "
                      f"publishes nothing for {after['mode']} under the base rule, or clears the mailbox)")
        row["finding"] = None
        row["why"] = f"the fence covers it: {reason}; scenario {name}: proved"
        row.update(decided)
    else:
        row["finding"] = {"kind": "worker_read_after_publish", "status": "unresolved", **decided}
        row["why"] = f"scenario {name}: {verdict}" + (f" ({', '.join(races)})" if races else "")


def findings(algorithms: list[dict]) -> list[dict]:
    """The top-level findings of the worker reads after the publisher that are findings: one per worker class, read
    and publisher (the algorithms that share the worker listed), sorted."""
    out: dict = {}
    for a in algorithms:
        for r in a["reads_after_publisher"]:
            f = r["finding"]
            if f is None:
                continue
            w = a["worker"]
            key = (w["class"], w["file"], r["file"], r["line"], r["location"], r["publisher"])
            if key in out:
                out[key]["algorithms"].append(a["name"])
                continue
            pub = f" (when {r['publisher_condition']})" if r["publisher_condition"] else ""
            cond = " and ".join(x for x in (r["condition"], r["publisher_condition"], r["after"]["condition"])
                                if x) or None
            out[key] = {"kind": f["kind"], "subject": w["class"], "subject_at": f"{w['file']}:{w['line']}",
                        "mode": f.get("mode"), "status": f["status"], "condition": cond,
                        "algorithms": [a["name"]], "location": r["location"],
                        "evidence": [{"file": r["after"]["file"], "line": r["after"]["line"],
                                      "what": f"`{r['after']['call']}` is the publisher's runner: "
                                              f"`{r['publisher']}`{pub} is last_shared_read_runner"},
                                     {"file": r["file"], "line": r["line"],
                                      "what": f"reads {r['location']} on the device after it via "
                                              + " -> ".join(r["via"])
                                              + (f" (when {r['condition']})" if r["condition"] else "")}],
                        "why": r["why"],
                        **{k: f[k] for k in ("scenario", "verdict", "races", "model_verdict", "oracles_agree",
                                             "oracles_differ") if k in f}}
    return [out[k] for k in sorted(out)]

