"""``fencecheck verify``: one backend, every context.

Symbolic contexts: every configuration of the main theorem's family (its assumptions, except that declarations must
be honest) in which some phases run this backend, with its declaration and reads for their mode, and the other
phases run any honest backend. Catalog contexts: each race-free catalog scenario with this backend swapped into every
phase whose mode it covers. Advice: where a declaration is later than its reads need, the overlap given away.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import z3

from fencecheck.report import Verdict
from fencecheck.scenario import ANY_MODE, BackendSpec, Scenario
from fencecheck.vocab import COVERED_SITES, ForwardMode, ReadSite, SharedReadEnds, base_shared_read_ends

from . import assumptions as A
from .check import ModelReport, model_check
from .concrete import mode_class
from .counterexample import Counterexample, search_with
from .program import build
from .solver import Budget, fresh_context
from .symconfig import SITES, Bounds, make_config

BOUNDS = Bounds(steps=2, phases=4, runners=3)


@dataclass
class ModeFacts:
    mode: ForwardMode
    declared: SharedReadEnds
    sites: dict[ReadSite, tuple[str, ...]]

    @property
    def honest(self) -> bool:
        return set(self.sites) <= COVERED_SITES[self.declared]

    def earliest(self) -> SharedReadEnds:
        """The earliest declaration whose covered sites hold every site read."""
        for d in (SharedReadEnds.PRE_REPLAY, SharedReadEnds.IN_REPLAY, SharedReadEnds.POST_REPLAY):
            if set(self.sites) <= COVERED_SITES[d]:
                return d
        return SharedReadEnds.UNKNOWN


@dataclass
class VerifyReport:
    backend: str
    modes: list[ModeFacts]
    verdict: Verdict = Verdict.UNKNOWN
    reason: str = ""
    counterexample: Counterexample | None = None
    contexts: list[ModelReport] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)

    @property
    def safe(self) -> bool:
        return self.verdict is Verdict.PROVED and all(c.safe for c in self.contexts)


def mode_facts(b: BackendSpec) -> list[ModeFacts]:
    """The modes the backend speaks for (declared or read; all modes when it reads under '*')."""
    modes = set(b.declares)
    for key in b.reads:
        modes |= set(ForwardMode) if key == ANY_MODE else {ForwardMode(key)}
    out = []
    for mode in sorted(modes, key=lambda m: list(ForwardMode).index(m)):
        declared = b.declares.get(mode, base_shared_read_ends(mode))
        sites = b.reads.get(mode.value, b.reads.get(ANY_MODE, {}))
        out.append(ModeFacts(mode, declared, {s: tuple(v) for s, v in sites.items() if v}))
    return out


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
    names = tuple(a for a in A.BY_NAME if a != "honest_declarations")
    ctx = fresh_context()

    def setup(b: Bounds):
        cfg = make_config(b, ctx=ctx)
        prog = build(cfg)
        per_phase = []
        uses_any = []
        for n, step in enumerate(cfg.phases):
            for i, p in enumerate(step):
                u = z3.Bool(f"uses.s{n}.p{i}", ctx)
                per_phase += [z3.Implies(u, _uses(p, facts, loc)), z3.Implies(z3.Not(u), _honest(p))]
                uses_any.append(z3.And(p.active, u))
        constraints = [*cfg.domain, *prog.constraints, *A.constraints(cfg, prog, names), *per_phase,
                       z3.Or(*uses_any), prog.any_race()]
        return cfg, prog, constraints

    return search_with(bounds, setup, budget, name)


def swap_into(s: Scenario, b: BackendSpec, modes: set[ForwardMode]) -> Scenario | None:
    """``s`` with backend ``b`` in every phase whose mode it covers (None if no phase is in such a mode)."""
    name = f"verify:{b.name}"
    backend = dataclasses.replace(b, name=name, children=(), delegate={})
    hit = False
    steps = {}
    for kind, phases in s.algorithm.steps.items():
        new = []
        for p in phases:
            if p.mode in modes:
                hit = True
                p = dataclasses.replace(p, backend=name)
            new.append(p)
        steps[kind] = tuple(new)
    if not hit:
        return None
    return s.replace(name=f"{s.name}+{b.name}", backends={**s.backends, name: backend},
                     algorithm=dataclasses.replace(s.algorithm, steps=steps), expect=None)


def verify(b: BackendSpec, catalog: list[Scenario], budget: Budget = Budget()) -> VerifyReport:
    facts = mode_facts(b)
    report = VerifyReport(b.name, facts)
    if facts:
        verdict, ce, reason = symbolic(facts, budget=budget, name=f"verify-{b.name}")
        report.verdict, report.counterexample, report.reason = verdict, ce, reason
    else:
        report.verdict, report.reason = Verdict.UNKNOWN, "the backend declares and reads nothing"
    modes = {f.mode for f in facts}
    for s in catalog:
        if s.expect is not None and s.expect.verdict is not Verdict.PROVED:
            continue  # a context that races already says nothing about this backend
        swapped = swap_into(s, b, modes)
        if swapped is not None:
            report.contexts.append(model_check(swapped, budget=budget))
    for f in facts:
        early = f.earliest()
        if f.honest and early < f.declared and f.declared is not SharedReadEnds.UNKNOWN:
            report.advice.append(
                f"{f.mode.value}: declares {f.declared.name} but its reads end at "
                f"{', '.join(s.value for s in f.sites) or 'no site'}; {early.name} would publish earlier and give "
                f"back the overlap between there and the {f.declared.name} publish point"
            )
        if f.declared is SharedReadEnds.UNKNOWN and f.sites:
            report.advice.append(
                f"{f.mode.value}: UNKNOWN (unaudited) takes the coarse fence only while the mailbox is empty; "
                f"its reads fit {early.name}, which would publish an event of its own"
            )
    return report
