"""Whether each backend's reads lie inside what its declaration promises (``vocab.COVERED_SITES``), and which backend
of a composite or hybrid wrapper does a given read.

A backend declaring ``d`` for a mode promises its reads of scheduler-shared state in that mode lie at the sites
``COVERED_SITES[d]``. A read outside them is a finding against the backend whose declaration fails to cover it: the
child that does the read when its own declaration does not cover it, else the wrapper whose explicit ``declares``
overrides its children's (docs/sglang-mechanism.md#the-sharedreadends-declaration). A hybrid wrapper declares and
reads as the child that runs the mode, so its findings are that child's.
"""

from __future__ import annotations

from fencecheck.verdict import Finding
from fencecheck.scenario import ANY_MODE, Scenario
from fencecheck.vocab import COVERED_SITES, ForwardMode, ReadSite

from .backends import AttentionBackend, build_backends


def _own_reads(backend: AttentionBackend, mode: ForwardMode) -> dict[ReadSite, tuple[str, ...]]:
    spec = backend.spec
    return dict(spec.reads.get(mode.value, spec.reads.get(ANY_MODE, {})))


def _audit(registry: dict[str, AttentionBackend], name: str, mode: ForwardMode, phase: str, via: tuple[str, ...],
           out: dict) -> None:
    backend = registry[name]
    spec = backend.spec
    if mode in spec.delegate and mode not in spec.declares:
        _audit(registry, spec.delegate[mode], mode, phase, via + (name,), out)
        return
    declared = backend._declared(mode)
    covered = COVERED_SITES[declared]
    own = {} if mode in spec.delegate else _own_reads(backend, mode)  # a hybrid reads only as its delegate
    reads = [(site, loc, name) for site, locs in own.items() for loc in locs]
    kids = [spec.delegate[mode]] if mode in spec.delegate else list(spec.children)
    for child in kids:
        child_declared = registry[child]._declared(mode)
        for site, locs in registry[child].read_sites(mode).items():
            if site not in covered and site in COVERED_SITES[child_declared]:
                # the child keeps its promise; this wrapper's override promises less than the child reads
                reads.extend((site, loc, name) for loc in locs)
        _audit(registry, child, mode, phase, via + (name,), out)
    for site, loc, at_fault in reads:
        if site not in covered:
            f = Finding(phase=phase, mode=mode.value, backend=at_fault, via=via, declared=declared.name,
                        site=site.value, location=loc)
            out.setdefault(f.key(), f)


def honesty_findings(scenario: Scenario) -> tuple[Finding, ...]:
    """Every read of every phase's backend (and its children) outside what the reading backend's declaration for the
    phase's mode covers, once per (phase, mode, backend, site, location), in phase order."""
    registry = build_backends(dict(scenario.effective_backends))
    out: dict = {}
    for kind in scenario.step_kinds:
        for phase in scenario.algorithm.steps.get(kind, ()):
            _audit(registry, phase.backend, phase.mode, phase.name, (), out)
    return tuple(out.values())


def readers(scenario: Scenario, step: int, phase: str, site: str, location: str) -> tuple[str, ...]:
    """The backends inside phase ``phase``'s backend (in step ``step``, 1-based) that read ``location`` at ``site``,
    each as a path ``wrapper/child``; empty when the phase's backend reads it itself or the phase has no backend."""
    phases = scenario.algorithm.steps.get(scenario.step_kind(step), ())
    spec = next((p for p in phases if p.name == phase), None)
    if spec is None:
        return ()
    registry = build_backends(dict(scenario.effective_backends))
    try:
        rsite = ReadSite(site)
    except ValueError:  # the worker's reads are not a backend's
        return ()
    found: list[str] = []

    def walk(name: str, path: tuple[str, ...]) -> None:
        b = registry[name]
        if spec.mode in b.spec.delegate:
            walk(b.spec.delegate[spec.mode], path + (name,))
            return
        if location in _own_reads(b, spec.mode).get(rsite, ()) and path:
            found.append("/".join(path + (name,)))
        for child in b.spec.children:
            walk(child, path + (name,))

    walk(spec.backend, ())
    return tuple(found)
