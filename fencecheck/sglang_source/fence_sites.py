"""Who publishes and who waits, read from an SGLang tree: each worker's ``last_shared_read_runner`` (one row per
``return``, under the tests leading to it), the barrier's definition, call sites and the scheduler's event loops, and
each runner's publish behaviour (read from the events of its ``execute`` or ``replay`` entry)."""

from __future__ import annotations

import ast
import re

from .records import At, Barrier, BarrierCall, ClassAt, EventLoop, Runner, RunnerEvent, RunnerMethod, WorkerPublisher
from .tree import ClassInfo, Tree


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


def workers(tree: Tree) -> tuple[WorkerPublisher, ...]:
    """Each return of each worker's ``last_shared_read_runner``, sorted by class, file, line and condition."""
    mods = tree.modules_containing("def last_shared_read_runner")
    roots = []
    for m in mods:
        mod = tree.module(m)
        roots += [c for c in (mod.classes.values() if mod else ()) if "last_shared_read_runner" in c.methods]
    out = []
    for ci in tree.subclasses(roots):
        owner, fn = tree.lookup(ci, "last_shared_read_runner")
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
            lines = sorted({n.lineno for n in ast.walk(fn) if isinstance(n, ast.Call)
                            and isinstance(n.func, ast.Attribute) and n.func.attr == "_apply_war_barrier"})
            for ln in lines:
                calls.append(BarrierCall(fn.name, cname, mod.rel, ln))
            if fn.name.startswith("event_loop") and (cname or "").startswith("Scheduler") and "/srt/" in mod.rel:
                loops.append(EventLoop(fn.name, cname, mod.rel, fn.lineno, tuple(lines)))
    key = lambda d: (d.file, d.line)  # noqa: E731
    return Barrier(tuple(sorted(defined, key=key)), tuple(sorted(calls, key=key)), tuple(sorted(loops, key=key)))


def _runner_events(tree: Tree, ci: ClassInfo, fn):
    """(line, event) in ``fn`` and every self method it calls, at any depth (each once): clear / resolve / publish /
    prefill_publish."""
    out, seen, todo = [], {fn}, [fn]
    while todo:
        for n in ast.walk(todo.pop()):
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is None and any(
                    isinstance(t, ast.Attribute) and t.attr == "shared_read_done_event" for t in n.targets):
                out.append((n.lineno, "clear"))
            if isinstance(n, ast.Call):
                name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
                if name in ("_resolve_shared_read_ends", "shared_read_ends"):
                    out.append((n.lineno, "resolve"))
                elif name == "_publish_read_done":
                    out.append((n.lineno, "publish"))
                elif name == "maybe_publish_prefill_shared_read_done":
                    out.append((n.lineno, "prefill_publish"))
                elif isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                        and n.func.value.id == "self":
                    hit = tree.lookup(ci, name)
                    if hit is not None and hit[1] not in seen:
                        seen.add(hit[1])
                        todo.append(hit[1])
    return out


def runners(tree: Tree) -> tuple[Runner, ...]:
    """Each ``*Runner`` class with an ``execute`` or ``replay`` entry and how it publishes, sorted by file and
    line."""
    names = set()
    for m in tree.modules_containing("Runner"):
        for cm in re.finditer(r"^[ \t]*class[ \t]+(\w*Runner)\b", tree.text(m), re.M):
            names.add((m, cm.group(1)))
    out = []
    for m, name in sorted(names):
        mod = tree.module(m)
        ci = mod.classes.get(name) if mod else None
        if ci is None:
            continue
        mro = tree.mro(ci)
        hits = [h for h in (tree.lookup(ci, "execute"), tree.lookup(ci, "replay")) if h is not None]
        if not hits:
            continue
        hit = min(hits, key=lambda h: mro.index(h[0]))  # the entry defined lowest in the MRO
        owner, fn = hit
        ev = sorted(set(_runner_events(tree, ci, fn)))
        kinds = [k for _, k in ev]
        first = {k: ln for ln, k in reversed(ev)}
        if "prefill_publish" in kinds:
            publish = "prefill_publish"
        elif "publish" in kinds and "clear" in kinds and first["clear"] < first.get("resolve", 10 ** 9):
            publish = "clear_then_resolve"
        elif "publish" in kinds and "resolve" in kinds:
            publish = "resolve"
        elif "publish" in kinds:
            publish = "publish_unconditionally"
        else:
            publish = "never"
        out.append(Runner(ci.name, ci.file, ci.line, publish, RunnerMethod(owner.name, fn.name, owner.file, fn.lineno),
                          tuple(RunnerEvent(ln, owner.file, k) for ln, k in ev)))
    return tuple(sorted(out, key=lambda r: (r.file, r.line)))
