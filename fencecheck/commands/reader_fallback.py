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

from fencecheck.files.scenario_io import scenario_from_dict
from fencecheck.sglang_source.algorithms import slug

MODES = ("DECODE", "TARGET_VERIFY")


def _declares_in_replay(v) -> bool:
    return v == "IN_REPLAY" if isinstance(v, str) else any(r["end"] == "IN_REPLAY" for r in v)


def candidates(doc: dict) -> list[tuple[dict, dict]]:
    """(finding, scenario table) of each mode where a no-marker platform class resolves by a fallback and a backend
    reads before the marker."""
    conf = doc.get("configurations") or {}
    classes = [c for c in conf.get("platform_classes", ()) if not c["marker"] and c["barrier"]]
    rule = conf.get("rule")
    plats = {p["platform"]: p for p in (doc.get("platforms") or {}).get("platforms", ())}
    moved = {(n["subject"], n["mode"]) for n in doc.get("not_findings", ()) if n["why"].startswith("never resolved")}
    out = []
    classes = [c for c in classes if any(plats.get(p, {}).get("fallback") for p in c["platforms"])]
    if not classes:
        return out
    row = next(plats[p] for p in classes[0]["platforms"] if plats.get(p, {}).get("fallback"))
    fb, runner = row["fallback"], row["decode_graph_runner"]
    cond = " or ".join(f"platform {'/'.join(c['platforms'])}" + (f" with {' and '.join(c['settings'])}"
                                                                 if c["settings"] else "") for c in classes)
    if True:
        for mode in MODES:
            found = []
            for b in doc["backends"]:
                if (b["class"], mode) in moved or not _declares_in_replay(b["declares"].get(mode, "UNKNOWN")):
                    continue
                early = [r for r in b["reads"] if r["mode"] == mode and r["site"] == "in_graph_before_marker"]
                if early:
                    found.append((min(len(r["conditions"]) for r in early), b["class"], b, early))
            if not found:
                continue
            found.sort(key=lambda x: (x[0], x[1]))
            _, name, b, early = found[0]
            sites: dict[str, set] = {}
            for r in b["reads"]:  # the reads the fallback decides: those a marker would cover
                if r["mode"] == mode and r["site"] in ("pre_replay", "in_graph_before_marker"):
                    sites.setdefault(r["site"], set()).add(r["location"])
            gate = (doc.get("fence") or {}).get("gate") or {}
            marker = (doc.get("platforms") or {}).get("marker") or {}
            evidence = [{"file": fb["file"], "line": fb["line"],
                         "what": f"{fb['function']} resolves IN_REPLAY without a marker to {fb['end']} ({fb['rule']})"}]
            for s in marker.get("sites", ()):
                for w in (s.get("factory") or {}).get("none_when", ()):
                    evidence.append({"file": s["factory"]["file"], "line": w["line"],
                                     "what": f"no marker: {s['factory']['function']} returns None when "
                                             + (w.get("test") or f"{w.get('call')} raises {w.get('raises')}")})
            if gate.get("file"):
                evidence.append({"file": gate["file"], "line": gate["line"],
                                 "what": f"the barrier is on when {gate['expr']}: no marker and the barrier on "
                                         f"for {cond}"})
            for _, other, ob, oe in found:
                r = oe[0]
                evidence.append({"file": r["file"], "line": r["line"],
                                 "what": f"{other} declares IN_REPLAY for {mode} and reads {r['location']} in the graph "
                                         "before the marker via " + " -> ".join(v.split(" (")[0] for v in r["via"])
                                         + (f" (when {' and '.join(r['conditions'])})" if r["conditions"] else "")})
            f = {"kind": "no_marker_fallback", "subject": runner["class"],
                 "subject_at": f"{runner['file']}:{runner['line']}", "mode": mode, "status": "plausible",
                 "declared": "IN_REPLAY", "condition": cond, "evidence": evidence, "scenario": None,
                 "backends": [x[1] for x in found]}
            declares = {mode: "IN_REPLAY"}
            data = {"name": f"sglang-{slug(runner['class'])}-no-marker-{mode.lower().replace('_', '-')}",
                    "description": f"{runner['class']} without its in-graph marker ({cond}): {name} declares "
                                   f"IN_REPLAY for {mode} and reads in the graph before the marker; the runner "
                                   f"resolves by its fallback ({fb['end']}).",
                    "cites": [f"{e['file']}:{e['line']}: {e['what']}" for e in evidence],
                    "resolution": rule or "declaration_only",
                    "backends": {name: {"declares": declares,
                                        "reads": {mode: {s: sorted(v) for s, v in sorted(sites.items())}}}},
                    "runners": {"target": {"marker": False, "fresh_events": True}},
                    "algorithm": {"name": "none", "publisher": "target",
                                  "steps": {"normal": [{"name": mode.lower(), "runner": "target", "mode": mode,
                                                        "backend": name}]}}}
            out.append((f, data))
    return out


def decide_fallback(doc: dict, model: bool = True) -> list:
    """Decides each candidate; appends the ones that race to ``doc["findings"]``. Returns their scenarios."""
    from fencecheck.commands.reader_findings import record_model
    from fencecheck.model.check import model_check
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace
    from fencecheck.verdict import Verdict

    built = []
    for f, data in candidates(doc):
        s = scenario_from_dict(data, data["name"])
        report = check_trace(run_scenario(s))
        if report.verdict is not Verdict.COUNTEREXAMPLE:
            continue
        f.update(scenario=s.name, verdict=report.verdict.value,
                 races=[r.text() for r in sorted({r.key() for r in report.races})])
        if model:
            record_model(f, report, model_check(s))
        doc["findings"].append(f)
        built.append(s)
    return built
