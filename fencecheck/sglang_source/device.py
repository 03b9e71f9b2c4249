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

A worker's read after the target model runner's graph-replayed phases is bound to devices by its path's tests
(``PlatformPaths``): where every platform on which none of them is false (module-level flags such as
``_is_cpu = is_cpu()`` taken for their call) is such a device, the target's mailbox gets no event from the step there,
and the read is not a finding (decided after its scenario, so a read the fence covers on every platform keeps that
reason). A draft runner, a class of the worker's own, is not the device's decode graph runner: a read ordered against
a draft-side publisher is never taken.
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


def silent_devices(tree: Tree, runners: tuple) -> dict[str, str]:
    """device -> why its runners never resolve a graph-replayed mode's declaration there (its decode graph runner in
    ``capture_decode_graph``'s map never publishes, and the eager runner publishes only a prefill ``PRE_REPLAY``), as
    the text the not findings cite; empty when the tree has no such map or its eager runner publishes otherwise.
    ``runners``: the ``runners`` rows."""
    device_map = device_runners(tree)
    if not device_map:
        return {}
    table = {(r.cls, r.file, r.line): r for r in runners}
    eager = [r for r in runners if r.cls == "EagerRunner"]
    if len(eager) != 1 or eager[0].publish not in ("never", "prefill_publish"):
        return {}
    em = eager[0].method
    out = {}
    for device, (runner, mfile, mline) in sorted(device_map.items()):
        row = table.get((runner.name, runner.file, runner.line))
        if row is not None and row.publish not in PUBLISHING:
            m = row.method
            out[device] = (f"{device}'s decode graph runner is {runner.name} ({mfile}:{mline}), whose "
                           f"{m.cls}.{m.name} never publishes ({m.file}:{m.line}), and the eager runner publishes "
                           f"only a prefill PRE_REPLAY ({em.file}:{em.line})")
    return out


def never_published(tree: Tree, reader, findings: list, runners: tuple) -> tuple[list, list]:
    """``findings`` without each ``read_outside_declaration`` finding whose backend is bound to a device whose
    runners never resolve its mode's declaration, and the not findings those become (one per uncovered read, with
    why). ``reader``: the ``backend_reader.Reader`` of ``tree``; ``runners``: the ``runners`` rows."""
    silent = silent_devices(tree, runners)
    if not silent:
        return findings, []
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
            if bound and bound[0] in silent:
                device, bfile, bline, what = bound
                why = (f"never resolved on {device}: {what} ({bfile}:{bline}); {silent[device]}: the barrier waits on "
                       f"the whole forward stream after a {f.mode} step"
                       + (f"; the barrier applies at all only when {gate}" if gate else ""))
                moved += [NotFinding(f.subject, f.mode, r.location, r.file, r.line, tuple(h.text() for h in r.via),
                                     why) for _, r in f.uncovered]
                continue
        keep.append(f)
    return keep, moved


class PlatformPaths:
    """Worker reads whose path runs only on devices whose runners never publish (``silent_devices``): there the
    publisher's mailbox gets no event from a graph-replayed step, and the barrier waits on the whole forward stream.

    A path's platforms are those on which none of its conditions is false (``platform.Evaluator``), once each name
    bound at module level to a platform's predicate (``_is_npu = is_npu()``) in a module of the read's call chain is
    replaced by that call: a name bound once in its module, imported by no module of the chain, neither assigned
    nor a parameter in a function of the chain, and bound alike in every module of the chain that binds it. As
    everywhere in the reader, the platform predicates are taken to hold one at a time (``platform``)."""

    def __init__(self, tree: Tree, runners: tuple, modes):
        self.tree, self.modes = tree, modes
        self.silent = silent_devices(tree, runners)
        self.gate = _barrier_gate(tree) if self.silent else None
        self._flags: dict[str, dict] = {}

    def _bindings(self, mod) -> dict[str, tuple[ast.expr, str] | None]:
        """name -> (the predicate call, ``file:line``) of each name bound once at module level to one; None for a
        name the module imports or binds otherwise."""
        hit = self._flags.get(mod.name)
        if hit is not None:
            return hit
        from .constructed import _predicate_names

        stores: dict[str, int] = {}
        foreign: set[str] = set()  # imported, or rebound through `global`
        for n in self.tree.walk(mod.tree):
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                stores[n.id] = stores.get(n.id, 0) + 1
            elif isinstance(n, ast.Global):
                foreign.update(n.names)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                foreign.update((a.asname or a.name).split(".")[0] for a in n.names)
        out: dict[str, tuple[ast.expr, str] | None] = dict.fromkeys(foreign)
        for name, call in _predicate_names(mod).items():
            out[name] = (call, f"{mod.rel}:{call.lineno}") if stores.get(name) == 1 and name not in foreign else None
        self._flags[mod.name] = out
        return out

    def _module_of(self, key: str):
        parts = key.split(".")
        for i in range(len(parts) - 1, 0, -1):
            name = ".".join(parts[:i])
            if name in self.tree.paths:
                return self.tree.module(name)
        return None

    def _usable(self, read, functions: dict):
        """(the modules of ``read``'s call chain, the read's own last; name -> (predicate call, ``file:line``) of each
        module-level binding to a platform's predicate that the chain's functions neither assign nor take as a
        parameter, bound alike in every module of the chain that binds it)."""
        mods = [m for m in (self._module_of(h.key) for h in read.via) if m is not None]
        if not mods:
            return mods, {}
        local: set[str] = set()
        for h in read.via:
            node = functions.get(h.key, (None,))[0]
            for n in self.tree.walk(node) if node is not None else ():
                if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                    local.add(n.id)
                elif isinstance(n, ast.arg):
                    local.add(n.arg)
        names: dict[str, tuple[ast.expr, str] | None] = {}
        for m in {id(m): m for m in reversed(mods)}.values():  # the read's own module first: the binding cited
            for name, b in self._bindings(m).items():
                if name in names and (b is None or names[name] is None
                                      or ast.dump(b[0]) != ast.dump(names[name][0])):
                    names[name] = None
                else:
                    names.setdefault(name, b)
        return mods, {n: b for n, b in names.items() if b is not None and n not in local}

    def values(self, read, functions: dict, texts, known=None) -> list[tuple[str, dict, list[str]]]:
        """Each condition text of ``texts`` (on ``read``'s path) with its value per platform (True, False or None:
        ``platform.Evaluator``, each module-level predicate binding replaced by its call) and the bindings it used
        (``name = call (file:line)``); ``known(e)``, where given, replaces what it decides in each parsed test first
        (a forward-mode test the phase decides)."""
        return self._values(*self._usable(read, functions), texts, known)

    def _values(self, mods, usable: dict, texts, known=None) -> list[tuple[str, dict, list[str]]]:
        from fencecheck.vocab import Platform

        from .constructed import _Aliases
        from .platform import Evaluator
        from .tree import copy_node

        aliases = _Aliases({n: b[0] for n, b in usable.items()}) if usable else None
        ev = Evaluator(self.tree)
        mod = mods[-1] if mods else None
        out = []
        for text in texts:
            try:
                e = ast.parse(text, mode="eval").body
            except (SyntaxError, RecursionError):
                out.append((text, {}, []))
                continue
            if known is not None:
                e = known(copy_node(e))
            present = {n.id for n in ast.walk(e) if isinstance(n, ast.Name)} & set(usable)
            e = aliases.visit(copy_node(e)) if present else e
            vals = {p.value: (ev.value(mod, e, p.value, {}) if mod is not None else None) for p in Platform}
            out.append((text, vals, [f"{n} = {ast.unparse(usable[n][0])} ({usable[n][1]})" for n in sorted(present)]))
        return out

    def platforms(self, read, functions: dict) -> tuple[list[str], list[str], list[str]] | None:
        """(the platforms ``read``'s path can run on, in ``Platform`` order; the conditions false on some other
        platform; the bindings they use, as ``name = call (file:line)``), or None when no condition is false on any
        platform. ``functions``: the read walker's ``functions`` (qualified name -> (def node, file))."""
        from fencecheck.vocab import Platform

        if not read.conditions:
            return None
        mods, usable = self._usable(read, functions)
        if not mods or not usable:
            return None
        possible = [p.value for p in Platform]
        deciding, used = [], []
        for text, vals, names in self._values(mods, usable, read.conditions):
            false_on = [p for p in possible if vals.get(p) is False]
            if false_on:
                possible = [p for p in possible if p not in false_on]
                deciding.append(text)
                used += [n for n in names if n not in used]
        if not deciding:
            return None
        return possible, deciding, used

    def why(self, read, publisher, before, functions: dict) -> str | None:
        """Why ``read`` is not a finding: its path runs only on devices whose runners never publish, or on no
        platform; None otherwise. ``publisher``: the ``Publisher`` row it is ordered against; ``before``: the runner
        phases before it. Only a target-side publisher is taken, and only when every target phase before the read
        is in a graph-replayed mode: those run on the device's decode graph runner (``capture_decode_graph``'s map) or
        eagerly, neither of which publishes on such a device; a draft runner is a class of the worker's own, which may
        publish there (0.5.18's NPU draft-extend runner does)."""
        target = [ph for ph in before if ph.kind == "runner" and ph.side == "target"]
        from .capture_state import graph_modes

        replayed = graph_modes(self.modes)
        if not self.silent or publisher.side != "target" or not target or any(ph.mode not in replayed for ph in target):
            return None
        mode, publisher = target[-1].mode, publisher.publisher
        hit = self.platforms(read, functions)
        if hit is None:
            return None
        possible, deciding, used = hit
        tests = " and ".join(f"`{t}`" for t in deciding) + (f" ({'; '.join(used)})" if used else "")
        if not possible:
            return f"its path runs on no platform: {tests} cannot all hold with one platform's predicate true"
        if any(p not in self.silent for p in possible):
            return None
        from .platform import predicates

        preds = predicates(self.tree)
        defs = "; ".join(f"{preds[p].function} ({preds[p].file}:{preds[p].line})" for p in possible if p in preds)
        return (f"runs only on {', '.join(possible)}: {tests}; " + "; ".join(self.silent[p] for p in possible)
                + f": `{publisher}`'s mailbox gets no event from a {mode} step there, and the barrier waits on the "
                  "whole forward stream" + (f"; the barrier applies at all only when {self.gate}" if self.gate else "")
                + "; one platform's predicate is taken to hold at a time" + (f" ({defs})" if defs else ""))
