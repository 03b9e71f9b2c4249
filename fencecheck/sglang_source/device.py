"""Backends bound to a device whose graph-replayed modes never publish: their findings are not findings.

A read outside a backend's declaration races only when a runner resolves that declaration and publishes the
shared-read-done event the barrier waits on (docs/sglang-mechanism.md). SGLang picks the decode graph runner per
device in ``capture_decode_graph`` (a ``{"cpu": CPUGraphRunner, "npu": NPUGraphRunner, ...}`` map; other devices
take the CUDA runner). A backend whose code binds it to one of those devices, on a device whose mapped runner never
publishes (the runners table) and whose eager runner publishes only a prefill ``PRE_REPLAY``, never has its
declaration for a graph-replayed mode (``DECODE``, ``TARGET_VERIFY``, ``IDLE``) resolved: the barrier waits on the
whole forward stream there. Each such finding becomes ``not_findings`` rows, one per uncovered read, its ``why``
citing every fact with file:line.

A backend is bound to a device by its code, never by its name:

- ``npu``: a module defining a class on its MRO imports ``torch_npu`` (Ascend's PyTorch extension) at module level;
- ``cpu``: a method on its MRO takes a ``torch.ops.sgl_kernel.*_cpu`` kernel (sgl-kernel's CPU operators).

Anything not decided this way stays a finding.
"""

from __future__ import annotations

import ast

from .findings import NotFinding
from .tree import ClassInfo, Tree

#: A module-level import that binds a module's classes to a device.
DEVICE_IMPORTS = {"torch_npu": "npu"}
#: Runner publish kinds that resolve a declaration for a graph-replayed mode.
PUBLISHING = ("resolve", "clear_then_resolve", "publish_unconditionally")


def decode_graph_runner_map(tree: Tree):
    """(``capture_decode_graph``'s node, its module), or None."""
    for m in tree.modules_containing("def capture_decode_graph"):
        mod = tree.module(m)
        fn = mod.functions.get("capture_decode_graph") if mod else None
        if fn is not None:
            return fn.node, mod
    return None


def device_runners(tree: Tree) -> dict[str, tuple[ClassInfo, str, int]]:
    """device -> (decode graph runner class, file, line of the map entry) from ``capture_decode_graph``."""
    out: dict[str, tuple[ClassInfo, str, int]] = {}
    hit = decode_graph_runner_map(tree)
    if hit is not None:
        fn, mod = hit
        for node in ast.walk(fn):
            if not isinstance(node, ast.Dict):
                continue
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, (ast.Name, ast.Attribute)):
                    r = tree.resolve_expr(mod, v)
                    if isinstance(r, ClassInfo) and r.name.endswith("Runner"):
                        out.setdefault(k.value, (r, mod.rel, k.lineno))
    return out


def backend_device(tree: Tree, ci: ClassInfo, root: ClassInfo) -> tuple[str, str, int, str] | None:
    """(device, file, line, what) binding ``ci`` to a device, or None."""
    chain = [c for c in tree.mro(ci) if c is not root]
    for c in chain:
        for node in c.module.tree.body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in DEVICE_IMPORTS:
                        return (DEVICE_IMPORTS[a.name], c.module.rel, node.lineno,
                                f"{c.module.name} imports {a.name} at module level")
    for c in chain:
        for fn in c.methods.values():
            for node in tree.walk(fn):
                if isinstance(node, ast.Attribute) and node.attr.endswith("_cpu") \
                        and ast.unparse(node.value) == "torch.ops.sgl_kernel":
                    return ("cpu", c.file, node.lineno, f"{c.name}.{fn.name} takes {ast.unparse(node)}")
    return None


#: A package whose unconditional module-level import binds the module's classes to a platform: AMD's kernel library
#: AITER exists for ROCm only (``hip``), Ascend's PyTorch extension for NPUs.
PLATFORM_IMPORTS = {"aiter": "hip", "torch_npu": "npu"}


def _top_level_imports(mod):
    """The import statements a module runs unconditionally: at its top level, or in the body of a top-level ``try``
    (an ``if`` is a condition: not followed)."""
    for node in mod.tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.Try):
            yield from (n for n in node.body if isinstance(n, (ast.Import, ast.ImportFrom)))


def platform_binding(tree: Tree, ci: ClassInfo, root: ClassInfo) -> tuple[str, str, int, str] | None:
    """(platform, file, line, what) when a module defining a class on ``ci``'s MRO (the root aside) imports a
    platform's own package unconditionally (``PLATFORM_IMPORTS``), or else when every construction of ``ci`` runs on
    one platform only (``constructed.construction_platform``), else None."""
    hit = _import_binding(tree, ci, root)
    if hit is not None:
        return hit
    from .constructed import construction_platform

    return construction_platform(tree, ci)


def _import_binding(tree: Tree, ci: ClassInfo, root: ClassInfo) -> tuple[str, str, int, str] | None:
    for c in tree.mro(ci):
        if c is root:
            continue
        for node in _top_level_imports(c.module):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                if node.__class__ is ast.ImportFrom and node.level:
                    continue
                if top in PLATFORM_IMPORTS:
                    return (PLATFORM_IMPORTS[top], c.module.rel, node.lineno,
                            f"{c.module.name} imports {name} unconditionally at module level")
    return None


def _barrier_gate(tree: Tree) -> str | None:
    """``file:line (expression)`` where the scheduler decides whether the barrier applies at all."""
    for m in tree.modules_containing("_war_barrier_enabled ="):
        mod = tree.module(m)
        for node in (ast.walk(mod.tree) if mod else ()):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "_war_barrier_enabled"
                                                    for t in node.targets):
                return f"{mod.rel}:{node.lineno} ({ast.unparse(node.value)})"
    return None


def never_published(tree: Tree, reader, findings: list, runners: tuple) -> tuple[list, list]:
    """``findings`` without each ``read_outside_declaration`` finding whose backend is bound to a device whose
    runners never resolve its mode's declaration, and the not findings those become (one per uncovered read, with
    why). ``reader``: the ``backend_reader.Reader`` of ``tree``; ``runners``: the ``runners`` rows."""
    device_map = device_runners(tree)
    if not device_map:
        return findings, []
    table = {(r.cls, r.file, r.line): r for r in runners}
    eager = [r for r in runners if r.cls == "EagerRunner"]
    if len(eager) != 1 or eager[0].publish not in ("never", "prefill_publish"):
        return findings, []
    em = eager[0].method
    gate = _barrier_gate(tree)
    classes = {f"{c.file}:{c.line}": c for c in reader.backends}
    memo: dict[str, object] = {}
    keep, moved = [], []
    for f in findings:
        ci = classes.get(f.subject_at)
        if f.kind == "read_outside_declaration" and ci is not None and f.mode \
                and reader.modes.predicate("is_cuda_graph", f.mode) is True:
            if f.subject_at not in memo:
                memo[f.subject_at] = backend_device(tree, ci, reader.root)
            bound = memo[f.subject_at]
            hit = device_map.get(bound[0]) if bound else None
            row = table.get((hit[0].name, hit[0].file, hit[0].line)) if hit else None
            if bound and row is not None and row.publish not in PUBLISHING:
                device, bfile, bline, what = bound
                runner, mfile, mline = hit
                m = row.method
                why = (f"never resolved on {device}: {what} ({bfile}:{bline}); {device}'s decode graph runner is "
                       f"{runner.name} ({mfile}:{mline}), whose {m.cls}.{m.name} never publishes "
                       f"({m.file}:{m.line}), and the eager runner publishes only a prefill PRE_REPLAY "
                       f"({em.file}:{em.line}): the barrier waits on the whole forward stream after a "
                       f"{f.mode} step" + (f"; the barrier applies at all only when {gate}" if gate else ""))
                moved += [NotFinding(f.subject, f.mode, r.location, r.file, r.line, tuple(h.text() for h in r.via),
                                     why) for _, r in f.uncovered]
                continue
        keep.append(f)
    return keep, moved
