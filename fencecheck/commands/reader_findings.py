"""Deciding what was read: each ``read_outside_declaration`` finding becomes a scenario (the backend as read, its
declaration row, its reads of that mode per site, replayed by a decode runner that resolves the declaration and has
its marker, the scheduler's barrier after ``run_batch``, the release's POST_REPLAY fallback), which the reference
protocol runs on the simulator and the SMT model decides (each distinct configuration once: the answer depends on
the configuration alone); both verdicts, the races and whether the two oracles agree are recorded on the finding.
Each scenario cites the source lines it was built from.

Each finding is also decided in every context of the release catalog (``fencecheck/catalog/sglang-0.5.23``) that
runs a phase of the finding's mode: the context as it is (its runners, algorithm, scheduler and settings, its other
phases), with each phase of that mode run by the backend as read (its declaration and reads of that mode). Each
distinct (context, backend configuration, mode) is decided once by the simulator and the model; the finding records
``contexts``, one entry per context sorted by name."""

from __future__ import annotations

from fencecheck.files.scenario_io import scenario_from_dict
from fencecheck.sglang_source.algorithms import slug
from fencecheck.verdict import Verdict, oracles_agree
from fencecheck.vocab import ForwardMode


def scenario_dict(finding: dict, backend: dict, index: int) -> dict | None:
    """The scenario of ``finding`` (None when its mode is not one fencecheck's scenarios model)."""
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
        "resolution": "declaration_only_post_fallback",
        "backends": {finding["subject"]: {"declares": {mode: finding["declared"]},
                                          "reads": {mode: {s: sorted(v) for s, v in sorted(sites.items())}}}},
        "runners": {"target": {}},
        "algorithm": {"name": "none", "publisher": "target",
                      "steps": {"normal": [{"name": mode.lower(), "runner": "target", "mode": mode,
                                            "backend": finding["subject"]}]}},
    }


def _contexts(version: str) -> list[tuple[str, dict]]:
    """The catalog's contexts of ``version`` as scenario tables (their expectations dropped), sorted by name."""
    import tomllib

    from fencecheck.files.catalog import catalog_paths

    out = []
    for p in catalog_paths(version):
        d = tomllib.loads(p.read_text(encoding="utf-8"))
        d.pop("expect", None)
        out.append((p.name[:-len(".toml")], d))
    return out


def context_dict(context: dict, data: dict) -> dict | None:
    """``context`` with each phase of the mode of ``data`` (a finding's scenario) run by ``data``'s backend as read
    (None when the context runs no phase of that mode)."""
    import copy

    (name, backend), = data["backends"].items()
    mode = data["algorithm"]["steps"]["normal"][0]["mode"]
    out = copy.deepcopy(context)
    hit = False
    for phases in out["algorithm"]["steps"].values():
        for ph in phases:
            if ph["mode"] == mode:
                ph["backend"] = name
                hit = True
    if not hit:
        return None
    out["backends"] = {**out["backends"], name: copy.deepcopy(backend)}
    out["name"] = f"{context['name']}-with-{data['name']}"
    out["description"] = f"{context['name']} with its {mode} phases run by {name} as read from the sources."
    out["cites"] = list(data.get("cites", ()))
    return out


def decide_contexts(doc: dict, built: list[tuple[dict, dict]], version: str | None = None,
                    model: str = "flagged") -> None:
    """Sets ``contexts`` on each finding of ``built`` (pairs of finding and scenario table): for each catalog context
    of ``version`` (the release by default) that runs a phase of its mode, the simulator's verdict and races there and
    whether the model agrees (``oracles_agree``). ``model``: ``"all"`` asks the model about every configuration,
    ``"flagged"`` only about those where the simulator finds a race (elsewhere ``oracles_agree`` is None: not asked),
    ``"none"`` about none (the simulator alone; ``fencecheck sglang`` without ``--cross-check``).
    Each distinct configuration is decided once."""
    import json

    from fencecheck.files.catalog import RELEASE
    from fencecheck.model.check import model_check
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace

    contexts = _contexts(version or RELEASE)
    cache: dict[str, dict] = {}
    for f, data in built:
        (backend,) = data["backends"].values()
        mode = data["algorithm"]["steps"]["normal"][0]["mode"]
        rows = []
        for cname, ctx in contexts:
            cdata = context_dict(ctx, data)
            if cdata is None:
                continue
            key = json.dumps([cname, backend, mode], sort_keys=True)  # the backend's name does not change the answer
            if key not in cache:
                s = scenario_from_dict(cdata, cdata["name"])
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
        data = scenario_dict(f, backends[f["subject_at"]], used.get(key, 0))
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
