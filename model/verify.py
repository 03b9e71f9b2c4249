"""``fencecheck verify``: one backend (plain, composite or hybrid), every context (docs/verify.md).

Symbolic contexts: every configuration of the main theorem's family (its assumptions, except that declarations must
be honest) in which some phases run this backend, with its declaration and reads for their mode, and the other
phases run any honest backend. The family fixes the resolution rule to ``declaration_only_post_fallback``
(``sound_fallback``).

Catalog contexts: every catalog scenario with this backend swapped into every phase whose mode it covers, decided by
the model's host program run on the scenario's values, each with the named assumptions it fails (where the symbolic
proof says nothing) and the races it has on its own (catalog verdict counterexample) told apart from the races the
backend brings. Where the backend's reads race, the context is also run with every stand-in backend (the same
locations at one site, one declaration): when all of them race too, the context races whatever the backend does, and
the change outside the backend that its failed assumptions point at is made and verified on the same context.

Advice: for every race the backend brings, and for every declaration later than its reads need, the smallest change
to the backend (an earlier or later declaration, a read moved out of the graph), each verified over the same
symbolic and catalog contexts before it is offered; when no change to the backend alone removes a race, the
verified change to the component whose assumption the context fails.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Callable, Mapping

import z3

from fencecheck.verdict import RaceId, Verdict
from fencecheck.scenario import ANY_MODE, BackendSpec, Scenario
from fencecheck.vocab import (
    COVERED_SITES,
    ForwardMode,
    ReadSite,
    ResolutionRule,
    SharedReadEnds,
    base_shared_read_ends,
)

from . import assumptions as A
from .check import ModelReport
from .concrete import concretize, layout, mode_class
from .counterexample import Counterexample, search_order, search_with
from .program import build
from .solver import Budget, check, fresh_context, make_solver
from .symconfig import SITES, Bounds, make_config

BOUNDS = Bounds(steps=2, phases=4, runners=3)

#: The resolution rule of the symbolic family, and the assumptions it holds under (model/assumptions.py).
RULE = ResolutionRule.DECLARATION_ONLY_POST_FALLBACK
ASSUMED = tuple(a for a in A.BY_NAME if a != "honest_declarations")

#: The component that must change when a context fails an assumption and no change to the backend removes its race.
COMPONENT = {
    "named_runner_is_last_reader": "the worker/algorithm (last_shared_read_runner must name the last reading runner)",
    "sound_fallback": "the runner (IN_REPLAY without a marker must resolve to POST_REPLAY)",
    "honest_declarations": "another backend of the context (its reads lie outside its declaration)",
    "plan_stream_joined_before_replay": "the runner (join the plan stream into F before the launch)",
    "barrier_on": "the scheduler (the WAR barrier must be on)",
    "barrier_after_run_batch": "the scheduler (apply the barrier right after run_batch)",
    "last_reader_resolves": "the runner of the last reading phase (publish by resolving the declaration) or the "
                            "worker (clear the mailbox after it)",
    "last_reader_publishes": "the runner or the worker/algorithm (the last reading phase publishes nothing: its mode "
                             "resolves UNKNOWN or it runs eagerly; the worker must clear the mailbox after it, or the "
                             "step must name a runner that publishes)",
    "worker_reads_cleared": "the worker (clear the mailbox after the phase its reads follow)",
}



# -- the backend's facts ------------------------------------------------------------------------------------------


@dataclass
class ModeFacts:
    """What the backend declares and reads in one mode, and which backend of its file each fact comes from."""

    mode: ForwardMode
    declared: SharedReadEnds
    sites: dict[ReadSite, tuple[str, ...]]
    declared_by: str = ""
    readers: dict[tuple[ReadSite, str], tuple[str, ...]] = field(default_factory=dict)

    @property
    def honest(self) -> bool:
        return set(self.sites) <= COVERED_SITES[self.declared]

    def outside(self) -> list[tuple[ReadSite, str]]:
        """The (site, location) reads outside what the declaration covers."""
        return [(s, loc) for s, locs in self.sites.items() if s not in COVERED_SITES[self.declared] for loc in locs]

    def earliest(self) -> SharedReadEnds:
        """The earliest declaration whose covered sites hold every site read."""
        for d in (SharedReadEnds.PRE_REPLAY, SharedReadEnds.IN_REPLAY, SharedReadEnds.POST_REPLAY):
            if set(self.sites) <= COVERED_SITES[d]:
                return d
        return SharedReadEnds.UNKNOWN


def _as_map(b) -> dict[str, BackendSpec]:
    """A backend file (``scenario_io.BackendFile``) or a lone ``BackendSpec`` as (root name, backends by name)."""
    if isinstance(b, BackendSpec):
        return {b.name: b}
    return {b.root.name: b.root, **b.backends}


def _root(b) -> str:
    return b.name


def _effective(bs: Mapping[str, BackendSpec], name: str, mode: ForwardMode):
    """(declaration, the backend it comes from, {(site, location): readers}) of backend ``name`` in ``mode``: its
    override, a hybrid's delegate, a composite's ``max_of``, the base rule (model.concrete.declared/read_sites)."""
    b = bs[name]
    if mode in b.delegate:
        decl, by, readers = _effective(bs, b.delegate[mode], mode)
        if mode in b.declares:
            decl, by = b.declares[mode], name
        return decl, by, readers
    readers: dict[tuple[ReadSite, str], tuple[str, ...]] = {}
    own = b.reads.get(mode.value, b.reads.get(ANY_MODE, {}))
    for site, locs in own.items():
        for loc in locs:
            readers[(site, loc)] = (name,)
    child_decls = []
    for child in b.children:
        d, by, r = _effective(bs, child, mode)
        child_decls.append((d, by))
        for key, who in r.items():
            readers[key] = tuple(dict.fromkeys((*readers.get(key, ()), *who)))
    if mode in b.declares:
        return b.declares[mode], name, readers
    if child_decls:
        d = SharedReadEnds.max_of(*(d for d, _ in child_decls))
        return d, next(by for dd, by in child_decls if dd is d), readers
    return base_shared_read_ends(mode), name, readers


def _speaks_for(bs: Mapping[str, BackendSpec]) -> set[ForwardMode]:
    modes: set[ForwardMode] = set()
    for b in bs.values():
        modes |= set(b.declares) | set(b.delegate)
        for key in b.reads:
            modes |= set(ForwardMode) if key == ANY_MODE else {ForwardMode(key)}
    return modes


def mode_facts(b) -> list[ModeFacts]:
    """The modes the backend speaks for (declared, delegated or read anywhere in its file; all modes for '*')."""
    bs = _as_map(b)
    out = []
    for mode in sorted(_speaks_for(bs), key=lambda m: list(ForwardMode).index(m)):
        decl, by, readers = _effective(bs, _root(b), mode)
        sites: dict[ReadSite, tuple[str, ...]] = {}
        for site in ReadSite:
            locs = tuple(sorted(loc for (s, loc) in readers if s is site))
            if locs:
                sites[site] = locs
        out.append(ModeFacts(mode, decl, sites, by, readers))
    return out


def child_findings(b, facts: list[ModeFacts]) -> list[str]:
    """Per child backend of a composite or hybrid: reads outside what the child's own declaration covers."""
    bs = _as_map(b)
    out = []
    if len(bs) == 1:
        return out
    for f in facts:
        for name in bs:
            if name == _root(b):
                continue
            d, _, readers = _effective(bs, name, f.mode)
            mine = [(s, loc) for (s, loc), who in readers.items() if name in who and (s, loc) in f.readers
                    and name in f.readers[(s, loc)]]
            bad = [(s, loc) for s, loc in mine if s not in COVERED_SITES[d]]
            if bad:
                where = ", ".join(f"{loc} at {s.value}" for s, loc in bad)
                cover = ("covered by the composite's " + f.declared.name if f.honest and f.declared_by != name
                         else f"outside what {f.mode.value} {f.declared.name} covers too")
                out.append(f"child {name}: {f.mode.value}: reads {where}, outside what its own {d.name} covers "
                           f"({cover})")
    return out


# -- symbolic contexts --------------------------------------------------------------------------------------------


def _uses(p, facts: list[ModeFacts], loc: str) -> z3.BoolRef:
    options = []
    for f in facts:
        reads = [p.reads[(i, loc)] == (site in f.sites) for i, site in enumerate(SITES)]
        options.append(z3.And(p.mode == mode_class(f.mode), p.decl == int(f.declared), *reads))
    return z3.Or(*options)


def _honest(p) -> z3.BoolRef:
    return z3.And(*[z3.Implies(v, A.covered(p.decl, s)) for (s, _), v in p.reads.items()])


def symbolic(facts: list[ModeFacts], bounds: Bounds = BOUNDS, budget: Budget = Budget(), name: str = "verify"):
    """(verdict, counterexample, reason) over the symbolic context family of the backend."""
    loc = bounds.locations[0]
    ctx = fresh_context()
    return search_with(bounds, lambda b: _setup(b, facts, loc, ctx), budget, name)


def _setup(b: Bounds, facts: list[ModeFacts], loc: str, ctx: z3.Context):
    """The symbolic family's query for bound ``b``: (cfg, program, constraints), a race among them."""
    cfg = make_config(b, ctx=ctx)
    prog = build(cfg)
    per_phase = []
    uses_any = []
    for n, step in enumerate(cfg.phases):
        for i, p in enumerate(step):
            u = z3.Bool(f"uses.s{n}.p{i}", ctx)
            per_phase += [z3.Implies(u, _uses(p, facts, loc)), z3.Implies(z3.Not(u), _honest(p))]
            uses_any.append(z3.And(p.active, u))
    constraints = [*cfg.domain, *prog.constraints, *A.constraints(cfg, prog, ASSUMED), *per_phase,
                   z3.Or(*uses_any), prog.any_race()]
    return cfg, prog, constraints


def symbolic_verdict(facts: list[ModeFacts], bounds: Bounds = BOUNDS, budget: Budget = Budget()) -> Verdict:
    """``symbolic``'s verdict alone (a proposed change's check needs no counterexample): the bounds in the same order,
    each query in the same context, the first bound with a race a COUNTEREXAMPLE, the first unknown UNKNOWN."""
    loc = bounds.locations[0]
    ctx = fresh_context()
    for b in search_order(bounds):
        cfg, prog, constraints = _setup(b, facts, loc, ctx)
        solver = make_solver(budget, ctx)
        solver.add(*constraints)
        verdict = check(solver).verdict
        if verdict is not Verdict.PROVED:
            return verdict
    return Verdict.PROVED


class SymbolicVerdicts:
    """``symbolic_verdict`` of each proposed change's facts, each asked once. With ``jobs`` > 1 the facts asked for
    in advance (``prefetch``) are decided in that many worker processes; every query is built in a fresh context
    there as here, so the verdicts are the same for any ``jobs``."""

    def __init__(self, bounds: Bounds = BOUNDS, budget: Budget = Budget(), jobs: int = 1):
        self.bounds, self.budget, self.jobs = bounds, budget, jobs
        self._done: dict[str, Verdict] = {}
        self._pending: dict = {}
        self._pool = None

    def prefetch(self, many: list[list[ModeFacts]]) -> None:
        todo = {repr(f): f for f in many if repr(f) not in self._done and repr(f) not in self._pending}
        if self.jobs <= 1 or len(todo) < 2:
            return
        import multiprocessing

        self._pool = multiprocessing.get_context("spawn").Pool(min(self.jobs, len(todo)))
        for key, facts in todo.items():
            self._pending[key] = self._pool.apply_async(symbolic_verdict, (facts, self.bounds, self.budget))

    def __call__(self, facts: list[ModeFacts]) -> Verdict:
        key = repr(facts)
        if key not in self._done:
            pending = self._pending.pop(key, None)
            self._done[key] = (pending.get() if pending is not None
                               else symbolic_verdict(facts, self.bounds, self.budget))
        return self._done[key]

    def close(self) -> None:
        """Stop the workers (those still deciding a change that was not needed after all)."""
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None


# -- catalog contexts ---------------------------------------------------------------------------------------------

PREFIX = "verify:"


def swap_into(s: Scenario, b, modes: set[ForwardMode]) -> Scenario | None:
    """``s`` with the backend ``b`` (and the children of its file) in every phase whose mode it covers (None if no
    phase is in such a mode). The file's backends are named ``verify:NAME`` in the scenario."""
    bs = _as_map(b)
    ren = {n: f"{PREFIX}{n}" for n in bs}
    added = {
        ren[n]: dataclasses.replace(x, name=ren[n], children=tuple(ren[c] for c in x.children),
                                    delegate={m: ren[c] for m, c in x.delegate.items()})
        for n, x in bs.items()
    }
    root = ren[_root(b)]
    hit = False
    steps = {}
    for kind, phases in s.algorithm.steps.items():
        new = []
        for p in phases:
            if p.mode in modes:
                hit = True
                p = dataclasses.replace(p, backend=root)
            new.append(p)
        steps[kind] = tuple(new)
    if not hit:
        return None
    return s.replace(name=f"{s.name}+{_root(b)}", backends={**s.backends, **added},
                     algorithm=dataclasses.replace(s.algorithm, steps=steps), expect=None)


@dataclass
class PhaseFacts:
    """One phase of one step of a context as the model resolves it."""

    step: int
    kind: str
    phase: str
    runner: str
    mode: ForwardMode
    backend: str
    resolved: SharedReadEnds | None  # None: its runner does not resolve (publishes before replay or never)
    publisher: str  # the runner the step names


class Decision:
    """The model's decision of one concrete context: the program run in the concrete domain (model/traces.py), the
    same host program the symbolic proofs run, so its verdict and races are the solver's for the pinned scenario."""

    def __init__(self, s: Scenario):
        self._s = s
        cfg, prog = self._run()
        races = tuple(r.race_id(s) for r in prog.reads if prog.race_of(r))
        verdict = Verdict.COUNTEREXAMPLE if races else Verdict.PROVED
        self.report = ModelReport(s.name, layout(s).steps, verdict, races)
        #: (step, phase index) -> the publish point the phase resolves (0: none)
        self.resolved: dict = dict(prog.resolved)
        self._failed: tuple[str, ...] | None = None

    def _run(self):
        cfg = concretize(self._s, layout(self._s))
        return cfg, build(cfg)

    @property
    def failed(self) -> tuple[str, ...]:
        """The named assumptions it fails, except sound_fallback and honest_declarations (found when first asked)."""
        if self._failed is None:
            cfg, prog = self._run()
            self._failed = tuple(n for n in A.BY_NAME if n not in ("sound_fallback", "honest_declarations")
                                 and not _truth(A.BY_NAME[n].build(cfg, prog)))
        return self._failed


def _truth(x) -> bool:
    return x if isinstance(x, bool) else z3.is_true(z3.simplify(x))


def _decide(s: Scenario) -> Decision:
    return Decision(s)


class Decisions:
    """Each concrete context decided once: the same scenario (the backend swapped in, a change applied) asked again
    gets the first answer."""

    def __init__(self):
        self._seen: dict[str, Decision] = {}

    def __call__(self, s: Scenario) -> Decision:
        key = repr(s)
        if key not in self._seen:
            self._seen[key] = _decide(s)
        return self._seen[key]


def _dishonest_context(sc: Scenario) -> bool:
    """A backend of the context itself (not the backend under test) reads outside what its declaration covers."""
    from .concrete import declared, read_sites
    for kind in set(sc.step_kinds):
        for p in sc.algorithm.steps[kind]:
            if p.backend.startswith(PREFIX):
                continue
            d = declared(sc, p.backend, p.mode)
            sites = read_sites(sc, p.backend, p.mode)
            if any(locs and SITES[i] not in COVERED_SITES[d] for i, locs in sites.items()):
                return True
    return False


def context_facts(s: Scenario, decide: Callable[[Scenario], Decision] | None = None
                  ) -> tuple[list[str], list[PhaseFacts]]:
    """(the named assumptions ``s`` fails, the phases as the model resolves them). ``sound_fallback`` counts as
    failed only where the rule changes a publish point; ``honest_declarations`` only for the context's own
    backends (the backend under test is judged by its own facts)."""
    decide = decide or _decide
    got = decide(s)
    failed = list(got.failed)
    if _dishonest_context(s):
        failed.append("honest_declarations")
    if s.resolution is not RULE and decide(s.replace(resolution=RULE)).resolved != got.resolved:
        failed.append("sound_fallback")
    phases = []
    for n in range(1, s.steps + 1):
        kind = s.step_kind(n)
        for i, p in enumerate(s.algorithm.steps[kind]):
            r = got.resolved.get((n, i), 0)
            phases.append(PhaseFacts(n, kind.value, p.name, p.runner, p.mode, p.backend,
                                     SharedReadEnds(r) if r else None, s.algorithm.publisher[kind]))
    order = list(A.BY_NAME)
    return sorted(set(failed), key=order.index), phases


@dataclass
class Context:
    """One catalog context: the scenario with the backend swapped in, its verdict and what the races come from."""

    scenario: str  # the catalog scenario's name
    report: ModelReport
    own_verdict: Verdict  # the catalog scenario's own (expected) verdict
    own_races: tuple[RaceId, ...]  # the places it races at on its own
    failed: list[str] = field(default_factory=list)  # the named assumptions it fails
    phases: list[PhaseFacts] = field(default_factory=list)
    swapped: Scenario | None = None  # the scenario with the backend swapped in (for the simulator's explanation)
    races_anyway: bool = False  # every stand-in backend's reads race here too (``races_whatever_the_backend``)
    component: "ComponentChange | None" = None  # where ``races_anyway``: the change outside the backend, verified

    @property
    def brought(self) -> tuple[RaceId, ...]:
        """The races the backend brings: every race of a context race-free on its own, else those at new places."""
        races = tuple(sorted(set(self.report.races), key=_order))
        if self.own_verdict is Verdict.PROVED:
            return races
        own = {r.place() for r in self.own_races}
        return tuple(r for r in races if r.place() not in own)

    @property
    def kept(self) -> tuple[RaceId, ...]:
        """The context's own races that remain with the backend swapped in."""
        own = {r.place() for r in self.own_races}
        return tuple(r for r in sorted(set(self.report.races), key=_order) if r.place() in own)

    @property
    def safe(self) -> bool:
        """The backend brings no race here: the context's own races are the context's, and in a context that races
        on its own where every backend's reads race (``races_anyway``) the backend is not at fault. In a context
        race-free on its own, a race the backend brings counts even where every backend's reads would race: the
        context must change before this backend can run there (``component``)."""
        if self.report.verdict is Verdict.UNKNOWN:
            return False
        return not self.brought or (self.races_anyway and self.own_verdict is Verdict.COUNTEREXAMPLE)

    @property
    def covered(self) -> bool:
        """The symbolic proof speaks for this context (it fails none of the assumptions)."""
        return not self.failed

    def phase_of(self, r: RaceId) -> PhaseFacts | None:
        return next((p for p in self.phases if p.step == r.step and p.phase == r.phase), None)


def catalog_contexts(b, facts: list[ModeFacts], catalog: list[Scenario], budget: Budget = Budget(),
                     tick: Callable[[str], None] | None = None, examine: bool = True,
                     decide: Callable[[Scenario], Decision] | None = None,
                     anyway: Mapping[str, bool] | None = None) -> list[Context]:
    """Every catalog scenario with a phase in a mode of ``facts``, the backend swapped in and decided by the model
    (``decide``: a ``Decisions`` shared across the report and its advice, so no context is decided twice).
    ``anyway``: ``races_anyway`` per scenario when known (it depends on the modes and locations the backend reads,
    which no proposed change alters); else found for each examined context."""
    decide = decide or Decisions()
    modes = {f.mode for f in facts}
    out = []
    for s in catalog:
        swapped = swap_into(s, b, modes)
        if swapped is None:
            continue
        own = s.expect.verdict if s.expect is not None else Verdict.PROVED
        races = s.expect.races if s.expect is not None else ()
        c = Context(s.name, decide(swapped).report, own, races, swapped=swapped)
        if anyway is not None:
            c.races_anyway = anyway.get(s.name, False)
        if examine:
            c.failed, c.phases = context_facts(swapped, decide)
            if anyway is None and ours(swapped, c.report.races):
                c.races_anyway = races_whatever_the_backend(s, b, facts, decide)
            if c.races_anyway:
                c.component = component_change(swapped, c.failed, decide, s.name,
                                               lambda sc: races_whatever_the_backend(sc, b, facts, decide))
        out.append(c)
        if tick is not None:
            tick(s.name)
    return out


# -- contexts that race whatever the backend does ------------------------------------------------------------------


def ours(s: Scenario, races) -> tuple[RaceId, ...]:
    """The races among ``races`` at a read of the backend under test (sorted, each once)."""
    out = set()
    sites = {site.value for site in ReadSite}
    for r in races:
        if r.site not in sites:
            continue  # a worker's read, not the backend's
        p = next((p for p in s.algorithm.steps[s.step_kind(r.step)] if p.name == r.phase), None)
        if p is not None and p.backend.startswith(PREFIX):
            out.add(r)
    return tuple(sorted(out, key=_order))


#: The declarations a stand-in backend is tried with: every value, UNKNOWN (publish nothing) included.
STAND_IN_DECLARATIONS = (SharedReadEnds.PRE_REPLAY, SharedReadEnds.IN_REPLAY, SharedReadEnds.POST_REPLAY,
                         SharedReadEnds.UNKNOWN)


def stand_ins(b, facts: list[ModeFacts]) -> list[tuple[tuple[SharedReadEnds, ...], BackendSpec]]:
    """The backends that could replace ``b`` and still read what it reads, one per declaration per mode of ``facts``
    (``STAND_IN_DECLARATIONS`` each): in each mode, every location ``b`` reads there, at every site. A read's race
    depends on the declarations and its own site alone (a read publishes nothing, and no publish point depends on
    where the backend reads), so one run tells, for every site, whether a backend reading only there races; and
    reading at fewer sites never adds a race, so these cover every backend that reads those locations."""
    out = []
    for decls in itertools.product(STAND_IN_DECLARATIONS, repeat=len(facts)):
        reads = {f.mode.value: {site: tuple(sorted({loc for locs in f.sites.values() for loc in locs}))
                                for site in SITES}
                 for f in facts if f.sites}
        out.append((decls, BackendSpec(_root(b), declares={f.mode: d for f, d in zip(facts, decls)}, reads=reads)))
    return out


def races_whatever_the_backend(s: Scenario, b, facts: list[ModeFacts],
                               decide: Callable[[Scenario], "Decision"]) -> bool:
    """Catalog scenario ``s`` races at a read of the backend whatever backend runs there: for every declaration per
    mode (of the modes ``s`` runs), some mode's reads race at every site (``stand_ins``), so no backend reading
    those locations is race-free there."""
    modes = {f.mode for f in facts}
    present = {p.mode for kind in set(s.step_kinds) for p in s.algorithm.steps[kind] if p.mode in modes}
    here = [f for f in facts if f.mode in present]
    for _, alt in stand_ins(b, here):
        sc = swap_into(s, alt, present)
        racing = set()  # (mode, site) with a race
        for r in ours(sc, decide(sc).report.races):
            racing |= {(p.mode, r.site) for p in sc.algorithm.steps[sc.step_kind(r.step)] if p.name == r.phase}
        if all(any((f.mode, site.value) not in racing for site in SITES) for f in here):
            return False  # these declarations, each mode read at a site where it does not race: race-free
    return True


# -- changes outside the backend -----------------------------------------------------------------------------------


@dataclass
class ComponentChange:
    """A change to a component of the context other than the backend, restoring the named assumptions it fails, and
    what the model finds with it. ``verified``: in a context that races with any backend, it no longer does (some
    stand-in backend is race-free there); else no read of this backend races there. ``races``: the races left at
    this backend's reads with the change made."""

    scenario: str
    assumptions: tuple[str, ...]
    component: str  # the scheduler, the algorithm, the runner, the worker
    change: str  # the change, in SGLang's terms
    verified: bool
    races: tuple[RaceId, ...]  # the races at the backend's reads with the change made
    anyway: bool = False  # judged as a context that races with any backend

    def text(self) -> str:
        head = f"{self.component} must change: {self.change}"
        left = "; ".join(sorted({r.place().text() for r in self.races}))
        if self.verified and not self.races:
            return f"{head}; verified: with it no read of this backend races in {self.scenario}"
        if self.verified:
            return (f"{head}; verified: with it a backend that reads the same locations can be race-free in "
                    f"{self.scenario} (this one's reads still race there at {left}: see the advice)")
        if self.anyway:
            return f"{head}; not enough: with it every backend that reads the same locations still races in " \
                   f"{self.scenario}"
        return f"{head}; not enough: with it this backend's reads still race in {self.scenario} at {left}"

    def to_dict(self) -> dict:
        return {"scenario": self.scenario, "assumptions": list(self.assumptions), "component": self.component,
                "change": self.change, "verified": self.verified, "races": [r.to_dict() for r in self.races]}


def _reads_shared(s: Scenario, p) -> bool:
    from .concrete import read_sites
    return any(read_sites(s, p.backend, p.mode).values()) or bool(p.worker_reads_after)


def _last_readers(s: Scenario):
    """(step kind, index, phase) of each step kind's last phase that reads shared state."""
    out = []
    for kind in dict.fromkeys(s.step_kinds):
        phases = s.algorithm.steps[kind]
        last = [i for i, p in enumerate(phases) if _reads_shared(s, p)]
        if last:
            out.append((kind, last[-1], phases[last[-1]]))
    return out


def _set_phase(s: Scenario, kind, i: int, **changes) -> Scenario:
    steps = dict(s.algorithm.steps)
    phases = list(steps[kind])
    phases[i] = dataclasses.replace(phases[i], **changes)
    steps[kind] = tuple(phases)
    return s.replace(algorithm=dataclasses.replace(s.algorithm, steps=steps))


def _fix(s: Scenario, name: str, decision: "Decision"):
    """(component, change, scenario with the change made) restoring assumption ``name`` in ``s``; None where no
    change of the context's own is known (another backend's declaration is the backend author's, not SGLang's). A
    change that leaves ``s`` as it is is not offered (``component_change``)."""
    from fencecheck.vocab import BarrierPlacement, Execution, PlanJoin, PrepStream, PublishPolicy

    if name == "barrier_on":
        return "the scheduler", "turn the WAR barrier on", s.replace(
            scheduler=dataclasses.replace(s.scheduler, barrier=True))
    if name == "barrier_after_run_batch":
        return "the scheduler", "apply the WAR barrier right after run_batch returns", s.replace(
            scheduler=dataclasses.replace(s.scheduler, placement=BarrierPlacement.AFTER_RUN_BATCH))
    if name == "sound_fallback":
        return ("the runner", "resolve IN_REPLAY on a runner without its marker to POST_REPLAY (resolution "
                f"{RULE.value})", s.replace(resolution=RULE))
    if name == "named_runner_is_last_reader":
        publisher = dict(s.algorithm.publisher)
        said = []
        for kind, _, p in _last_readers(s):
            if publisher[kind] != p.runner:
                publisher[kind] = p.runner
                said.append(f"{p.runner} in {kind.value} steps (the runner of {p.name}, the step's last reading "
                            "phase)")
        return ("the algorithm", "set last_shared_read_runner to " + ", ".join(said),
                s.replace(algorithm=dataclasses.replace(s.algorithm, publisher=publisher)))
    if name == "plan_stream_joined_before_replay":
        said, out = [], s
        for kind, phases in s.algorithm.steps.items():
            for i, p in enumerate(phases):
                if p.prep_stream is PrepStream.PLAN and p.plan_join is not PlanJoin.BEFORE_REPLAY:
                    out = _set_phase(out, kind, i, plan_join=PlanJoin.BEFORE_REPLAY)
                    said.append(f"{p.name} ({kind.value} steps)")
        return ("the runner", "join the plan stream into F before the launch (F.wait_stream(P)) in "
                + ", ".join(said), out)
    if name == "last_reader_resolves":
        runners, said = dict(s.runners), []
        for kind, _, p in _last_readers(s):
            r = runners[p.runner]
            if r.publish is not PublishPolicy.RESOLVE and not p.clear_mailbox_after:
                runners[p.runner] = dataclasses.replace(r, publish=PublishPolicy.RESOLVE)
                said.append(f"runner {p.runner} (of {p.name}, {kind.value} steps)")
        return ("the runner", "publish by resolving the backend's declaration (publish = resolve): "
                + ", ".join(dict.fromkeys(said)), s.replace(runners=runners))
    if name in ("last_reader_publishes", "worker_reads_cleared"):
        said, out = [], s
        for kind, i, p in _last_readers(s):
            if p.clear_mailbox_after:
                continue
            steps = [n for n in range(1, s.steps + 1) if s.step_kind(n) is kind]
            silent = p.execution is Execution.EAGER or any(
                decision.resolved.get((n, i), 0) == int(SharedReadEnds.UNKNOWN) for n in steps)
            if (silent if name == "last_reader_publishes" else bool(p.worker_reads_after)):
                out = _set_phase(out, kind, i, clear_mailbox_after=True)
                said.append(f"{p.name} ({kind.value} steps, runner {p.runner})")
        return ("the worker", "clear the runner's mailbox after the step's last reading phase "
                "(clear_mailbox_after): " + ", ".join(said), out)
    return None


def component_change(s: Scenario, failed: list[str], decide: Callable[[Scenario], "Decision"], name: str,
                     anyway: Callable[[Scenario], bool] | None = None) -> ComponentChange | None:
    """The smallest change outside the backend that the model verifies in ``s`` (the backend swapped in): each
    failed assumption's change alone, in the order of model/assumptions.py, then all of them together; else the
    change of all of them with what it leaves. ``anyway``: ``s`` races with any backend, and this tells whether a
    scenario still does (a change is verified when it no longer does); None: verified when no read of this backend
    races. None if ``s`` fails no assumption that names such a change."""
    decision = decide(s)
    fixes = [(n, f) for n in failed if (f := _fix(s, n, decision)) is not None and repr(f[2]) != repr(s)]
    if not fixes:
        return None

    def judge(names, component, change, fixed) -> ComponentChange:
        races = ours(fixed, decide(fixed).report.races)
        ok = not anyway(fixed) if anyway is not None else not races
        return ComponentChange(name, names, component, change, ok, races, anyway is not None)

    tried = []
    for n, (component, change, fixed) in fixes:
        cc = judge((n,), component, change, fixed)
        if cc.verified:
            return cc
        tried.append(cc)
    if len(fixes) == 1:
        return tried[0]
    both = s
    for n, _ in fixes:
        both = _fix(both, n, decide(both))[2]
    return judge(tuple(n for n, _ in fixes), " and ".join(dict.fromkeys(c for _, (c, _, _) in fixes)),
                 "; ".join(ch for _, (_, ch, _) in fixes), both)


# -- advice -------------------------------------------------------------------------------------------------------


@dataclass
class Check:
    """A proposed change verified over the same contexts: the symbolic verdict and each catalog context's."""

    symbolic: Verdict
    contexts: list[Context]

    @property
    def safe(self) -> bool:
        return self.symbolic is Verdict.PROVED and all(c.safe for c in self.contexts)

    def text(self) -> str:
        n = len(self.contexts) + 1
        bad = [c for c in self.contexts if not c.safe]
        if self.safe:
            return f"safe in all {n} contexts (the symbolic family and {n - 1} catalog scenarios)"
        parts = [] if self.symbolic is Verdict.PROVED else [f"symbolic {self.symbolic.value}"]
        parts += [f"{c.scenario} ({'; '.join(sorted({r.place().text() for r in c.brought})) or 'unknown'})"
                  for c in bad]
        return f"races in {len(parts)} of {n} contexts: {', '.join(parts)}"


@dataclass
class Advice:
    change: str  # the change, in SGLang's terms
    why: str  # what it is for
    check: Check | None  # its verification (None: no change to the backend is offered)
    component: ComponentChange | None = None  # the change outside the backend, and what the model finds with it

    def text(self) -> str:
        tail = f": {self.check.text()}" if self.check is not None else ""
        if self.component is not None:
            tail += f"; {self.component.text()}"
        return f"{self.change}{tail} ({self.why})"


def _order(r: RaceId):
    return (r.step, r.phase, r.site, r.location)


def _declare(b, mode: ForwardMode, d: SharedReadEnds):
    """The backend file with the root declaring ``d`` for ``mode`` (an override wins over delegate and max_of)."""
    bs = _as_map(b)
    root = bs[_root(b)]
    new = dataclasses.replace(root, declares={**root.declares, mode: d})
    return _with(b, {root.name: new})


def _move_out(b, mode: ForwardMode, site: ReadSite, loc: str, who: tuple[str, ...]):
    """The backend file with ``loc``'s read at ``site`` in ``mode`` moved to pre_replay in each of ``who``."""
    bs = _as_map(b)
    changes = {}
    for name in who:
        x = bs[name]
        own = dict(x.reads.get(mode.value, x.reads.get(ANY_MODE, {})))
        own[site] = tuple(v for v in own.get(site, ()) if v != loc)
        if not own[site]:
            del own[site]
        own[ReadSite.PRE_REPLAY] = tuple(sorted({*own.get(ReadSite.PRE_REPLAY, ()), loc}))
        changes[name] = dataclasses.replace(x, reads={**x.reads, mode.value: own})
    return _with(b, changes)


def _with(b, changes: dict[str, BackendSpec]):
    if isinstance(b, BackendSpec):
        return changes.get(b.name, b)
    root = changes.get(b.root.name, b.root)
    return dataclasses.replace(b, root=root, backends={**b.backends, **changes})


@dataclass
class VerifyReport:
    backend: str
    modes: list[ModeFacts]
    verdict: Verdict = Verdict.UNKNOWN
    reason: str = ""
    counterexample: Counterexample | None = None
    contexts: list[Context] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    advice: list[Advice] = field(default_factory=list)
    bounds: Bounds = BOUNDS

    @property
    def safe(self) -> bool:
        return self.verdict is Verdict.PROVED and all(c.safe for c in self.contexts)


def _check(b, catalog, bounds, budget, decide: Callable[[Scenario], Decision] | None = None,
           anyway: Mapping[str, bool] | None = None, verdicts: SymbolicVerdicts | None = None) -> Check:
    facts = mode_facts(b)
    verdict = verdicts(facts) if verdicts is not None else symbolic_verdict(facts, bounds, budget)
    return Check(verdict, catalog_contexts(b, facts, catalog, budget, examine=False, decide=decide, anyway=anyway))


def _locations(report: "VerifyReport") -> list[str]:
    return sorted({loc for f in report.modes for locs in f.sites.values() for loc in locs})


def _implicated(report: "VerifyReport") -> set[ForwardMode]:
    """The modes whose declaration or reads take part in a race the backend brings: a mode read outside its
    declaration, the mode of a racing phase that runs the backend, and, for a race at a phase of another backend,
    every mode the backend runs in that context."""
    modes = {f.mode for f in report.modes if not f.honest}
    ce = report.counterexample
    if ce is not None:
        modes.add(ce.scenario.algorithm.steps[ce.scenario.step_kind(ce.race.step)][ce.race.phase].mode)
    for c in report.contexts:
        if c.safe:
            continue
        ours = {p.mode for p in c.phases if p.backend.startswith(PREFIX)}
        for r in c.brought:
            ph = c.phase_of(r)
            modes |= {ph.mode} if ph is not None and ph.backend.startswith(PREFIX) else ours
    return modes


def advise(b, report: VerifyReport, catalog: list[Scenario], bounds: Bounds = BOUNDS, budget: Budget = Budget(),
           tick: Callable[[str], None] | None = None,
           decide: Callable[[Scenario], Decision] | None = None, verdicts: SymbolicVerdicts | None = None,
           plan: list | None = None) -> list[Advice]:
    """The smallest verified change for every race the backend brings, and for every declaration later than its
    reads need; else the component that must change. ``plan``: collect the facts of every change that could be
    checked (each taken as unsafe, so none stops the search) instead of checking them."""
    out: list[Advice] = []
    racing = report.verdict is not Verdict.PROVED or any(not c.safe for c in report.contexts)
    tried: dict[str, Check] = {}
    decide = decide or Decisions()
    anyway = {c.scenario: c.races_anyway for c in report.contexts}

    def verified(label: str, cand) -> Check:
        if plan is not None:
            plan.append(mode_facts(cand))
            return Check(Verdict.UNKNOWN, [])
        if label not in tried:
            tried[label] = _check(cand, catalog, bounds, budget, decide, anyway, verdicts)
            if tick is not None:
                tick(label)
        return tried[label]

    implicated = _implicated(report)
    for f in report.modes:
        if f.declared is SharedReadEnds.UNKNOWN and not f.sites:
            continue
        if racing and f.mode not in implicated and not (f.honest and f.earliest() < f.declared):
            continue  # its declaration plays no part in any race, and gives no overlap away
        # Every honest declaration, earliest first: the earliest safe one is the smallest fix and keeps most overlap.
        options = [d for d in (SharedReadEnds.PRE_REPLAY, SharedReadEnds.IN_REPLAY, SharedReadEnds.POST_REPLAY)
                   if set(f.sites) <= COVERED_SITES[d]]
        over = f.honest and options and options[0] < f.declared
        if not racing and not over:
            continue
        mode_racing = racing and f.mode in implicated
        failed_here = []
        for d in options:
            if d == f.declared:
                if not mode_racing:
                    break
                continue
            label = f"declare {d.name} for {f.mode.value}" + (f" on {report.backend}" if f.declared_by != report.backend
                                                               else "")
            chk = verified(label, _declare(b, f.mode, d))
            if chk.safe:
                if f.declared is SharedReadEnds.UNKNOWN:
                    why = ("UNKNOWN (unaudited) publishes no event of its own: the barrier takes the coarse fence "
                           f"only while the mailbox is empty; {d.name} publishes one")
                elif d < f.declared:
                    why = (f"publishes earlier than {f.declared.name}, giving back the overlap from there to the "
                           f"{f.declared.name} publish point")
                else:
                    why = f"covers every site {f.mode.value} reads"
                if failed_here:
                    why += "; " + "; ".join(failed_here)
                out.append(Advice(label, why, chk))
                break
            failed_here.append(f"{d.name} instead: {chk.text()}")
        else:
            if failed_here and mode_racing and not over:
                out.append(Advice(f"no declaration for {f.mode.value} alone fixes it",
                                  "; ".join(failed_here), None))
            if failed_here and over:
                out.append(Advice(f"keep {f.declared.name} for {f.mode.value}",
                                  "no earlier declaration is safe: " + "; ".join(failed_here), None))
        # A read in the graph moved out of it (the declaration kept).
        if mode_racing and not f.honest:
            for site, loc in f.outside():
                who = f.readers.get((site, loc), ())
                label = (f"move the read of {loc} at {site.value} in {f.mode.value} out of the graph (pre_replay)"
                         f" in {'/'.join(who)}")
                chk = verified(label, _move_out(b, f.mode, site, loc, who))
                if chk.safe:
                    out.append(Advice(label, f"keeps {f.declared.name}", chk))
    # Contexts the backend brings races to that no verified backend change removes.
    fixed = [a for a in out if a.check is not None and a.check.safe]
    if racing and not fixed:
        for c in report.contexts:
            if c.safe or c.swapped is None:
                continue
            cc = (c.component if c.races_anyway
                  else component_change(c.swapped, c.failed, decide, c.scenario) if c.failed else None)
            if cc is not None:
                said = ("no change to this backend fixes it: every backend that reads " + "/".join(_locations(report))
                        + " races there (each read site, each declaration tried)" if c.races_anyway
                        else "no change to this backend alone is verified to fix it")
                out.append(Advice(f"{c.scenario}: {said}", "the context fails " + ", ".join(c.failed), None, cc))
            elif c.failed:
                parts = "; ".join(f"{n}: {COMPONENT[n]}" for n in c.failed if n in COMPONENT)
                out.append(Advice(f"{c.scenario}: no change to this backend alone is verified to fix it; change "
                                  f"{parts}", "the context fails " + ", ".join(c.failed), None))
    return out


# -- the whole check ----------------------------------------------------------------------------------------------


def verify(b, catalog: list[Scenario], budget: Budget = Budget(), bounds: Bounds = BOUNDS,
           tick: Callable[[str], None] | None = None, advice: bool = True, jobs: int = 1) -> VerifyReport:
    """Check backend ``b`` (a ``scenario_io.BackendFile`` or a lone ``BackendSpec``) in every context. ``jobs``:
    worker processes for the symbolic checks of the proposed changes (the report is the same for any number)."""
    facts = mode_facts(b)
    report = VerifyReport(_root(b), facts, bounds=bounds)
    if facts:
        verdict, ce, reason = symbolic(facts, bounds, budget, f"verify-{_root(b)}")
        report.verdict, report.counterexample, report.reason = verdict, ce, reason
    else:
        report.verdict, report.reason = Verdict.UNKNOWN, "the backend declares and reads nothing"
    if tick is not None:
        tick("symbolic")
    decide = Decisions()
    report.contexts = catalog_contexts(b, facts, catalog, budget, tick, decide=decide)
    report.findings = child_findings(b, facts)
    for f in facts:
        for site, loc in f.outside():
            who = "/".join(f.readers.get((site, loc), ()))
            report.findings.append(f"{f.mode.value}: {who} reads {loc} at {site.value}, outside what "
                                   f"{f.declared.name} (declared by {f.declared_by}) covers")
    if advice:
        verdicts = SymbolicVerdicts(bounds, budget, jobs)
        try:
            if jobs > 1:
                wanted: list = []
                advise(b, report, catalog, bounds, budget, None, decide, plan=wanted)
                verdicts.prefetch(wanted)
            report.advice = advise(b, report, catalog, bounds, budget, tick, decide, verdicts)
        finally:
            verdicts.close()
    return report
