"""Between scenarios and the symbolic configuration: flatten a scenario (the model's own reading of backends,
independent of fencecheck.reference) and pin a ``SymConfig`` to it."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import z3

from fencecheck.scenario import ANY_MODE, PhaseSpec, Scenario
from fencecheck.vocab import (
    BarrierPlacement,
    Execution,
    ForwardMode,
    PlanJoin,
    PublishPolicy,
    ResolutionRule,
    SharedReadEnds,
    base_shared_read_ends,
)

from .symconfig import SITES, Bounds, PhaseVars, RunnerVars, SymConfig, make_config

MODE_CLASS = {ForwardMode.DECODE: 0, ForwardMode.TARGET_VERIFY: 1}
EXECUTION = {Execution.GRAPH: 0, Execution.BREAKABLE_GRAPH: 1, Execution.EAGER: 2}
POLICY = {PublishPolicy.RESOLVE: 0, PublishPolicy.ALWAYS_PRE_REPLAY: 1, PublishPolicy.NEVER: 2}
JOIN = {PlanJoin.BEFORE_REPLAY: 0, PlanJoin.AFTER_REPLAY: 1, PlanJoin.NONE: 2}
RULE = {ResolutionRule.GATED: 0, ResolutionRule.DECLARATION_ONLY: 1, ResolutionRule.DECLARATION_ONLY_POST_FALLBACK: 2}


def mode_class(mode: ForwardMode) -> int:
    return MODE_CLASS.get(mode, 2)


def declared(s: Scenario, backend: str, mode: ForwardMode) -> SharedReadEnds:
    """The backend's declaration for ``mode``: override, hybrid delegate, composite max_of, base rule (section 3)."""
    b = s.backends[backend]
    if mode in b.declares:
        return b.declares[mode]
    if mode in b.delegate:
        return declared(s, b.delegate[mode], mode)
    if b.children:
        return SharedReadEnds.max_of(*(declared(s, c, mode) for c in b.children))
    return base_shared_read_ends(mode)


def read_sites(s: Scenario, backend: str, mode: ForwardMode) -> dict[int, set[str]]:
    """Site index -> locations the backend reads in ``mode`` (a delegate's, else its own plus its children's)."""
    b = s.backends[backend]
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
    cfg = _config(lay.bounds(s))
    values = {var.get_id(): value for var, value in assignment(cfg, s, lay)}
    v = lambda var: values[var.get_id()]  # noqa: E731
    runners = [RunnerVars(v(r.marker), v(r.publish), v(r.owner)) for r in cfg.runners]
    phases = [
        [
            PhaseVars(v(p.active), v(p.runner), v(p.mode), v(p.decl), {k: v(x) for k, x in p.reads.items()},
                      {k: v(x) for k, x in p.worker.items()}, v(p.clear), v(p.execution), v(p.plan), v(p.join),
                      v(p.segments), v(p.consume))
            for p in step
        ]
        for step in cfg.phases
    ]
    return SymConfig(cfg.bounds, phases, [v(x) for x in cfg.publisher], runners, [v(x) for x in cfg.is_last],
                     v(cfg.rule), v(cfg.barrier), v(cfg.loop_top), v(cfg.force_coarse),
                     {k: v(x) for k, x in cfg.written.items()}, [])


@functools.lru_cache(maxsize=64)
def _config(bounds: Bounds) -> SymConfig:
    return make_config(bounds)


def assignment(cfg: SymConfig, s: Scenario, lay: Layout) -> list[tuple[z3.ExprRef, object]]:
    """(variable, value) for every variable of ``cfg`` under the scenario ``s``."""
    ri = {name: i for i, name in enumerate(lay.runners)}
    out: list[z3.BoolRef] = []
    for name, r in s.runners.items():
        rv = cfg.runners[ri[name]]
        out += [(rv.marker, r.marker), (rv.publish, POLICY[r.publish]), (rv.owner, ri[r.mailbox_owner])]
    for n in range(1, lay.steps + 1):
        kind = s.step_kind(n)
        phases: tuple[PhaseSpec, ...] = s.algorithm.steps[kind]
        out.append((cfg.publisher[n - 1], ri[s.algorithm.publisher[kind]]))
        for i, pv in enumerate(cfg.phases[n - 1]):
            if i >= len(phases):
                out += _idle_phase(pv)
                continue
            ph = phases[i]
            sites = read_sites(s, ph.backend, ph.mode)
            out += [
                (pv.active, True),
                (pv.runner, ri[ph.runner]),
                (pv.mode, mode_class(ph.mode)),
                (pv.decl, int(declared(s, ph.backend, ph.mode))),
                (pv.clear, ph.clear_mailbox_after),
                (pv.consume, ph.consume_mailbox_before),
                (pv.execution, EXECUTION[ph.execution]),
                (pv.plan, ph.prep_stream.value == "plan"),
                (pv.join, JOIN[ph.plan_join]),
                (pv.segments, ph.segments),
            ]
            for (site, loc), var in pv.reads.items():
                out.append((var, loc in sites[site]))
            for loc, var in pv.worker.items():
                out.append((var, loc in ph.worker_reads_after))
    modes = {mode_class(m) for m in s.algorithm.last_shared_read_modes}
    out += [(cfg.is_last[m], m in modes) for m in range(3)]
    out += [
        (cfg.rule, RULE[s.resolution]),
        (cfg.barrier, s.scheduler.barrier),
        (cfg.loop_top, s.scheduler.placement is BarrierPlacement.LOOP_TOP),
        (cfg.force_coarse, s.scheduler.force_coarse),
    ]
    written = set(s.written_locations())
    out += [(var, loc in written) for loc, var in cfg.written.items()]
    return out


def _idle_phase(pv) -> list:
    """Values for an inactive phase too, so a pinned configuration has exactly one solution."""
    out = [(pv.active, False), (pv.runner, 0), (pv.mode, 0), (pv.decl, 1), (pv.clear, False), (pv.consume, False),
           (pv.execution, 0),
           (pv.plan, False), (pv.join, 0), (pv.segments, 1)]
    out += [(v, False) for v in pv.reads.values()] + [(v, False) for v in pv.worker.values()]
    return out
