"""The gates of the prefill publish, read from the tree as the decode fallback is: the tests that keep a prefill
(``EXTEND``) runner from recording its read-done event, and what they decide per speculative algorithm and setting.

A gate is an exit on the way to the publish: in the function holding a runner's prefill publish statement, a
``return`` before it under a test (``if not supports_prefill_shared_read_done(): return`` on 0.5.21-0.5.23; ``if
stage is None or not stage(fb): return`` inside it, the stager of 0.5.20-0.5.22); and in the resolving method the
runner calls first (0.5.23's ``resolve_prefill_shared_read_ends`` on the root ``AttentionBackend``), a ``return`` of an
end other than ``PRE_REPLAY`` that does not come from the backend's declaration (``if FORCE_COARSE or not
ENABLE_PREFILL_WAR_READ_DONE: return UNKNOWN``). The declaration method itself is the backend's, not a gate. An exit
is the conjunction of the tests on its path (an ``if`` whose body returns; the negation of an enclosing test whose
body holds the publish). What the gates decide also takes the conditions on the runner's path to the publish (the
runner walk's, over its whole call chain), so a test moved from the publishing function into its caller decides
the same.

Each exit's atoms are classified: a setting (``envs.NAME.get()``, its default read from ``Envs``), a speculative
algorithm predicate (``...spec_algorithm.P()``, evaluated per ``SpeculativeAlgorithm`` member by
``dispatch.Algorithms``), the forward mode (decided for ``EXTEND``), the declaration (``shared_read_ends is not
PRE_REPLAY``: the backend's), a stager (a local bound to ``getattr(obj, "attr", None)`` and tested ``is None``:
decided from every store of ``attr`` in the tree, class attributes included) and anything else (a server flag, a
call: not known). Tests are decided for a backend that declares ``PRE_REPLAY`` (the one a prefill publish is for).
Each publish point is decided on its own (``_Point``: its exits, its path conditions, and the resolving method's
exits when it tests the declaration); per member the tree's answer is the most permissive point's: ``never`` when
every point is kept off whatever the settings, else ``allowed`` (at the settings' defaults), ``may`` (not decided) or
``with settings``; no speculation's row says whether the publish is on by default.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .platform import _setting_of, setting_names
from .tree import ClassInfo, Tree

DECLARATION = "shared_read_ends"
PRE_REPLAY = "PRE_REPLAY"


@dataclass(frozen=True)
class Exit:
    """One way out before the publish: the conjunction of ``tests`` (AST), where it leaves (file, the line of the
    ``if`` whose test completes it), and the local names bound before it (name -> value AST)."""

    tests: tuple[ast.expr, ...]
    file: str
    line: int
    env: tuple[tuple[str, ast.expr], ...]

    def text(self) -> str:
        if len(self.tests) == 1:
            return ast.unparse(self.tests[0])
        return " and ".join(_paren(ast.unparse(t)) for t in self.tests) if self.tests else "always"


def _paren(text: str) -> str:
    return f"({text})" if " or " in text else text


def _contains(node: ast.AST, line: int) -> bool:
    end = getattr(node, "end_lineno", None) or getattr(node, "lineno", 0)
    return getattr(node, "lineno", 0) <= line <= end


#: A name bound to a value the reader does not follow.
UNKNOWN = ast.Constant(value=Ellipsis)


def negation(e: ast.expr) -> ast.expr:
    """``not e``, with a double negation dropped (``not not x`` is ``x``)."""
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        return e.operand
    return ast.UnaryOp(op=ast.Not(), operand=e)


def _stored(s: ast.stmt) -> set[str]:
    """The local names ``s`` binds anywhere in it (targets, walrus targets, loop and ``with`` targets)."""
    return {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _returns(stmts) -> bool:
    """Whether ``stmts`` end in a ``return`` or ``raise`` at their own level."""
    return any(isinstance(s, (ast.Return, ast.Raise)) for s in stmts)


def exits_before(stmts, line: int | None, is_exit, conds: tuple = (), env: dict | None = None,
                 where: str = "", at: int | None = None) -> list[Exit]:
    """The exits of ``stmts`` before ``line`` (None: every exit): a statement ``is_exit`` accepts (a ``return`` or a
    ``raise``) under the tests ``conds`` on its path, cited in the file ``where`` at the line of the innermost ``if``
    (``at``). The block
    holding ``line`` is entered (its test joins ``conds``, its negation an exit); a loop or ``try`` before it is not
    entered (its exits are not gates)."""
    env = dict(env or {})
    out: list[Exit] = []
    for s in stmts:
        if line is not None and s.lineno > line:
            break
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            env[s.targets[0].id] = s.value
        else:  # any other binding (a tuple, an annotation, a loop target, a walrus, one inside a block): not known
            for name in _stored(s):
                env[name] = UNKNOWN
        holds = line is not None and _contains(s, line)
        if isinstance(s, (ast.Return, ast.Raise)) and not holds:
            if is_exit(s):
                out.append(Exit(conds, where, at or s.lineno, tuple(env.items())))
            break  # the rest of the block does not run
        if isinstance(s, ast.If):
            in_body = holds and any(_contains(x, line) for x in s.body)
            in_else = holds and any(_contains(x, line) for x in s.orelse)
            neg = negation(s.test)
            if in_body:
                out.append(Exit(conds + (neg,), where, s.lineno, tuple(env.items())))
                out += exits_before(s.body, line, is_exit, conds + (s.test,), env, where, s.lineno)
                break
            if in_else:
                out.append(Exit(conds + (s.test,), where, s.lineno, tuple(env.items())))
                out += exits_before(s.orelse, line, is_exit, conds + (neg,), env, where, s.lineno)
                break
            out += exits_before(s.body, None, is_exit, conds + (s.test,), env, where, s.lineno)
            out += exits_before(s.orelse, None, is_exit, conds + (neg,), env, where, s.lineno)
            if _returns(s.body) and _returns(s.orelse):
                break
        if holds:
            break
    return out


@dataclass(frozen=True)
class Atom:
    text: str
    kind: str  # setting, algorithm, mode, declaration, stager, other
    node: ast.expr = field(compare=False, repr=False)


class _Eval:
    """Three-valued evaluation of an exit under one algorithm member and setting values, for a backend that declares
    ``PRE_REPLAY`` (the declaration test is false: the backend a prefill publish is for)."""

    def __init__(self, tree: Tree, algos, modes, stagers: dict):
        self.tree, self.algos, self.modes, self.stagers = tree, algos, modes, stagers
        self.mode = "EXTEND"  # the forward mode the mode tests are decided for

    @staticmethod
    def subst(e: ast.expr, env: dict, depth: int = 0) -> ast.expr:
        """``e`` with each local bound by one plain assignment before it replaced by its value (a few levels): a
        test through a local (``enabled = envs.X.get(); if not enabled``) reads as the test itself."""
        if depth > 4 or not env:
            return e

        class Sub(ast.NodeTransformer):
            def visit_Name(self, n):
                v = env.get(n.id)
                if isinstance(n.ctx, ast.Load) and v is not None and v is not UNKNOWN:
                    return _Eval.subst(v, {k: x for k, x in env.items() if k != n.id}, depth + 1)
                return n

        import copy

        return ast.fix_missing_locations(Sub().visit(copy.deepcopy(e)))

    def atoms(self, e: ast.expr, env: dict) -> list[Atom]:
        if isinstance(e, ast.BoolOp):
            return [a for v in e.values for a in self.atoms(v, env)]
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            return self.atoms(e.operand, env)
        return [Atom(ast.unparse(e), self.kind(e, env), e)]

    def kind(self, e: ast.expr, env: dict) -> str:
        """The kind of an atom: a stager test on a local as written, anything else through the locals it names."""
        if self._stager(e, env) is not None:
            return "stager"
        e = self.subst(e, env)
        if _setting_of(e):
            return "setting"
        if self._algorithm_call(e) is not None:
            return "algorithm"
        if self._mode_compare(e) is not None:
            return "mode"
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], ast.IsNot) \
                and isinstance(e.comparators[0], ast.Attribute) and e.comparators[0].attr == PRE_REPLAY \
                and not isinstance(e.left, ast.Constant) \
                and not (isinstance(e.left, ast.Attribute) and e.left.attr == PRE_REPLAY):
            return "declaration"
        return "setting" if setting_names(e) else "other"

    def value(self, e: ast.expr, member: str | None, values: dict, env: dict) -> bool | None:
        if isinstance(e, ast.BoolOp):
            vals = [self.value(v, member, values, env) for v in e.values]
            return _conj(vals) if isinstance(e.op, ast.And) else _disj(vals)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            v = self.value(e.operand, member, values, env)
            return None if v is None else not v
        st = self._stager(e, env)
        if st is not None:
            attr, is_none = st
            never = not any(x["value"] != "None" for x in self.stagers.get(attr, ()))
            return (True if is_none else False) if never else None
        kind = self.kind(e, env)
        e = self.subst(e, env)
        if isinstance(e, (ast.BoolOp, ast.UnaryOp)) and kind == "other":
            return self.value(e, member, values, {})  # a local bound to a whole test
        name = _setting_of(e)
        if name is not None:
            return values.get(name)
        if kind == "declaration":
            return False  # decided for a backend that declares PRE_REPLAY: the one a prefill publish is for
        pred = self._algorithm_call(e)
        if pred is not None:
            return None if member is None or self.algos is None else self.algos.predicate(pred, member)
        mode = self._mode_compare(e)
        if mode is not None:
            return mode
        return None

    @staticmethod
    def _algorithm_call(e) -> str | None:
        """``P`` of ``<x>.spec_algorithm.P()`` (or ``<x>.speculative_algorithm.P()``)."""
        if isinstance(e, ast.Call) and not e.args and not e.keywords and isinstance(e.func, ast.Attribute) \
                and isinstance(e.func.value, (ast.Attribute, ast.Name)):
            recv = e.func.value.attr if isinstance(e.func.value, ast.Attribute) else e.func.value.id
            if recv in ("spec_algorithm", "speculative_algorithm"):
                return e.func.attr
        return None

    def _mode_compare(self, e) -> bool | None:
        """``<x>.forward_mode ==/!= ForwardMode.M`` decided for ``self.mode``; ``<x>.forward_mode.is_M()`` too."""
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], (ast.Eq, ast.NotEq)) \
                and ast.unparse(e.left).endswith("forward_mode") and isinstance(e.comparators[0], ast.Attribute) \
                and e.comparators[0].attr in self.modes.members:
            same = e.comparators[0].attr == self.mode
            return same if isinstance(e.ops[0], ast.Eq) else not same
        if isinstance(e, ast.Call) and not e.args and isinstance(e.func, ast.Attribute) \
                and all(k.arg and isinstance(k.value, ast.Constant) for k in e.keywords) \
                and (ast.unparse(e.func.value).endswith("forward_mode") or (
                    isinstance(e.func.value, ast.Name) and e.func.value.id.endswith("mode"))):
            return self.modes.predicate(e.func.attr, self.mode, {k.arg: k.value.value for k in e.keywords})
        return None

    @staticmethod
    def _stager(e, env) -> tuple[str, bool] | None:
        """(attribute, is None) of ``x is None`` / ``x is not None`` where ``x`` is bound to ``getattr(obj, "attr",
        None)`` or ``obj.attr``."""
        if not (isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], (ast.Is, ast.IsNot))
                and isinstance(e.comparators[0], ast.Constant) and e.comparators[0].value is None):
            return None
        if not isinstance(e.left, ast.Name):
            return None
        v = env.get(e.left.id)
        attr = None
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "getattr" and len(v.args) >= 2 \
                and isinstance(v.args[1], ast.Constant) and isinstance(v.args[1].value, str) \
                and (len(v.args) == 2 or (isinstance(v.args[2], ast.Constant) and v.args[2].value is None)):
            attr = v.args[1].value
        elif isinstance(v, ast.Attribute):
            attr = v.attr
        return None if attr is None else (attr, isinstance(e.ops[0], ast.Is))


def _stores(tree: Tree, attr: str) -> list[dict]:
    """Every ``<x>.attr = value`` (and ``setattr(x, "attr", value)``) of the tree: file, line, the value's text."""
    out = []
    for m in tree.modules_containing(attr):
        mod = tree.module(m)
        if mod is None:
            continue
        for node in ast.walk(mod.tree):
            targets, value = (), None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = (node.target,), node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                    and len(node.args) == 3 and isinstance(node.args[1], ast.Constant) and node.args[1].value == attr:
                out.append({"file": mod.rel, "line": node.lineno, "value": ast.unparse(node.args[2])})
                continue
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr == attr:
                    out.append({"file": mod.rel, "line": node.lineno, "value": ast.unparse(value)})
        for c in ast.walk(mod.tree):  # a class attribute of that name: every instance's value until one is stored
            if isinstance(c, ast.ClassDef):
                for st in c.body:
                    tg = st.targets if isinstance(st, ast.Assign) else (st.target,) if isinstance(st, ast.AnnAssign) \
                        and st.value is not None else ()
                    if any(isinstance(t, ast.Name) and t.id == attr for t in tg):
                        out.append({"file": mod.rel, "line": st.lineno, "value": ast.unparse(st.value)})
    return sorted(out, key=lambda s: (s["file"], s["line"]))


def _literal_end(ret: ast.Return) -> str | None:
    v = ret.value
    if isinstance(v, ast.Attribute) and isinstance(v.value, (ast.Name, ast.Attribute)):
        return v.attr
    return None


def prefill_gates(tree: Tree, proto, root: ClassInfo | None, modes) -> dict | None:
    """The ``prefill_gates`` fact of the tree (docs/sglang-reader.md), None when no runner publishes at prefill."""
    from .dispatch import registry
    from .platform import settings

    def show(key, function, file, line, role, runner, xs):
        """The shown gate of one function: every exit its points have, each once."""
        g = gates.setdefault(key, {"function": function, "file": file, "line": line, "role": role, "runners": [],
                                   "exits": []})
        g["runners"].append(runner)
        g["exits"] += [x for x in xs if x.text() not in {y.text() for y in g["exits"]}]

    runners = [r for r in proto.runners if r.policy == "prefill_publish"]
    if not runners:
        return None
    gates: dict[tuple, dict] = {}  # shown: per function, its exits (every publish point's there)
    points: list[_Point] = []  # decided: per publish event, its own exits, path conditions and resolves
    for r in runners:
        resolves = []
        for e in r.events:
            if e.kind != "resolve" or root is None:
                continue
            method = e.what.rsplit(".", 1)[-1]
            hit = tree.lookup(root, method) if method != DECLARATION else None
            if hit is None:
                continue
            owner, fn = hit
            name = f"{owner.name}.{fn.name}"
            xs = exits_before(fn.body, None, lambda st: isinstance(st, ast.Return)
                              and _literal_end(st) not in (None, PRE_REPLAY), where=owner.file)
            show((owner.file, name, "resolve"), name, owner.file, fn.lineno, "resolve", r.ci.name, xs)
            resolves += xs
        functions = {k: (node, file) for k, node, file in r.functions}  # what the runner walk read its events from
        for e in r.events:
            if e.kind != "publish":
                continue
            got = functions.get(e.chain[-1][0]) if e.chain else None
            xs = []
            if got is not None:
                fn, file = got
                xs = exits_before(fn.body, e.line, lambda st: True, where=file)
                show((file, fn.name, "publish"), fn.name, file, fn.lineno, "publish", r.ci.name, xs)
            conds = []
            for text in e.conditions:
                try:
                    conds.append(ast.parse(text, mode="eval").body)
                except (SyntaxError, RecursionError):
                    continue
            points.append(_Point(tuple(xs), tuple(conds), tuple(resolves)))
    algos = registry(tree)
    members = list(algos.members) if algos is not None else []
    none_member = next((m for m in members if algos.predicate("is_none", m) is True), None) if algos else None
    ev = _Eval(tree, algos, modes, {})
    stager_attrs: dict[str, list] = {}
    for x in (x for p in points for x in p.own + p.resolves):
        env = dict(x.env)
        for t in x.tests:
            for sub in ast.walk(t):
                st = ev._stager(sub, env) if isinstance(sub, ast.expr) else None
                if st is not None and st[0] not in stager_attrs:
                    stager_attrs[st[0]] = _stores(tree, st[0])
    ev.stagers = stager_attrs
    for p in points:
        p.decide(ev)
    names = sorted({n for p in points for t in p.tests(ev) for n in setting_names(t)})
    defs = settings(tree, names)
    defaults = {n: d.default for n, d in defs.items()}

    def status(member) -> str:
        """The most permissive publish point's: ``allowed`` (at the settings' defaults), ``may`` (not decided),
        ``with settings`` (off at the defaults), ``never``."""
        best = "never"
        for p in points:
            if p.blocked(ev, member, {}) is True:
                got = "never"
            else:
                at_default = p.blocked(ev, member, defaults)
                got = "allowed" if at_default is False else "with settings" if at_default is True else "may"
            best = max(best, got, key=_ORDER.index)
        return best

    algorithms = [{"name": m, "publish": status(m)} for m in members if m != none_member]
    publishing_modes = []
    for m in modes.members:
        ev.mode = m
        if any(p.blocked(ev, none_member, {}) is not True for p in points):
            publishing_modes.append(m)
    ev.mode = "EXTEND"
    plain = status(none_member)
    setting_rows = []
    for n in names:
        d = defs[n]
        off = [v for v in (True, False) if all(p.blocked(ev, none_member, {**defaults, n: v}) is True for p in points)]
        setting_rows.append({"name": n, "default": d.default, "file": d.file, "line": d.line,
                             "publish_off_when": off[0] if len(off) == 1 else None})
    overrides = sorted({(c.name, c.file) for g in gates.values() if g["role"] == "resolve"
                        for c in tree.subclasses([root]) if c is not root
                        and g["function"].split(".")[-1] in c.methods}) if root is not None else []
    untested = [p for p in points if not p.declared]
    return {
        "no_speculation": plain,
        "modes": publishing_modes,
        "declaration": [] if untested or not points else sorted({t for p in points for t in p.declared}),
        "gates": [{"function": g["function"], "file": g["file"], "line": g["line"], "role": g["role"],
                   "runners": sorted(set(g["runners"])),
                   "exits": [{"test": x.text(), "file": x.file, "line": x.line,
                              "atoms": [{"text": a.text, "kind": a.kind}
                                        for t in x.tests for a in ev.atoms(t, dict(x.env))]} for x in g["exits"]]}
                  for _, g in sorted(gates.items())],
        "unless": sorted({t for p in points for t in p.unless(ev, none_member, defaults)}),
        "path_unless": sorted({t for p in points for t in p.path_unless(ev, none_member, defaults)}),
        "settings": setting_rows,
        "algorithms": algorithms,
        "stagers": [{"attribute": a, "stores": st, "set": any(x["value"] != "None" for x in st)}
                    for a, st in sorted(stager_attrs.items())],
        "resolve_overridden_by": [{"class": n, "file": f} for n, f in overrides],
    }


#: The publish statuses, from the least to the most permissive.
_ORDER = ("never", "with settings", "may", "allowed")


class _Point:
    """One publish event of a prefill runner: the exits before it in its function, the conditions on its path (the
    runner walk's, over the call chain) and the exits of the runner's resolving methods, which keep it off only
    when it tests the backend's declaration (the resolved end must be ``PRE_REPLAY``)."""

    def __init__(self, exits, paths, resolves):
        self.own, self.paths, self.resolves = exits, paths, resolves
        self.exits: tuple[Exit, ...] = ()
        self.declared: tuple[str, ...] = ()

    def decide(self, ev: _Eval) -> None:
        """Which exits gate: an exit whose test has the declaration test as a disjunct tests the declaration (and
        brings the resolving methods' exits in); the declaration alone gates nothing of the tree's own."""
        declared, gating = [], []
        for x in self.own:
            env = dict(x.env)
            if len(x.tests) == 1 and any(ev.kind(d, env) == "declaration" for d in _disjuncts(x.tests[0])):
                declared.append(x.text())
            if any(a.kind != "declaration" for t in x.tests for a in ev.atoms(t, env)):
                gating.append(x)
        self.declared = tuple(declared)
        self.exits = tuple(gating) + (self.resolves if declared else ())

    def tests(self, ev: _Eval):
        """Its exits' tests (through the locals they name) and its path conditions."""
        return [ev.subst(t, dict(x.env)) for x in self.exits for t in x.tests] + list(self.paths)

    def blocked(self, ev: _Eval, member, values) -> bool | None:
        """True: an exit holds or a path condition is false; False: neither can, but for server flags; None: one
        may."""
        vals = [_all(ev, x, member, values) for x in self.exits]
        pvals = [ev.value(c, member, values, {}) for c in self.paths]
        if True in vals or False in pvals:
            return True
        undecided = [x for v, x in zip(vals, self.exits) if v is None and not _open_on_other(ev, x, member, values)]
        undecided += [c for v, c in zip(pvals, self.paths) if v is None and not _other_only(ev, c, member, values)]
        return None if undecided else False

    def path_unless(self, ev: _Eval, member, values) -> list[str]:
        """The conditions on the runner's path that keep this point off, undecided only on flags (negated): what
        the runner tests before it calls the publish (a gate moved into the caller is one of them)."""
        return [ast.unparse(negation(c)) for c in self.paths if ev.value(c, member, values, {}) is None
                and _other_only(ev, c, member, values)]

    def unless(self, ev: _Eval, member, values) -> list[str]:
        """The server conditions its exits keep this point off under (undecided only on flags). The runner's path
        conditions decide with them but are not listed: they are the runner's own (its batch's state), not the
        gates'."""
        return [x.text() for x in self.exits if _all(ev, x, member, values) is None
                and _open_on_other(ev, x, member, values)]


def _disjuncts(e: ast.expr) -> list[ast.expr]:
    return list(e.values) if isinstance(e, ast.BoolOp) and isinstance(e.op, ast.Or) else [e]


def _other_only(ev: _Eval, e: ast.expr, member, values, env: dict | None = None) -> bool:
    """Whether ``e`` is undecided only on atoms of kind ``other`` (a server flag, a call)."""
    env = env or {}
    return not any(a.kind != "other" and ev.value(a.node, member, values, env) is None for a in ev.atoms(e, env))


def _open_on_other(ev: _Eval, x: Exit, member, values) -> bool:
    """Whether each test of ``x`` is decided or undecided only on flags (``_other_only``): it is an ``unless``."""
    env = dict(x.env)
    return all(ev.value(t, member, values, env) is not None or _other_only(ev, t, member, values, env)
               for t in x.tests)


def _all(ev: _Eval, x: Exit, member, values) -> bool | None:
    """Whether the exit ``x`` holds (its tests' conjunction, three-valued)."""
    env = dict(x.env)
    return _conj([ev.value(t, member, values, env) for t in x.tests])


def _conj(vals) -> bool | None:
    return False if False in vals else (True if all(v is True for v in vals) else None)


def _disj(vals) -> bool | None:
    return True if True in vals else (False if all(v is False for v in vals) else None)
