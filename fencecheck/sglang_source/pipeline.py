"""Publisher rows that never hold, or hold only where no event loop applies the barrier: a worker read ordered against
one races nothing, since no barrier waits on that mailbox with that row.

Two facts of the tree, and one of pipeline parallelism:

- **What every loop with the barrier needs** (``barrier_loop_needs``): each call that starts an event loop
  applying the barrier (``scheduler.event_loop_overlap()``, the loops of ``barrier.event_loops`` with barrier lines)
  has the tests on its path in its function (``constructed.path_tests``); the conjuncts every one of those calls has,
  in negation normal form, are what the barrier needs (0.5.23's ``_dispatch_event_loop_once`` tests
  ``get_parallel().pp_size > 1`` before each overlap loop: ``get_parallel().pp_size <= 1``).
- **What a publisher row's test means** (``publisher_test``): a row's condition ``self.X is None`` where the worker's
  ``__init__`` assigns ``self.X = (Cls(...) if T else None)`` (an instance of a class of the tree is never None) is
  ``not T``, and a ``self.Y`` in it that ``__init__`` assigns once at its top level is that value (0.5.23's EAGLE
  worker: ``self._draft_worker is None`` is ``not get_parallel().pp_group.is_last_rank``); where ``__init__`` assigns
  ``self.X = Cls(...)`` alone, the row never holds (the STANDALONE worker, whose ``__init__`` replaces EAGLE's). Only
  when nothing else the instance runs assigns ``self.X`` too: another method of its MRO, or a base ``__init__`` the
  running one calls (``super().__init__``, ``Base.__init__(self)``).
- **A pipeline group of one rank**: its one rank is its last (the tree's ``is_last_rank`` compares the rank with the
  group's last; SGLang's parallel context has ``pp_size`` the width of ``pp_group``). So ``not P.pp_group.is_last_rank``
  needs ``P.pp_size > 1``, and a barrier that needs ``P.pp_size <= 1`` (the same ``P``) never runs with that row.

Any other row, or a tree without those facts, is decided as before.
"""

from __future__ import annotations

import ast

from .attributes import self_assignments
from .constructed import parents_of, path_tests
from .feasible import _nnf, conjuncts
from .tree import ClassInfo, Tree


def barrier_loop_needs(tree: Tree, loops: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(the conjuncts every call starting one of ``loops`` has on its path, the calls' file:line), or None when a
    loop has no such call in the tree."""
    memo = tree.__dict__.setdefault("_barrier_loop_needs", {})
    if loops in memo:
        return memo[loops]
    common: set[str] | None = None
    sites, started = [], set()
    for m in tree.modules_containing(*(f".{name}()" for name in loops), under="sglang.srt"):
        mod = tree.module(m)
        if mod is None:
            continue
        parents = parents_of(tree, mod)
        for n in tree.walk(mod.tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in loops \
                    and not n.args and not n.keywords:
                tests, fn = path_tests(n, parents)
                if fn is not None and fn.name in loops:
                    continue  # a loop calling another loop: started where the first one is
                here = {ast.unparse(c) for t in tests for c in conjuncts(t)}
                common = here if common is None else common & here
                sites.append((mod.rel, n.lineno))
                started.add(n.func.attr)
    out = None if common is None or started != set(loops) else (
        tuple(sorted(common)), tuple(f"{f}:{n}" for f, n in sorted(sites)))
    memo[loops] = out
    return out


def _init_assignments(tree: Tree, ci: ClassInfo, attr: str):
    """The ``self.<attr> = value`` statements of the ``__init__`` ``ci`` runs, and whether each is at its top level;
    none when a method of ``ci``'s MRO other than that ``__init__`` assigns it too (its value may change later)."""
    hit = tree.lookup(ci, "__init__")
    if hit is None:
        return [], None
    owner, fn = hit
    mro = tree.mro(ci)
    runs_from = _first_init_run(fn, owner, mro)  # the other __init__s that run: from this place of the MRO on
    for i, c in enumerate(mro):
        for name, _, _ in self_assignments(tree, c, attr):
            if c is owner and name == "__init__":
                continue
            if name != "__init__" or i >= runs_from:
                return [], owner
    return [(n, n in fn.body) for name, n, _ in self_assignments(tree, owner, attr)
            if name == "__init__" and isinstance(n, (ast.Assign, ast.AnnAssign))], owner


def _first_init_run(fn, owner: ClassInfo, mro: list[ClassInfo]) -> int:
    """The first place of ``mro`` whose ``__init__`` the running ``__init__`` ``fn`` (of ``owner``) may run:
    ``super().__init__`` runs the classes after ``owner`` (and what they chain to), ``Base.__init__(self)`` ``Base``
    and the classes after it; ``len(mro)`` when it calls none."""
    first = len(mro)
    names = [c.name for c in mro]
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "__init__":
            v = n.func.value
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
                first = min(first, mro.index(owner) + 1 if owner in mro else 0)
            elif isinstance(v, ast.Name) and v.id in names:
                first = min(first, names.index(v.id))
            else:
                first = 0  # an __init__ the reader cannot place
    return first


def publisher_test(tree: Tree, ci: ClassInfo, condition: str) -> tuple[str, tuple[str, ...]] | None:
    """What a publisher row's ``condition`` of worker ``ci`` means in terms of the values ``__init__`` starts from
    (see the module's docstring), with the file:line of each assignment used; None when it is not that shape."""
    try:
        e = ast.parse(condition, mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], (ast.Is, ast.IsNot))
            and isinstance(e.comparators[0], ast.Constant) and e.comparators[0].value is None
            and isinstance(e.left, ast.Attribute) and isinstance(e.left.value, ast.Name) and e.left.value.id == "self"):
        return None
    assigns, owner = _init_assignments(tree, ci, e.left.attr)
    if len(assigns) != 1:
        return None
    value = assigns[0][0].value
    cites = [f"{owner.file}:{assigns[0][0].lineno}"]
    if _constructs(tree, owner, value):  # a class's instance, never None
        return ("False" if isinstance(e.ops[0], ast.Is) else "True"), tuple(cites)
    if not (isinstance(value, ast.IfExp) and _constructs(tree, owner, value.body)
            and isinstance(value.orelse, ast.Constant) and value.orelse.value is None):
        return None
    test = value.test
    if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and test.value.id == "self":
        inner, owner2 = _init_assignments(tree, ci, test.attr)
        if len(inner) == 1 and inner[0][1]:
            test = inner[0][0].value
            cites.append(f"{owner2.file}:{inner[0][0].lineno}")
    holds = test if isinstance(e.ops[0], ast.IsNot) else ast.UnaryOp(ast.Not(), test)
    return ast.unparse(_nnf(holds)), tuple(cites)


def _constructs(tree: Tree, owner: ClassInfo, e) -> bool:
    """Whether ``e`` calls a class of the tree (its module's names or the imports of the ``__init__`` it is in)."""
    if not isinstance(e, ast.Call):
        return False
    r = tree.resolve_expr(owner.module, e.func)
    if isinstance(r, ClassInfo):
        return True
    init = owner.methods.get("__init__")
    if init is not None and isinstance(e.func, ast.Name):
        return any(isinstance(x, ClassInfo) for x in tree.local_imports(owner.module, init.body).get(e.func.id, ()))
    return False


def _is_last_rank_at(tree: Tree) -> str | None:
    for m in tree.modules_containing("def is_last_rank(", under="sglang.srt"):
        mod = tree.module(m)
        for n in tree.walk(mod.tree) if mod else ():
            if isinstance(n, ast.FunctionDef) and n.name == "is_last_rank":
                return f"{mod.rel}:{n.lineno}"
    return None


def without_barrier(tree: Tree, ci: ClassInfo, conditions: tuple[str, ...], loops: tuple[str, ...]) -> str | None:
    """Why a publisher row of worker ``ci`` with ``conditions`` never meets a loop of ``loops`` (those applying the
    barrier), or None when it may."""
    needs = barrier_loop_needs(tree, loops)
    if needs is None:
        return None
    common, sites = needs
    for c in conditions:
        hit = publisher_test(tree, ci, c)
        if hit is None:
            continue
        text, cites = hit
        if text == "False":
            return (f"this publisher row never holds: `{c}` is false, since {ci.name}'s __init__ assigns it an "
                    f"instance of a class ({', '.join(cites)}), never None")
        e = ast.parse(text, mode="eval").body
        if not (isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not) and isinstance(e.operand, ast.Attribute)
                and e.operand.attr == "is_last_rank" and isinstance(e.operand.value, ast.Attribute)
                and e.operand.value.attr == "pp_group"):
            continue
        owner = ast.unparse(e.operand.value.value)
        need = f"{owner}.pp_size <= 1"
        if need not in common:
            continue
        last = _is_last_rank_at(tree)
        return (f"no barrier with this publisher: `{c}` holds when {text} ({', '.join(cites)}), only on a rank that is "
                f"not its pipeline's last, which needs {owner}.pp_size > 1 (a group of one rank is its own last"
                + (f": is_last_rank, {last}" if last else "") + f"); every loop that applies the barrier starts only "
                f"when {need} ({', '.join(sites)})")
    return None
