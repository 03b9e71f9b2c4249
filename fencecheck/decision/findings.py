"""Deciding what was read: each ``read_outside_declaration`` finding becomes a scenario (the backend as read, its
declaration row, its reads of that mode per site, replayed by a decode runner that resolves the declaration and has
its marker, the scheduler's barrier after ``run_batch``, the tree's own no-marker fallback rule), which the reference
protocol runs on the simulator and the SMT model decides (each distinct configuration once: the answer depends on
the configuration alone); both verdicts, the races and whether the two oracles agree are recorded on the finding.
Each scenario cites the source lines it was built from.

Each finding is also decided in every configuration the tree's facts generate (``sglang_source.contexts``: the
document's ``configurations``) that runs a phase of the finding's mode with the barrier on: the configuration as it
is (its runners, algorithm, scheduler and platform class, its other phases), with each phase of that mode run by the
backend as read (its declaration and reads of that mode). Each distinct (configuration, backend configuration, mode)
is decided once by the simulator (and the model when asked); the finding's decision records ``contexts``, one entry
per configuration sorted by name."""

from __future__ import annotations

from dataclasses import replace

from fencecheck.files.scenario_io import scenario_from_dict
from fencecheck.sglang_source.extract import Extraction
from fencecheck.sglang_source.findings import (
    ContextVerdict,
    Decision,
    Fix,
    Reach,
    ModelAnswer,
    ReadOutsideDeclaration,
    StaleRead,
    Witness,
)
from fencecheck.sglang_source.records import Backend, slug
from fencecheck.verdict import Verdict, oracles_agree
from fencecheck.vocab import ForwardMode


def scenario_dict(finding: ReadOutsideDeclaration, backend: Backend, index: int, rule: str | None = None,
                  eager: str | None = None) -> dict | None:
    """The scenario of ``finding`` (None when its mode is not one fencecheck's scenarios model), resolved under the
    tree's no-marker fallback ``rule`` (``configurations.rule``; the PRE_REPLAY fallback, the earlier one, when the
    tree's rule was not read). ``eager``: the publish policy of the tree's eager runner, for a backend no decode
    graph can replay (``graph_replay.never_replayed``): its phase then runs eagerly on that runner."""
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
    runner = "replayed by a decode graph runner with its marker" if eager is None else \
        "run eagerly (no decode graph can replay the backend) by the tree's eager runner"
    phase = {"name": mode.lower(), "runner": "target", "mode": mode, "backend": finding.subject}
    if eager is not None:
        phase["execution"] = "eager"
    return {
        "name": name,
        "description": (f"{finding.subject} as read from the sources: declares {finding.declared} for {mode}"
                        f"{cond}; its reads of scheduler-shared state in that mode, per site, {runner} under the WAR "
                        f"barrier."),
        "cites": [f"{e.file}:{e.line}: {e.what}" for e in finding.evidence],
        "resolution": rule or "declaration_only",
        "backends": {finding.subject: {"declares": {mode: finding.declared},
                                       "reads": {mode: {s: sorted(v) for s, v in sorted(sites.items())}}}},
        "runners": {"target": {} if eager is None else {"publish": eager}},
        "algorithm": {"name": "none", "publisher": "target", "steps": {"normal": [phase]}},
    }


def tree_rule(ex: Extraction) -> str | None:
    """The no-marker fallback rule read from the tree (``configurations.rule``; None when it was not read)."""
    return (ex.facts.get("configurations") or {}).get("rule")


def generated_contexts(ex: Extraction) -> list[tuple[str, dict]]:
    """The configurations the tree's facts generate (``ex.facts["configurations"]``) with the barrier on, as scenario
    tables, sorted by name: where the barrier is off every read races, whatever its declaration (the platform's
    hazard, not the finding's)."""
    from fencecheck.sglang_source.contexts import scenario

    conf = ex.facts.get("configurations") or {}
    rule = conf.get("rule")
    return sorted(((c["name"], scenario(c, rule)) for c in conf.get("configurations", ()) if c["barrier"]),
                  key=lambda x: x[0])


def context_dict(context: dict, data: dict) -> dict | None:
    """``context`` with each phase of the mode of ``data`` (a finding's scenario) run by ``data``'s backend as read
    (None when the context runs no phase of that mode). ``context`` is not changed."""
    (name, backend), = data["backends"].items()
    mode = data["algorithm"]["steps"]["normal"][0]["mode"]
    if mode not in _modes(context):
        return None
    steps = {k: [dict(ph, backend=name) if ph["mode"] == mode else ph for ph in v]
             for k, v in context["algorithm"]["steps"].items()}
    return {**context, "algorithm": {**context["algorithm"], "steps": steps},
            "backends": {**context["backends"], name: backend},
            "name": f"{context['name']}-with-{data['name']}",
            "description": f"{context['name']} with its {mode} phases run by {name} as read from the sources.",
            "cites": list(data.get("cites", ()))}


def _modes(context: dict) -> set[str]:
    return {ph["mode"] for v in context["algorithm"]["steps"].values() for ph in v}


def decide_contexts(built: list[dict], contexts: list[tuple[str, dict]],
                    model: str = "flagged") -> list[tuple[ContextVerdict, ...]]:
    """For each finding's scenario table in ``built``, its contexts: for each of ``contexts`` ((name, scenario table)
    pairs: the tree's generated configurations, ``generated_contexts``) that runs a phase of its mode, the simulator's
    verdict and races there and whether the model agrees (``oracles_agree``), sorted by context. ``model``:
    ``"all"`` asks the model about every configuration, ``"flagged"`` only about those where the simulator finds a
    race (elsewhere ``oracles_agree`` is None: not asked), ``"none"`` about none (the simulator alone; ``fencecheck
    sglang`` without ``--cross-check``). Each distinct configuration is decided once."""
    import json

    from fencecheck.model.check import model_check
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace

    modes = {cname: _modes(ctx) for cname, ctx in contexts}
    cache: dict[str, ContextVerdict] = {}
    honest_races: dict[str, frozenset] = {}
    out = []
    for data in built:
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
                s = scenario_from_dict(cdata, cdata["name"], validate=False)
                report = check_trace(run_scenario(s))
                agree = None
                if model == "all" or (model == "flagged" and report.verdict is not Verdict.PROVED):
                    m = model_check(s)
                    agree, _ = oracles_agree((report.verdict, [r.id for r in report.races]), (m.verdict, m.races))
                    agree = agree if m.verdict is not Verdict.UNKNOWN else None
                races = _races(report)
                own = False
                if report.verdict is Verdict.COUNTEREXAMPLE:
                    own = set(races) <= _honest_races(honest_races, ctx, cname, mode, backend)
                cache[key] = ContextVerdict(cname, report.verdict.value, races, agree, own)
            rows.append(cache[key])
        out.append(tuple(sorted(rows, key=lambda r: r.context)))
    return out


def _twin(backend: dict, mode: str) -> dict | None:
    """The finding backend's honest twin in ``mode``: the same declaration, reading the same locations only at the
    sites that declaration covers (``vocab.COVERED_SITES``); None when the declaration is not one end."""
    from fencecheck.vocab import COVERED_SITES, SharedReadEnds

    end = backend["declares"].get(mode)
    if end not in SharedReadEnds.__members__:
        return None
    covered = {s.value for s in COVERED_SITES[SharedReadEnds[end]]}
    reads = {site: locs for site, locs in backend["reads"].get(mode, {}).items() if site in covered}
    return {"declares": {mode: end}, "reads": {mode: reads} if reads else {}}


def _honest_races(memo: dict, ctx: dict, cname: str, mode: str, backend: dict) -> frozenset:
    """The races of the configuration ``ctx`` with its ``mode`` phases run by the backend's honest twin
    (``_twin``: the same declaration, reading only where it covers): the races the configuration has with that
    declaration whatever the reads outside it, which the finding (a read outside the declaration) does not bring.
    Once per configuration, mode and twin; nothing (every race the finding's) where the twin cannot be built."""
    import json

    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace

    twin = _twin(backend, mode)
    if twin is None:
        return frozenset()
    key = f"{cname}\0{mode}\0{json.dumps(twin, sort_keys=True)}"
    if key not in memo:
        data = context_dict(ctx, {"name": "twin", "backends": {"twin": twin},
                                  "algorithm": {"steps": {"normal": [{"mode": mode}]}}})
        s = scenario_from_dict(data, data["name"], validate=False)
        memo[key] = frozenset(_races(check_trace(run_scenario(s))))
    return memo[key]


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
    ``contexts`` is false, its generated configurations (``decide_contexts``), or, when its mode is not one fencecheck's
    vocabulary knows, why it has no scenario (``why``); and the scenarios built, in the findings' order."""
    import json

    from fencecheck.model.check import model_check
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace

    backends = {b.at: b for b in ex.backends}
    rule = tree_rule(ex)
    built, used, models, tables, decided, unmodelled = [], {}, {}, [], {}, {}
    for i, f in enumerate(ex.findings):
        if f.kind != "read_outside_declaration":
            continue
        key = (f.subject, f.mode)
        data = scenario_dict(f, backends[f.subject_at], used.get(key, 0), rule)
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
        for (i, _), rows in zip(tables, decide_contexts([data for _, data in tables], generated_contexts(ex),
                                                       model=context_model)):
            decided[i] = replace(decided[i], contexts=rows)
    configs = {c["name"]: c for c in (ex.facts.get("configurations") or {}).get("configurations", ())}
    for i, _ in tables:
        if decided[i].contexts:
            decided[i] = replace(decided[i], reach=reach(decided[i].contexts, configs))
    generated = dict(generated_contexts(ex)) if contexts else {}
    for i, data in tables:
        if decided[i].verdict == Verdict.COUNTEREXAMPLE.value:
            decided[i] = replace(decided[i], fix=verified_fix(ex.findings[i], data, decided[i], generated))
    findings = tuple(replace(f, decision=decided[i]) if i in decided else
                     replace(f, why=unmodelled[i]) if i in unmodelled else f for i, f in enumerate(ex.findings))
    return replace(ex, findings=findings), built


#: What a configuration's event loop needs beyond the default overlap scheduler.
_LOOPS = {"overlap": None, "normal": "the normal scheduler (--disable-overlap-schedule)",
          "pp": "pipeline parallelism", "disagg_prefill": "the disaggregated prefill server"}


def needs(cfg: dict) -> tuple[str, ...]:
    """What the generated configuration ``cfg`` needs beyond the default: a speculative algorithm (and the step's
    condition), a platform other than CUDA or CUDA without external events, a setting, another event loop."""
    out = []
    if not cfg["source"].startswith("no speculation"):
        out.append(f"--speculative-algorithm {cfg['source']}" + (f" (when {cfg['condition']})" if cfg["condition"]
                                                                 else ""))
    if cfg["platform_class"] != "cuda":
        out.append(f"platform {'/'.join(cfg['platforms'])}" + ("" if cfg["marker"] else " without the in-graph marker"))
    out += list(cfg["settings"])
    if _LOOPS.get(cfg["loop"], cfg["loop"]):
        out.append(_LOOPS.get(cfg["loop"], cfg["loop"]))
    return tuple(out)


def reach(rows, configs: dict) -> Reach | None:
    """The least demanding configuration of ``rows`` (a finding's ``ContextVerdict``) where it races beyond the
    configuration's own races (``ContextVerdict.own``)."""
    racing = [(needs(configs[r.context]), r.context) for r in rows
              if r.verdict == Verdict.COUNTEREXAMPLE.value and not r.own and r.context in configs]
    if not racing:
        return None
    need, name = min(racing, key=lambda x: (len(x[0]), x[1]))
    return Reach(name, need)


def covering_end(declared: str, sites) -> str | None:
    """The earliest publishing end after ``declared`` whose covered sites hold every one of ``sites``."""
    from fencecheck.vocab import COVERED_SITES, PUBLISHING_ENDS, SharedReadEnds

    order = list(PUBLISHING_ENDS)
    start = order.index(SharedReadEnds[declared]) + 1 if declared in SharedReadEnds.__members__ and \
        SharedReadEnds[declared] in order else 0
    return next((e.name for e in order[start:] if set(sites) <= COVERED_SITES[e]), None)


#: The model's verdict on a fixed configuration, by its content (the same backend reads and mode: one answer).
_FIX_MODELS: dict[str, str] = {}


def verified_fix(f: ReadOutsideDeclaration, data: dict, decision: Decision, generated: dict) -> Fix | None:
    """The smallest declaration change for the racing finding ``f`` (its scenario table ``data``), decided by the
    simulator and the model on that scenario and by the simulator in each generated configuration (``generated``,
    name -> table) where ``f`` races (a later end only publishes later, so it cannot add a race where there was
    none); None when no end covers its reads."""
    import copy
    import json

    from fencecheck.model.check import model_check
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace

    end = covering_end(f.declared, [s for s, _ in f.uncovered])
    if end is None:
        return None
    fixed = copy.deepcopy(data)
    (backend,) = fixed["backends"].values()
    backend["declares"][f.mode] = end
    fixed["name"] += "-fix"
    s = scenario_from_dict(fixed, fixed["name"])
    report = check_trace(run_scenario(s))
    key = json.dumps([list(fixed["backends"].values()), f.mode], sort_keys=True)  # the names do not change the answer
    if key not in _FIX_MODELS:
        _FIX_MODELS[key] = model_check(s).verdict.value
    m = _FIX_MODELS[key]
    racing = [c.context for c in decision.contexts or () if c.verdict == Verdict.COUNTEREXAMPLE.value and not c.own]
    rows = decide_contexts([fixed], [(n, generated[n]) for n in racing if n in generated], model="none")[0] \
        if racing else ()
    still = tuple(r.context for r in rows if r.verdict != Verdict.PROVED.value and not r.own)
    what = "the prefill snapshot's declaration" if f.declared_by == "_snapshot_prefill_shared_reads" else "declare"
    change = f"{what} {end} for {f.mode}" if what == "declare" else f"{what}: {end} for {f.mode}"
    return Fix(change, end, report.verdict.value, m, len(racing), len(rows) - len(still), still)
