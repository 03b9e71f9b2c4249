"""The released SGLang's fence behaviours (docs/sglang-0.5.23.md), each decided by both oracles.

Every scenario is small and built here; ``_decide`` runs it on the simulator (the reference protocol) and on the SMT
model, asserts the two agree race for race and that the model's trace is the reference's op for op, and returns the
races. Each behaviour is shown with the specific race it causes or its absence, and each knob with a pair of
scenarios that differ in that knob alone and get different verdicts.
"""

from __future__ import annotations

import dataclasses

import pytest
import z3

from fencecheck.model import assumptions as A
from fencecheck.model.check import model_check
from fencecheck.model.concrete import concretize, layout
from fencecheck.model.emit import emit
from fencecheck.model.program import build
from fencecheck.model.solver import Budget, check, fresh_context, make_solver
from fencecheck.model.symconfig import LOOP_NORMAL, LOOP_PP, Bounds, make_config
from fencecheck.reference.check import check_scenario
from fencecheck.reference.run import run_scenario
from fencecheck.verdict import RaceId, Verdict
from fencecheck.scenario import AlgorithmSpec, BackendSpec, PhaseSpec, RunnerSpec, Scenario, SchedulerSpec
from fencecheck.trace import (
    BarrierCoarse,
    BarrierFine,
    ClearReason,
    HostSync,
    MailboxCleared,
    MailboxSet,
    Record,
    Resolve,
    WaitStream,
    Write,
)
from fencecheck.vocab import (
    BarrierPlacement,
    EventLoop,
    Execution,
    ForwardMode,
    PublishPolicy,
    ReadSite,
    ResolutionRule,
    SharedReadEnds,
    StepKind,
)

LOC = "req_to_token"
PRE, IN_G, AFTER, POST = (ReadSite.PRE_REPLAY, ReadSite.IN_GRAPH_BEFORE_MARKER, ReadSite.IN_GRAPH_AFTER_MARKER,
                          ReadSite.POST_REPLAY)
E = SharedReadEnds


def _decide(s: Scenario) -> set[RaceId]:
    """The races of ``s``, the same for the simulator and the model; the model's trace is the reference's."""
    r, m = check_scenario(s), model_check(s)
    assert m.verdict is not Verdict.UNKNOWN, m.reason
    assert m.verdict is r.verdict, (m.verdict, r.verdict)
    assert set(m.races) == {x.id for x in r.races}
    lay = layout(s)
    assert emit(build(concretize(s, lay)), None, s, lay) == run_scenario(s)
    return set(m.races)


def _scenario(phases, runners, backends, publisher, steps=2, scheduler=SchedulerSpec(), **algo) -> Scenario:
    return Scenario(
        name="release",
        backends={b.name: b for b in backends},
        runners={r.name: r for r in runners},
        algorithm=AlgorithmSpec(name="a", steps={StepKind.NORMAL: tuple(phases)},
                                publisher={StepKind.NORMAL: publisher}, **algo),
        scheduler=scheduler,
        resolution=ResolutionRule.DECLARATION_ONLY_POST_FALLBACK,
        steps=steps,
    )


def _with(s: Scenario, **sched) -> Scenario:
    return s.replace(scheduler=dataclasses.replace(s.scheduler, **sched))


def _race(phase: str, site: ReadSite | str, step: int = 1) -> RaceId:
    return RaceId(LOC, phase, site if isinstance(site, str) else site.value, step)


def _both_steps(phase: str, site: ReadSite) -> set[RaceId]:
    return {_race(phase, site, 1), _race(phase, site, 2)}


# -- clear_then_resolve (docs/sglang-0.5.23.md 4.7) ------------------------------------------------------------------


def _draft(extend_policy=PublishPolicy.CLEAR_THEN_RESOLVE, extend_declares=None, execution=Execution.GRAPH,
           marker=False) -> Scenario:
    """A draft decode graph (IN_REPLAY at its marker) then the draft-extend runner on the same model runner, whose
    backend reads the shared state after the draft's marker; the draft model runner is the publisher."""
    decode = BackendSpec("decode", reads={"*": {IN_G: (LOC,)}})
    extend = BackendSpec("extend", declares=extend_declares or {}, reads={"*": {AFTER: (LOC,)}})
    runners = [RunnerSpec("draft"), RunnerSpec("extend", marker=marker, publish=extend_policy, mailbox="draft")]
    phases = [PhaseSpec("draft", "draft", ForwardMode.DECODE, "decode"),
              PhaseSpec("draft_extend", "extend", ForwardMode.DRAFT_EXTEND_V2, "extend", execution=execution)]
    return _scenario(phases, runners, [decode, extend], "draft")


def test_clear_then_resolve_discards_the_earlier_phase_event():
    s = _draft()
    assert _decide(s) == set()  # UNKNOWN after the clear: the mailbox is empty, the barrier waits on all of F
    trace = run_scenario(s, steps=1)
    cleared = [op for op in trace.ops if isinstance(op, MailboxCleared) and op.why is ClearReason.CLEARED_BEFORE_RESOLVE]
    assert [(c.owner, c.phase) for c in cleared] == [("draft", "draft_extend")]
    i = trace.ops.index(cleared[0])
    assert trace.ops[i + 1] == Resolve(1, "draft_extend", ForwardMode.DRAFT_EXTEND_V2, E.UNKNOWN)
    assert [op.reason.value for op in trace.ops if isinstance(op, BarrierCoarse)] == ["empty_mailbox"]


def test_policy_flips_the_verdict_resolve_keeps_the_stale_marker():
    """The same runner resolving without the clear leaves the draft's marker in the mailbox: the barrier waits on it
    and the draft-extend reads after it race."""
    assert _decide(_draft(extend_policy=PublishPolicy.RESOLVE)) == _both_steps("draft_extend", AFTER)


def test_clear_then_resolve_eager_neither_clears_nor_publishes():
    s = _draft(execution=Execution.EAGER)
    assert _decide(s) == _both_steps("draft_extend", AFTER)
    assert not [op for op in run_scenario(s).ops if isinstance(op, MailboxCleared)
                and op.why is ClearReason.CLEARED_BEFORE_RESOLVE]


@pytest.mark.parametrize("declared, races", [
    (E.PRE_REPLAY, True),  # publishes before the replay; the reads after it race
    (E.IN_REPLAY, False),  # no marker: the release's fallback publishes POST_REPLAY, after every read
    (E.POST_REPLAY, False),
])
def test_clear_then_resolve_publishes_where_the_rule_resolves(declared, races):
    s = _draft(extend_declares={ForwardMode.DRAFT_EXTEND_V2: declared})
    assert _decide(s) == (_both_steps("draft_extend", AFTER) if races else set())
    points = [op.point for op in run_scenario(s, steps=1).ops if isinstance(op, MailboxSet) and op.by == "extend"]
    assert points == [E.POST_REPLAY if declared is E.IN_REPLAY else declared]


def test_clear_then_resolve_with_a_marker_publishes_it():
    s = _draft(extend_declares={ForwardMode.DRAFT_EXTEND_V2: E.IN_REPLAY}, marker=True)
    assert _decide(s) == _both_steps("draft_extend", AFTER)  # the reads after the marker are not covered
    published = [op.event for op in run_scenario(s, steps=1).ops if isinstance(op, MailboxSet) and op.by == "extend"]
    assert published == ["extend.marker"]


# -- prefill (docs/sglang-0.5.23.md 4.5) -----------------------------------------------------------------------------


def _prefill(execution=Execution.GRAPH, declares=E.PRE_REPLAY, mode=ForwardMode.EXTEND, sites=(PRE, AFTER),
             allowed=True, **sched) -> Scenario:
    """A prefill runner whose backend declares ``declares`` for EXTEND and reads at ``sites``: publishing PRE_REPLAY
    makes the barrier wait for the prep only, so a read after it races."""
    b = BackendSpec("b", declares={ForwardMode.EXTEND: declares}, reads={"*": {site: (LOC,) for site in sites}})
    phases = [PhaseSpec("prefill", "prefill", mode, "b", execution=execution)]
    return _scenario(phases, [RunnerSpec("prefill", marker=False, publish=PublishPolicy.PREFILL)], [b], "prefill",
                     scheduler=SchedulerSpec(**sched), prefill_publish_allowed=allowed)


@pytest.mark.parametrize("execution", [Execution.GRAPH, Execution.EAGER, Execution.BREAKABLE_GRAPH])
def test_prefill_publishes_pre_replay_from_eager_and_graph_paths(execution):
    s = _prefill(execution=execution)
    assert _decide(s) == _both_steps("prefill", AFTER)
    trace = run_scenario(s, steps=1)
    sets = [op for op in trace.ops if isinstance(op, MailboxSet)]
    assert [(op.owner, op.point) for op in sets] == [("prefill", E.PRE_REPLAY)]
    assert [op.event for op in trace.ops if isinstance(op, BarrierFine)] == ["prefill.ring0"]
    assert _decide(_prefill(execution=execution, sites=(PRE,))) == set()  # honest: the fine barrier suffices
    if execution is Execution.EAGER:  # an eager `resolve` runner never publishes: coarse, safe
        resolving = s.replace(runners={"prefill": dataclasses.replace(s.runners["prefill"],
                                                                      publish=PublishPolicy.RESOLVE)})
        assert _decide(resolving) == set()


@pytest.mark.parametrize("gate", [
    {"force_coarse": True},
    {"prefill_read_done": False},
    {"hierarchical_cache": True},
    {"allowed": False},
    {"mode": ForwardMode.MIXED},
    {"declares": E.IN_REPLAY},
    {"declares": E.POST_REPLAY},
])
def test_each_prefill_gate_flips_the_verdict(gate):
    """With the gate closed prefill does not publish: the mailbox stays empty and the barrier waits on all of F (the
    gate open: ``test_prefill_publishes_pre_replay_from_eager_and_graph_paths``)."""
    gated = _prefill(**gate)
    assert _decide(gated) == set()
    assert not [op for op in run_scenario(gated).ops if isinstance(op, MailboxSet)]


def test_prefill_never_clears_the_decode_marker():
    """A decode graph publishes its marker, then a prefill phase on the same model runner resolves UNKNOWN: nothing
    is cleared, the barrier waits on the decode marker, and every prefill read after it races."""
    decode = BackendSpec("decode", reads={"*": {IN_G: (LOC,)}})
    b = BackendSpec("b", reads={"*": {PRE: (LOC,)}})
    runners = [RunnerSpec("decode"), RunnerSpec("prefill", marker=False, publish=PublishPolicy.PREFILL,
                                                mailbox="decode")]
    phases = [PhaseSpec("decode", "decode", ForwardMode.DECODE, "decode"),
              PhaseSpec("prefill", "prefill", ForwardMode.EXTEND, "b", execution=Execution.EAGER)]
    s = _scenario(phases, runners, [decode, b], "decode")
    assert _decide(s) == _both_steps("prefill", PRE)
    assert not [op for op in run_scenario(s).ops if isinstance(op, MailboxCleared) and op.why is not
                ClearReason.BARRIER_RESET]


def test_prefill_resolution_rule_does_not_depend_on_the_resolution_setting():
    s = _prefill()
    for rule in (ResolutionRule.GATED, ResolutionRule.DECLARATION_ONLY):  # the release's rule: every other test
        assert _decide(s.replace(resolution=rule)) == _both_steps("prefill", AFTER)


# -- fresh events ------------------------------------------------------------------------------------------------------


def test_fresh_events_name_a_new_event_per_publish_and_decide_as_the_ring():
    base = _prefill()
    fresh = base.replace(runners={"prefill": dataclasses.replace(base.runners["prefill"], fresh_events=True)})
    trace = run_scenario(fresh, steps=3)
    assert [op.event for op in trace.ops if isinstance(op, Record)] == ["prefill.fresh0", "prefill.fresh1",
                                                                        "prefill.fresh2"]
    assert {"prefill.fresh0", "prefill.fresh2"} <= {e.id for e in trace.events}
    assert _decide(fresh) == _both_steps("prefill", AFTER)  # as the ring does (the prefill tests above)
    honest = _prefill(sites=(PRE,))
    honest = honest.replace(runners={"prefill": dataclasses.replace(honest.runners["prefill"], fresh_events=True)})
    assert _decide(honest) == set()


# -- the event loops (docs/sglang-0.5.23.md 1.3, 7.2) ------------------------------------------------------------------


def _dishonest_decode(**sched) -> Scenario:
    """A decode graph whose backend declares IN_REPLAY but reads after its marker: the fine barrier misses the read."""
    b = BackendSpec("b", reads={"*": {IN_G: (LOC,), AFTER: (LOC,)}})
    return _scenario([PhaseSpec("decode", "target", ForwardMode.DECODE, "b")], [RunnerSpec("target")], [b], "target",
                     scheduler=SchedulerSpec(**sched))


def _unknown_decode(**sched) -> Scenario:
    """A decode graph whose backend declares UNKNOWN and reads at every site: the mailbox stays empty."""
    b = BackendSpec("b", declares={ForwardMode.DECODE: E.UNKNOWN}, reads={"*": {s: (LOC,) for s in ReadSite}})
    return _scenario([PhaseSpec("decode", "target", ForwardMode.DECODE, "b")], [RunnerSpec("target")], [b], "target",
                     scheduler=SchedulerSpec(**sched))


@pytest.mark.parametrize("loop", [EventLoop.NORMAL, EventLoop.PP])
def test_loops_without_a_barrier_are_safe_and_the_loop_flips_the_verdict(loop):
    """The overlap loop races (``test_disagg_prefill_fine_barrier_at_once_as_overlap``); these loops do not."""
    s = _dishonest_decode(loop=loop, barrier=False, force_coarse=True)  # neither loop calls the barrier
    assert _decide(s) == set()
    trace = run_scenario(s, steps=1)
    assert not [op for op in trace.ops if isinstance(op, (BarrierFine, BarrierCoarse))]
    assert not [op for op in trace.ops if isinstance(op, MailboxCleared)]  # no barrier: no mailbox reset


def test_normal_loop_orders_s_after_f_when_run_batch_returns():
    trace = run_scenario(_dishonest_decode(loop=EventLoop.NORMAL), steps=1)
    i = next(i for i, op in enumerate(trace.ops) if type(op).__name__ == "RunBatchReturn")
    assert trace.ops[i + 1] == WaitStream("S", "F")
    assert isinstance(trace.ops[i + 2], Write)


def test_pp_loop_host_synchronizes_on_an_event_recorded_at_run_batch_return():
    trace = run_scenario(_dishonest_decode(loop=EventLoop.PP), steps=2)
    assert [op for op in trace.ops if isinstance(op, (Record, HostSync))] == [
        Record("F", "scheduler.forward_done"), HostSync("scheduler.forward_done")] * 2
    assert "scheduler.forward_done" in {e.id for e in trace.events}


def test_disagg_prefill_fine_barrier_at_once_as_overlap():
    s = _dishonest_decode(loop=EventLoop.DISAGG_PREFILL)
    assert _decide(s) == _both_steps("decode", AFTER) == _decide(_dishonest_decode())
    assert run_scenario(s).ops == run_scenario(_dishonest_decode()).ops


def test_disagg_prefill_deferred_coarse_barrier_needs_results_touch_inflight_false():
    """With an empty mailbox, result processing writes before the deferred coarse barrier: every read of the step
    races unless result processing touches nothing the forward in flight reads."""
    assert _decide(_unknown_decode()) == set()  # overlap: the coarse barrier comes first
    deferred = _unknown_decode(loop=EventLoop.DISAGG_PREFILL)
    every_read = {_race("decode", site, n) for site in ReadSite for n in (1, 2)}
    assert _decide(deferred) == every_read
    assert _decide(_unknown_decode(loop=EventLoop.DISAGG_PREFILL, results_touch_inflight=False)) == set()
    trace = run_scenario(deferred, steps=1)
    i = next(i for i, op in enumerate(trace.ops) if type(op).__name__ == "RunBatchReturn")
    assert isinstance(trace.ops[i + 1], Write)  # before the barrier
    assert [op.reason.value for op in trace.ops if isinstance(op, BarrierCoarse)] == ["empty_mailbox"]


def test_disagg_prefill_forced_coarse_is_deferred_too():
    s = _dishonest_decode(loop=EventLoop.DISAGG_PREFILL, force_coarse=True)
    assert _decide(s) == {_race("decode", site, n) for site in (IN_G, AFTER) for n in (1, 2)}
    assert [op.reason.value for op in run_scenario(s).ops if isinstance(op, BarrierCoarse)] == ["forced"] * 2
    assert _decide(_with(s, results_touch_inflight=False)) == set()


def test_disagg_prefill_with_the_barrier_off_races_as_overlap_does():
    s = _unknown_decode(loop=EventLoop.DISAGG_PREFILL, barrier=False)
    assert _decide(s) == _decide(_unknown_decode(barrier=False)) == {_race("decode", site, n) for site in ReadSite
                                                                      for n in (1, 2)}


def test_results_touch_inflight_false_removes_the_loop_top_unfenced_writes():
    top = _unknown_decode(placement=BarrierPlacement.LOOP_TOP)
    assert _decide(top) == {_race("decode", site, n) for site in ReadSite for n in (1, 2)}
    assert _decide(_with(top, results_touch_inflight=False)) == set()


# -- the staged publisher (multi-layer EAGLE's last_draft_extend_staged) -----------------------------------------------


def test_staged_publisher_follows_the_execution_of_its_phases():
    """The staged runner is the publisher only in steps where the staged phase ran as a graph; when it runs eagerly,
    the barrier reads the base publisher's mailbox, which holds the target's marker."""
    target = BackendSpec("target", reads={"*": {IN_G: (LOC,)}})
    draft = BackendSpec("draft", declares={ForwardMode.DRAFT_EXTEND_V2: E.UNKNOWN},
                        reads={"*": {AFTER: (LOC,)}})
    runners = [RunnerSpec("target"), RunnerSpec("draft", publish=PublishPolicy.NEVER)]

    def scenario(execution):
        phases = [PhaseSpec("verify", "target", ForwardMode.TARGET_VERIFY, "target"),
                  PhaseSpec("draft_extend", "draft", ForwardMode.DRAFT_EXTEND_V2, "draft", execution=execution)]
        return _scenario(phases, runners, [target, draft], "target", staged_publisher="draft",
                         staged_phases=("draft_extend",))

    assert _decide(scenario(Execution.GRAPH)) == set()  # the draft's mailbox is empty: coarse
    assert _decide(scenario(Execution.EAGER)) == _both_steps("draft_extend", AFTER)


# -- reads by other work, and declarations under settings ---------------------------------------------------------------


def test_reads_by_non_backend_work_race_where_the_backend_declaration_does_not_cover_them():
    """A capture hook in the same graph reads after the marker: the backend's IN_REPLAY covers its own reads, not
    the hook's, so the hook's read races at its site."""
    b = BackendSpec("b", reads={"*": {IN_G: (LOC,)}})
    phase = PhaseSpec("decode", "target", ForwardMode.DECODE, "b")
    s = _scenario([phase], [RunnerSpec("target")], [b], "target")
    assert _decide(s) == set()
    hooked = _scenario([dataclasses.replace(phase, other_reads={AFTER: (LOC,)})], [RunnerSpec("target")], [b],
                       "target")
    assert _decide(hooked) == _both_steps("decode", AFTER)


def test_a_setting_selects_the_declaration_and_flips_the_verdict():
    """A backend whose DECODE declaration is PRE_REPLAY only under one speculative algorithm: under it, its
    in-graph read races; under any other setting the base rule (IN_REPLAY) covers it."""
    b = BackendSpec("b", reads={"*": {IN_G: (LOC,)}},
                    declares_when={"spec_algorithm=EAGLE": {ForwardMode.DECODE: E.PRE_REPLAY}})
    s = _scenario([PhaseSpec("decode", "target", ForwardMode.DECODE, "b")], [RunnerSpec("target")], [b], "target")
    assert _decide(s) == set()
    assert _decide(s.replace(settings={"spec_algorithm": "NGRAM"})) == set()
    assert _decide(s.replace(settings={"spec_algorithm": "EAGLE"})) == _both_steps("decode", IN_G)


# -- the loops without a barrier, over every configuration of a small family --------------------------------------------


def _symbolic(assumptions: tuple[str, ...], extra) -> Verdict:
    """Whether some configuration of a small family (2 steps, 2 phases, 2 runners) under ``assumptions`` and
    ``extra(cfg)`` races: COUNTEREXAMPLE if one does, PROVED if none can (each check needs under 0.5 M rlimit)."""
    ctx = fresh_context()
    cfg = make_config(Bounds(steps=2, phases=2, runners=2), ctx=ctx)
    prog = build(cfg)
    solver = make_solver(Budget(rlimit=4_000_000), ctx)
    solver.add(*cfg.domain, *prog.constraints, *A.constraints(cfg, prog, assumptions), extra(cfg), prog.any_race())
    return check(solver).verdict


@pytest.mark.slow
def test_normal_and_pp_loops_need_only_the_plan_stream_join():
    """In the non-overlap and pipeline-parallel loops no declaration, publisher, publish or barrier setting matters:
    every configuration is race-free once a plan-stream prep is joined into F before the launch; without that join
    one races."""
    def no_barrier_loop(cfg):
        return z3.Or(cfg.loop == LOOP_NORMAL, cfg.loop == LOOP_PP)

    assert _symbolic(("plan_stream_joined_before_replay",), no_barrier_loop) is Verdict.PROVED
    assert _symbolic((), no_barrier_loop) is Verdict.COUNTEREXAMPLE
