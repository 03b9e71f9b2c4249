"""What the capture of a whole CUDA graph fixes in a captured path's tests: an attribute the capture's metadata object
never has.

A graph records the one path its capture takes: a test on the path of an in-graph read is evaluated once, at
capture, with the objects the capture made. SGLang's decode graph runner calls the backend's
``init_forward_metadata_out_graph(forward_batch, in_capture=True)`` before it captures the in-graph prep and the
forward (the call is read from the tree, and cited). A test conjunct that needs ``getattr(M, "A", None)`` not None
(``L is not None`` or ``L`` with ``L = getattr(M, "A", None)`` the function's last assignment of ``L`` before the
test, in a block that holds it; the same for ``M``) is false at capture when every alternative of ``M`` (an ``or`` of
them) is None there:

- ``self.C``: on every path of that capture call in the mode (``in_capture`` true, forward-mode tests decided, the
  backend's own and ``super()`` methods followed), the last assignment of ``self.C`` is an object the capture
  constructs, ``K(...)`` (directly, through a local, or through a per-size dict ``self.D[...]`` whose every store in
  the backend is such an object; a store no forward mode runs is left out: one in a method reached only through
  ``super()`` calls that pass the caller's batch on, where no mode passes both the ``if`` tests enclosing the call and
  those enclosing the store (each a test of that batch's ``forward_mode``, the method nowhere named with its class), as
  TRTLLM-MLA calls FlashInfer-MLA's capture only outside the modes in which that capture stores its wrappers), no
  class on ``K``'s MRO has ``A`` (a field, a class attribute, a ``self.A`` assignment, or a ``__getattr__``), and
  ``.C`` is stored nowhere in the tree through another receiver (``runner.attn_backend.C = ...``, a wrapper's
  ``self.backend.C = ...``), ``self`` of another class's method excepted where nothing calls that method through its
  class;
- ``getattr(P, "B", None)``: the forward batch has no field ``B``, and every store of ``.B`` in the tree is in a
  method of the backend's MRO that the capture does not run;

and nothing that runs between the capture call and the captured test stores or deletes ``.A`` (any target, or by
name: ``REFLECTIVE``): the capture call and what it calls, the warm-up hook (``WARMUP_HOOK``), the in-graph prep
(``init_forward_metadata_in_graph``) and the read's functions whole, as an earlier layer runs them (``reach``:
nested functions and lambdas followed), save the body of each ``if`` whose test needs the attribute the fact denies
on the same object (by induction). Stores through objects the reader cannot type are not seen.

A breakable graph captures decode and verify attention in a segment too (its ``eager_on_graph`` breaks around attention
are for extend batches in a prefill graph's scope), but its debug replay runs the whole forward as one eager break,
where the same test reads the live objects (no marker is recorded there: the tree's no-marker fallback decides what
covers it). Such a read is not a finding in a tree without that break marker, nor where the CUDA decode graph
runner's no-marker fallback turns the row's ``IN_REPLAY`` into ``POST_REPLAY`` (``extract._whole_graph``); elsewhere it
is left to ``reader_status`` with this fact named.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .attributes import _targets, self_assignments
from .reads import decided_test
from .tree import ClassInfo, FuncInfo, Tree, body_nodes as _body_nodes, walk_once

#: The backend method the graph runner calls with ``in_capture=True`` before capturing a graph.
CAPTURE_ENTRY = "init_forward_metadata_out_graph"
#: The backend's in-graph prep, captured before the forward.
IN_GRAPH_PREP = "init_forward_metadata_in_graph"
#: The ``ForwardMode`` predicate naming the modes the decode graph runner replays from a captured graph.
GRAPH_PREDICATE = "is_cuda_graph"
#: SGLang's break marker of a breakable graph (its function runs eagerly at replay; the debug replay wraps the whole
#: forward in one).
BREAK_MARKER = "eager_on_graph"
#: Levels of calls followed from the capture call when looking for the assignment of ``self.C``.
MAX_DEPTH = 4


@dataclass(frozen=True)
class CaptureFact:
    """Why a test of a read's path is false when the graph is captured (with file:line), or why no graph captures the
    path at all; ``eager``: what a replay that runs the forward eagerly does instead."""

    why: str
    eager: str = "evaluates the test again, on the live objects"


def capture_call(tree: Tree) -> tuple[str, int] | None:
    """(file, line) of the runner's ``<backend>.init_forward_metadata_out_graph(..., in_capture=True)`` (the decode
    graph runner's first, else any under ``sglang.srt.model_executor``), or None."""
    memo = tree.__dict__.setdefault("_capture_call", {})
    if "hit" not in memo:
        hits = []
        for m in sorted(tree.modules_containing(CAPTURE_ENTRY, under="sglang.srt.model_executor")):
            mod = tree.module(m)
            for n in (tree.walk(mod.tree) if mod else ()):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == CAPTURE_ENTRY \
                        and any(k.arg == "in_capture" and isinstance(k.value, ast.Constant) and k.value.value is True
                                for k in n.keywords):
                    hits.append(("decode" not in m, mod.rel, n.lineno))
        memo["hit"] = min(hits)[1:] if hits else None
    return memo["hit"]


def capture_only_marker(marker: dict | None) -> tuple[str, int, str] | None:
    """(file, line, test) of the guard that makes the decode runner's in-graph marker only while a stream captures
    (``if not ...is_current_stream_capturing(): return`` before its creation and record), when every site creating
    the marker has one (``protocol.Protocol.marker``'s sites); else None. A replay that runs the forward eagerly then
    records no marker."""
    sites = (marker or {}).get("sites") or []
    found = []
    for site in sites:
        g = next((g for g in site.get("guards", ()) if "is_current_stream_capturing" in g["test"]
                  and g["test"].startswith("not ")), None)
        if g is None:
            return None
        found.append((site["file"], g["line"], g["test"]))
    return found[0] if found else None


def break_marker(tree: Tree) -> tuple[str, int] | None:
    """(file, line) of the definition of SGLang's breakable-graph break marker, or None when the tree has none."""
    memo = tree.__dict__.setdefault("_break_marker", {})
    if "hit" not in memo:
        memo["hit"] = None
        for m in sorted(tree.modules_containing(f"def {BREAK_MARKER}")):
            mod = tree.module(m)
            fi = mod.functions.get(BREAK_MARKER) if mod else None
            if fi is not None:
                memo["hit"] = (mod.rel, fi.node.lineno)
                break
    return memo["hit"]


class _Fn:
    def __init__(self, node: ast.FunctionDef, module, owner: ClassInfo | None):
        self.node, self.module, self.owner = node, module, owner


def _ends(stmts) -> bool:
    """Whether every path through ``stmts`` ends in a ``return`` or ``raise``."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.If):
        return _ends(last.body) and _ends(last.orelse)
    return isinstance(last, (ast.Return, ast.Raise))


def _before(stmts, line: int):
    """The nodes of ``stmts`` a path reaching ``line`` may run before it: a branch that returns or raises at its end
    and does not hold the line is left out (its path never reaches the line)."""
    for s in stmts:
        if s.lineno >= line:
            return
        inside = s.lineno <= line <= (s.end_lineno or s.lineno)
        if isinstance(s, ast.If):
            yield from ast.walk(s.test)
            for b in (s.body, s.orelse):
                holds = any(x.lineno <= line <= (x.end_lineno or x.lineno) for x in b)
                if holds:
                    yield from _before(b, line)
                elif not _ends(b):
                    for x in b:
                        yield from ast.walk(x)
            if inside:
                return
            continue
        yield from ast.walk(s)
        if inside:
            return


def _assigned_names(n) -> list[str]:
    targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
        n, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr)) else [
        i.optional_vars for i in n.items if i.optional_vars is not None] if isinstance(n, (ast.With, ast.AsyncWith)) \
        else []
    out, todo = [], list(targets)
    while todo:  # a name bound by the target (``a``, ``a, b``, ``*a``), not one a store goes through (``a.x``)
        t = todo.pop()
        if isinstance(t, ast.Name):
            out.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            todo.extend(t.elts)
        elif isinstance(t, ast.Starred):
            todo.append(t.value)
    return out


def local_value(fn: ast.FunctionDef, name: str, before: int) -> ast.expr | None:
    """The value of the local ``name`` at line ``before`` of ``fn``: its last assignment before that line when it is a
    plain ``name = V`` in a block that holds the line (so every path to the line runs it); None otherwise."""
    if name in {a.arg for a in fn.args.args + fn.args.kwonlyargs}:
        return None
    hits = sorted((n.lineno, n) for n in _body_nodes(fn) if name in _assigned_names(n) and n.lineno < before)
    if not hits:
        return None
    last = hits[-1][1]
    if not any(last in b for b in _enclosing(fn.body, before)) or not (
            isinstance(last, ast.Assign) and len(last.targets) == 1 and isinstance(last.targets[0], ast.Name)):
        return None
    return last.value


def _enclosing(stmts, line: int):
    """The statement lists from ``stmts`` down to the innermost one holding the statement at ``line``."""
    yield stmts
    for s in stmts:
        if s.lineno <= line <= (s.end_lineno or s.lineno):
            for field in ("body", "orelse", "finalbody"):
                b = getattr(s, field, None)
                if isinstance(b, list) and any(x.lineno <= line <= (x.end_lineno or x.lineno) for x in b):
                    yield from _enclosing(b, line)
            for h in getattr(s, "handlers", ()):
                if h.lineno <= line <= (h.end_lineno or h.lineno):
                    yield from _enclosing(h.body, line)
            return


def _getattr_none(e) -> tuple[ast.expr, str] | None:
    """(receiver, attribute) of ``getattr(R, "A", None)``."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "getattr" and len(e.args) == 3 \
            and not e.keywords and isinstance(e.args[1], ast.Constant) and isinstance(e.args[1].value, str) \
            and isinstance(e.args[2], ast.Constant) and e.args[2].value is None:
        return e.args[0], e.args[1].value
    return None


def _resolved(fn: ast.FunctionDef, e: ast.expr, line: int, depth: int = 0) -> ast.expr:
    while isinstance(e, ast.Name) and depth < 3:
        v = local_value(fn, e.id, line)
        if v is None:
            return e
        e, depth = v, depth + 1
    return e


def _needs_attribute(fn: ast.FunctionDef, conj: ast.expr, line: int):
    """(receiver, attribute) when the conjunct needs ``getattr(receiver, attribute, None)`` not None."""
    x = conj.left if isinstance(conj, ast.Compare) and len(conj.ops) == 1 and isinstance(conj.ops[0], ast.IsNot) \
        and isinstance(conj.comparators[0], ast.Constant) and conj.comparators[0].value is None else conj
    return _getattr_none(_resolved(fn, x, line))


def _alternatives(e: ast.expr) -> list[ast.expr]:
    if isinstance(e, ast.BoolOp) and isinstance(e.op, ast.Or):
        return [x for v in e.values for x in _alternatives(v)]
    return [e]


def _is_self_attr(e) -> str | None:
    return e.attr if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self" else None


def attr_stores(node: ast.AST, attr: str) -> list[ast.Attribute]:
    """Each ``X.attr`` stored into or deleted under ``node``, nested functions and lambdas included."""
    return [n for n in ast.walk(node) if isinstance(n, ast.Attribute) and n.attr == attr
            and isinstance(n.ctx, (ast.Store, ast.Del))]


def _root(e: ast.expr) -> ast.expr:
    while isinstance(e, (ast.Attribute, ast.Subscript)):
        e = e.value
    return e


def functions_of(tree: Tree, mod) -> list[tuple[ast.AST, ast.ClassDef | None]]:
    """(function, the class whose body defines it, or None) of every function of the module, nested ones included
    (a nested function's class is None: its ``self`` is whatever its enclosing function passes)."""
    out = []
    for n in tree.walk(mod.tree):
        if isinstance(n, ast.ClassDef):
            out += [(f, n) for f in n.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    methods = {id(f) for f, _ in out}
    out += [(f, None) for f in tree.walk(mod.tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            and id(f) not in methods]
    return out


#: builtins that only look at the object they are given
_LOOKS = frozenset({"isinstance", "issubclass", "hasattr", "getattr", "type", "id", "len", "repr", "str", "print",
                    "super", "callable", "hash", "bool"})


def _names(node, attr: str) -> bool:
    """Whether ``node`` names ``self.<attr>`` anywhere inside."""
    return any(_is_self_attr(x) == attr for x in ast.walk(node))


def _stores_field(t, attr: str) -> bool:
    """Whether the target stores ``self.<attr>`` itself (not a field or item of it), alone or unpacked into."""
    if isinstance(t, (ast.Tuple, ast.List)):
        return any(_stores_field(e, attr) for e in t.elts)
    if isinstance(t, ast.Starred):
        return _stores_field(t.value, attr)
    return _is_self_attr(t) == attr


def _written(s) -> list:
    """What the statement stores into (``attributes._targets``) or deletes."""
    return list(s.targets) if isinstance(s, ast.Delete) else _targets(s)


class _Capture:
    """The capture's objects and code for one backend class and mode."""

    def __init__(self, tree: Tree, ci: ClassInfo, modes, mode: str):
        self.tree, self.ci, self.modes, self.mode = tree, ci, modes, mode
        self._must: dict = {}
        self._mine: set[int] | None = None
        #: the per-size dicts' stores no mode runs (``_stored``), as ``file:line (Class.method)``
        self.unrun: dict[str, list[str]] = {}

    # stores through another receiver ------------------------------------------------------------------------------
    @property
    def mine(self) -> set[int]:
        """The ids of the nodes of the methods an instance of the backend runs (``methods``)."""
        if self._mine is None:
            self._mine = {id(f.node) for f in self.methods()}
        return self._mine

    def others_self(self, fnode: ast.AST, owner: ast.ClassDef | None) -> bool:
        """Whether ``self`` in ``fnode`` (not one of the backend's methods) is surely another object: ``fnode`` is a
        method of a class, and nothing in the tree calls it through its class (``K.m(...)``)."""
        return owner is not None and id(fnode) not in self.mine \
            and not self.tree.modules_containing(f"{owner.name}.{fnode.name}(")

    def outside_stores(self, attr: str, allow, own: bool = False) -> str | None:
        """file:line of a store of ``.attr`` in the tree that ``allow(target, fnode, mod)`` does not accept, where
        the receiver is not ``self`` itself in another class's method (``others_self``: ``self.attr = ...`` there
        stores on that other object, while ``self.child.attr = ...`` may store on this backend, a wrapper's child);
        the backend's own methods included when ``own``; None when there is none."""
        tree = self.tree
        for m in tree.modules_containing(f".{attr}"):
            mod = tree.module(m)
            for fnode, owner in (functions_of(tree, mod) if mod else ()):
                if id(fnode) in self.mine and not own:
                    continue
                other = self.others_self(fnode, owner)
                for t in attr_stores(fnode, attr):
                    if other and isinstance(t.value, ast.Name) and t.value.id == "self":
                        continue
                    if not allow(t, fnode, mod):
                        return f"{mod.rel}:{t.lineno}"
        return None

    # functions ---------------------------------------------------------------------------------------------------
    def method(self, name: str, after: ClassInfo | None = None) -> _Fn | None:
        hit = self.tree.lookup(self.ci, name, after)
        return _Fn(hit[1], hit[0].module, hit[0]) if hit else None

    def callee(self, fn: _Fn, c: ast.Call) -> _Fn | None:
        f = c.func
        if isinstance(f, ast.Attribute):
            if isinstance(f.value, ast.Name) and f.value.id == "self":
                return self.method(f.attr)
            if isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) and f.value.func.id == "super" \
                    and fn.owner is not None:
                return self.method(f.attr, fn.owner)
            return None
        if isinstance(f, ast.Name):
            r = self.tree.resolve(fn.module, f.id)
            if isinstance(r, FuncInfo):
                return _Fn(r.node, r.module, None)
        return None

    def closure(self, roots: list[tuple[_Fn, int | None]]) -> list[_Fn]:
        """The functions ``roots`` run (each up to its line, or whole), and everything they call that the reader can
        follow, through every branch."""
        seen, out, todo = set(), [], list(roots)
        while todo:
            fn, upto = todo.pop()
            k = (id(fn.node), upto)
            if k in seen:
                continue
            seen.add(k)
            out.append(fn)
            for n in (_body_nodes(fn.node) if upto is None else _before(fn.node.body, upto)):
                if isinstance(n, ast.Call):
                    t = self.callee(fn, n)
                    if t is not None:
                        todo.append((t, None))
        return out

    # the last assignment of self.C on every path ------------------------------------------------------------------
    def assigned(self, fn: _Fn, attr: str, depth: int = 0):
        """The states at ``fn``'s exits: each a frozenset of (value, function) of the last ``self.<attr> = value``
        on that path, empty where the path assigns none; None when a call on a path cannot be followed that far, or
        where ``self.<attr>`` is stored other than by a plain assignment (a tuple, augmented or ``with ... as``
        target, a nested function)."""
        k = (id(fn.node), attr)
        if k in self._must:
            return self._must[k]
        self._must[k] = None  # recursion: not decided
        nested = any(n is not fn.node and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                                         ast.ClassDef)) and _names(n, attr) for n in ast.walk(fn.node))
        fall, exits = (None, None) if nested else self._block(fn, fn.node.body, [frozenset()], attr, depth)
        out = None if fall is None or exits is None else list(dict.fromkeys(fall + exits))
        self._must[k] = out
        return out

    def _reaches(self, t: _Fn, attr: str) -> bool:
        """Whether ``t``, or what it calls that the reader follows, names ``self.<attr>``."""
        return any(_names(f.node, attr) for f in self.closure([(t, None)]))

    def _given_self(self, fn: _Fn, c: ast.Call, t: _Fn | None, attr: str) -> bool:
        """Whether the call hands the backend itself to code that may store ``.<attr>`` on it: a call the reader
        cannot follow (a builtin that only looks excepted), or a module function whose code names ``.<attr>`` on
        any receiver."""
        if not any(isinstance(a, ast.Name) and a.id == "self"
                   or isinstance(a, ast.Starred) and isinstance(a.value, ast.Name) and a.value.id == "self"
                   for a in [*c.args, *(k.value for k in c.keywords)]):
            return False
        if t is None:
            return not (isinstance(c.func, ast.Name) and c.func.id in _LOOKS
                        and self.tree.resolve(fn.module, c.func.id) is None)
        return t.owner is None and any(isinstance(x, ast.Attribute) and x.attr == attr
                                       for f in self.closure([(t, None)]) for x in ast.walk(f.node))

    def _call_states(self, fn: _Fn, e, states, attr, depth):
        for c in (n for n in ast.walk(e) if isinstance(n, ast.Call)) if e is not None else ():
            t = self.callee(fn, c)
            if self._given_self(fn, c, t, attr):
                return None
            if t is None or t.owner is None:
                continue
            if self._reaches(t, attr):
                if depth >= MAX_DEPTH:
                    return None
                sub = self.assigned(t, attr, depth + 1)
                if sub is None:
                    return None
                states = list(dict.fromkeys(s2 if s2 else s for s in states for s2 in sub))
        return states

    def _touches(self, fn: _Fn, s, attr: str) -> bool:
        """Whether ``s`` names ``self.<attr>``, calls a method that reaches it or hands the backend on."""
        for x in ast.walk(s):
            if _is_self_attr(x) == attr:
                return True
            if isinstance(x, ast.Call):
                t = self.callee(fn, x)
                if self._given_self(fn, x, t, attr) or t is not None and t.owner is not None \
                        and self._reaches(t, attr):
                    return True
        return False

    def _block(self, fn, stmts, states, attr, depth):
        """(states falling through, states at returns); None parts where a path cannot be followed."""
        exits = []
        for s in stmts:
            if isinstance(s, ast.Return):
                st = self._call_states(fn, s.value, states, attr, depth)
                return ([], None) if st is None else ([], exits + st)
            if isinstance(s, ast.Raise):
                st = self._call_states(fn, s, states, attr, depth)
                return ([], None) if st is None else ([], exits)
            if isinstance(s, ast.If):
                states = self._call_states(fn, s.test, states, attr, depth)
                if states is None:
                    return None, None
                t, _ = decided_test(self.modes, self.mode, s.test, in_capture=True)
                branches = [s.body] if t is True else [s.orelse] if t is False else [s.body, s.orelse]
                fall = []
                for b in branches:
                    f2, e2 = self._block(fn, b, states, attr, depth)
                    if f2 is None or e2 is None:
                        return None, None
                    fall += f2
                    exits += e2
                states = list(dict.fromkeys(fall))
                if not states:
                    return [], exits
                continue
            if isinstance(s, (ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match)):
                if self._touches(fn, s, attr):
                    return None, None  # an assignment in a loop or handler: not on every path
                continue
            if isinstance(s, (ast.With, ast.AsyncWith)):
                if any(_stores_field(i.optional_vars, attr) for i in s.items if i.optional_vars is not None):
                    return None, None
                states = self._call_states(fn, ast.Tuple([i.context_expr for i in s.items]), states, attr, depth)
                if states is None:
                    return None, None
                f2, e2 = self._block(fn, s.body, states, attr, depth)
                if f2 is None or e2 is None:
                    return None, None
                exits += e2
                states = f2
                if not states:
                    return [], exits
                continue
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # a nested definition that names the field is refused in ``assigned``
            value = s.value if isinstance(s, (ast.Assign, ast.AnnAssign)) else None
            st = self._call_states(fn, value if value is not None else s, states, attr, depth)
            if st is None:
                return None, None
            states = st
            if isinstance(s, ast.Assign) and any(_is_self_attr(t) == attr for t in s.targets):
                states = [frozenset({(s.value, fn)})]
            elif isinstance(s, ast.AnnAssign) and _is_self_attr(s.target) == attr and s.value is not None:
                states = [frozenset({(s.value, fn)})]
            elif any(_stores_field(t, attr) for t in _written(s)):
                return None, None  # a tuple, starred, augmented or deleted target: not followed
        return states, exits

    # the classes of a value ---------------------------------------------------------------------------------------
    def constructed(self, value: ast.expr, fn: _Fn, line: int, depth: int = 0) -> list[tuple[ClassInfo, str]] | None:
        """The classes ``value`` (in ``fn`` at ``line``) constructs, with file:line, or None when it is not always a
        new object of a class of the tree."""
        value = _resolved(fn.node, value, line)
        if isinstance(value, ast.Call):
            k = self.tree.resolve_expr(fn.module, value.func)
            return [(k, f"{fn.module.rel}:{value.lineno}")] if isinstance(k, ClassInfo) else None
        if isinstance(value, ast.Subscript) and _is_self_attr(value.value) and depth == 0:
            return self._stored(value.value.attr)
        return None

    def _mode_runs(self, fn: _Fn) -> set[str] | None:
        """The modes ``fn`` can run in: None (any) for a name's first definition on the MRO, else the union, over the
        ``super()`` calls of the backend's methods that reach it, of the modes passing the tests enclosing the call
        (its callers taken to run in any mode). None too wherever that is not sure: the method named with its class
        anywhere in the tree (``Base.m(self, ...)`` runs it in any mode), a call that does not pass the caller's own
        batch on as the callee's, or a mode test not on that batch's ``forward_mode`` (``_batch_param``)."""
        if fn.owner is None or (self.method(fn.node.name) is not None
                                and self.method(fn.node.name).node is fn.node):
            return None
        if self.tree.modules_containing(f"{fn.owner.name}.{fn.node.name}"):
            return None
        callee_batch = _batch_param(fn.node)
        if callee_batch is None:
            return None
        out: set[str] = set()
        for g in self.methods():
            for n in _body_nodes(g.node):
                if _super_call(n) is not None and g.owner is not None:
                    hit = self.method(_super_call(n), g.owner)
                    if hit is not None and hit.node is fn.node:
                        if self._mode_runs(g) is not None:
                            return None  # reached through a chain of super() calls: not followed, any mode
                        batch = _batch_param(g.node)
                        passed = n.args[0] if n.args else next(
                            (k.value for k in n.keywords if k.arg == callee_batch), None)
                        tests = _path_tests(g.node.body, n.lineno)
                        if batch is None or not (isinstance(passed, ast.Name) and passed.id == batch) \
                                or not _on_batch(g.node, batch, tests):
                            return None
                        out |= _modes_passing(self.modes, tests)
        return out

    def methods(self) -> list[_Fn]:
        """The methods an instance of the backend runs: each name's first definition on the MRO, and the ones a
        ``super()`` call of one of those reaches."""
        out, todo, seen = [], [], set()
        for c in self.tree.mro(self.ci):
            for name in c.methods:
                if name not in seen:
                    seen.add(name)
                    todo.append(self.method(name))
        done = set()
        while todo:
            fn = todo.pop()
            if fn is None or id(fn.node) in done:
                continue
            done.add(id(fn.node))
            out.append(fn)
            for n in _body_nodes(fn.node):
                if _super_call(n) is not None:
                    todo.append(self.method(_super_call(n), fn.owner))
        return out

    def _stored(self, table: str) -> list[tuple[ClassInfo, str]] | None:
        """The classes every store ``self.<table>[k] = value`` of the backend's methods puts in the per-size dict
        (None where one is not a new object of a tree class, or the dict is replaced). A store no forward mode runs
        is left out: one in a method reached only through ``super()`` calls, where no mode passes both the tests
        enclosing the call and those enclosing the store (``_mode_runs``)."""
        out = []
        for fn in self.methods():
            runs = self._mode_runs(fn)
            for n in _body_nodes(fn.node):
                tests = _path_tests(fn.node.body, n.lineno) if runs is not None and isinstance(n, ast.stmt) else None
                if tests is not None and _on_batch(fn.node, _batch_param(fn.node), tests) and not (
                        runs & _modes_passing(self.modes, tests)):
                    if any(isinstance(t, ast.Subscript) and _is_self_attr(t.value) == table for t in _targets(n)):
                        at = f"{fn.module.rel}:{n.lineno} ({fn.owner.name}.{fn.node.name})"
                        self.unrun.setdefault(table, []).append(at)
                    continue  # the store never runs for this backend
                for t in _targets(n):
                    if _is_self_attr(t) == table and not (isinstance(n, ast.Assign) and isinstance(
                            n.value, ast.Dict) and not n.value.keys):
                        return None  # the dict itself replaced by something else
                    if isinstance(t, ast.Subscript) and _is_self_attr(t.value) == table:
                        got = self.constructed(n.value, fn, n.lineno, depth=1) if isinstance(n, ast.Assign) \
                            else None
                        if got is None:
                            return None
                        out += got
        return out or None


def _super_call(n) -> str | None:
    """The method name of a ``super().name(...)`` call, or None for any other node."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Call) \
            and isinstance(n.func.value.func, ast.Name) and n.func.value.func.id == "super":
        return n.func.attr
    return None


def _path_tests(stmts, line: int) -> list[tuple[ast.expr, bool]]:
    """(test, the value it has there) of each ``if`` enclosing ``line`` in ``stmts`` (``elif`` chains included); other
    compound statements are entered without a test (a test left out only lets more modes reach the line)."""
    for st in stmts:
        if not (getattr(st, "lineno", 0) <= line <= getattr(st, "end_lineno", 0)):
            continue
        if isinstance(st, ast.If):
            if any(x.lineno <= line <= x.end_lineno for x in st.body):
                return [(st.test, True), *_path_tests(st.body, line)]
            if any(x.lineno <= line <= x.end_lineno for x in st.orelse):
                return [(st.test, False), *_path_tests(st.orelse, line)]
            return []  # the test itself
        out = []
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(st, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.AST):
                body = [b for x in inner for b in (x.body if isinstance(x, (ast.ExceptHandler, ast.match_case))
                                                   else [x])]
                out += _path_tests(body, line)
        return out
    return []


#: The names ``reads.decided_test`` takes for a forward mode.
_MODE_NAMES = ("forward_mode", "fm", "mode")


def _batch_param(fn: ast.FunctionDef) -> str | None:
    """The method's batch parameter (its first after ``self``) when nothing in it rebinds that name or stores a
    ``.forward_mode``; else None."""
    params = [a.arg for a in fn.args.args[1:]]
    if not params:
        return None
    p = params[0]
    for n in walk_once(fn):
        if isinstance(n, ast.Name) and n.id == p and isinstance(n.ctx, ast.Store):
            return None
        if isinstance(n, ast.Attribute) and n.attr == "forward_mode" and isinstance(n.ctx, ast.Store):
            return None
    return p


def _on_batch(fn: ast.FunctionDef, batch: str | None, tests: list[tuple[ast.expr, bool]]) -> bool:
    """Whether every forward-mode expression in ``tests`` is ``batch.forward_mode``, directly or through a local
    whose every binding in ``fn`` is ``= batch.forward_mode`` (what the caller's tests and the callee's see alike)."""
    if batch is None:
        return False
    params = {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs, *fn.args.posonlyargs]}

    def of_batch(e) -> bool:
        return isinstance(e, ast.Attribute) and e.attr == "forward_mode" and isinstance(e.value, ast.Name) \
            and e.value.id == batch

    for test, _ in tests:
        for e in ast.walk(test):
            if isinstance(e, ast.Attribute) and e.attr == "forward_mode" and not of_batch(e):
                return False
            if isinstance(e, ast.Name) and e.id in _MODE_NAMES:
                if e.id in params:
                    return False
                binds = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == e.id
                         and isinstance(n.ctx, ast.Store)]
                assigns = [n for n in ast.walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
                           and isinstance(n.targets[0], ast.Name) and n.targets[0].id == e.id and of_batch(n.value)]
                if not binds or len(binds) != len(assigns):
                    return False
    return True


def _modes_passing(modes, tests: list[tuple[ast.expr, bool]]) -> set[str]:
    """The forward modes under which no test of ``tests`` is decided against the value it needs (``in_capture`` and
    every other test left open)."""
    return {m for m in modes.members
            if all(decided_test(modes, m, t, in_capture=None)[0] in (None, want) for t, want in tests)}


def _has_attribute(tree: Tree, k: ClassInfo, attr: str) -> bool:
    for c in tree.mro(k):
        if attr in c.assigned or "__getattr__" in c.methods or attr in c.methods:
            return True
        if any(isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.target.id == attr
               for s in c.node.body):
            return True
        if self_assignments(tree, c, attr):
            return True
    return False


#: Ways of storing an attribute by name, each taken as a store of any attribute.
REFLECTIVE = frozenset({"setattr", "vars", "__setattr__", "__dict__"})
#: The backend method the graph runner calls after each warm-up forward, before the capture (0.5.23
#: model_executor/runner/decode_cuda_graph_runner.py:1487-1498).
WARMUP_HOOK = "on_after_cuda_graph_warmup"


def reach(cap: "_Capture", roots: list, skip: dict[int, list] | None = None, guard=None) -> list[_Fn]:
    """The functions ``roots`` run and everything they call that the reader can follow (``_Capture.callee``), whole:
    calls inside nested functions and lambdas included; in a function whose node is a key of ``skip``, the statements
    listed under it are left out (with what only they call), and so is the body of each ``if`` for which
    ``guard(function, if)`` is true."""
    seen, out, todo = set(), [], [r for r in roots if r is not None]
    while todo:
        fn = todo.pop()
        if id(fn.node) in seen:
            continue
        seen.add(id(fn.node))
        out.append(fn)
        gone = {id(x) for x in (skip or {}).get(id(fn.node), ())}
        stack = [fn.node]
        while stack:
            n = stack.pop()
            if id(n) in gone:
                continue
            if isinstance(n, ast.Call):
                t = cap.callee(fn, n)
                if t is not None:
                    todo.append(t)
            if isinstance(n, ast.If) and guard is not None and guard(fn, n):
                stack.extend([n.test, *n.orelse])
                continue
            stack.extend(ast.iter_child_nodes(n))
    return out


def after_capture_call(cap: "_Capture", hops: list[_Fn], branch: list, guard=None) -> list[_Fn]:
    """What runs between the capture call and the captured test, besides the capture call itself: the warm-up
    forwards and the hook after each (``WARMUP_HOOK``), the in-graph prep and every layer's forward, as far as the
    reader follows them (``reach``). The read's functions up to the test's are taken whole (an earlier layer runs all
    of them), save ``branch``, the statements of the test's function that run only where the test has the value the
    read needs: they run, in an earlier layer, only after the test had that value there, which is what the fact
    denies (the first layer's test sees the capture's objects as they are). ``guard`` leaves out, the same way, the
    body of each other ``if`` whose test needs what the fact denies (``reach``)."""
    return reach(cap, [cap.method(IN_GRAPH_PREP), cap.method(WARMUP_HOOK), *hops],
                 {id(hops[-1].node): branch} if hops else None, guard)


def by_name(n: ast.AST) -> bool:
    """Whether ``n`` names a way of storing an attribute by name (``REFLECTIVE``)."""
    return (isinstance(n, ast.Name) and n.id in REFLECTIVE) or (isinstance(n, ast.Attribute) and n.attr in REFLECTIVE)


def replaces(fns: list[_Fn], c_attr: str) -> bool:
    """Whether one of ``fns`` stores or deletes ``self.<c_attr>`` (any target, nested functions included)."""
    return any(_is_self_attr(n) == c_attr and isinstance(n.ctx, (ast.Store, ast.Del)) for f in fns
               for n in walk_once(f.node))


def _stores(fns: list[_Fn], attr: str) -> list[str]:
    """file:line of each store or deletion of ``.attr`` on an object other than ``self`` in ``fns`` (any target:
    tuple, annotated, augmented; nested functions and lambdas included), and of each store by name (``setattr``,
    ``__setattr__``, ``vars``, ``__dict__``)."""
    out = []
    for fn in fns:
        for n in walk_once(fn.node):
            if by_name(n):
                out.append(f"{fn.module.rel}:{n.lineno}")
            if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, (ast.Store, ast.Del)) \
                    and _is_self_attr(n) is None:
                out.append(f"{fn.module.rel}:{n.lineno}")
    return out


def _tree_stores(tree: Tree, attr: str) -> list[tuple[str, int, ast.AST]]:
    """(module, line, enclosing function node) of every ``<x>.attr = ...`` in the tree."""
    out = []
    for m in tree.modules_containing(f".{attr}"):
        mod = tree.module(m)
        if mod is None:
            continue
        for fnode in (n for n in tree.walk(mod.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for n in _body_nodes(fnode):
                for t in _targets(n):
                    if isinstance(t, ast.Attribute) and t.attr == attr:
                        out.append((mod.rel, n.lineno, fnode))
    return out


def _forward_batch_has(tree: Tree, field: str) -> bool:
    ks = tree.classes_named("ForwardBatch")
    return not ks or any(_has_attribute(tree, k, field) for k in ks)


def graph_modes(modes) -> tuple[str, ...]:
    """The tree's modes its ``ForwardMode.is_cuda_graph`` holds for (the decode graph runner replays them from a
    captured graph), in the modes' order; none where the predicate cannot be evaluated."""
    return tuple(m for m in modes.members if modes.predicate(GRAPH_PREDICATE, m) is True)


def capture_fact(tree: Tree, ci: ClassInfo, modes, mode: str, read) -> CaptureFact | None:
    """The test on ``read``'s path (a ``reads.Read`` of ``ci`` in ``mode``, at an in-graph site) that the capture of
    a whole graph decides false, or None."""
    if mode not in graph_modes(modes) or not read.via:
        return None
    runner = capture_call(tree)
    if runner is None:
        return None
    cap = _Capture(tree, ci, modes, mode)
    got = read_hops(tree, ci, read)
    if got is None:
        return None
    hops, lines = got
    for i, fn in enumerate(hops):
        for n in _body_nodes(fn.node):
            if not isinstance(n, (ast.If, ast.While)) or not (n.lineno < lines[i]):
                continue
            text = ast.unparse(n.test)
            if text not in read.conditions or not _encloses(n, lines[i]):
                continue
            memo = tree.__dict__.setdefault("_capture_facts", {})
            k = (ci.key, mode, id(n), tuple(id(h.node) for h in hops[:i + 1]), tuple(lines[:i]))
            if k not in memo:
                memo[k] = _test_fact(cap, fn, n, runner, hops[:i + 1])
            if memo[k] is not None:
                return memo[k]
    return None


def read_hops(tree: Tree, ci: ClassInfo, read) -> tuple[list[_Fn], list[int]] | None:
    """The functions of ``read``'s call chain (a method of ``ci``'s MRO or one it borrows, or a module function) and
    the line each calls the next at (the last: the read's line), or None when one of them is not found."""
    hops = []
    for h in read.via:
        owner_key, _, name = h.key.rpartition(".")
        c = next((c for c in tree.mro(ci) if c.key == owner_key and name in c.methods), None)
        if c is not None:
            hops.append(_Fn(c.methods[name], c.module, c))
            continue
        hit = tree.lookup(ci, name)  # a method the class borrows (``forward = Other.forward``), as the walk took it
        if hit is not None and hit[0].key == owner_key:
            hops.append(_Fn(hit[1], hit[0].module, hit[0]))
            continue
        mod = tree.module(owner_key)
        fi = mod.functions.get(name) if mod else None
        if fi is None:
            return None
        hops.append(_Fn(fi.node, fi.module, None))
    return hops, [h.line for h in read.via[1:]] + [read.line]


def _test_fact(cap, fn, n, runner, chain) -> CaptureFact | None:
    conjs = n.test.values if isinstance(n.test, ast.BoolOp) and isinstance(n.test.op, ast.And) else [n.test]
    for conj in conjs:
        why = _absent(cap, fn, conj, n.lineno, runner, chain, n.body)
        if why is not None:
            return CaptureFact(f"`{ast.unparse(conj)}` ({fn.module.rel}:{n.lineno}) is false when the graph is "
                               f"captured: {why}")
    return None


def _encloses(n: ast.If | ast.While, line: int) -> bool:
    return any(getattr(s, "lineno", 0) <= line <= getattr(s, "end_lineno", 0) for s in n.body)


def _absent(cap: _Capture, fn: _Fn, conj, line: int, runner, chain: list[_Fn], branch: list) -> str | None:
    hit = _needs_attribute(fn.node, conj, line)
    if hit is None:
        return None
    receiver, attr = hit
    receiver = _resolved(fn.node, receiver, line)
    tree, ci = cap.tree, cap.ci
    entry = cap.method(CAPTURE_ENTRY)
    if entry is None:
        return None
    want = ast.dump(receiver)

    def same_test(f: _Fn, n: ast.If) -> bool:
        """The test needs ``getattr(R, attr, None)`` not None for the same ``R``: its body runs only once that
        attribute is there, which nothing before it stored (the argument by induction over what runs)."""
        conjs = n.test.values if isinstance(n.test, ast.BoolOp) and isinstance(n.test.op, ast.And) else [n.test]
        for c in conjs:
            got = _needs_attribute(f.node, c, n.lineno)
            if got is not None and got[1] == attr and ast.dump(_resolved(f.node, got[0], n.lineno)) == want:
                return True
        return False

    later = after_capture_call(cap, chain, branch, same_test)
    memo = tree.__dict__.setdefault("_capture_reach", {})
    k = (ci.key, ci.line, cap.mode, id(entry.node))
    if k not in memo:  # what the capture call runs: the same for every test of the class and mode
        memo[k] = (entry.node, reach(cap, [entry]))
    ran = memo[k][1] + later
    ran_nodes = {id(f.node) for f in ran}
    if _stores(ran, attr):
        return None
    parts = []
    for alt in _alternatives(receiver):
        c_attr = _is_self_attr(alt)
        if c_attr is not None:
            if replaces(later, c_attr):
                return None  # what runs after the capture call may replace the capture's object
            if cap.outside_stores(c_attr, lambda t, fnode, mod: False) is not None:
                return None  # the object replaced through another receiver
            states = cap.assigned(entry, c_attr)
            if not states or any(not s for s in states):
                return None
            made = []
            for s in states:
                for value, where in s:
                    got = cap.constructed(value, where, value.lineno)
                    if got is None or any(_has_attribute(tree, k, attr) for k, _ in got):
                        return None
                    made += got
            names = ", ".join(dict.fromkeys(f"{k.name} ({at})" for k, at in made))
            unrun = sorted({at for t in cap.unrun.values() for at in t})
            parts.append(f"`self.{c_attr}` is then a new {names}, which has no `{attr}` (no field, class attribute "
                         f"or assignment on its MRO)" + (
                             f"; a per-size dict's store no forward mode runs is left out: {', '.join(unrun)} (in a "
                             "method reached only through `super()` calls whose enclosing tests no mode passes "
                             "together with the store's)" if unrun else ""))
            continue
        g = _getattr_none(alt)
        if g is not None and isinstance(g[0], ast.Name):
            field = g[1]
            if _forward_batch_has(tree, field):
                return None
            backend_fns = {id(n) for c in tree.mro(ci) for n in c.methods.values()}
            where = []
            for rel, ln, fnode in _tree_stores(tree, field):
                if id(fnode) not in backend_fns or id(fnode) in ran_nodes:
                    return None
                where.append(f"{rel}:{ln}")
            parts.append(f"`{ast.unparse(alt)}` is None (no ForwardBatch field `{field}`; "
                         + (f"only {', '.join(where)} set it, outside the capture" if where else "nothing sets it")
                         + ")")
            continue
        return None
    if not parts:
        return None
    return (f"the runner calls `{CAPTURE_ENTRY}(..., in_capture=True)` ({runner[0]}:{runner[1]}) before capturing; "
            + "; ".join(parts) + f"; nothing the capture runs stores `.{attr}`")
