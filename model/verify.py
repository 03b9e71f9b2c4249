"""``fencecheck verify``: one backend (plain, composite or hybrid), every context (docs/verify.md).

The backend's facts (model/backend_facts.py) are checked in its symbolic contexts (model/symbolic_contexts.py) and
its catalog contexts (model/catalog_contexts.py: the backend swapped in, model/swap.py; each context decided once,
model/decision.py; the change outside the backend, model/component_changes.py); then the verified advice
(model/advice.py). The report: model/verify_report.py.
"""

from __future__ import annotations

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


def verify(b, catalog: list[Scenario], budget: Budget = Budget(), bounds: Bounds = BOUNDS,
           tick: Callable[[str], None] | None = None, advice: bool = True, jobs: int = 1) -> VerifyReport:
    """Check backend ``b`` (a ``scenario_io.BackendFile`` or a lone ``BackendSpec``) in every context. ``jobs``:
    worker processes for the symbolic checks of the proposed changes (the report is the same for any number)."""
    facts = mode_facts(b)
    report = VerifyReport(root_name(b), facts, bounds=bounds)
    if facts:
        verdict, ce, reason = symbolic(facts, bounds, budget, f"verify-{root_name(b)}")
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
