"""What the capture of a whole CUDA graph binds on a captured path's object: a metadata field the capture sets to a
view of a buffer, so a test on the read's path that needs the field to be None is false when the graph is captured.

SGLang's graph-capable backends bind their captured metadata to slices of per-graph buffers: the XPU backend's
``init_forward_metadata_out_graph(..., in_capture=True)`` makes a metadata object, sets its ``swa_page_table`` to a
slice of a preallocated table when the backend uses the sliding-window pool, keeps it per batch size and makes it the
forward's metadata; the forward translates the full page table through the pool's ``full_to_swa_index_mapping`` only
when that field is None (0.5.23 xpu_backend.py:1727-1757,1843 and 1531-1538). The graph records the one branch its
capture took: the translation is never in it.

A path's test that needs ``L is None`` (``if L is None:`` holding the read, ``if L is not None: ... else:`` holding
it, or a conjunct of such a test), with ``L`` resolved to ``M.A`` and ``M`` to ``self.C`` (through the function's
last assignment of a local in a block that holds the test, ``capture_state.local_value``), is false at capture when
all of the following hold. What runs between the capture call and the captured test is taken to be: the capture call
itself, the warm-up forwards and the hook the runner calls after each (``on_after_cuda_graph_warmup``), the in-graph
prep and the forward of every layer; each as the functions they call that the reader follows (``_Capture.closure``),
whole.

- ``self.C`` is stored only by plain ``self.C = value`` statements of the capture call's own function (none in a
  function it calls, a nested function, a tuple or annotated target), none in what runs after it, and nowhere through
  another receiver (``x.C = ...`` outside the backend's own methods, a module function's parameter named ``self``
  and a wrapper's ``self.child.C = ...`` included; a store of None too, which a property or a re-creating call the
  reader does not follow may turn into an object without the binding); on every path of that function in the mode
  (``in_capture`` true, forward-mode tests decided:
  ``_Capture.assigned``), its last value is a local the function binds (below), or ``self.D[k]`` with ``k`` not a
  constant;
- ``self.D`` is, in the backend's methods, only subscripted or replaced by a dict literal of string keys (buffers kept
  by name: a per-size key is a batch size, never one of those names); every store into it under a key that is not a
  string constant is a bound local; nowhere else is ``.D`` stored into, taken whole or called on, save through
  ``self`` in a method of another class that nothing calls through its class (``K.m(self, ...)``);
- a local ``V`` is bound to ``A`` at a store when its last assignment is a new object of a tree class ``K``
  (``V = K(...)``) with no ``A`` method or property and no ``__setattr__``, ``__getattr__`` or ``__getattribute__``
  on its MRO, and ``V.A = X[... : ...]`` (a slice: a view of a tensor, never None) runs on every path from there to
  the store: in the same statement list, or nested only in ``if`` statements whose tests hold at capture (decided by
  ``in_capture`` or the mode in the capture call's own function only, on its batch; or an attribute of ``self`` that
  the read's own path needs with the same value), the store in no loop; every store of ``.A`` in that function is a
  slice, and every call given ``V`` (as an argument, or as its receiver) is one the reader follows, whose functions
  store ``.A`` only as a slice;
- an attribute of ``self`` the binding's tests need is assigned only in ``__init__`` (``feasible.volatile_attributes``)
  and nowhere through another receiver or ``setattr``;
- nothing that runs stores ``.A`` other than as a slice, deletes it, or calls ``setattr``, ``__setattr__`` or
  ``vars``; and nowhere in the tree is ``.A`` stored other than as a slice, except on a new object of a tree class
  (a local ``x = K(...)``) or on ``self`` itself in a method of another class that nothing calls through its class.

The fact is then what ``capture_state.capture_fact`` gives for an attribute the capture never sets, and the reader
treats it the same way (not a finding without breakable graphs, or where the debug replay's no-marker fallback covers
the forward). As there, stores through objects the reader cannot type (a call it does not follow) are not seen, and
the premise is that the runner's capture call reaches this backend's own capture function (a wrapper that captures a
child's forward without calling the child's is not modelled). A capture path that takes another object
(FlashAttention's top-k draft decode, whose metadata binds no ``swa_page_table``) leaves the test open, and the read
is a finding on its conditions.
"""

from __future__ import annotations

import ast

from .capture_state import (CAPTURE_ENTRY, CaptureFact, _batch_param, _body_nodes, _Capture, _Fn, _is_self_attr,
                            _on_batch, _path_tests, _resolved, after_capture_call, attr_stores as _stores, by_name,
                            capture_call, functions_of, graph_modes, local_value, reach, read_hops, replaces)
from .constructed import parents_of
from .feasible import volatile_attributes
from .reads import decided_test
from .tree import ClassInfo, Tree

#: Hooks that make an attribute's store or load run code.
_HOOKS = ("__setattr__", "__getattr__", "__getattribute__")


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
    """(compound statement, the field holding ``line``) from ``stmts`` down to the statement at ``line`` (left out);
    a compound statement entered another way (``match``) is ``(statement, "other")``."""
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
        return [(s, "other")] if s.lineno != line or getattr(s, "cases", None) else []
    return []


def _is_view(value: ast.expr) -> bool:
    """A slice of something (``X[a:b]``, ``X[:n, :]``): a view of a tensor, never None."""
    if not isinstance(value, ast.Subscript):
        return False
    s = value.slice
    return isinstance(s, ast.Slice) or (isinstance(s, ast.Tuple) and any(isinstance(e, ast.Slice) for e in s.elts))


def _view_store(fn: ast.AST, target: ast.Attribute) -> bool:
    """Whether ``target`` is the one target of an ``=`` in ``fn`` whose value is a view (``_is_view``)."""
    return any(isinstance(n, ast.Assign) and n.targets == [target] and _is_view(n.value) for n in ast.walk(fn))


def _touches(node: ast.AST, attr: str) -> bool:
    """Whether ``node`` stores or deletes ``.attr`` other than as a slice (``_view_store``), or stores attributes by
    name (``capture_state.by_name``)."""
    return any(by_name(n) for n in ast.walk(node)) or any(not _view_store(node, t) for t in _stores(node, attr))


class _Binding:
    """The binding check for one backend, mode, attribute and the ``self`` tests the read's path needs."""

    def __init__(self, cap: _Capture, entry: _Fn, attr: str, assumed: dict[str, bool]):
        self.cap, self.entry, self.attr, self.assumed = cap, entry, attr, assumed
        self.at: list[str] = []  # file:line of each binding found
        self.used: set[str] = set()  # the assumed attributes a binding's tests needed
        self.kept: list[str] = []  # file:line of each store of a bound object into a per-size dict

    # --- tests -----------------------------------------------------------------------------------------------------
    def holds(self, fn: _Fn, test: ast.expr, want: bool) -> bool:
        """Whether ``test`` has the value ``want`` at capture: decided by ``in_capture`` or the mode in the capture
        call's own function (mode tests on its batch only), or each literal it needs an assumed attribute of
        ``self`` with that value."""
        if fn.node is self.entry.node:
            batch = _batch_param(fn.node)
            t, used = decided_test(self.cap.modes, self.cap.mode, test, in_capture=True)
            if t is not None and (not used or _on_batch(fn.node, batch, [(test, want)])):
                return t is want
        lits = [(_is_self_attr(lit), need) for lit, need in _literals(test, want)]
        if any(a is None or self.assumed.get(a) is not need for a, need in lits):
            return False
        self.used.update(a for a, _ in lits)
        return True

    # --- the object ------------------------------------------------------------------------------------------------
    def _class_ok(self, classes) -> bool:
        """No class on the object's MRO defines ``attr`` as a method or property, a hook run by a store or load of
        it, or a method storing ``self.<attr>`` other than as a slice (a method the forward may call on it)."""
        tree = self.cap.tree
        for k, _ in classes:
            for c in tree.mro(k):
                if self.attr in c.methods or any(h in c.methods for h in _HOOKS):
                    return False
                for m in c.methods.values():
                    if _touches(m, self.attr):
                        return False
        return True

    def _calls_ok(self, fn: _Fn, var: str) -> bool:
        """Every call in ``fn`` given ``var`` (an argument holding the name itself, not only a field of it; or the
        receiver ``var.m(...)``) is one the reader follows, whose functions store ``self.attr`` only as a slice."""
        for c in (n for n in ast.walk(fn.node) if isinstance(n, ast.Call)):
            given = isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name) and c.func.value.id == var
            for a in [*c.args, *(k.value for k in c.keywords)]:
                fields = {id(x.value) for x in ast.walk(a) if isinstance(x, (ast.Attribute, ast.Subscript))}
                given |= any(isinstance(x, ast.Name) and x.id == var and id(x) not in fields for x in ast.walk(a))
            if not given:
                continue
            target = self.cap.callee(fn, c)
            if target is None:
                return False
            for f in reach(self.cap, [target]):
                if _touches(f.node, self.attr):
                    return False
        return True

    def bound(self, fn: _Fn, var: str, line: int) -> bool:
        """Whether the local ``var`` of ``fn`` is, at ``line`` (a store of it), a new object bound to ``self.attr``
        (see the module's docstring)."""
        ctor = local_value(fn.node, var, line)
        if not isinstance(ctor, ast.Call):
            return False
        classes = self.cap.constructed(ctor, fn, line)
        if classes is None or not self._class_ok(classes):
            return False
        at = _chain(fn.node.body, line)
        if any(isinstance(s, (ast.For, ast.AsyncFor, ast.While)) or field == "other" for s, field in at):
            return False  # a store in a loop may keep an object made on another iteration
        if _touches(fn.node, self.attr) or not self._calls_ok(fn, var):
            return False
        for t in _stores(fn.node, self.attr):
            if not (isinstance(t.value, ast.Name) and t.value.id == var and ctor.lineno < t.lineno < line):
                continue
            mine = _chain(fn.node.body, t.lineno)
            k = 0
            while k < min(len(at), len(mine)) and at[k][0] is mine[k][0] and at[k][1] == mine[k][1]:
                k += 1
            if all(isinstance(s, ast.If) and field in ("body", "orelse") and self.holds(fn, s.test, field == "body")
                   for s, field in mine[k:]):
                self.at.append(f"{fn.module.rel}:{t.lineno}")
                return True
        return False

    def dict_bound(self, table: str) -> bool:
        """Whether every object the backend keeps in ``self.<table>`` under a key that is not a string is bound (see
        the module's docstring)."""
        cap, tree = self.cap, self.cap.tree
        found = 0
        for fn in cap.methods():
            parents = parents_of(tree, fn.module)
            for n in ast.walk(fn.node):
                if _is_self_attr(n) != table:
                    continue
                p = parents.get(id(n))
                if isinstance(n.ctx, ast.Store):
                    if not (isinstance(p, ast.Assign) and p.targets == [n] and isinstance(p.value, ast.Dict)
                            and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in p.value.keys)):
                        return False
                    continue
                if not (isinstance(p, ast.Subscript) and p.value is n) or isinstance(n.ctx, ast.Del):
                    return False  # the dict itself taken, passed, called on or deleted: stores through it unseen
                if isinstance(p.ctx, (ast.Load, ast.Del)):
                    continue
                if isinstance(p.slice, ast.Constant) and isinstance(p.slice.value, str):
                    continue  # a buffer kept by name
                stmt = parents.get(id(p))
                if not (isinstance(stmt, ast.Assign) and stmt.targets == [p] and isinstance(stmt.value, ast.Name)
                        and self.bound(fn, stmt.value.id, stmt.lineno)):
                    return False
                self.kept.append(f"{fn.module.rel}:{stmt.lineno}")
                found += 1
        for m in tree.modules_containing(f".{table}"):
            mod = tree.module(m)
            for fnode, owner in (functions_of(tree, mod) if mod else ()):
                if id(fnode) in self.cap.mine:
                    continue
                other = self.cap.others_self(fnode, owner)
                parents = parents_of(tree, mod)
                for n in ast.walk(fnode):
                    if not (isinstance(n, ast.Attribute) and n.attr == table):
                        continue
                    if other and isinstance(n.value, ast.Name) and n.value.id == "self":
                        continue
                    p = parents.get(id(n))
                    if isinstance(n.ctx, (ast.Store, ast.Del)) or not (isinstance(p, ast.Subscript) and p.value is n) \
                            or not isinstance(p.ctx, ast.Load):
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
    tree, ci = cap.tree, cap.ci
    tests = [(i, fn, test, lit, need) for i, fn in enumerate(hops) for test, want in _path_tests(fn.node.body, lines[i])
             for lit, need in _literals(test, want)]
    candidates = []
    for i, fn, test, lit, need in tests:
        operand = _none_operand(lit, need)
        if operand is None or fn.owner is None:
            continue
        field = _resolved(fn.node, operand, test.lineno)
        if not isinstance(field, ast.Attribute):
            continue
        c_attr = _is_self_attr(_resolved(fn.node, field.value, test.lineno))
        if c_attr is not None:
            candidates.append((fn, test, lit, need, c_attr, field.attr))
    entry = cap.method(CAPTURE_ENTRY)
    if not candidates or entry is None:
        return None
    memo = tree.__dict__.setdefault("_volatile_attributes", {})
    if ci.key not in memo:
        memo[ci.key] = volatile_attributes(tree, ci)
    volatile = memo[ci.key]
    assumed: dict[str, bool] = {}
    for i, fn, test, lit, need in tests:
        a = _is_self_attr(lit)
        if a is not None and fn.owner is not None and a not in volatile:
            if assumed.get(a, need) is not need:
                return None  # the path needs both values: another rule prunes it
            assumed[a] = need
    for fn, test, lit, need, c_attr, attr in candidates:
        i = next(k for k, h in enumerate(hops) if h is fn)
        node = next((n for n in ast.walk(fn.node) if isinstance(n, (ast.If, ast.While)) and n.test is test), None)
        if node is None:
            continue
        holds_read = node.body if any(x.lineno <= lines[i] <= (x.end_lineno or x.lineno) for x in node.body) \
            else node.orelse
        why = _bound_at_capture(cap, entry, hops[:i + 1], c_attr, attr, assumed, holds_read)
        if why is not None:
            return CaptureFact(f"`{ast.unparse(lit)}` ({fn.module.rel}:{test.lineno}) is {'false' if need else 'true'} "
                               f"when the graph is captured: the runner calls `{CAPTURE_ENTRY}(..., in_capture=True)` "
                               f"({runner[0]}:{runner[1]}) before capturing; {why}")
    return None


def _bound_at_capture(cap: _Capture, entry: _Fn, hops: list[_Fn], c_attr: str, attr: str,
                      assumed: dict[str, bool], branch: list) -> str | None:
    tree = cap.tree
    b = _Binding(cap, entry, attr, assumed)
    if cap.outside_stores(c_attr, lambda t, fnode, mod: False) is not None:
        return None  # the object replaced through another receiver (None included: the forward may re-create it)
    later = after_capture_call(cap, hops, branch)
    ran = reach(cap, [entry]) + later
    if replaces(later, c_attr):
        return None  # what runs after the capture call may replace the capture's object
    plain = {id(n.targets[0]) for n in _body_nodes(entry.node) if isinstance(n, ast.Assign) and len(n.targets) == 1}
    for f in reach(cap, [entry]):
        for n in ast.walk(f.node):
            if _is_self_attr(n) == c_attr and isinstance(n.ctx, (ast.Store, ast.Del)) and (
                    f.node is not entry.node or id(n) not in plain):
                return None  # stored where ``_Capture.assigned`` does not follow it
    if any(_touches(f.node, attr) for f in ran):
        return None
    for a in assumed:
        if cap.outside_stores(a, lambda t, fnode, mod: False) is not None:
            return None  # a setting the read's path needs, changed through another receiver

    def fresh(t, fnode, mod) -> bool:
        if _view_store(fnode, t):
            return True
        if not (isinstance(t.value, ast.Name) and isinstance(t.ctx, ast.Store)):
            return False
        v = local_value(fnode, t.value.id, t.lineno)
        return isinstance(v, ast.Call) and isinstance(tree.resolve_expr(mod, v.func), ClassInfo)

    if cap.outside_stores(attr, fresh, own=True) is not None:
        return None  # the field stored, other than as a slice, on an object that may be the capture's
    states = cap.assigned(entry, c_attr)
    if not states or any(not s for s in states):
        return None
    objects = []
    for s in states:
        for value, where in s:
            if where.node is not entry.node:
                return None
            v = _resolved(where.node, value, value.lineno)
            if isinstance(v, ast.Subscript) and _is_self_attr(v.value) is not None \
                    and not isinstance(v.slice, ast.Constant):
                table = _is_self_attr(v.value)
                if not b.dict_bound(table):
                    return None
                objects.append(f"`self.{table}[{ast.unparse(v.slice)}]` ({where.module.rel}:{value.lineno}), "
                               f"and each store into `self.{table}` under a key that is not a string")
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
            + f"; nothing the capture, the warm-ups or the forward runs stores `.{attr}` otherwise, nor does anything "
              "in the tree on an object that may be this one")
