"""Deciding what was read: each ``read_outside_declaration`` finding becomes a scenario (the backend as read, its
declaration row, its reads of that mode per site, replayed by a decode runner that resolves the declaration and has
its marker, the scheduler's barrier after ``run_batch``, the release's POST_REPLAY fallback), which the reference
protocol runs on the simulator and the SMT model decides (each distinct configuration once: the answer depends on
the configuration alone); both verdicts, the races and whether the two oracles agree are recorded on the finding.
Each scenario cites the source lines it was built from.

Each finding is also decided in every context of the release catalog (``fencecheck/catalog/sglang-0.5.23``) that
runs a phase of the finding's mode: the context as it is (its runners, algorithm, scheduler and settings, its other
phases), with each phase of that mode run by the backend as read (its declaration and reads of that mode). Each
distinct (context, backend configuration, mode) is decided once by the simulator and the model; the finding's
decision records ``contexts``, one entry per context sorted by name."""

from __future__ import annotations

import re
from dataclasses import replace

from fencecheck.files.scenario_io import scenario_from_dict
from fencecheck.sglang_source.extract import Extraction
from fencecheck.sglang_source.findings import (
    ContextVerdict,
    Decision,
    ModelAnswer,
    ReadOutsideDeclaration,
    StaleRead,
    Witness,
)
from fencecheck.sglang_source.records import Backend
from fencecheck.verdict import Verdict, oracles_agree
from fencecheck.vocab import ForwardMode


def slug(text: str) -> str:
    """A class or map name as a scenario-name fragment: ``DSparkWorkerV2`` -> ``d-spark-worker-v2`` (the reader's
    scenario names, backend findings' and worker reads' alike)."""
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", text)
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def scenario_dict(finding: ReadOutsideDeclaration, backend: Backend, index: int) -> dict | None:
    """The scenario of ``finding`` (None when its mode is not one fencecheck's scenarios model)."""
    mode = finding.mode
    if mode not in ForwardMode.__members__:
        return None
    sites: dict[str, set] = {}
    snapshot = finding.declared_by == "_snapshot_prefill_shared_reads"
    for r in backend.reads:
        if r.mode == mode:
            # a prefill snapshot is published after the whole eager metadata prep, its in-graph part included
            site = "pre_replay" if snapshot and r.site == "in_graph_before_marker" else r.site
            sites.setdefault(site, set()).add(r.location)
    name = f"sglang-{slug(finding.subject)}-{mode.lower().replace('_', '-')}" + ("-snapshot" if snapshot else "") \
        + (f"-{index}" if index else "")
    cond = f" when {finding.condition}" if finding.conditions else ""
    return {
        "name": name,
        "description": (f"{finding.subject} as read from the sources: declares {finding.declared} for {mode}"
                        f"{cond}; its reads of scheduler-shared state in that mode, per site, replayed by a decode "
                        f"graph runner with its marker under the WAR barrier."),
        "cites": [f"{e.file}:{e.line}: {e.what}" for e in finding.evidence],
        "resolution": "declaration_only_post_fallback",
        "backends": {finding.subject: {"declares": {mode: finding.declared},
                                       "reads": {mode: {s: sorted(v) for s, v in sorted(sites.items())}}}},
        "runners": {"target": {}},
        "algorithm": {"name": "none", "publisher": "target",
                      "steps": {"normal": [{"name": mode.lower(), "runner": "target", "mode": mode,
                                            "backend": finding.subject}]}},
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


def decide_contexts(built: list[dict], version: str | None = None,
                    model: str = "flagged") -> list[tuple[ContextVerdict, ...]]:
    """For each finding's scenario table in ``built``, its release contexts: for each catalog context of ``version``
    (the release by default) that runs a phase of its mode, the simulator's verdict and races there and whether the
    model agrees (``oracles_agree``), sorted by context. ``model``: ``"all"`` asks the model about every
    configuration, ``"flagged"`` only about those where the simulator finds a race (elsewhere ``oracles_agree`` is
    None: not asked), ``"none"`` about none (the simulator alone; ``fencecheck sglang`` without ``--cross-check``).
    Each distinct configuration is decided once."""
    import json

    from fencecheck.files.catalog import RELEASE
    from fencecheck.model.check import model_check
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace

    contexts = _contexts(version or RELEASE)
    cache: dict[str, ContextVerdict] = {}
    out = []
    for data in built:
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
                cache[key] = ContextVerdict(cname, report.verdict.value, _races(report), agree)
            rows.append(cache[key])
        out.append(tuple(sorted(rows, key=lambda r: r.context)))
    return out


def _races(report) -> tuple[str, ...]:
    """The distinct races of a simulator ``report``, as ``location@phase/site``, sorted."""
    return tuple(r.text() for r in sorted({r.key() for r in report.races}))


def model_answer(report, m) -> ModelAnswer:
    """The model's verdict ``m`` beside the simulator's ``report``: whether they agree (None when the model answers
    unknown) and, when they differ, why."""
    agree, why = oracles_agree((report.verdict, [r.id for r in report.races]), (m.verdict, m.races))
    unknown = m.verdict is Verdict.UNKNOWN
    return ModelAnswer(m.verdict.value, None if unknown else agree, why if not agree and not unknown else None)


def _witnesses(trace, report) -> tuple[Witness, ...]:
    """Each distinct race of ``report`` replayed under its witness interleaving, with the stale read it shows."""
    from fencecheck.reference.sim.hb import analyze
    from fencecheck.reference.sim.interleave import witnesses

    races = report.distinct()
    return tuple(Witness(race.key().text(), tuple(schedule),
                         None if o is None else StaleRead(o.step, o.phase, o.site, o.location, o.seen))
                 for race, (schedule, o) in zip(races, witnesses(analyze(trace), races)))


def decide(ex: Extraction, witness: bool = False, contexts: bool = True,
           context_model: str = "flagged") -> tuple[Extraction, list]:
    """``ex`` with a decision on each ``read_outside_declaration`` finding whose scenario it can model: the scenario's
    name, the simulator's verdict and races, the model's answer (and the witnesses when asked) and, unless
    ``contexts`` is false, its release contexts (``decide_contexts``), or, when its mode is not one fencecheck's
    vocabulary knows, why it has no scenario (``why``); and the scenarios built, in the findings' order."""
    import json

    from fencecheck.model.check import model_check
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace

    backends = {b.at: b for b in ex.backends}
    built, used, models, tables, decided, unmodelled = [], {}, {}, [], {}, {}
    for i, f in enumerate(ex.findings):
        if f.kind != "read_outside_declaration":
            continue
        key = (f.subject, f.mode)
        data = scenario_dict(f, backends[f.subject_at], used.get(key, 0))
        used[key] = used.get(key, 0) + 1
        if data is None:
            unmodelled[i] = (f"no scenario: forward mode {f.mode} is not one fencecheck's vocabulary knows "
                             "(fencecheck/vocab.py ForwardMode)")
            continue
        s = scenario_from_dict(data, data["name"])
        trace = run_scenario(s)
        report = check_trace(trace)
        config = json.dumps([list(data["backends"].values()), data["algorithm"]["steps"]["normal"][0]["mode"]],
                            sort_keys=True)  # the backend's name does not change the answer
        if config not in models:
            models[config] = model_check(s)
        decided[i] = Decision(s.name, report.verdict.value, _races(report), model=model_answer(report, models[config]),
                              witness=_witnesses(trace, report) if witness and report.verdict is Verdict.COUNTEREXAMPLE
                              else None)
        built.append(s)
        tables.append((i, data))
    if contexts:
        for (i, _), rows in zip(tables, decide_contexts([data for _, data in tables], model=context_model)):
            decided[i] = replace(decided[i], contexts=rows)
    findings = tuple(replace(f, decision=decided[i]) if i in decided else
                     replace(f, why=unmodelled[i]) if i in unmodelled else f for i, f in enumerate(ex.findings))
    return replace(ex, findings=findings), built
