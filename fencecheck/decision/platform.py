"""Backends bound to one platform by their code (``backend_platforms``: a module on their MRO imports that platform's
own package unconditionally, ``device.platform_binding``), on a platform whose decode graph runner has no in-graph
marker (``platforms``, read from the tree): each of their findings that declares ``IN_REPLAY`` is decided again with
the runner as that platform has it (no marker, so the declaration resolves by the tree's no-marker fallback), by the
simulator and the model. Proved by both, the finding's reads become not findings, their ``why`` citing the binding, the
marker's absence, the fallback and the scenario; a race leaves the finding (a fallback to ``PRE_REPLAY`` races: the
``no_marker_fallback`` finding says so for the whole platform).

Runs before the findings are decided, as ``reader_replay`` does."""

from __future__ import annotations

from fencecheck.decision.replay import not_findings_of, proved, with_not_findings
from fencecheck.files.scenario_io import scenario_from_dict
from fencecheck.sglang_source.extract import Extraction


def demote_platform_bound(ex: Extraction) -> tuple[Extraction, list]:
    """``ex`` with the ``IN_REPLAY`` findings of the backends bound to a platform without the marker moved to its not
    findings where their scenario on that platform is proved, and those scenarios."""
    from fencecheck.decision.findings import scenario_dict, tree_rule

    bound = {f"{r['file']}:{r['line']}": r for r in ex.facts.get("backend_platforms") or ()}
    plats = {p["platform"]: p for p in (ex.facts.get("platforms") or {}).get("platforms", ())}
    rule = tree_rule(ex)
    if not bound or rule is None:
        return ex, []
    backends = {b.at: b for b in ex.backends}
    keep, moved, built = [], [], []
    for f in ex.findings:
        row = bound.get(f.subject_at)
        plat = plats.get(row["platform"]) if row else None
        if f.kind != "read_outside_declaration" or f.declared != "IN_REPLAY" or plat is None \
                or plat["marker"] != "absent" or not plat.get("fallback"):
            keep.append(f)
            continue
        data = scenario_dict(f, backends[f.subject_at], 0, rule)
        if data is None:
            keep.append(f)
            continue
        data["name"] += f"-{row['platform']}-no-marker"
        data["runners"] = {"target": {"marker": False}}
        s = scenario_from_dict(data, data["name"])
        if not proved(s):
            keep.append(f)
            continue
        fb = plat["fallback"]
        why = (f"on {row['platform']} only: {row['why']} ({row['at']['file']}:{row['at']['line']}); "
               f"{row['platform']} has no in-graph marker ({plat['marker_why']}), so its decode graph runner "
               f"resolves IN_REPLAY by the fallback to {fb['end']} ({fb['rule']}, {fb['file']}:{fb['line']}); "
               f"scenario {s.name}: proved")
        moved += not_findings_of(f, why)
        built.append(s)
    return with_not_findings(ex, keep, moved), built
