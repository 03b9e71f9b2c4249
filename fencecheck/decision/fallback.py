"""The no-marker fallback as a finding: where the barrier can be on (by default or with a setting) on a platform
whose decode graph runner has no in-graph marker, an ``IN_REPLAY`` declaration resolves by the runner's fallback
(``runners.Fallback``). A fallback to ``PRE_REPLAY`` publishes before the replay, so a backend that honestly declares
``IN_REPLAY`` and reads in the graph before the marker (``in_graph_before_marker``) races there; a fallback to
``POST_REPLAY`` covers it.

For each graph-replayed mode, the backends declaring ``IN_REPLAY`` (in some row) with reads at
``in_graph_before_marker`` are collected; one of them (the one whose reads depend on the fewest conditions, then by
name) is decided on a scenario of the configuration: its reads, a decode runner without the marker, the tree's
rule, the barrier on. A race is a ``no_marker_fallback`` finding (``plausible``: it needs the platform and, where the
barrier is off by default there, the setting), its subject the runner, its evidence the fallback, the marker's
factory, the gate and each such backend's first in-graph read; no race is no finding."""

from __future__ import annotations

from dataclasses import replace

from fencecheck.decision.findings import _races, model_answer
from fencecheck.files.scenario_io import scenario_from_dict
from fencecheck.sglang_source.extract import Extraction
from fencecheck.sglang_source.findings import Decision, NoMarkerFallback
from fencecheck.sglang_source.records import Backend, Evidence, slug

MODES = ("DECODE", "TARGET_VERIFY")


def _declares_in_replay(b: Backend, mode: str) -> bool:
    decl = dict(b.declares).get(mode)
    return decl is not None and any(r.end == "IN_REPLAY" for r in decl.rows)


def candidates(ex: Extraction) -> list[tuple[NoMarkerFallback, dict]]:
    """(finding, scenario table) of each mode where a no-marker platform class resolves by a fallback and a backend
    reads before the marker."""
    conf = ex.facts.get("configurations") or {}
    rule = conf.get("rule")
    plats = {p["platform"]: p for p in (ex.facts.get("platforms") or {}).get("platforms", ())}
    classes = [c for c in conf.get("platform_classes", ()) if not c["marker"] and c["barrier"]
               and any(plats.get(p, {}).get("fallback") for p in c["platforms"])]
    if not classes:
        return []
    moved = {(n.subject, n.mode) for n in ex.not_findings if n.why.startswith("never resolved")}
    row = next(plats[p] for p in classes[0]["platforms"] if plats.get(p, {}).get("fallback"))
    fb, runner = row["fallback"], row["decode_graph_runner"]
    cond = " or ".join(f"platform {'/'.join(c['platforms'])}" + (f" with {' and '.join(c['settings'])}"
                                                                 if c["settings"] else "") for c in classes)
    gate = (ex.facts.get("fence") or {}).get("gate") or {}
    marker = (ex.facts.get("platforms") or {}).get("marker") or {}
    out = []
    for mode in MODES:
        found = []
        for b in ex.backends:
            if (b.cls, mode) in moved or not _declares_in_replay(b, mode):
                continue
            early = [r for r in b.reads if r.mode == mode and r.site == "in_graph_before_marker"]
            if early:
                found.append((min(len(r.conditions) for r in early), b.cls, b, early))
        if not found:
            continue
        found.sort(key=lambda x: (x[0], x[1]))
        _, name, b, _ = found[0]
        sites: dict[str, set] = {}
        for r in b.reads:  # the reads the fallback decides: those a marker would cover
            if r.mode == mode and r.site in ("pre_replay", "in_graph_before_marker"):
                sites.setdefault(r.site, set()).add(r.location)
        evidence = [Evidence(fb["file"], fb["line"],
                             f"{fb['function']} resolves IN_REPLAY without a marker to {fb['end']} ({fb['rule']})")]
        for site in marker.get("sites", ()):
            for w in (site.get("factory") or {}).get("none_when", ()):
                evidence.append(Evidence(site["factory"]["file"], w["line"],
                                         f"no marker: {site['factory']['function']} returns None when "
                                         + (w.get("test") or f"{w.get('call')} raises {w.get('raises')}")))
        if gate.get("file"):
            evidence.append(Evidence(gate["file"], gate["line"], f"the barrier is on when {gate['expr']}: no marker "
                                                                 f"and the barrier on for {cond}"))
        for _, other, _, oe in found:
            r = oe[0]
            evidence.append(Evidence(r.file, r.line, f"{other} declares IN_REPLAY for {mode} and reads {r.location} "
                                     "in the graph before the marker via "
                                     + " -> ".join(v.split(" (")[0] for v in r.via)
                                     + (f" (when {' and '.join(r.conditions)})" if r.conditions else "")))
        f = NoMarkerFallback(runner["class"], f"{runner['file']}:{runner['line']}", mode, "plausible", cond,
                             tuple(x[1] for x in found), tuple(evidence))
        data = {"name": f"sglang-{slug(runner['class'])}-no-marker-{mode.lower().replace('_', '-')}",
                "description": f"{runner['class']} without its in-graph marker ({cond}): {name} declares "
                               f"IN_REPLAY for {mode} and reads in the graph before the marker; the runner "
                               f"resolves by its fallback ({fb['end']}).",
                "cites": [f"{e.file}:{e.line}: {e.what}" for e in evidence],
                "resolution": rule or "declaration_only",
                "backends": {name: {"declares": {mode: "IN_REPLAY"},
                                    "reads": {mode: {s: sorted(v) for s, v in sorted(sites.items())}}}},
                "runners": {"target": {"marker": False, "fresh_events": True}},
                "algorithm": {"name": "none", "publisher": "target",
                              "steps": {"normal": [{"name": mode.lower(), "runner": "target", "mode": mode,
                                                    "backend": name}]}}}
        out.append((f, data))
    return out


def decide_fallback(ex: Extraction, model: bool = True) -> tuple[Extraction, list]:
    """``ex`` with each candidate that races appended to its findings (decided by the simulator, and the model when
    ``model``), and their scenarios."""
    from fencecheck.model.check import model_check
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace
    from fencecheck.verdict import Verdict

    built, found = [], []
    for f, data in candidates(ex):
        s = scenario_from_dict(data, data["name"])
        report = check_trace(run_scenario(s))
        if report.verdict is not Verdict.COUNTEREXAMPLE:
            continue
        found.append(replace(f, decision=Decision(s.name, report.verdict.value, _races(report),
                                                  model=model_answer(report, model_check(s)) if model else None)))
        built.append(s)
    return replace(ex, findings=ex.findings + tuple(found)), built
