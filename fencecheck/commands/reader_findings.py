"""Deciding what was read: each ``read_outside_declaration`` finding becomes a scenario (the backend as read, its
declaration row, its reads of that mode per site, replayed by a decode runner that resolves the declaration and has
its marker, the scheduler's barrier after ``run_batch``, the tree's own fallback rule), which the reference
protocol runs on the simulator and the SMT model decides (each distinct configuration once: the answer depends on
the configuration alone); both verdicts, the races and whether the two oracles agree are recorded on the finding.
Each scenario cites the source lines it was built from.

Each finding is also decided in every configuration the tree's facts generate (``sglang_source.contexts``: the
document's ``configurations``) that runs a phase of the finding's mode: the configuration as it is (its runners,
algorithm, scheduler and platform class, its other phases), with each phase of that mode run by the backend as read
(its declaration and reads of that mode). Each distinct (configuration, backend configuration, mode) is decided once
by the simulator (and the model when asked); the finding records ``contexts``, one entry per configuration sorted by
name."""

from __future__ import annotations

from fencecheck.files.scenario_io import scenario_from_dict
from fencecheck.sglang_source.algorithms import slug
from fencecheck.verdict import Verdict, oracles_agree
from fencecheck.vocab import ForwardMode


def scenario_dict(finding: dict, backend: dict, index: int, rule: str | None = None) -> dict | None:
    """The scenario of ``finding`` (None when its mode is not one fencecheck's scenarios model), resolved under the
    tree's fallback ``rule`` (``configurations.rule``; the PRE_REPLAY fallback, the earlier one, when not read)."""
    mode = finding["mode"]
    if mode not in ForwardMode.__members__:
        return None
    sites: dict[str, set] = {}
    snapshot = finding.get("declared_by") == "_snapshot_prefill_shared_reads"
    for r in backend["reads"]:
        if r["mode"] == mode:
            # a prefill snapshot is published after the whole eager metadata prep, its in-graph part included
            site = "pre_replay" if snapshot and r["site"] == "in_graph_before_marker" else r["site"]
            sites.setdefault(site, set()).add(r["location"])
    name = f"sglang-{slug(finding['subject'])}-{mode.lower().replace('_', '-')}" + ("-snapshot" if snapshot else "") \
        + (f"-{index}" if index else "")
    cond = f" when {finding['condition']}" if finding.get("condition") else ""
    return {
        "name": name,
        "description": (f"{finding['subject']} as read from the sources: declares {finding['declared']} for {mode}"
                        f"{cond}; its reads of scheduler-shared state in that mode, per site, replayed by a decode "
                        f"graph runner with its marker under the WAR barrier."),
        "cites": [f"{e['file']}:{e['line']}: {e['what']}" for e in finding["evidence"]],
        "resolution": rule or "declaration_only",
        "backends": {finding["subject"]: {"declares": {mode: finding["declared"]},
                                          "reads": {mode: {s: sorted(v) for s, v in sorted(sites.items())}}}},
        "runners": {"target": {}},
        "algorithm": {"name": "none", "publisher": "target",
                      "steps": {"normal": [{"name": mode.lower(), "runner": "target", "mode": mode,
                                            "backend": finding["subject"]}]}},
    }


def _contexts(doc: dict) -> list[tuple[str, dict]]:
    """The configurations the tree's facts generate (``doc["configurations"]``) with the barrier on, as scenario
    tables, sorted by name: where the barrier is off every read races, whatever its declaration (the platform's
    hazard, not the finding's)."""
    from fencecheck.sglang_source.contexts import scenario

    conf = doc.get("configurations") or {}
    rule = conf.get("rule")
    return sorted(((c["name"], scenario(c, rule)) for c in conf.get("configurations", ()) if c["barrier"]),
                  key=lambda x: x[0])


def context_dict(context: dict, data: dict) -> dict | None:
    """``context`` with each phase of the mode of ``data`` (a finding's scenario) run by ``data``'s backend as read
    (None when the context runs no phase of that mode). ``context`` is not changed."""
    (name, backend), = data["backends"].items()
    mode = data["algorithm"]["steps"]["normal"][0]["mode"]
    steps = {k: [dict(ph, backend=name) if ph["mode"] == mode else ph for ph in v]
             for k, v in context["algorithm"]["steps"].items()}
    if not any(ph["mode"] == mode for v in context["algorithm"]["steps"].values() for ph in v):
        return None
    return {**context, "algorithm": {**context["algorithm"], "steps": steps},
            "backends": {**context["backends"], name: backend},
            "name": f"{context['name']}-with-{data['name']}",
            "description": f"{context['name']} with its {mode} phases run by {name} as read from the sources.",
            "cites": list(data.get("cites", ()))}


def _modes(context: dict) -> set[str]:
    return {ph["mode"] for v in context["algorithm"]["steps"].values() for ph in v}


def decide_contexts(doc: dict, built: list[tuple[dict, dict]], contexts: list | None = None,
                    model: str = "flagged") -> None:
    """Sets ``contexts`` on each finding of ``built`` (pairs of finding and scenario table): for each of ``contexts``
    ((name, scenario table) pairs; by default the configurations the tree's facts generate with the barrier on,
    ``_contexts``) that runs a phase of its mode, the simulator's verdict and races there and whether the model agrees
    (``oracles_agree``). ``model``: ``"all"`` asks the model about every configuration, ``"flagged"`` only about those
    where the simulator finds a race (elsewhere ``oracles_agree`` is None: not asked), ``"none"`` about none (the
    simulator alone; ``fencecheck sglang`` without ``--cross-check``). Each distinct configuration is decided once."""
    import json

    from fencecheck.model.check import model_check
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace

    generated = contexts is None
    contexts = _contexts(doc) if contexts is None else contexts
    modes = {cname: _modes(ctx) for cname, ctx in contexts}
    cache: dict[str, dict] = {}
    for f, data in built:
        (backend,) = data["backends"].values()
        mode = data["algorithm"]["steps"]["normal"][0]["mode"]
        bkey = json.dumps(backend, sort_keys=True)  # the backend's name does not change the answer
        rows = []
        for cname, ctx in contexts:
            if mode not in modes[cname]:
                continue
            key = f"{cname}\0{mode}\0{bkey}"
            if key not in cache:
                cdata = context_dict(ctx, data)
                s = scenario_from_dict(cdata, cdata["name"], validate=not generated)
                report = check_trace(run_scenario(s))
                agree = None
                if model == "all" or (model == "flagged" and report.verdict is not Verdict.PROVED):
                    m = model_check(s)
                    agree, _ = oracles_agree((report.verdict, [r.id for r in report.races]), (m.verdict, m.races))
                    agree = agree if m.verdict is not Verdict.UNKNOWN else None
                cache[key] = {"context": cname, "verdict": report.verdict.value,
                              "races": [r.text() for r in sorted({r.key() for r in report.races})],
                              "oracles_agree": agree}
            rows.append(dict(cache[key]))
        f["contexts"] = sorted(rows, key=lambda r: r["context"])


def record_model(target: dict, report, m) -> None:
    """Records on ``target`` (a finding or a read's row) the model's verdict ``m`` beside the simulator's ``report``:
    ``model_verdict``, ``oracles_agree`` (None when the model answers unknown) and, when they differ, why."""
    target["model_verdict"] = m.verdict.value
    agree, why = oracles_agree((report.verdict, [r.id for r in report.races]), (m.verdict, m.races))
    target["oracles_agree"] = agree if m.verdict is not Verdict.UNKNOWN else None
    if not agree and m.verdict is not Verdict.UNKNOWN:
        target["oracles_differ"] = why


def decide(doc: dict, witness: bool = False, contexts: bool = True, context_model: str = "flagged") -> list:
    """Builds and decides a scenario for each finding it can model; sets the finding's ``scenario``, ``verdict`` and
    ``races`` (and ``witness`` when asked) and, unless ``contexts`` is false, ``contexts`` (``decide_contexts``).
    Returns the scenarios built, in the findings' order."""
    import json

    from fencecheck.model.check import model_check
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace

    backends = {f"{b['file']}:{b['line']}": b for b in doc["backends"]}
    built, used, models, pairs = [], {}, {}, []
    for f in doc["findings"]:
        if f["kind"] != "read_outside_declaration":
            continue
        key = (f["subject"], f["mode"])
        data = scenario_dict(f, backends[f["subject_at"]], used.get(key, 0),
                             (doc.get("configurations") or {}).get("rule"))
        used[key] = used.get(key, 0) + 1
        if data is None:
            f["why"] = (f"no scenario: forward mode {f['mode']} is not one fencecheck's vocabulary knows "
                        "(fencecheck/vocab.py ForwardMode)")
            continue
        s = scenario_from_dict(data, data["name"])
        trace = run_scenario(s)
        report = check_trace(trace)
        f["scenario"] = s.name
        f["verdict"] = report.verdict.value
        f["races"] = [r.text() for r in sorted({r.key() for r in report.races})]
        config = json.dumps([list(data["backends"].values()), data["algorithm"]["steps"]["normal"][0]["mode"]],
                            sort_keys=True)  # the backend's name does not change the answer
        if config not in models:
            models[config] = model_check(s)
        record_model(f, report, models[config])
        if witness and report.verdict is Verdict.COUNTEREXAMPLE:
            from fencecheck.reference.sim.hb import analyze
            from fencecheck.reference.sim.interleave import witnesses

            races = report.distinct()
            f["witness"] = [
                {"race": race.key().text(), "schedule": schedule,
                 "stale_read": None if o is None else {"step": o.step, "phase": o.phase, "site": o.site,
                                                       "location": o.location, "seen": o.seen}}
                for race, (schedule, o) in zip(races, witnesses(analyze(trace), races))]
        built.append(s)
        pairs.append((f, data))
    if contexts:
        decide_contexts(doc, pairs, model=context_model)
    return built
