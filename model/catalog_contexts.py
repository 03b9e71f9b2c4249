"""The catalog contexts of one backend (docs/verify.md): every catalog scenario with the backend swapped into every
phase whose mode it covers (model/swap.py), decided by the model's host program run on the scenario's values, each
with the named assumptions it fails (where the symbolic proof says nothing) and the races it has on its own (catalog
verdict counterexample) told apart from the races the backend brings. Where the backend's reads race, the context is
also run with every stand-in backend: when all of them race too, the context races whatever the backend does, and the
change outside the backend that its failed assumptions point at is made and verified on the same context
(model/component_changes.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from fencecheck.verdict import RaceId, Verdict
from fencecheck.scenario import Scenario
from fencecheck.vocab import COVERED_SITES, ForwardMode, SharedReadEnds

from . import assumptions as A
from .backend_facts import ModeFacts
from .check import ModelReport
from .component_changes import ComponentChange, component_change
from .decision import Decision, Decisions
from .solver import Budget
from .swap import PREFIX, honest_races, ours, race_order, races_whatever_the_backend, swap_into
from .symbolic_contexts import RULE
from .symconfig import SITES


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
    decide = decide or Decision
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
    component: ComponentChange | None = None  # where ``races_anyway``: the change outside the backend, verified
    honest: frozenset = frozenset()  # the places it races at with the honest backend in its place (``honest_races``)

    @property
    def brought(self) -> tuple[RaceId, ...]:
        """The races the backend brings: those at places where neither the context on its own nor the context with
        the honest backend in its place races (``honest``: the context's own races, whatever declares honestly)."""
        races = tuple(sorted(set(self.report.races), key=race_order))
        own = {r.place() for r in self.own_races} if self.own_verdict is not Verdict.PROVED else set()
        return tuple(r for r in races if r.place() not in own and r.place() not in self.honest)

    @property
    def kept(self) -> tuple[RaceId, ...]:
        """The context's own races that remain with the backend swapped in (its own, and the honest backend's)."""
        own = {r.place() for r in self.own_races} | set(self.honest)
        return tuple(r for r in sorted(set(self.report.races), key=race_order) if r.place() in own)

    @property
    def safe(self) -> bool:
        """The backend brings no race here: the context's own races (those of the catalog scenario, and those the
        honest backend has in the backend's place) are the context's; a race beyond them is the backend's, except in
        a context that races on its own where every backend's reads race (``races_anyway``: the barrier off, say),
        where no backend is at fault."""
        if self.report.verdict is Verdict.UNKNOWN:
            return False
        return not self.brought or (self.races_anyway and self.own_verdict is Verdict.COUNTEREXAMPLE)

    @property
    def covered(self) -> bool:
        """The symbolic proof speaks for this context (it fails none of the assumptions)."""
        return not self.failed

    def phase_of(self, r: RaceId) -> PhaseFacts | None:
        return next((p for p in self.phases if p.step == r.step and p.phase == r.phase), None)


def _honest_memo(decide, s: Scenario, b, facts: list[ModeFacts]) -> frozenset:
    """``honest_races(s, b, facts, decide)``, once per scenario and what the backend reads (the honest backends do
    not depend on what it declares: every change the advice tries asks the same), kept on ``decide``."""
    from .backend_facts import root_name

    key = (s.name, root_name(b), tuple(sorted((f.mode.value, tuple(sorted((site.value, tuple(sorted(locs)))
                                                                      for site, locs in f.sites.items())))
                                              for f in facts)))
    try:
        memo = decide.__dict__.setdefault("_honest_races", {})
    except AttributeError:  # a plain callable without attributes: nothing kept
        memo = {}
    if key not in memo:
        memo[key] = honest_races(s, b, facts, decide)
    return memo[key]


def catalog_contexts(b, facts: list[ModeFacts], catalog: list[Scenario], budget: Budget = Budget(),
                     tick: Callable[[str], None] | None = None, examine: bool = True,
                     decide: Callable[[Scenario], Decision] | None = None,
                     anyway: Mapping[str, bool] | None = None, honest: bool = True) -> list[Context]:
    """Every catalog scenario with a phase in a mode of ``facts``, the backend swapped in and decided by the model
    (``decide``: a ``Decisions`` shared across the report and its advice, so no context is decided twice).
    ``anyway``: ``races_anyway`` per scenario when known (it depends on the modes and locations the backend reads,
    which no proposed change alters); else found for each examined context. ``honest``: find the places an honest
    backend races at (``Context.honest``); without, none is excused that way."""
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
        own_places = {r.place() for r in races} if own is not Verdict.PROVED else set()
        if honest and any(r.place() not in own_places for r in c.report.races):  # only where it blames the backend
            c.honest = _honest_memo(decide, s, b, facts)
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
