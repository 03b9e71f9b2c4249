"""Deciding the speculative workers' reads after the publisher: each read the reader leaves pending gets a scenario
(``worker_read_scenario``: the runner phases of the step before it, as read), which the simulator runs (each distinct
scenario once) and, when asked, the SMT model checks; ``settle`` makes the read's outcome from the simulator's answer,
and the reads that are findings join the document's ``findings`` (kind ``worker_read_after_publish``, ``findings``).

Each distinct configuration (runners, phases, publisher) is one scenario, named after the first read of it in the
order the reader found the reads (``WorkerRead.found``: the workers in ``create_worker``'s order, each decode step as
walked)."""

from __future__ import annotations

from dataclasses import replace

from fencecheck.decision.findings import model_answer, slug, tree_rule
from fencecheck.files.scenario_io import scenario_from_dict
from fencecheck.sglang_source.algorithm_records import PENDING, Algorithm, Phase, Publisher, ReadOutcome, WorkerRead
from fencecheck.sglang_source.extract import Extraction
from fencecheck.sglang_source.findings import Decision, WorkerReadFinding
from fencecheck.sglang_source.records import Evidence
from fencecheck.vocab import WORKER_SITE, ForwardMode, ReadSite

#: Where a capture tail hook reads: inside the phase's graph, after the model forward.
IN_GRAPH = ReadSite.IN_GRAPH_AFTER_MARKER.value
#: The outcome of a read after a phase in a mode the scenarios do not model.
UNMODELLED = ReadOutcome("unresolved", "a phase before the read runs in a mode the scenarios do not model")


def worker_read_scenario(name: str, worker: str, pub: Publisher, location: str,
                         before: tuple[Phase, ...], rule: str | None = None, in_graph: bool = False) -> dict | None:
    """The scenario table of ``worker``'s read of ``location`` after the runner phases ``before`` (in step order):
    the two model runners own the mailboxes (``target``, ``draft``), each phase runs on a runner of its own that
    publishes into its side's mailbox as its runner class does, with an attention backend under the base rule
    (``AttentionBackend.shared_read_ends``) that reads nothing; the worker reads ``location`` on the forward stream
    after the last phase (``worker_reads_after``); the publisher is ``pub``'s side; the overlap scheduler's barrier;
    the tree's no-marker fallback ``rule`` (PRE_REPLAY, the earlier one, when the tree's was not read). A read in a
    capture tail hook (``in_graph``) is a read of the last phase at ``in_graph_after_marker`` instead: inside its graph,
    after the model forward. None when a phase's mode is not one the scenarios model."""
    seen, phases, runners = set(), [], {"target": {"publish": "never", "fresh_events": True},
                                        "draft": {"publish": "never", "fresh_events": True}}
    for p in before:
        if p.mode not in ForwardMode.__members__:
            return None
        if (p.file, p.line, p.mode) in seen:
            continue
        seen.add((p.file, p.line, p.mode))
        pname = f"{p.side}-{p.mode.lower().replace('_', '-')}-{p.line}"
        while any(x["name"] == pname for x in phases):
            pname += "x"
        runners[pname] = {"publish": p.publish.policy or "resolve", "mailbox": p.side, "fresh_events": True}
        phases.append({"name": pname, "runner": pname, "mode": p.mode, "backend": "attn",
                       **({"execution": "eager"} if p.publish.execution == "eager" else {})})
    if not phases:
        return None
    phases[-1] = {**phases[-1], **({"other_reads": {IN_GRAPH: [location]}} if in_graph
                                   else {"worker_reads_after": [location]})}
    where = ("which a capture tail hook reads inside the last one's graph, after the model forward" if in_graph
             else "which follows them on the forward stream")
    cites = [f"{p.file}:{p.line}: {p.side} {p.mode} by `{p.call}`: {p.publish.why}" for p in before]
    return {"name": name,
            "description": f"{worker} as read from the sources: the runner phases of its decode step before its "
                           f"read of {location}, {where}; the publisher is "
                           f"`{pub.publisher}` ({pub.side}); each phase's attention backend declares the base rule.",
            "cites": cites + [f"{pub.file}:{pub.line}: publisher {pub.publisher}"],
            "resolution": rule or "declaration_only", "steps": 2,
            "backends": {"attn": {}}, "runners": runners,
            "algorithm": {"name": slug(worker), "publisher": pub.side, "steps": {"normal": phases}}}


class _Scenarios:
    """The scenarios built, each distinct configuration once: ``of(data)`` is the Scenario of ``data``'s
    configuration (named ``data``'s name, or that name with ``-b`` appended while it is taken, the first time)."""

    def __init__(self):
        self.by_name: dict = {}
        self.tables: dict[str, dict] = {}  # name -> the table the scenario was built from
        self._by_config: dict[str, str] = {}

    def of(self, data: dict):
        key = repr((data["runners"], data["algorithm"]["steps"], data["algorithm"]["publisher"]))
        if key not in self._by_config:
            name = data["name"]
            while name in self.by_name:
                name += "-b"
            self.by_name[name] = scenario_from_dict({**data, "name": name}, name)
            self.tables[name] = {**data, "name": name}
            self._by_config[key] = name
        return self.by_name[self._by_config[key]]


def settle(read: WorkerRead, scenario, verdict: str, races: tuple[str, ...], at_read: bool) -> ReadOutcome:
    """The outcome of ``read`` from the simulator's answer on its ``scenario``: ``verdict``, the distinct ``races``
    (``location@phase/site``) and whether one is at the read (its location, the last phase before it,
    ``worker_after``). A race at the read is a finding, ``confirmed`` when neither the read, the publisher nor the
    publisher's runner call depends on a condition, else ``plausible``; a proof is no finding (the reason says why
    the fence covers it); anything else is ``unresolved``."""
    follows = scenario.algorithm.steps[next(iter(scenario.algorithm.steps))][-1]
    decision = Decision(scenario.name, verdict, races, mode=follows.mode.value)
    after, pub = read.after, read.publisher.publisher
    where = f"`{after.call}` ({after.file}:{after.line})"
    if verdict == "counterexample" and at_read:
        status = "plausible" if (read.conditions or read.publisher.conditions or after.conditions) else "confirmed"
        if read.in_graph:
            return ReadOutcome(status, f"read by a capture tail hook inside the graph of {where}, after the model "
                                       f"forward and after the in-graph marker it publishes into `{pub}`'s mailbox "
                                       "(a backend under the base rule): the scheduler's next write waits only for "
                                       "that event", decision)
        return ReadOutcome(status, f"read on the forward stream after {where} published the read-done event into "
                                   f"`{pub}`'s mailbox: the scheduler's next write waits only for that event", decision)
    if verdict == "proved":
        if not after.can_publish:
            reason = (f"nothing publishes into the mailbox of the publisher `{pub}` (no runner on its side publishes "
                      f"in these modes): the barrier waits for all of the forward stream")
        else:
            reason = (f"no read-done event precedes the read in `{pub}`'s mailbox when the barrier reads it ({where} "
                      f"publishes nothing for {after.mode} under the base rule, or clears the mailbox)")
        return ReadOutcome(None, f"the fence covers it: {reason}; scenario {scenario.name}: proved", decision)
    return ReadOutcome("unresolved", f"scenario {scenario.name}: {verdict}"
                       + (f" ({', '.join(races)})" if races else ""), decision)


def findings(algorithms: tuple[Algorithm, ...]) -> tuple[WorkerReadFinding, ...]:
    """The top-level findings of the worker reads after the publisher that are findings: one per worker class, read
    and publisher (the algorithms that share the worker listed), sorted."""
    first, names = {}, {}
    for a in algorithms:
        for r in a.reads_after_publisher:
            if r.outcome.status is None:
                continue
            w = a.worker
            key = (w.cls, w.file, r.file, r.line, r.location, r.publisher.publisher)
            first.setdefault(key, (w, r))
            names.setdefault(key, []).append(a.name)
    out = []
    for key in sorted(first):
        w, r = first[key]
        o, pub, after = r.outcome, r.publisher, r.after
        when = f" (when {pub.condition})" if pub.conditions else ""
        out.append(WorkerReadFinding(
            w.cls, f"{w.file}:{w.line}", o.decision.mode if o.decision else None, o.status,
            r.conditions + pub.conditions + after.conditions, tuple(names[key]), r.location,
            (Evidence(after.file, after.line, f"`{after.call}` is the publisher's runner: `{pub.publisher}`{when} is "
                                              f"last_shared_read_runner"),
             Evidence(r.file, r.line, (f"reads {r.location} at {IN_GRAPH} (a capture tail hook in its graph) via "
                                       if r.in_graph else f"reads {r.location} on the device after it via ")
                      + " -> ".join(r.via)
                      + (f" (when {r.condition})" if r.conditions else ""))),
            o.why, o.decision, settled=r.settled))
    return tuple(out)


def worker_fix(data: dict, f: WorkerReadFinding, after):
    """The smallest change to the worker that keeps the read ``f`` (its scenario table ``data``, the publisher's
    runner call ``after``: ``WorkerRead.after``) out of the race,
    verified before it is printed (the simulator, then the model, on the scenario with the change): a copy of the rows
    it needs taken before the publishing runner call and read after it (in the scenario, the read moved before that
    call, after the phase before it: a read that needs the call's results can still read a copy made before it),
    else the publisher's mailbox cleared after that call (the barrier then waits for the whole forward stream in that
    step: the coarse fence). None when neither is proved."""
    import copy

    from fencecheck.model.check import model_check
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace
    from fencecheck.sglang_source.findings import Fix

    where = f"`{after.call}` ({after.file}:{after.line})"
    tries = []
    phases = data["algorithm"]["steps"]["normal"]
    if "other_reads" in phases[-1]:  # a capture tail hook's read: a snapshot taken before the replay
        moved = copy.deepcopy(data)
        moved["algorithm"]["steps"]["normal"][-1]["other_reads"] = {"pre_replay": [f.location]}
        tries.append((f"take the {f.location} rows the capture tail hook needs before {where} replays its graph and "
                      "read that copy in the hook (the model: the read moved out of the graph, before the replay)",
                      moved))
    elif len(phases) > 1:
        moved = copy.deepcopy(data)
        ph = moved["algorithm"]["steps"]["normal"]
        ph[-2]["worker_reads_after"] = ph[-1].pop("worker_reads_after")
        tries.append((f"take the {f.location} rows it needs before {where} publishes and read that copy after it "
                      "(the model: the read moved before that call, after the phase before it)", moved))
    cleared = copy.deepcopy(data)
    cleared["algorithm"]["steps"]["normal"][-1]["clear_mailbox_after"] = True
    tries.append((f"clear the mailbox of `{data['algorithm']['publisher']}` after {where} (the barrier then waits "
                  "for the whole forward stream in that step)", cleared))
    for change, table in tries:
        table["name"] += "-fix"
        s = scenario_from_dict(table, table["name"], validate=False)
        verdict = check_trace(run_scenario(s)).verdict.value
        if verdict != "proved":
            continue
        return Fix(change, None, verdict, model_check(s).verdict.value, 0, 0, ())
    return None


def decide_worker_reads(ex: Extraction, model: bool = False) -> tuple[Extraction, list]:
    """``ex`` with every pending worker read of its algorithms decided on its scenario (the simulator; with
    ``model`` the SMT model too, its answer beside the simulator's) and the reads that are findings appended to its
    findings; and the scenarios of those findings, each once, in the findings' order."""
    from fencecheck.model.check import model_check
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace

    rule = tree_rule(ex)
    worker = {r: a.worker.cls for a in ex.algorithms for r in a.reads_after_publisher
              if r.host_copy is None and r.outcome == PENDING}  # not one the reader settled (a path that cannot run)
    no_barrier = {(w["worker"], w["publisher"], tuple(w["conditions"])): w["why"]
                  for w in ex.facts.get("publishers_without_barrier") or ()}
    scenarios, sims, models, outcomes = _Scenarios(), {}, {}, {}
    for r in sorted(worker, key=lambda r: r.found):
        why = no_barrier.get((worker[r], r.publisher.publisher, tuple(r.publisher.conditions)))
        if why is not None:  # that publisher exists only where no loop applies the barrier (pipeline.py)
            outcomes[r] = ReadOutcome(None, why)
            continue
        data = worker_read_scenario(f"sglang-{slug(worker[r])}-reads-{slug(r.location)}-{r.line}", worker[r],
                                    r.publisher, r.location, r.before, rule, r.in_graph)
        if data is None:
            outcomes[r] = UNMODELLED
            continue
        s = scenarios.of(data)
        if s.name not in sims:
            sims[s.name] = check_trace(run_scenario(s))
        report = sims[s.name]
        last = s.algorithm.steps[next(iter(s.algorithm.steps))][-1].name
        site = IN_GRAPH if r.in_graph else WORKER_SITE
        at_read = any(x.location == r.location and x.phase == last and x.site == site
                      for x in (y.key() for y in report.races))
        o = settle(r, s, report.verdict.value, tuple(sorted({x.key().text() for x in report.races})), at_read)
        if o.status is not None and r.bound is not None:  # its scenario races, on no device whose runners publish
            outcomes[r] = ReadOutcome(None, r.bound)
            continue
        if model:
            if s.name not in models:
                models[s.name] = model_check(s)
            o = replace(o, decision=replace(o.decision, model=model_answer(report, models[s.name])))
        outcomes[r] = o
    algorithms = tuple(replace(a, reads_after_publisher=tuple(replace(r, outcome=outcomes[r]) if r in outcomes else r
                                                              for r in a.reads_after_publisher))
                       for a in ex.algorithms)
    after = {o.decision.scenario: r.after for r, o in outcomes.items() if o.decision is not None}
    fixes: dict[str, object] = {}  # one per scenario: its reads share the phases before them

    def with_fix(f):
        name = f.decision.scenario if f.decision else None
        if name not in scenarios.tables or f.decision.verdict != "counterexample":
            return f
        if name not in fixes:
            fixes[name] = worker_fix(scenarios.tables[name], f, after[name])
        return f if fixes[name] is None else replace(f, decision=replace(f.decision, fix=fixes[name]))

    added = tuple(with_fix(f) for f in findings(algorithms))
    built = [scenarios.by_name[n] for n in dict.fromkeys(f.decision.scenario for f in added if f.decision)]
    return replace(ex, algorithms=algorithms, findings=ex.findings + added), built
