"""Between scenarios and the symbolic configuration: flatten a scenario (the model's own reading of backends,
independent of fencecheck.reference) and pin a ``SymConfig`` to it."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import z3

from fencecheck.fields import encode, model_knobs
from fencecheck.scenario import ANY_MODE, AlgorithmSpec, PhaseSpec, Scenario
from fencecheck.vocab import ForwardMode, SharedReadEnds, base_shared_read_ends, family

from .symconfig import (
    GLOBAL_KNOBS,
    MODE_CLASSES,
    PHASE_KNOBS,
    RUNNER_KNOBS,
    SITES,
    Bounds,
    PhaseVars,
    RunnerVars,
    SymConfig,
    make_config,
)

def mode_class(mode: ForwardMode) -> int:
    """A phase's mode as the model encodes it (``vocab.ModeFamily``)."""
    return int(family(mode))


def declared(s: Scenario, backend: str, mode: ForwardMode) -> SharedReadEnds:
    """The backend's declaration for ``mode``: override, hybrid delegate, composite max_of, base rule (docs/sglang-mechanism.md#the-sharedreadends-declaration)."""
    b = s.effective_backends[backend]
    if mode in b.declares:
        return b.declares[mode]
    if mode in b.delegate:
        return declared(s, b.delegate[mode], mode)
    if b.children:
        return SharedReadEnds.max_of(*(declared(s, c, mode) for c in b.children))
    return base_shared_read_ends(mode)


def read_sites(s: Scenario, backend: str, mode: ForwardMode) -> dict[int, set[str]]:
    """Site index -> locations the backend reads in ``mode`` (a delegate's, else its own plus its children's)."""
    b = s.effective_backends[backend]
    if mode in b.delegate:
        return read_sites(s, b.delegate[mode], mode)
    own = b.reads.get(mode.value, b.reads.get(ANY_MODE, {}))
    out: dict[int, set[str]] = {i: set(own.get(site, ())) for i, site in enumerate(SITES)}
    for child in b.children:
        for i, locs in read_sites(s, child, mode).items():
            out[i] |= locs
    return out


@dataclass(frozen=True)
class Layout:
    """How a scenario's names map onto the model's indices."""

    runners: tuple[str, ...]
    locations: tuple[str, ...]
    steps: int

    def bounds(self, s: Scenario) -> Bounds:
        kinds = [s.step_kind(n) for n in range(1, self.steps + 1)]
        phases = max(len(s.algorithm.steps[k]) for k in kinds)
        segments = max([p.segments for k in kinds for p in s.algorithm.steps[k]] + [1])
        return Bounds(self.steps, phases, len(self.runners), self.locations, segments)


def layout(s: Scenario, steps: int | None = None) -> Layout:
    steps = steps or s.steps
    return Layout(tuple(s.runners), s.locations() or ("req_to_token",), steps)


def pin(cfg: SymConfig, s: Scenario, lay: Layout) -> list[z3.BoolRef]:
    """Equalities that fix every variable of ``cfg`` to the scenario ``s``."""
    return [var == value for var, value in assignment(cfg, s, lay)]


def concretize(s: Scenario, lay: Layout) -> SymConfig:
    """The configuration of ``s`` with Python values in place of variables (runs the program concretely)."""
    cfg = config(lay.bounds(s))
    values = {var.get_id(): value for var, value in assignment(cfg, s, lay)}
    v = lambda var: values[var.get_id()]  # noqa: E731
    vals = lambda d: {k: v(x) for k, x in d.items()}  # noqa: E731
    runners = [RunnerVars(v(r.owner), vals(r.knobs)) for r in cfg.runners]
    phases = [
        [PhaseVars(v(p.active), v(p.runner), v(p.mode), v(p.decl), vals(p.reads), vals(p.worker), vals(p.knobs))
         for p in step]
        for step in cfg.phases
    ]
    return SymConfig(cfg.bounds, phases, [v(x) for x in cfg.publisher], runners, [v(x) for x in cfg.is_last],
                     vals(cfg.written), vals(cfg.knobs), [])


@functools.lru_cache(maxsize=64)
def config(bounds: Bounds) -> SymConfig:
    """The symbolic configuration of ``bounds``, made once per bounds (its variables, in their order)."""
    return make_config(bounds)


def assignment(cfg: SymConfig, s: Scenario, lay: Layout) -> list[tuple[z3.ExprRef, object]]:
    """(variable, value) for every variable of ``cfg`` under the scenario ``s``."""
    ri = {name: i for i, name in enumerate(lay.runners)}
    out: list[tuple[z3.ExprRef, object]] = []
    for name, r in s.runners.items():
        rv = cfg.runners[ri[name]]
        out.append((rv.owner, ri[r.mailbox_owner]))
        out += [(rv.knobs[k.name], encode(k, getattr(r, k.name))) for k in RUNNER_KNOBS]
    for n in range(1, lay.steps + 1):
        kind = s.step_kind(n)
        phases: tuple[PhaseSpec, ...] = s.algorithm.steps[kind]
        out.append((cfg.publisher[n - 1], ri[s.publisher_of(kind)]))
        for i, pv in enumerate(cfg.phases[n - 1]):
            if i >= len(phases):
                out += _idle_phase(pv)
                continue
            ph = phases[i]
            sites = read_sites(s, ph.backend, ph.mode)
            for site, locs in ph.other_reads.items():  # work of the phase that is not the backend's
                sites[SITES.index(site)] |= set(locs)
            out += [
                (pv.active, True),
                (pv.runner, ri[ph.runner]),
                (pv.mode, mode_class(ph.mode)),
                (pv.decl, int(declared(s, ph.backend, ph.mode))),
            ]
            out += [(pv.knobs[k.name], encode(k, getattr(ph, k.name))) for k in PHASE_KNOBS]
            for (site, loc), var in pv.reads.items():
                out.append((var, loc in sites[site]))
            for loc, var in pv.worker.items():
                out.append((var, loc in ph.worker_reads_after))
    modes = {mode_class(m) for m in s.algorithm.last_shared_read_modes}
    out += [(cfg.is_last[m], m in modes) for m in range(MODE_CLASSES)]
    for k in GLOBAL_KNOBS:
        holder = s if k in _SCENARIO_KNOBS else s.algorithm if k in _ALGORITHM_KNOBS else s.scheduler
        out.append((cfg.knobs[k.name], encode(k, getattr(holder, k.name))))
    written = set(s.written_locations())
    out += [(var, loc in written) for loc, var in cfg.written.items()]
    return out


_SCENARIO_KNOBS = frozenset(model_knobs(Scenario))
_ALGORITHM_KNOBS = frozenset(model_knobs(AlgorithmSpec))


def _idle_phase(pv) -> list:
    """Values for an inactive phase too (its knobs at their plain values), so a pinned configuration has exactly one
    solution."""
    out = [(pv.active, False), (pv.runner, 0), (pv.mode, 0), (pv.decl, 1)]
    out += [(pv.knobs[k.name], encode(k, k.plain)) for k in PHASE_KNOBS]
    out += [(v, False) for v in pv.reads.values()] + [(v, False) for v in pv.worker.values()]
    return out
