"""Deciding the speculative workers' reads after the publisher: each read's scenario (built by ``algorithms``) is run
by the simulator (each scenario once) and, when asked, checked by the SMT model; ``algorithms.settle`` sets each
read's status, and the reads that race join the document's ``findings`` (kind ``worker_read_after_publish``)."""

from __future__ import annotations

from fencecheck.commands.reader_findings import record_model
from fencecheck.model.check import model_check
from fencecheck.reference.run import run_scenario
from fencecheck.reference.sim.races import check_trace
from fencecheck.sglang_source.algorithms import findings, settle
from fencecheck.vocab import WORKER_SITE


def decide_worker_reads(doc: dict, scenarios: dict, model: bool = False) -> list:
    """Decides every pending worker read of ``doc["algorithms"]`` on its scenario in ``scenarios`` (name ->
    Scenario, ``Extraction.algorithm_scenarios``), appends the findings to ``doc["findings"]`` and, with ``model``,
    records ``model_verdict`` and ``oracles_agree`` (None when the model answers unknown) on each decided read and
    finding. Returns the scenarios of the findings, each once, by name."""
    sims, models = {}, {}
    for a in doc.get("algorithms", ()):
        for row in a["reads_after_publisher"]:
            f = row["finding"]
            name = f and f.get("scenario")
            if name not in scenarios or f.get("verdict") is not None:
                continue
            s = scenarios[name]
            if name not in sims:
                sims[name] = check_trace(run_scenario(s))
            report = sims[name]
            last = s.algorithm.steps[next(iter(s.algorithm.steps))][-1].name
            at_read = any(r.location == row["location"] and r.phase == last and r.site == WORKER_SITE
                          for r in (x.key() for x in report.races))
            settle(row, s, report.verdict.value, sorted({x.key().text() for x in report.races}), at_read)
            if model:
                if name not in models:
                    models[name] = model_check(s)
                for target in [x for x in (row, row["finding"]) if x is not None and x.get("scenario") == name]:
                    record_model(target, report, models[name])
    added = findings(doc.get("algorithms", ()))
    doc["findings"] += added
    return [scenarios[n] for n in dict.fromkeys(f["scenario"] for f in added if f.get("scenario") in scenarios)]
