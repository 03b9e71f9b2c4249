"""What the capture of a whole CUDA graph binds on a captured path's object: a metadata field the capture sets to a
view of a buffer, so a test on the read's path that needs the field to be None is false when the graph is captured.

SGLang's graph-capable backends bind their captured metadata to slices of per-graph buffers: FlashAttention's and
the XPU backend's ``init_forward_metadata_out_graph(..., in_capture=True)`` make a metadata object, set its
``swa_page_table`` to a slice of a preallocated table when the backend uses the sliding-window pool, keep it in a
per-size dict and make it the forward's metadata; the forward translates the full page table through the pool's
``full_to_swa_index_mapping`` only when that field is None (0.5.23 xpu_backend.py:1728-1758,1843 and 1531-1538). The
graph records the one branch its capture took: the translation is never in it.

A path's test that needs ``L is None`` (``if L is None:`` holding the read, ``if L is not None: ... else:`` holding
it, or a conjunct of such a test), with ``L`` resolved to ``M.A`` and ``M`` to ``self.C`` (through the function's
last assignment of a local in a block that holds the test, ``capture_state.local_value``), is false at capture when:

- on every path of the capture call in the mode (``in_capture`` true, forward-mode tests decided, the backend's own
  and ``super()`` methods followed: ``capture_state._Capture.assigned``), the last assignment of ``self.C`` is either
  a local the capture function binds (below), or ``self.D[k]`` with ``k`` not a constant, where every store
  ``self.D[key] = V`` in the backend's methods with a key that is not a constant is a local ``V`` bound there, the dict
  is replaced only by a literal of constant keys (buffers kept by name: a per-size key is a batch size, never one of
  those names), nothing calls ``self.D.update``/``setdefault``, and nothing outside the backend's own methods stores
  into a ``.D[...]`` of another receiver;
- a local ``V`` is bound to ``A`` at a store (or at the assignment of ``self.C``) when its last assignment there is a
  new object of a tree class, ``V = K(...)``, and a statement ``V.A = X[... : ...]`` (a slice: a view of a tensor,
  never None) between the two runs on every path to it: it is in the same statement list, or nested only in ``if``
  statements whose tests hold at capture, each decided by the mode or ``in_capture``, or an attribute of ``self``
  that the read's own path needs with the same value and that no method but ``__init__`` assigns (so the capture and
  the read see one value); no other ``V.A`` store between assigns something else;
- nothing the capture runs (the capture call, the in-graph prep, the read's call chain up to the test) assigns
  ``self.C``, stores ``.A`` other than such a slice, or calls ``setattr``.

The fact is then what ``capture_state.capture_fact`` gives for an attribute the capture never sets, and the reader
treats it the same way (not a finding without breakable graphs, or where the debug replay's no-marker fallback covers
the forward). A capture path that takes another object (FlashAttention's top-k draft decode, whose metadata binds no
``swa_page_table``) leaves the test open, and the read is a finding on its conditions.
"""

from __future__ import annotations

import ast

from .capture_state import (CAPTURE_ENTRY, IN_GRAPH_PREP, CaptureFact, _Capture, _Fn, _is_self_attr, _path_tests,
                            _resolved, capture_call, graph_modes, local_value, read_hops)
from .tree import ClassInfo, Tree
from .feasible import volatile_attributes
from .reads import decided_test

#: Methods of a dict that store into it.
_DICT_STORES = frozenset({"update", "setdefault", "__setitem__"})


def _literals(test: ast.expr, want: bool):
    """(literal, value it needs) for each literal that ``test`` having the value ``want`` needs: the conjuncts of a
    true ``and``, the disjuncts of a false ``or``, through ``not``; the test itself otherwise."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        yield from _literals(test.operand, not want)
    elif isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and want:
        for v in test.values:
            yield from _literals(v, True)
    elif isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) and not want:
        for v in test.values:
            yield from _literals(v, False)
    else:
        yield test, want


def _none_operand(lit: ast.expr, want: bool) -> ast.expr | None:
    """``L`` when the literal having the value ``want`` says ``L is None``."""
    if isinstance(lit, ast.Compare) and len(lit.ops) == 1 and isinstance(lit.comparators[0], ast.Constant) \
            and lit.comparators[0].value is None:
        if (isinstance(lit.ops[0], ast.Is) and want) or (isinstance(lit.ops[0], ast.IsNot) and not want):
            return lit.left
    return None


def _chain(stmts, line: int) -> list[tuple[ast.stmt, str]]:
    """(compound statement, the field holding ``line``) from ``stmts`` down to the statement at ``line`` (left out)."""
    for s in stmts:
        if not (s.lineno <= line <= (s.end_lineno or s.lineno)):
            continue
        for field in ("body", "orelse", "finalbody"):
            b = getattr(s, field, None)
            if isinstance(b, list) and any(x.lineno <= line <= (x.end_lineno or x.lineno) for x in b):
                return [(s, field)] + _chain(b, line)
        for h in getattr(s, "handlers", ()):
            if h.lineno <= line <= (h.end_lineno or h.lineno):
                return [(s, "handlers")] + _chain(h.body, line)
        return []
    return []


def _is_view(value: ast.expr) -> bool:
    """A slice of something (``X[a:b]``, ``X[:n, :]``): a view of a tensor, never None."""
    if not isinstance(value, ast.Subscript):
        return False
    s = value.slice
    return isinstance(s, ast.Slice) or (isinstance(s, ast.Tuple) and any(isinstance(e, ast.Slice) for e in s.elts))


def _stored_attrs(node: ast.AST, attr: str):
    """Each ``X.attr`` stored into under ``node``, nested functions included (``ast.walk``), with the statement that
    stores it when it is a plain ``=``."""
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Store):
            yield n


def _is_view_store(fn: ast.AST, target: ast.Attribute) -> bool:
    """Whether ``target`` is the one target of an ``=`` in ``fn`` whose value is a view (``_is_view``)."""
    return any(isinstance(n, ast.Assign) and n.targets == [target] and _is_view(n.value) for n in ast.walk(fn))


class _Binding:
    """The binding check for one backend, mode, attribute and the ``self`` tests the read's path needs."""

    def __init__(self, cap: _Capture, attr: str, assumed: dict[str, bool]):
        self.cap, self.attr, self.assumed = cap, attr, assumed
        self.at: list[str] = []  # file:line of each binding found
        self.used: set[str] = set()  # the assumed attributes a binding's tests needed
        self.kept: list[str] = []  # file:line of each store of a bound object into a per-size dict

    def holds(self, test: ast.expr, want: bool) -> bool:
        """Whether ``test`` has the value ``want`` at capture: decided by the mode or ``in_capture``, or each literal
        it needs an assumed attribute of ``self`` with that value."""
        t, _ = decided_test(self.cap.modes, self.cap.mode, test, in_capture=True)
        if t is not None:
            return t is want
        lits = [(_is_self_attr(lit), need) for lit, need in _literals(test, want)]
        if any(a is None or self.assumed.get(a) is not need for a, need in lits):
            return False
        self.used.update(a for a, _ in lits)
        return True

    def bound(self, fn: _Fn, var: str, line: int) -> bool:
        """Whether the local ``var`` of ``fn`` is, at ``line``, a new object bound to ``self.attr`` (see the
        module's docstring): between its construction and ``line`` every store of ``.attr`` in ``fn`` is a view,
        one of them on ``var`` runs on every path to ``line``, and no call after it is given ``var``."""
        ctor = local_value(fn.node, var, line)
        if not isinstance(ctor, ast.Call) or self.cap.constructed(ctor, fn, line) is None:
            return False
        between = [t for t in _stored_attrs(fn.node, self.attr) if ctor.lineno < t.lineno < line]
        if any(not _is_view_store(fn.node, t) for t in between):
            return False
        at = _chain(fn.node.body, line)
        for t in between:
            if not (isinstance(t.value, ast.Name) and t.value.id == var):
                continue
            if any(isinstance(c, ast.Call) and t.lineno < c.lineno < line and any(
                    isinstance(x, ast.Name) and x.id == var for x in [*c.args, *(k.value for k in c.keywords)])
                   for c in ast.walk(fn.node)):
                continue  # a call given the object after the binding may store into it
            mine = _chain(fn.node.body, t.lineno)
            k = 0
            while k < min(len(at), len(mine)) and at[k][0] is mine[k][0] and at[k][1] == mine[k][1]:
                k += 1
            if all(isinstance(st, ast.If) and field in ("body", "orelse") and self.holds(st.test, field == "body")
                   for st, field in mine[k:]):
                self.at.append(f"{fn.module.rel}:{t.lineno}")
                return True
        return False

    def dict_bound(self, table: str) -> bool:
        """Whether every object the backend keeps in ``self.<table>`` under a key that is not a constant is bound:
        each occurrence of ``self.<table>`` in the backend's methods (nested functions included) is subscripted, or
        replaced by a literal of constant keys; each store under a key that is not a constant is a bound local;
        nothing elsewhere stores into a ``.<table>[...]`` of another receiver, or of ``self`` in a function nested in
        one of the backend's methods."""
        cap, tree = self.cap, self.cap.tree
        mine = {id(f.node) for f in cap.methods()}
        nested = set()
        found = 0
        for fn in cap.methods():
            parents = {id(k): n for n in ast.walk(fn.node) for k in ast.iter_child_nodes(n)}
            nested |= {id(n) for n in ast.walk(fn.node) if n is not fn.node
                       and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))}
            for n in ast.walk(fn.node):
                if _is_self_attr(n) != table:
                    continue
                p = parents.get(id(n))
                if isinstance(n.ctx, ast.Store):
                    if not (isinstance(p, ast.Assign) and p.targets == [n] and isinstance(p.value, ast.Dict)
                            and all(isinstance(k, ast.Constant) for k in p.value.keys)):
                        return False
                    continue
                if not (isinstance(p, ast.Subscript) and p.value is n):
                    return False  # the dict itself taken, passed or called: stores through it are not seen
                if isinstance(p.ctx, ast.Load) or isinstance(p.slice, ast.Constant):
                    continue
                stmt = parents.get(id(p))
                if not (isinstance(stmt, ast.Assign) and stmt.targets == [p] and isinstance(stmt.value, ast.Name)
                        and self.bound(fn, stmt.value.id, stmt.lineno)):
                    return False
                self.kept.append(f"{fn.module.rel}:{stmt.lineno}")
                found += 1
        for m in tree.modules_containing(f".{table}"):
            mod = tree.module(m)
            for fnode in (x for x in tree.walk(mod.tree) if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef))) \
                    if mod else ():
                if id(fnode) in mine:
                    continue
                for n in ast.walk(fnode):
                    if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) \
                            and isinstance(n.value, ast.Attribute) and n.value.attr == table \
                            and (_is_self_attr(n.value) is None or id(fnode) in nested):
                        return False
        return found > 0


def binding_fact(tree: Tree, ci: ClassInfo, modes, mode: str, read) -> CaptureFact | None:
    """The test on ``read``'s path (a ``reads.Read`` of ``ci`` in ``mode``, at an in-graph site) that needs a field
    the capture binds to be None, or None (once per read's chain and mode)."""
    if mode not in graph_modes(modes) or not read.via:
        return None
    runner = capture_call(tree)
    got = read_hops(tree, ci, read) if runner is not None else None
    if got is None:
        return None
    hops, lines = got
    memo = tree.__dict__.setdefault("_binding_facts", {})
    k = (ci.key, mode, tuple(id(h.node) for h in hops), tuple(lines))
    if k not in memo:
        memo[k] = _binding_fact(_Capture(tree, ci, modes, mode), hops, lines, runner)
    return memo[k]


def _binding_fact(cap: _Capture, hops: list[_Fn], lines: list[int], runner: tuple[str, int]) -> CaptureFact | None:
    """The test on the read's path that needs a field the capture binds to be None (see the module's docstring), or
    None; ``hops`` the read's functions and ``lines`` the line each calls the next at (or reads at)."""
    tree, ci = cap.tree, cap.ci
    volatile = volatile_attributes(tree, ci)
    assumed: dict[str, bool] = {}
    tests = []
    for i, fn in enumerate(hops):
        for test, want in _path_tests(fn.node.body, lines[i]):
            for lit, need in _literals(test, want):
                a = _is_self_attr(lit)
                if a is not None and fn.owner is not None and a not in volatile:
                    if assumed.get(a, need) is not need:
                        return None  # the path needs both values: another rule prunes it
                    assumed[a] = need
                tests.append((i, fn, test, lit, need))
    entry, prep = cap.method(CAPTURE_ENTRY), cap.method(IN_GRAPH_PREP)
    if entry is None:
        return None
    for i, fn, test, lit, need in tests:
        operand = _none_operand(lit, need)
        if operand is None or fn.owner is None:
            continue
        field = _resolved(fn.node, operand, test.lineno)
        if not isinstance(field, ast.Attribute):
            continue
        c_attr = _is_self_attr(_resolved(fn.node, field.value, test.lineno))
        if c_attr is None:
            continue
        why = _bound_at_capture(cap, entry, prep, hops[:i + 1], lines[:i] + [test.lineno], c_attr, field.attr,
                                assumed)
        if why is not None:
            return CaptureFact(f"`{ast.unparse(lit)}` ({fn.module.rel}:{test.lineno}) is {'false' if need else 'true'} "
                               f"when the graph is captured: the runner calls `{CAPTURE_ENTRY}(..., in_capture=True)` "
                               f"({runner[0]}:{runner[1]}) before capturing; {why}")
    return None


def _bound_at_capture(cap: _Capture, entry: _Fn, prep: _Fn | None, chain: list[_Fn], upto: list[int], c_attr: str,
                      attr: str, assumed: dict[str, bool]) -> str | None:
    ran = cap.closure([(entry, None)] + ([(prep, None)] if prep else []) + list(zip(chain, upto)))
    later = cap.closure(([(prep, None)] if prep else []) + list(zip(chain, upto)))
    if any(_is_self_attr(n) == c_attr and isinstance(n.ctx, ast.Store) for f in later for n in ast.walk(f.node)):
        return None  # the in-graph prep or the forward may replace the capture's object
    for f in ran:
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr"
               for n in ast.walk(f.node)):
            return None
        if any(not _is_view_store(f.node, t) for t in _stored_attrs(f.node, attr)):
            return None
    states = cap.assigned(entry, c_attr)
    if not states or any(not s for s in states):
        return None
    b = _Binding(cap, attr, assumed)
    objects = []
    for s in states:
        for value, where in s:
            v = _resolved(where.node, value, value.lineno)
            if isinstance(v, ast.Subscript) and _is_self_attr(v.value) is not None \
                    and not isinstance(v.slice, ast.Constant):
                table = _is_self_attr(v.value)
                if not b.dict_bound(table):
                    return None
                objects.append(f"`self.{table}[{ast.unparse(v.slice)}]` ({where.module.rel}:{value.lineno}), "
                               f"and each store into `self.{table}` under a key that is not a constant")
            elif isinstance(value, ast.Name) and b.bound(where, value.id, value.lineno):
                objects.append(f"`{value.id}` ({where.module.rel}:{value.lineno}),")
            else:
                return None
    needs = sorted(b.used)
    return (f"`self.{c_attr}` is then " + "; or ".join(dict.fromkeys(objects))
            + (f" ({', '.join(dict.fromkeys(b.kept))}) puts there" if b.kept else "")
            + f" a new object whose `{attr}` the capture binds to a slice of a buffer"
            + f" ({', '.join(dict.fromkeys(b.at))})"
            + (" when " + " and ".join(f"`{'' if assumed[a] else 'not '}self.{a}`" for a in needs)
               + ", which the read's path needs (assigned only in `__init__`)" if needs else "")
            + f"; nothing the capture runs stores `.{attr}` otherwise")
