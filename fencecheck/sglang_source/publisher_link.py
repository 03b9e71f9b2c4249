"""A worker's publisher test linked to the value its own decode step gives the attribute it tests.

The scheduler asks the worker for ``last_shared_read_runner`` when it applies the barrier, after the worker's decode
step (``forward_batch_generation``) has returned (the overlap loops call ``_apply_war_barrier`` after ``run_batch``;
``barrier.py`` reads those calls). A publisher that holds only under a test of a sub-worker's attribute
(``if self.draft_worker.last_draft_extend_staged: return self.target_worker.model_runner``) therefore sees the value
the step left there. When the read's own call chain runs the method that sets it, the test and the read's path are
about the same values, and a read whose path needs the opposite of what the test needs cannot race with that
publisher: SGLang's multi-layer EAGLE computes its boundary locations after the verify only when the draft-extend is
not staged (``_draft_extend_for_decode``), and then sets ``last_draft_extend_staged`` false, so the publisher is the
draft runner, not the target runner the read would race against.

The link is made only where the step surely leaves that value (``linked``), each step checked on the tree:

- the publisher test is the attribute ``self.X.A`` used as a truth value (under ``and``/``or``/``not``);
- the step's entry calls ``self.X.m(...)`` as the read's first hop, in a statement that calls nothing else, not in a
  loop, ``try`` or ``with``, and its block returns a name right after (``return batch_output``), so nothing of the
  step runs after ``m``;
- ``X`` names one object for the worker's lifetime: an attribute assigned only in ``__init__`` (and the methods only
  ``__init__`` calls), or a property that returns one (``return self._draft_worker``);
- ``m``'s last statement is ``self.A = V``, the only store of ``A`` in ``m``, and ``m`` has no ``return`` (every path
  through it ends by storing ``V``);
- every other store of ``.A`` in the whole tree is in an ``__init__``, or a top-level statement of the entry before
  the call (``self.draft_worker.last_draft_extend_staged = False`` at the step's start); no string in those modules
  names ``A`` (``setattr``, ``__dict__``, ``vars()``).

The test is then ``V`` (``bool(E)`` taken as ``E`` where ``bool`` is the builtin: the same truth value) in ``m``'s
frame, and the formula given to the SMT solver (``feasible.unsat_core``, bounded by ``feasible.RLIMIT``) is that test
with the tests on the read's path in ``m`` and in the methods it calls on the same ``self`` down the chain: each ``if``
enclosing the next call (or the read) with the branch taken, and each ``if T:`` before it whose body ends in
``return``/``raise`` (``T`` false). Two occurrences are one variable only where nothing can change the value in
between (``_linkable``):

- a local of one frame that is a parameter never rebound, or a name bound once by a plain assignment outside loops
  (no ``global``/``nonlocal``, no walrus in a comprehension, no rebinding of any kind), and that is never handed to a
  call or stored into unless the parameter is annotated ``bool``, ``int``, ``float`` or ``str``;
- an attribute of ``self`` read in the tests of two adjacent frames with nothing run between the two reads but the
  call from one to the other (no call in the first test, the branch taken starting with that call alone; the test of
  the second the callee's first statement, the attribute in its first operand).

Anything else (an attribute of ``self`` elsewhere, the worker's attributes, a global, any call) is a variable of its
own at each occurrence. An attribute whose every store in the tree is a number or ``+``/``-`` with a number literal
(``= 0``, ``= steps - 1 + warmup``) has the truth value of ``!= 0``, which links ``not self.n`` to ``self.n == 0``. An
unsatisfiable formula is the reason, with its core's tests and the store cited; anything else (sat, unknown, a step
not surely linked) keeps the read as it was. Not seen: a store through ``exec``, a C extension, or another thread.
"""

from __future__ import annotations

import ast
import re

import z3

from .attributes import _targets
from .capture_state import _body_nodes
from .constructed import ends_in_exit
from .feasible import parsed_all, unsat_core
from .tree import ClassInfo, Tree, walk_once

#: The prefix of a frame's stable locals in the formula (``_linkable`` links these).
_FRAME = "F{}__"
#: What ``self`` of the worker's frame becomes in the formula (kept apart from the sub-worker's ``self``).
_WORKER_SELF = "W__self"


def _owner(tree: Tree, key: str) -> ClassInfo | None:
    """The class of the method with qualified name ``key`` (``module.Class.method``), or None."""
    parts = key.split(".")
    if len(parts) < 3:
        return None
    mod = tree.module(".".join(parts[:-2]))
    return mod.classes.get(parts[-2]) if mod is not None else None


def _truth_leaves(node) -> list[ast.expr]:
    """The operands ``node`` tests for their truth value alone (under ``and``/``or``/``not``)."""
    if isinstance(node, ast.BoolOp):
        return [x for v in node.values for x in _truth_leaves(v)]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _truth_leaves(node.operand)
    return [node]


def _self_chain(e) -> tuple[str, str] | None:
    """(X, A) of ``self.X.A``."""
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Attribute) and isinstance(e.value.value, ast.Name) \
            and e.value.value.id == "self":
        return e.value.attr, e.attr
    return None


def _init_only(tree: Tree, ci: ClassInfo) -> set[str]:
    """``__init__`` and the methods of ``ci``'s MRO whose every call in the tree is ``self.m(...)`` inside such a
    method (a fixed point from ``__init__``)."""
    methods = {name: fn for c in reversed(tree.mro(ci)) for name, fn in c.methods.items()}
    calls: dict[str, set[str]] = {}
    for name, fn in methods.items():
        for n in tree.walk(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in methods:
                calls.setdefault(n.func.attr, set()).add(
                    name if isinstance(n.func.value, ast.Name) and n.func.value.id == "self" else "")
    out = {"__init__"}
    changed = True
    while changed:
        changed = False
        for name in methods:
            if name in out or not calls.get(name) or not calls[name] <= out:
                continue
            if any(n for n in tree.modules_containing(f".{name}(")
                   if n not in {c.module.name for c in tree.mro(ci)}):
                continue  # called from another module: not only from __init__
            out.add(name)
            changed = True
    return out


def _volatile(tree: Tree, ci: ClassInfo) -> frozenset[str]:
    """The attributes of ``self`` assigned in a method of ``ci``'s MRO outside ``_init_only``."""
    keep = _init_only(tree, ci)
    out = set()
    for c in tree.mro(ci):
        for name, fn in c.methods.items():
            if name in keep:
                continue
            for n in tree.walk(fn):
                for t in _targets(n):
                    for x in ast.walk(t):
                        if isinstance(x, ast.Attribute) and isinstance(x.value, ast.Name) and x.value.id == "self":
                            out.add(x.attr)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr":
                    out.add("*")
    return frozenset(out)


def _numeric_value(e, depth: int = 0) -> bool:
    """Whether ``e`` is a number literal, or ``+``/``-`` with one (``steps - 1 + warmup``: a sequence or a string
    plus or minus a number raises; ``*`` and ``%`` are left out, ``[None] * n`` and ``"%d" % n`` are no numbers)."""
    if isinstance(e, ast.Constant):
        return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        return _numeric_value(e.operand, depth + 1)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)) and depth < 8:
        return _numeric_value(e.left, depth + 1) or _numeric_value(e.right, depth + 1)
    return False


def _numeric(tree: Tree, attr: str) -> bool:
    """Whether every store of ``.<attr>`` in the tree (at least one; on any object) is a plain assignment of a number
    (``_numeric_value``), and no class defines ``attr`` otherwise (a class attribute, a method or property)."""
    seen = False
    for m in tree.modules_containing(attr):
        mod = tree.module(m)
        if mod is None:
            continue
        for n in tree.walk(mod.tree):
            if isinstance(n, ast.ClassDef) and any(
                    isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef)) and x.name == attr
                    or isinstance(x, (ast.Assign, ast.AnnAssign)) and any(
                        isinstance(t, ast.Name) and t.id == attr for t in _targets(x)) for x in n.body):
                return False
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr":
                return False
            for t in _targets(n):
                if isinstance(t, ast.Attribute) and t.attr == attr:
                    if not (isinstance(n, ast.Assign) and len(n.targets) == 1 and _numeric_value(n.value)):
                        return False
                    seen = True
    return seen


def _binders(fn: ast.FunctionDef) -> list[tuple[str, ast.AST]]:
    """(name, node) of each binding of a name in ``fn``'s own scope: assignment targets, ``del``, ``except ... as``,
    imports, nested ``def``/``class`` names and match captures (nested scopes' insides left out)."""
    out: list[tuple[str, ast.AST]] = []
    stack = list(fn.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append((n.name, n))
            stack.extend(n.decorator_list)
            continue
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            stack.extend(g.iter for g in n.generators)  # its targets bind in its own scope
            out += [(w.target.id, w) for w in ast.walk(n) if isinstance(w, ast.NamedExpr)]  # these bind in fn's
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.append((n.id, n))
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.append((n.name, n))
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out += [((a.asname or a.name).split(".")[0], n) for a in n.names]
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            out.append((n.name, n))
        elif isinstance(n, ast.MatchMapping) and n.rest:
            out.append((n.rest, n))
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out += [(x, n) for x in n.names] * 2  # another scope may rebind it: never stable
        stack.extend(ast.iter_child_nodes(n))
    return out


#: Annotations of a value whose truth a call cannot change.
_IMMUTABLE = frozenset({"bool", "int", "float", "str"})


def _immutable(fn: ast.FunctionDef, name: str) -> bool:
    """Whether the parameter ``name`` is annotated ``bool``, ``int``, ``float`` or ``str`` (its declared type)."""
    a = next((a for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs] if a.arg == name), None)
    return a is not None and isinstance(a.annotation, ast.Name) and a.annotation.id in _IMMUTABLE


def _handed_on(fn: ast.FunctionDef, name: str) -> bool:
    """Whether ``fn`` hands ``name`` to anything that could change the object: an argument or the callee of a call
    (its receiver included), or a store into it (an attribute or an item)."""
    for n in walk_once(fn):
        if isinstance(n, ast.Call):
            for a in [*n.args, *(k.value for k in n.keywords), n.func]:
                if any(isinstance(x, ast.Name) and x.id == name for x in ast.walk(a)):
                    return True
        if isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, (ast.Store, ast.Del)) \
                and any(isinstance(x, ast.Name) and x.id == name for x in ast.walk(n.value)):
            return True
    return False


def _stable_locals(fn: ast.FunctionDef) -> set[str]:
    """The names of ``fn`` that keep one value once bound: parameters never rebound (and, unless annotated ``bool``,
    ``int``, ``float`` or ``str``, never handed to a call or stored into), and names bound by exactly one plain
    assignment outside loops (nested scopes left out; ``global``/``nonlocal`` names never)."""
    params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    if fn.args.vararg:
        params.add(fn.args.vararg.arg)
    if fn.args.kwarg:
        params.add(fn.args.kwarg.arg)
    loops = [n for n in _body_nodes(fn) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))]
    loop_lines = [(n.lineno, n.end_lineno or n.lineno) for n in loops]
    binds: dict[str, list[ast.AST]] = {}
    for name, node in _binders(fn):
        binds.setdefault(name, []).append(node)
    for n in ast.walk(fn):  # a nested function's nonlocal rebinds fn's name
        if isinstance(n, ast.Nonlocal):
            for x in n.names:
                binds.setdefault(x, []).extend([n, n])
    plain = {n.targets[0].id for n in _body_nodes(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
             and isinstance(n.targets[0], ast.Name)}
    out = {p for p in params if p not in binds and p != "self" and (_immutable(fn, p) or not _handed_on(fn, p))}
    for k, nodes in binds.items():
        if len(nodes) == 1 and k in plain and k not in params and isinstance(nodes[0], ast.Name) \
                and not any(a <= nodes[0].lineno <= b for a, b in loop_lines) and not _handed_on(fn, k):
            out.add(k)
    return out


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node):
        new = self.names.get(node.id)
        return ast.copy_location(ast.Name(new, node.ctx), node) if new else node


class _SelfAttr(ast.NodeTransformer):
    """``self.a`` as the name ``names[a]``, for the attributes ``names`` holds."""

    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in self.names:
            return ast.copy_location(ast.Name(self.names[node.attr], ast.Load()), node)
        return self.generic_visit(node)


def _renamed(node: ast.expr, names: dict[str, str]) -> ast.expr:
    return _Rename(names).visit(ast.parse(ast.unparse(node), mode="eval").body)


def _guards(fn: ast.FunctionDef, line: int) -> list[tuple[ast.If, bool]]:
    """The ``if`` statements a path reaching ``line`` in ``fn`` has passed, with the value of their test: each one
    enclosing it, and each ``if T:`` before it in an enclosing block whose branch not holding the line ends in
    ``return``/``raise``."""
    out: list[tuple[ast.If, bool]] = []
    todo = [fn.body]
    while todo:
        block = todo.pop()
        for s in block:
            if s.lineno > line:
                break
            holds = s.lineno <= line <= (s.end_lineno or s.lineno)
            if holds:
                for field in ("body", "orelse", "finalbody"):
                    b = getattr(s, field, None)
                    if isinstance(b, list) and any(isinstance(x, ast.stmt) and x.lineno <= line
                                                   <= (x.end_lineno or x.lineno) for x in b):
                        todo.append(b)
                        if isinstance(s, ast.If) and field in ("body", "orelse"):
                            out.append((s, field == "body"))
                break
            if isinstance(s, ast.If):
                if ends_in_exit(s.body) and not s.orelse:
                    out.append((s, False))
                elif s.orelse and ends_in_exit(s.orelse) and not ends_in_exit(s.body):
                    out.append((s, True))
    return out


def _calls(node) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call)]


def _self_attrs(node) -> set[str]:
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id == "self"}


def _hands_on(guard: tuple[ast.If, bool], line: int, attr: str) -> bool:
    """Whether the frame's ``guard`` reads ``self.<attr>`` and then nothing runs before the call at ``line`` but that
    call: no call in its test, the branch taken starts with the statement holding the call, and that statement
    calls nothing else."""
    s, want = guard
    if attr not in _self_attrs(s.test) or _calls(s.test):
        return False
    branch = s.body if want else s.orelse
    if not branch or not branch[0].lineno <= line <= (branch[0].end_lineno or branch[0].lineno):
        return False
    return len(_calls(branch[0])) == 1 and isinstance(branch[0], (ast.Expr, ast.Assign, ast.Return))


def _takes_first(fn: ast.FunctionDef, guard: tuple[ast.If, bool], attr: str) -> bool:
    """Whether ``guard`` is the first statement of ``fn`` (a docstring before it aside) and its test reads
    ``self.<attr>`` in its first operand, before any call."""
    body = [x for x in fn.body if not (isinstance(x, ast.Expr) and isinstance(x.value, ast.Constant))]
    s = guard[0]
    if not body or body[0] is not s:
        return False
    first = s.test.values[0] if isinstance(s.test, ast.BoolOp) else s.test
    return attr in _self_attrs(first) and not _calls(first)


def _statement_of(fn: ast.FunctionDef, line: int):
    """(block, index, enclosing statements) of the statement of ``fn`` starting at or holding ``line`` in the
    innermost block, or None."""
    chain, block = [], fn.body
    while True:
        hit = next((i for i, s in enumerate(block) if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
        if hit is None:
            return None
        s = block[hit]
        inner = None
        for field in ("body", "orelse", "finalbody", "handlers"):
            b = getattr(s, field, None)
            if isinstance(b, list):
                for x in b:
                    stmts = x.body if isinstance(x, ast.ExceptHandler) else [x]
                    if any(y.lineno <= line <= (y.end_lineno or y.lineno) for y in stmts):
                        inner = stmts if isinstance(x, ast.ExceptHandler) else b
                        break
            if inner is not None:
                break
        if inner is None:
            return block, hit, chain
        chain.append(s)
        block = inner


def _stable_receiver(tree: Tree, worker: ClassInfo, x: str, volatile: frozenset[str]) -> bool:
    """Whether ``self.<x>`` of the worker names one object for its lifetime."""
    if "*" in volatile:
        return False
    hit = tree.lookup(worker, x)
    if hit is None:
        return x not in volatile
    fn = hit[1]
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if not any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list) or len(body) != 1 \
            or not isinstance(body[0], ast.Return):
        return False
    v = body[0].value
    return isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == "self" \
        and v.attr not in volatile and tree.lookup(worker, v.attr) is None


def linked(walker, worker: ClassInfo, read, conditions: tuple[str, ...]) -> str | None:
    """Why the worker's publisher under ``conditions`` (texts of its ``last_shared_read_runner`` tests) cannot hold
    together with ``read``'s path (a ``reads.Read`` of the worker's decode step), or None (see the module's
    docstring)."""
    tree = walker.tree
    parsed = parsed_all(conditions)
    if parsed is None:
        return None
    for node in parsed:
        for leaf in _truth_leaves(node):
            hit = _self_chain(leaf)
            if hit is not None:
                why = _link(walker, tree, worker, read, parsed, hit[0], hit[1])
                if why is not None:
                    return why
    return None


def _link(walker, tree: Tree, worker: ClassInfo, read, parsed, x: str, attr: str) -> str | None:
    via = read.via
    if len(via) < 2:
        return None
    entry = walker.functions.get(via[0].key, (None,))[0]
    sub_fn = walker.functions.get(via[1].key, (None,))[0]
    sub = _owner(tree, via[1].key)
    if entry is None or sub_fn is None or sub is None:
        return None
    call_line = via[1].line
    # the entry calls self.X.m(...) at that line and returns right after, outside loops and try
    found = _statement_of(entry, call_line)
    if found is None:
        return None
    block, i, enclosing = found
    stmt = block[i]
    if any(isinstance(s, (ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith)) for s in enclosing):
        return None
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == sub_fn.name and isinstance(n.func.value, ast.Attribute) and n.func.value.attr == x
             and isinstance(n.func.value.value, ast.Name) and n.func.value.value.id == "self"]
    if len(calls) != 1 or len(_calls(stmt)) != 1 or not isinstance(stmt, (ast.Expr, ast.Assign)) or (
            isinstance(stmt, ast.Assign) and not all(isinstance(t, ast.Name) for t in stmt.targets)):
        return None  # the call of m alone: nothing else runs in its statement
    rest = block[i + 1:]
    if not rest or not isinstance(rest[0], ast.Return) or not isinstance(
            rest[0].value, (ast.Name, ast.Constant, type(None))):
        return None  # the step returns right after, a name or nothing (no call, no property read)
    worker_volatile = _volatile(tree, worker)
    if not _stable_receiver(tree, worker, x, worker_volatile):
        return None
    # m ends by storing self.A = V on every path
    if not sub_fn.body:
        return None
    last = sub_fn.body[-1]
    if not (isinstance(last, ast.Assign) and len(last.targets) == 1 and isinstance(last.targets[0], ast.Attribute)
            and last.targets[0].attr == attr and isinstance(last.targets[0].value, ast.Name)
            and last.targets[0].value.id == "self"):
        return None
    nodes = _body_nodes(sub_fn)
    if any(isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom)) for n in nodes):
        return None
    if any(t is not last.targets[0] and isinstance(t, ast.Attribute) and t.attr == attr
           for n in nodes for t in _targets(n)):
        return None
    # every other store of .A in the tree: an __init__, or the entry before the call at its top level
    top_before = {id(s) for s in entry.body if s.end_lineno is not None and s.end_lineno < call_line}
    for m in tree.modules_containing(attr):
        mod = tree.module(m)
        if mod is None:
            continue
        for fnode in (n for n in tree.walk(mod.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for n in _body_nodes(fnode):
                if isinstance(n, ast.Constant) and n.value == attr:
                    return None  # setattr, __dict__[...], vars(...)[...]: a store not written as one
                for t in _targets(n):
                    if not (isinstance(t, ast.Attribute) and t.attr == attr) or t is last.targets[0]:
                        continue
                    if fnode.name == "__init__" or (fnode is entry and id(n) in top_before):
                        continue
                    return None
    value = last.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "bool" \
            and len(value.args) == 1 and not value.keywords and _builtin_bool(tree, via[1].key, sub_fn):
        value = value.args[0]
    # the frames on the same self, from m down the chain
    sub_mro = {c.key for c in tree.mro(sub)}
    frames = [(sub_fn, via[2].line if len(via) > 2 else read.line, 1)]
    if frames[0][1] >= last.lineno:
        return None  # the read is not before the store
    for j in range(2, len(via)):
        owner_key = via[j].key.rpartition(".")[0]
        fn = walker.functions.get(via[j].key, (None,))[0]
        prev = walker.functions.get(via[j - 1].key, (None,))[0]
        if fn is None or prev is None or owner_key not in sub_mro or not _self_call(prev, via[j].line, fn.name):
            break
        frames.append((fn, via[j + 1].line if j + 1 < len(via) else read.line, j))
    guards = [_guards(fn, line) for fn, line, _ in frames]
    # an attribute of self another method may change is one value in two adjacent frames when nothing runs
    # between its two reads but the call from one to the other
    shared: list[dict[str, str]] = [{} for _ in frames]
    for p in range(len(frames) - 1):
        for a in sorted({x for gs in guards for g in gs for x in _self_attrs(g[0].test)}):
            here = [g for g in guards[p] if a in _self_attrs(g[0].test)]
            there = [g for g in guards[p + 1] if a in _self_attrs(g[0].test)]
            if here and there and len(there) == 1 and _hands_on(here[-1], frames[p][1], a) \
                    and _takes_first(frames[p + 1][0], there[0], a) \
                    and not any(a in _self_attrs(g[0].test) for q, gs in enumerate(guards) if q not in (p, p + 1)
                                for g in gs) and len(here) == 1:
                shared[p][a] = shared[p + 1][a] = f"L{p}__{a}"
    texts: list[tuple[str, str]] = []  # (formula text, what it is, for the reason)
    for (fn, line, k), gs, same in zip(frames, guards, shared):
        names = {n: _FRAME.format(k) + n for n in _stable_locals(fn)}
        for s_if, want in gs:
            t = _SelfAttr(same).visit(_renamed(s_if.test, names))
            texts.append((ast.unparse(t if want else ast.UnaryOp(ast.Not(), t)),
                          f"`{ast.unparse(s_if.test)}` is {'true' if want else 'false'} on the read's path in "
                          f"{fn.name} ({_file(walker, via, k)}:{s_if.lineno})"))
    # the publisher's tests, the attribute replaced by the value m stores
    names = {n: _FRAME.format(1) + n for n in _stable_locals(sub_fn)}
    v = _renamed(value, names)

    class _Sub(ast.NodeTransformer):
        def visit_Attribute(self, node):
            if isinstance(node.value, ast.Attribute) and node.attr == attr and node.value.attr == x \
                    and isinstance(node.value.value, ast.Name) and node.value.value.id == _WORKER_SELF:
                return v
            return self.generic_visit(node)

    for node in parsed:
        t = _Sub().visit(_renamed(node, {"self": _WORKER_SELF}))
        texts.append((ast.unparse(t), f"the publisher's test `{ast.unparse(node)}` holds: it is the value "
                                      f"{sub_fn.name} stores last, `{ast.unparse(last)}` "
                                      f"({_file(walker, via, 1)}:{last.lineno})"))
    core = _unsat([t for t, _ in texts], lambda a: _numeric(tree, a))
    if core is None:
        return None
    return ("the publisher's test and the read's path cannot hold together: "
            + "; ".join(why for (t, why), keep in zip(texts, core) if keep)
            + f" (the scheduler asks for last_shared_read_runner after {via[0].func} returns, and nothing after "
              f"that call stores `.{attr}`)")


def _builtin_bool(tree: Tree, key: str, fn: ast.FunctionDef) -> bool:
    """Whether ``bool`` in ``fn`` (the method ``key``) is the builtin: bound neither in it nor in its module."""
    mod = tree.module(".".join(key.split(".")[:-2]))
    if mod is None or any(name == "bool" for name, _ in _binders(fn)):
        return False
    return not any(isinstance(n, ast.Name) and n.id == "bool" and isinstance(n.ctx, ast.Store)
                   or isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == "bool"
                   or isinstance(n, ast.alias) and (n.asname or n.name) == "bool" for n in ast.walk(mod.tree))


def _self_call(fn: ast.FunctionDef, line: int, name: str) -> bool:
    """Whether ``fn`` calls ``self.<name>(...)`` at ``line``."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name
               and isinstance(n.func.value, ast.Name) and n.func.value.id == "self" and n.lineno <= line
               <= (n.end_lineno or n.lineno) for n in _body_nodes(fn))


def _file(walker, via, k: int) -> str:
    return walker.functions.get(via[k].key, (None, via[k].file))[1]


def _linkable(text: str) -> bool:
    """Whether every occurrence of the atom ``text`` names one value: no call in it, and every name a frame's stable
    local (``F<k>__``), an attribute nothing changes between its two reads (``L<p>__``) or a builtin constant; an
    attribute of ``self`` or of the worker, a global or a call is a variable of its own at each occurrence."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            return False
        if isinstance(n, ast.Name) and not (re.match(r"(F|L)\d+__", n.id) or n.id in ("None", "True", "False")):
            return False
    return True


def _unsat(texts: list[str], numeric) -> list[bool] | None:
    """Which of ``texts`` an unsatisfiable core holds (``feasible.unsat_core``, the atoms linked by ``_linkable``).
    ``numeric(attr)``: whether ``attr`` is always a number, so an attribute shared by two frames (``L<p>__attr``) is
    truthy exactly when it is not ``== 0``."""
    def axioms(named):
        for text, var in named.items():
            m = re.fullmatch(r"L\d+__(\w+)", text)
            if m and f"{text} == 0" in named and numeric(m.group(1)):
                yield var == z3.Not(named[f"{text} == 0"])

    return unsat_core(texts, _linkable, axioms)
