"""Which backends a decode graph can replay at all, read from the tree: the graph-state hooks the decode graph runner
calls on its attention backend unconditionally while it is built, and the backends that inherit such a hook from a
base whose body only raises ``NotImplementedError``.

The CUDA decode graph runner (``protocol.Protocol.decode_runner``) calls ``self.attn_backend.<hook>(...)`` as a
statement of its ``__init__`` (or of a method ``__init__`` calls as a statement, at any depth, each once), under no
condition: a backend whose ``<hook>`` is the base's raising one cannot have that runner built, so its graph-replayed
modes (``ForwardMode``'s ``is_cuda_graph`` members) run on the eager path (SGLang started with CUDA graphs off). What
the eager path publishes for those modes is the commands' to decide (the tree's eager runner, on a scenario); the
reader states the facts with file:line.
"""

from __future__ import annotations

import ast

from .tree import ClassInfo, Tree

#: The attribute of the runner holding its attention backend.
BACKEND_ATTR = "attn_backend"


def _only_raises_not_implemented(fn) -> bool:
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def _hook_calls(tree: Tree, ci: ClassInfo) -> list[tuple[str, ClassInfo, ast.FunctionDef, ast.stmt]]:
    """(hook, owner, function, statement) of each unconditional ``self.attn_backend.<hook>(...)`` statement of
    ``ci.__init__`` and of the self methods it calls as statements, each function once."""
    out, seen = [], set()
    start = tree.lookup(ci, "__init__")
    todo = [start] if start is not None else []
    while todo:
        owner, fn = todo.pop()
        if fn in seen:
            continue
        seen.add(fn)
        for s in fn.body:
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                    and isinstance(s.value.func, ast.Attribute)):
                continue
            f = s.value.func
            recv = f.value
            if isinstance(recv, ast.Attribute) and recv.attr == BACKEND_ATTR and isinstance(recv.value, ast.Name) \
                    and recv.value.id == "self":
                out.append((f.attr, owner, fn, s))
            elif isinstance(recv, ast.Name) and recv.id == "self":
                hit = tree.lookup(ci, f.attr)
                if hit is not None:
                    todo.append(hit)
    return out


def graph_replay(tree: Tree, proto, reader) -> dict | None:
    """``{"runner", "hooks": [...], "never_replayed": [...]}`` (docs/sglang-reader.md, "Backends a decode graph
    replays"), None when the tree's CUDA decode graph runner was not read. ``reader``: the ``backend_reader.Reader``
    of ``tree`` (its backends, their root and the modes)."""
    runner = proto.decode_runner()
    if runner is None:
        return None
    root = reader.root
    hooks, raising = [], {}
    for name, owner, fn, stmt in _hook_calls(tree, runner.ci):
        base = root.methods.get(name)
        raises = base is not None and _only_raises_not_implemented(base)
        if raises:
            raising.setdefault(name, base)
        hooks.append({"hook": name, "function": f"{owner.name}.{fn.name}", "file": owner.file, "line": stmt.lineno,
                      "base": {"class": root.name, "file": root.file, "line": base.lineno, "raises": raises}
                      if base is not None else None})
    modes = [m for m in reader.modes.members if reader.modes.predicate("is_cuda_graph", m) is True]
    never = []
    for ci in reader.backends:
        if ci is root:
            continue
        for name, base in sorted(raising.items()):
            hit = tree.lookup(ci, name)
            if hit is not None and hit[1] is base:
                never.append({"class": ci.name, "file": ci.file, "line": ci.line, "hook": name, "modes": modes})
                break
    return {"runner": {"class": runner.ci.name, "file": runner.ci.file, "line": runner.ci.line},
            "hooks": sorted(hooks, key=lambda h: (h["file"], h["line"])),
            "never_replayed": sorted(never, key=lambda r: (r["file"], r["line"]))}
