"""``fencecheck verify``: one backend (plain, composite or hybrid), every context (docs/verify.md).

The backend's facts (model/backend_facts.py) are checked in its symbolic contexts (model/symbolic_contexts.py) and
its catalog contexts (model/catalog_contexts.py: the backend swapped in, model/swap.py; each context decided once,
model/decision.py; the change outside the backend, model/component_changes.py); then the verified advice
(model/advice.py). The report: model/verify_report.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from fencecheck.verdict import Verdict
from fencecheck.scenario import Scenario

from .advice import advise
from .backend_facts import child_findings, mode_facts, root_name
from .catalog_contexts import catalog_contexts
from .decision import Decisions
from .solver import Budget
from .symbolic_contexts import BOUNDS, SymbolicVerdicts, symbolic
from .symconfig import Bounds
from .verify_report import VerifyReport


@dataclass
class Shared:
    """What the ``verify`` calls of one report share (``verify --sglang``'s backend files, one per combination of a
    class's conditional rows, which differ in a few modes): each concrete context decided once (``Decisions``), each
    proposed change's symbolic check asked once (``SymbolicVerdicts``), and the symbolic family of each backend's
    facts. Every entry is a function of its key alone (the scenario's decision key, the facts' text, with the
    bounds and the budget fixed here), so a report is the same with or without it."""

    bounds: Bounds = BOUNDS
    budget: Budget = field(default_factory=Budget)
    jobs: int = 1
    decide: Decisions = field(default_factory=Decisions)
    family: dict = field(default_factory=dict)  # (name, repr(facts)) -> symbolic(...)
    verdicts: SymbolicVerdicts | None = None

    def __post_init__(self):
        if self.verdicts is None:
            self.verdicts = SymbolicVerdicts(self.bounds, self.budget, self.jobs)

    def symbolic(self, facts, name: str):
        k = (name, repr(facts))
        if k not in self.family:
            self.family[k] = symbolic(facts, self.bounds, self.budget, name)
        return self.family[k]

    def close(self) -> None:
        self.verdicts.close()


def verify(b, catalog: list[Scenario], budget: Budget = Budget(), bounds: Bounds = BOUNDS,
           tick: Callable[[str], None] | None = None, advice: bool = True, jobs: int = 1,
           shared: Shared | None = None) -> VerifyReport:
    """Check backend ``b`` (a ``scenario_io.BackendFile`` or a lone ``BackendSpec``) in every context. ``jobs``:
    worker processes for the symbolic checks of the proposed changes (the report is the same for any number).
    ``shared``: the answers of the other backend files of the same report (its bounds, budget and jobs are used;
    the caller closes it), else a ``Shared`` of this call's own."""
    own = shared is None
    shared = Shared(bounds, budget, jobs) if own else shared
    try:
        return _verify(b, catalog, tick, advice, shared)
    finally:
        if own:
            shared.close()


def _verify(b, catalog, tick, advice: bool, shared: Shared) -> VerifyReport:
    bounds, budget, decide, verdicts = shared.bounds, shared.budget, shared.decide, shared.verdicts
    facts = mode_facts(b)
    report = VerifyReport(root_name(b), facts, bounds=bounds)
    if facts:
        verdict, ce, reason = shared.symbolic(facts, f"verify-{root_name(b)}")
        report.verdict, report.counterexample, report.reason = verdict, ce, reason
    else:
        report.verdict, report.reason = Verdict.UNKNOWN, "the backend declares and reads nothing"
    if tick is not None:
        tick("symbolic")
    report.contexts = catalog_contexts(b, facts, catalog, budget, tick, decide=decide)
    report.findings = child_findings(b, facts)
    for f in facts:
        for site, loc in f.outside():
            who = "/".join(f.readers.get((site, loc), ()))
            report.findings.append(f"{f.mode.value}: {who} reads {loc} at {site.value}, outside what "
                                   f"{f.declared.name} (declared by {f.declared_by}) covers")
    if advice:
        if shared.jobs > 1:
            wanted: list = []
            advise(b, report, catalog, bounds, budget, None, decide, plan=wanted)
            verdicts.prefetch(wanted)
        report.advice = advise(b, report, catalog, bounds, budget, tick, decide, verdicts)
    return report
