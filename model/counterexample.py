"""Minimal counterexamples: a scenario, the model's trace of it, the racing read and the interleaving that shows it.

Minimality: bounds are tried in order of (phases, steps), smallest first, so the first satisfiable bound has the
fewest phases and, among those, the fewest steps; then the number of reads (backend and worker reads of active
phases) is lowered one at a time (``count <= best - 1``) until the solver says no more. Every check comes from the
one seeded factory, is bounded by z3's rlimit and runs in the search's own context (``model.solver``), so the result
is the same on every run, whatever ran before it.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, field
from typing import Callable

import z3

from fencecheck.fields import decode, encode, model_knobs
from fencecheck.verdict import Expectation, Verdict
from fencecheck.scenario import (
    AlgorithmSpec,
    BackendSpec,
    PhaseSpec,
    RunnerSpec,
    Scenario,
    SchedulerSpec,
)
from fencecheck.trace import Trace
from fencecheck.vocab import REPRESENTATIVE, SharedReadEnds, StepKind

from .concrete import Layout
from .emit import emit, witness_schedule
from .program import Program, ReadSlot, build
from .solver import Answer, Budget, check, fresh_context, make_solver
from .symconfig import GLOBAL_KNOBS, PHASE_KNOBS, RUNNER_KNOBS, SITES, Bounds, SymConfig, make_config

MODES = {int(f): mode for f, mode in REPRESENTATIVE.items()}
KINDS = (StepKind.NORMAL, StepKind.IDLE, StepKind.FALLBACK)

#: builds the query's constraints for one program: (cfg, prog) -> constraints (assumptions, the race, ...)
Query = Callable[[SymConfig, Program], list]


@dataclass
class Counterexample:
    scenario: Scenario
    trace: Trace
    race: ReadSlot
    schedule: list[int]
    bounds: Bounds
    reads: int
    races: list[tuple[str, str, str, int]] = field(default_factory=list)

    def race_key(self) -> tuple[str, str, str]:
        rid = self.race.race_id(self.scenario)
        return (rid.location, rid.phase, rid.site)

    def witness(self) -> dict:
        return {
            "race": self.race.witness_race(self.scenario),
            "schedule": self.schedule,
            "how": "kernel indices in execution order: the racing write and every kernel ordered before it first, "
                   "then the rest in host order",
            "minimal": {"phases": self.bounds.phases, "steps": self.bounds.steps, "reads": self.reads},
        }


def _read_count(cfg: SymConfig) -> z3.ArithRef:
    terms = []
    for step in cfg.phases:
        for p in step:
            for v in (*p.reads.values(), *p.worker.values()):
                terms.append(z3.If(z3.And(p.active, v), 1, 0))
    return z3.Sum(terms)


def search(bounds: Bounds, query: Query, budget: Budget = Budget(), name: str = "counterexample",
           ctx: z3.Context | None = None):
    """Smallest counterexample within ``bounds`` satisfying ``query``: (verdict, Counterexample | None, reason).

    ``PROVED`` means no bound up to ``bounds`` has one; ``UNKNOWN`` if a check ran out of budget first. The queries are
    built in ``ctx``, a context of their own when None."""
    ctx = ctx if ctx is not None else fresh_context()

    def setup(b: Bounds):
        cfg = make_config(b, ctx=ctx)
        prog = build(cfg)
        return cfg, prog, [*cfg.domain, *prog.constraints, *query(cfg, prog)]

    return search_with(bounds, setup, budget, name)


#: sees each bound's query once it is decided: (label, solver, verdict, answers of every check made for the bound)
OnQuery = Callable[[str, z3.Solver, Verdict, list[Answer]], None]


def search_order(bounds: Bounds) -> list[Bounds]:
    """The bounds ``search_with`` tries, in order: fewest phases first, then fewest steps."""
    return [Bounds(n, p, bounds.runners, bounds.locations, bounds.segments)
            for p, n in sorted((p, n) for p in range(1, bounds.phases + 1) for n in range(1, bounds.steps + 1))]


def search_with(bounds: Bounds, setup: Callable, budget: Budget = Budget(), name: str = "counterexample",
                on_query: OnQuery | None = None):
    """``search`` for any ``setup(bounds) -> (cfg, prog, constraints)``; the counterexample is read from cfg/prog and
    the solver made in cfg's context. A bound's check, or a check lowering its read count, that answers unknown makes
    the search ``UNKNOWN``: a later bound's counterexample would not be minimal, and no bound may be taken as proved."""
    for b in search_order(bounds):
        label = f"race with {b.phases} phase(s), {b.steps} step(s)"
        cfg, prog, constraints = setup(b)
        solver = make_solver(budget, cfg.ctx)
        solver.add(*constraints)
        first = check(solver)
        answers = [first]
        if first.verdict is not Verdict.COUNTEREXAMPLE:
            if on_query is not None:
                on_query(label, solver, first.verdict, answers)
            if first.verdict is Verdict.UNKNOWN:
                return Verdict.UNKNOWN, None, f"{label}: {first.reason}"
            continue
        model = solver.model()
        count = _read_count(cfg)
        best = model.eval(count, model_completion=True).as_long()
        while best > 1:
            solver.push()
            solver.add(count <= best - 1)
            a = check(solver)
            answers.append(a)
            if a.verdict is Verdict.COUNTEREXAMPLE:
                model = solver.model()
                best = model.eval(count, model_completion=True).as_long()
            solver.pop()
            if a.verdict is Verdict.UNKNOWN:
                if on_query is not None:
                    on_query(label, solver, Verdict.UNKNOWN, answers)
                return Verdict.UNKNOWN, None, f"{label}, fewer than {best} reads: {a.reason}"
            if a.verdict is Verdict.PROVED:
                break
        solver.add(count <= best)
        model = _simplify(solver, cfg, model, answers)
        if on_query is not None:
            on_query(label, solver, Verdict.COUNTEREXAMPLE, answers)
        return Verdict.COUNTEREXAMPLE, realize(cfg, prog, model, name, best), ""
    return Verdict.PROVED, None, ""


def _preferences(cfg: SymConfig) -> list[z3.BoolRef]:
    """Plain choices, tried one at a time after the size is minimal, so a counterexample shows only what it needs."""
    prefs = []
    for n in range(1, len(cfg.phases)):
        prefs.append(z3.And(*[a == b for a, b in zip(_phase_terms(cfg.phases[n]), _phase_terms(cfg.phases[0]))],
                            cfg.publisher[n] == cfg.publisher[0]))
    for j, r in enumerate(cfg.runners):
        prefs += [r.owner == j, *_plain(RUNNER_KNOBS, r.knobs)]
    for step in cfg.phases:
        for p in step:
            prefs += [*_plain(PHASE_KNOBS, p.knobs), p.runner == 0, p.mode == 0,  # DECODE
                      z3.And(*[z3.Not(v) for v in p.worker.values()])]
    prefs += [*_plain(GLOBAL_KNOBS, cfg.knobs, skip=("resolution",)), *[z3.Not(v) for v in cfg.is_last]]
    return prefs


def _plain(knobs, variables: dict, skip=()) -> list[z3.BoolRef]:
    """Each knob at its plain value (``fields.Entry.plain``)."""
    return [variables[k.name] == encode(k, k.plain) for k in knobs if k.name not in skip]


def _phase_terms(step) -> list:
    out = []
    for p in step:
        out += [*p.structural(), *p.knobs.values(), *p.reads.values(), *p.worker.values()]
    return out


def _simplify(solver: z3.Solver, cfg: SymConfig, model: z3.ModelRef, answers: list[Answer]) -> z3.ModelRef:
    """Keep every preference that still allows a counterexample: a group at a time, halving groups that fail (a
    check that answers unknown counts as failing; it is bounded like every other, so the result is the same on every
    run). Each check's answer is appended to ``answers``."""
    pending = [_preferences(cfg)]
    while pending:
        group = pending.pop(0)
        solver.push()
        solver.add(*group)
        a = check(solver)
        answers.append(a)
        if a.verdict is Verdict.COUNTEREXAMPLE:
            model = solver.model()
            solver.pop()
            solver.add(*group)
        else:
            solver.pop()
            if len(group) > 1:
                half = len(group) // 2
                pending[:0] = [group[:half], group[half:]]
    return model


def realize(cfg: SymConfig, prog: Program, model: z3.ModelRef, name: str, reads: int | None = None) -> Counterexample:
    """Read the solution as a scenario, emit the model's trace of it and build the witness interleaving."""
    scenario, lay = to_scenario(cfg, prog, model, name)
    trace = emit(prog, model, scenario, lay)
    racing = [r for r in prog.reads if z3.is_true(model.eval(prog.race_of(r), model_completion=True))]
    race = racing[0]
    schedule = witness_schedule(prog, model, race)
    races = [astuple(r.race_id(scenario)) for r in racing]
    if reads is None:
        reads = model.eval(_read_count(cfg), model_completion=True).as_long()
    return Counterexample(scenario, trace, race, schedule, cfg.bounds, reads, races)


def to_scenario(cfg: SymConfig, prog: Program, model: z3.ModelRef, name: str) -> tuple[Scenario, Layout]:
    """The solution as a scenario file: one backend per phase (its declaration and reads), the runners in use."""
    ev = lambda t: model.eval(t, model_completion=True)  # noqa: E731
    iv = lambda t: ev(t).as_long()  # noqa: E731
    bv = lambda t: z3.is_true(ev(t))  # noqa: E731
    knob = lambda t: bv(t) if z3.is_bool(t) else iv(t)  # noqa: E731
    knobs = lambda entries, variables: {k.name: decode(k, knob(variables[k.name])) for k in entries}  # noqa: E731
    R = cfg.bounds.runners
    rnames = tuple(f"r{j}" for j in range(R))
    step_sigs, kinds_of_step = [], []
    for n, step in enumerate(cfg.phases):
        sig = tuple(
            (iv(p.runner), iv(p.mode), iv(p.decl), tuple(knob(v) for v in p.knobs.values()),
             tuple(bv(v) for v in p.reads.values()), tuple(bv(v) for v in p.worker.values()))
            for p in step if bv(p.active)
        ) + (iv(cfg.publisher[n]),)
        if sig not in step_sigs:
            step_sigs.append(sig)
        kinds_of_step.append(KINDS[step_sigs.index(sig)])
    used: set[int] = set()
    backends: dict[str, BackendSpec] = {}
    steps: dict[StepKind, tuple[PhaseSpec, ...]] = {}
    publisher: dict[StepKind, str] = {}
    for n, step in enumerate(cfg.phases):
        kind = kinds_of_step[n]
        if kind in steps:
            continue
        phases = []
        for i, p in enumerate(step):
            if not bv(p.active):
                continue
            mode = MODES[iv(p.mode)]
            bname = f"b{i}" if len(step_sigs) == 1 else f"b_{kind.value}_{i}"
            sites = {}
            for s_i, site in enumerate(SITES):
                locs = [loc for loc in cfg.bounds.locations if bv(p.reads[(s_i, loc)])]
                if locs:
                    sites[site] = tuple(locs)
            backends[bname] = BackendSpec(bname, declares={mode: SharedReadEnds(iv(p.decl))}, reads={mode.value: sites})
            runner = iv(p.runner)
            used.add(runner)
            phases.append(PhaseSpec(
                name=f"phase{i}", runner=rnames[runner], mode=mode, backend=bname,
                worker_reads_after=tuple(loc for loc, v in p.worker.items() if bv(v)),
                **knobs(PHASE_KNOBS, p.knobs),
            ))
        steps[kind] = tuple(phases)
        publisher[kind] = rnames[iv(cfg.publisher[n])]
        used.add(iv(cfg.publisher[n]))
    frontier = list(used)
    while frontier:  # the owners of the runners in use (mailbox redirections), transitively
        owner = iv(cfg.runners[frontier.pop()].owner)
        if owner not in used:
            used.add(owner)
            frontier.append(owner)
    runners = {
        rnames[j]: RunnerSpec(
            rnames[j], mailbox="" if iv(cfg.runners[j].owner) == j else rnames[iv(cfg.runners[j].owner)],
            **knobs(RUNNER_KNOBS, cfg.runners[j].knobs),
        )
        for j in sorted(used)
    }
    last = frozenset(MODES[m] for m in range(len(cfg.is_last)) if bv(cfg.is_last[m]))
    scenario = Scenario(
        name=name,
        description="Counterexample found by the fencecheck model (minimal in phases, steps and reads).",
        cites=("fencecheck model: docs/proofs.md",),
        backends=backends,
        runners=runners,
        algorithm=AlgorithmSpec("counterexample", steps, publisher, last,
                                **knobs(model_knobs(AlgorithmSpec), cfg.knobs)),
        scheduler=SchedulerSpec(
            writes=tuple(loc for loc, v in cfg.written.items() if bv(v)),
            **knobs(model_knobs(SchedulerSpec), cfg.knobs),
        ),
        **knobs(model_knobs(Scenario), cfg.knobs),
        steps=cfg.bounds.steps,
        step_kinds=tuple(kinds_of_step),
    )
    racing = {r.race_id(scenario) for r in prog.reads if bv(prog.race_of(r))}  # each with its step
    scenario = scenario.replace(expect=Expectation(Verdict.COUNTEREXAMPLE, tuple(sorted(racing))))
    return scenario, Layout(rnames, cfg.bounds.locations, cfg.bounds.steps)


__all__ = ["Counterexample", "realize", "search", "search_order", "search_with", "to_scenario"]
