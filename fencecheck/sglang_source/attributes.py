"""Attributes a path reads through ``getattr`` on a receiver the reader cannot type, linked to the tree's definitions
of them: a path whose tests no object of the tree can pass cannot run.

``getattr(R, "A", D)`` in a path's tests is one atom per receiver text ``R`` and attribute ``A``: its truth, and
(in ``getattr(R, "A", D) is None``) whether it is None. The receiver is one of:
- an instance of a class that assigns ``self.A`` (an *owner*; the first class on an instance's MRO that assigns an
  attribute defines it for that instance): ``A`` then has the definition its owner gives it when that owner assigns it
  exactly once, in ``__init__``, unconditionally (at the top of ``__init__``'s body or of a ``with`` there); a
  ``bool(E)`` is ``E``, a local of ``__init__`` assigned once and another attribute defined so are replaced by their
  values (three levels), ``X if T else None`` is None exactly when ``T`` is false (a call is never None), and the
  names left are the ``__init__``'s inputs (one value each, for that object). Any other assignment leaves ``A`` free.
- an object that assigns none of the attributes: each is its default ``D`` (no default: the path cannot run there).
A class whose subclass assigns one of the attributes again, or an assignment of ``A`` on another receiver anywhere in
the tree (``pool.A = ...``), leaves the path as it is. The path is cut when its tests and each receiver's definitions
are unsatisfiable for every candidate (z3, bounded by ``feasible.RLIMIT``), and the reason names the definitions.
"""

from __future__ import annotations

import ast
import re

import z3

from .feasible import RLIMIT, _Atoms, parsed_all
from .tree import ClassInfo, Tree, copy_node

#: Levels of substitution of a definition's locals and attributes.
MAX_DEPTH = 3


class _Scoped(_Atoms):
    """Atoms whose z3 names carry ``prefix`` (atoms of different scopes never meet); every text links unless ``link``
    says otherwise; ``True``/``False`` and ``bool(E)`` read as themselves."""

    def __init__(self, prefix: str, link=lambda t: True):
        super().__init__(link, prefix)

    def formula(self, n):
        if isinstance(n, ast.Constant) and isinstance(n.value, bool):
            return z3.BoolVal(n.value)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "bool" and len(n.args) == 1:
            return self.formula(n.args[0])
        return super().formula(n)


def _getattr(n) -> tuple[str, str, object] | None:
    """(receiver text, attribute, default or the marker ``_NONE``) of ``getattr(R, "A"[, D])`` with a constant."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr" and 2 <= len(n.args) <= 3 \
            and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str) and not n.keywords:
        if len(n.args) == 3 and not isinstance(n.args[2], ast.Constant):
            return None
        return ast.unparse(n.args[0]), n.args[1].value, n.args[2].value if len(n.args) == 3 else _NONE
    return None


_NONE = object()  # no default: getattr raises where the attribute is missing


def _owners(tree: Tree, attr: str) -> tuple[list[ClassInfo], bool]:
    """The classes that assign ``self.<attr>``, and whether anything else assigns ``<x>.<attr>`` (once per tree)."""
    memo = tree.__dict__.setdefault("_attribute_owners", {})
    if attr not in memo:
        memo[attr] = _find_owners(tree, attr)
    return memo[attr]


def _find_owners(tree: Tree, attr: str) -> tuple[list[ClassInfo], bool]:
    owners, other = [], False
    pat = re.compile(rf"\.{re.escape(attr)}\s*(:[^=\n]*)?=[^=]")
    for m in tree.modules_containing(f".{attr}", under="sglang.srt"):
        if not pat.search(tree.text(m)):
            continue
        mod = tree.module(m)
        if mod is None:
            continue
        other = other or any(isinstance(t, ast.Attribute) and t.attr == attr and not _is_self(t, attr)
                             for n in tree.walk(mod.tree) for t in _targets(n))
        owners += [ci for ci in mod.classes.values() if self_assignments(tree, ci, attr)]
    return owners, other


def _targets(n) -> list[ast.expr]:
    """The targets an assignment statement (``=``, annotated, augmented) assigns; none for any other node."""
    if isinstance(n, ast.Assign):
        return n.targets
    return [n.target] if isinstance(n, (ast.AnnAssign, ast.AugAssign)) else []


def _is_self(t, attr: str) -> bool:
    return isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name) and t.value.id == "self"


def self_assignments(tree: Tree, ci: ClassInfo, attr: str) -> list[tuple[str, ast.AST, bool]]:
    """(method, statement, unconditional in ``__init__``) of each ``self.<attr>`` assignment in ``ci``'s methods."""
    return _self_stores(tree, ci).get(attr, [])


def _self_stores(tree: Tree, ci: ClassInfo) -> dict[str, list[tuple[str, ast.AST, bool]]]:
    """attr -> ``self_assignments(tree, ci, attr)``, for every attribute at once (one walk of the class per tree)."""
    memo = tree.__dict__.setdefault("_self_stores", {})
    k = (ci.key, ci.line)
    out = memo.get(k)
    if out is not None:
        return out
    out = memo[k] = {}
    plain = (ast.Assign, ast.AnnAssign)
    for name, fn in ci.methods.items():
        top = set()
        if name == "__init__":
            for s in fn.body:
                top.add(id(s))
                if isinstance(s, (ast.With, ast.AsyncWith)):
                    top |= {id(x) for x in s.body}
        for n in tree.walk(fn):
            if not isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                continue
            seen = set()
            for t in _targets(n):
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" \
                        and t.attr not in seen:
                    seen.add(t.attr)
                    out.setdefault(t.attr, []).append((name, n, id(n) in top and isinstance(n, plain)))
    return out


class _Definitions:
    """The definitions of one candidate's attributes (see the module's docstring)."""

    def __init__(self, tree: Tree, ci: ClassInfo, attrs):
        self.tree, self.ci = tree, ci
        self.values: dict[str, ast.expr | None] = {}  # attr -> its value, None: free
        self.at: dict[str, str] = {}
        self.absent: set[str] = set()
        for a in attrs:
            owner = next((c for c in tree.mro(ci) if self_assignments(tree, c, a)), None)
            if owner is None:
                self.absent.add(a)
                continue
            hits = self_assignments(tree, owner, a)
            if len(hits) == 1 and hits[0][2] and hits[0][1].value is not None:
                self.values[a] = hits[0][1].value
                self.at[a] = f"{owner.file}:{hits[0][1].lineno}"
            else:
                self.values[a] = None
        init = next((c.methods["__init__"] for c in tree.mro(ci) if "__init__" in c.methods), None)
        self.locals: dict[str, ast.expr] = {}
        if init is not None:  # a local assigned once (never a parameter: it may be assigned after its first use)
            params = {x.arg for x in init.args.args + init.args.kwonlyargs}
            counts: dict[str, list] = {}
            for n in tree.walk(init):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]
                          if isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.For, ast.NamedExpr)) else []):
                    for x in ast.walk(t):
                        if isinstance(x, ast.Name):
                            counts.setdefault(x.id, []).append(n.value if isinstance(n, ast.Assign) and t is x
                                                               else None)
            self.locals = {k: v[0] for k, v in counts.items() if len(v) == 1 and v[0] is not None and k not in params}

    def expand(self, e: ast.expr, depth: int = 0) -> ast.expr:
        """``e`` with its single-assignment locals and defined attributes replaced by their values."""
        if depth >= MAX_DEPTH:
            return e
        outer = self

        class _Sub(ast.NodeTransformer):
            def visit_Name(self, node):
                v = outer.locals.get(node.id)
                return outer.expand(copy_node(v), depth + 1) if v is not None else node

            def visit_Attribute(self, node):
                if isinstance(node.value, ast.Name) and node.value.id == "self" and outer.values.get(node.attr):
                    return outer.expand(copy_node(outer.values[node.attr]), depth + 1)
                return self.generic_visit(node)

        return _Sub().visit(copy_node(e))


def _truth(atoms: _Scoped, d: _Definitions, a: str, default):
    if a in d.absent:
        return None if default is _NONE else z3.BoolVal(bool(default))
    v = d.values.get(a)
    return atoms(f"<free {a}>") if v is None else atoms.formula(d.expand(v))


def _is_none(atoms: _Scoped, d: _Definitions, a: str, default):
    if a in d.absent:
        return None if default is _NONE else z3.BoolVal(default is None)
    v = d.values.get(a)
    if isinstance(v, ast.Constant):
        return z3.BoolVal(v.value is None)
    if isinstance(v, ast.IfExp):
        body_none = isinstance(v.body, ast.Constant) and v.body.value is None
        else_none = isinstance(v.orelse, ast.Constant) and v.orelse.value is None
        test = atoms.formula(d.expand(v.test))
        if else_none and isinstance(v.body, ast.Call):
            return z3.Not(test)
        if body_none and isinstance(v.orelse, ast.Call):
            return test
    return atoms(f"<free {a} is None>")


def dead_path(tree: Tree, conditions: tuple[str, ...]) -> str | None:
    """Why ``conditions`` cannot all hold for any object of the tree behind their ``getattr`` tests, or None."""
    parsed = parsed_all(conditions)
    if parsed is None:
        return None
    uses: dict[str, dict[str, object]] = {}
    for node in parsed:
        for n in ast.walk(node):
            g = _getattr(n)
            if g is not None:
                uses.setdefault(g[0], {}).setdefault(g[1], g[2])
    for receiver, attrs in uses.items():
        if len(attrs) < 2:
            continue  # one attribute alone is a free variable in every candidate
        why = _dead_for(tree, parsed, receiver, attrs)
        if why is not None:
            return why
    return None


def _dead_for(tree: Tree, parsed, receiver: str, attrs: dict[str, object]) -> str | None:
    owners: list[ClassInfo] = []
    for a in attrs:
        found, other = _owners(tree, a)
        if other:
            return None
        owners += [c for c in found if c not in owners]
    for c in owners:  # a subclass assigning an attribute again defines it otherwise for its instances
        for sub in tree.subclasses([c]):
            if sub is not c and sub not in owners and any(self_assignments(tree, sub, a) for a in attrs):
                return None
    candidates: list[ClassInfo | None] = list(owners) + [None]
    cited = []
    for n, ci in enumerate(candidates):
        atoms = _Scoped(f"k{n}_")
        read = _Scoped(f"r{n}_", link=lambda t: t.startswith("<attr "))
        d = _Definitions(tree, ci, attrs) if ci is not None else None
        solver = z3.Solver()
        solver.set("rlimit", RLIMIT)
        impossible = False
        for a, default in attrs.items():
            if d is None:
                t = None if default is _NONE else z3.BoolVal(bool(default))
                isnone = None if default is _NONE else z3.BoolVal(default is None)
            else:
                t, isnone = _truth(atoms, d, a, default), _is_none(atoms, d, a, default)
            if t is None:
                impossible = True  # getattr without a default raises on this candidate
                break
            solver.add(read(f"<attr {a}>") == t, read(f"<attr {a} is None>") == isnone)
        if impossible:
            continue
        for node in parsed:
            solver.add(read.formula(_Marked(receiver).visit(copy_node(node))))
        if solver.check() != z3.unsat:
            return None
        if d is not None:
            cited += [f"{ci.name}.{a} = {ast.unparse(d.values[a])} ({d.at[a]})" for a in attrs if d.values.get(a)]
    return (f"no object can pass its tests of {receiver}: " + "; ".join(dict.fromkeys(cited))
            + f"; an object with none of {', '.join(sorted(attrs))} takes their defaults")


class _Marked(ast.NodeTransformer):
    """``getattr(receiver, "A", D)`` as the atom ``<attr A>``, and ``... is None`` as ``<attr A is None>``."""

    def __init__(self, receiver: str):
        self.receiver = receiver

    def _attr(self, n):
        g = _getattr(n)
        return g[1] if g is not None and g[0] == self.receiver else None

    def visit_Compare(self, node):
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)) and \
                isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None:
            a = self._attr(node.left)
            if a is not None:
                atom = ast.Name(f"<attr {a} is None>")
                return atom if isinstance(node.ops[0], ast.Is) else ast.UnaryOp(ast.Not(), atom)
        return self.generic_visit(node)

    def visit_Call(self, node):
        a = self._attr(node)
        return ast.Name(f"<attr {a}>") if a is not None else self.generic_visit(node)


def _conjuncts(node: ast.expr) -> list[ast.expr]:
    """The top-level ``and`` operands of ``node``, as written (no negation pushed in: ``feasible.conjuncts`` does)."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return [x for v in node.values for x in _conjuncts(v)]
    return [node]


def _platform_definition(tree: Tree, ci: ClassInfo, attr: str) -> ast.expr | None:
    """``self.<attr>``'s definition on an instance of ``ci`` (``_Definitions``, expanded) when it calls a platform's
    predicate (``is_npu()``, ...) and nothing else in the tree assigns ``<x>.<attr>``; else None (once per pair)."""
    from .platform import Evaluator

    memo = tree.__dict__.setdefault("_platform_definitions", {})
    k = (ci.key, attr)
    if k not in memo:
        d = _Definitions(tree, ci, {attr})
        v = d.values.get(attr)
        e = d.expand(v) if v is not None else None
        names = Evaluator(tree).names
        if e is not None and not any(isinstance(n, ast.Call) and (getattr(n.func, "id", None) in names or
                                                                  getattr(n.func, "attr", None) in names)
                                     for n in ast.walk(e)):
            e = None
        memo[k] = None if e is None or _owners(tree, attr)[1] else e
    return memo[k]


def _platform_values(tree: Tree, ci: ClassInfo, text: str) -> list[tuple[str, dict]]:
    """Each top-level conjunct of the condition ``text`` with its value per platform (True, False or None), with
    ``self.A`` replaced where ``_platform_definition`` defines it (once per class and text)."""
    from fencecheck.vocab import Platform

    from .platform import Evaluator

    memo = tree.__dict__.setdefault("_platform_values", {})
    k = (ci.key, text)
    if k in memo:
        return memo[k]
    try:
        conjuncts = _conjuncts(ast.parse(text, mode="eval").body)
    except (SyntaxError, RecursionError):
        memo[k] = [(text, {})]
        return memo[k]

    class _Sub(ast.NodeTransformer):
        def visit_Attribute(self, node):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                e = _platform_definition(tree, ci, node.attr)
                if e is not None:
                    return copy_node(e)
            return self.generic_visit(node)

    ev = Evaluator(tree)
    out = []
    for c in conjuncts:
        e = _Sub().visit(copy_node(c))
        out.append((ast.unparse(c), {p.value: ev.value(ci.module, e, p.value, {}) for p in Platform}))
    memo[k] = out
    return out


def on_platform(tree: Tree, ci: ClassInfo, conditions, platform: str) -> tuple[str, ...] | None:
    """The conditions (texts, of a path of an instance of ``ci``) not settled on ``platform``, each top-level conjunct
    on its own; None when one is false there. A conjunct is settled when ``platform.Evaluator`` decides it once each
    ``self.A`` in it whose definition calls a platform's predicate is replaced by it (``_platform_definition``):
    ``not self.is_npu`` with ``self.is_npu = is_npu()`` its one assignment holds on CUDA."""
    out: list[str] = []
    for text in conditions:
        for conj, values in _platform_values(tree, ci, text):
            v = values.get(platform)
            if v is False:
                return None
            if v is not True and conj not in out:
                out.append(conj)
    return tuple(out)
