"""Who publishes and who waits, read from an SGLang tree: each worker's ``last_shared_read_runner`` (one row per
``return``, under the tests leading to it), the barrier's definition, call sites and the scheduler's event loops
(each runner's publish behaviour is read by ``runners``)."""

from __future__ import annotations

import ast

from .records import At, Barrier, BarrierCall, ClassAt, EventLoop, WorkerPublisher
from .tree import Tree


def _return_rows(stmts, conds=()):
    out = []
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Return) and s.value is not None:
            out.append((conds, ast.unparse(s.value), s.lineno))
            return out
        if isinstance(s, ast.If):
            t = ast.unparse(s.test)
            out += _return_rows(list(s.body) + list(stmts[i + 1:]), conds + (t,))
            neg = f"not ({t})" if " " in t else f"not {t}"
            out += _return_rows(list(s.orelse) + list(stmts[i + 1:]), conds + (neg,))
            return out
    return out


def workers(tree: Tree, prop: str = "last_shared_read_runner") -> tuple[WorkerPublisher, ...]:
    """Each return of each worker's ``prop`` (the property the barrier takes its runner from), sorted by class,
    file, line and condition."""
    mods = tree.modules_containing(f"def {prop}")
    roots = []
    for m in mods:
        mod = tree.module(m)
        roots += [c for c in (mod.classes.values() if mod else ()) if prop in c.methods]
    out = []
    for ci in tree.subclasses(roots):
        owner, fn = tree.lookup(ci, prop)
        for conds, text, line in _return_rows(fn.body):
            out.append(WorkerPublisher(ci.name, ci.file, ci.line, text, conds,
                                       ClassAt(owner.name, owner.file, fn.lineno), At(owner.file, line)))
    return tuple(sorted(out, key=lambda w: (w.cls, w.file, w.line, w.condition or "")))


def _enclosing(tree_node):
    for cls in [n for n in tree_node.body if isinstance(n, ast.ClassDef)] + [None]:
        fns = cls.body if cls else tree_node.body
        for fn in fns:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield (cls.name if cls else None), fn


def barrier(tree: Tree) -> Barrier:
    defined, calls, loops = [], [], []
    for m in tree.modules_containing("_apply_war_barrier", "def event_loop"):
        mod = tree.module(m)
        for cname, fn in (_enclosing(mod.tree) if mod else ()):
            if fn.name == "_apply_war_barrier":
                defined.append(ClassAt(cname, mod.rel, fn.lineno))
            lines = sorted({n.lineno for n in tree.walk(fn) if isinstance(n, ast.Call)
                            and isinstance(n.func, ast.Attribute) and n.func.attr == "_apply_war_barrier"})
            for ln in lines:
                calls.append(BarrierCall(fn.name, cname, mod.rel, ln))
            if fn.name.startswith("event_loop") and (cname or "").startswith("Scheduler") and "/srt/" in mod.rel:
                loops.append(EventLoop(fn.name, cname, mod.rel, fn.lineno, tuple(lines)))
    key = lambda d: (d.file, d.line)  # noqa: E731
    return Barrier(tuple(sorted(defined, key=key)), tuple(sorted(calls, key=key)), tuple(sorted(loops, key=key)))
