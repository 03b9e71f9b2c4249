"""SGLang's own fence tests (docs/sglang-mechanism.md#tests-in-sglang), reproduced against the reference resolution and runner."""

from __future__ import annotations

import pytest

from fencecheck.reference.backends import build_backends
from fencecheck.reference.resolution import resolve_shared_read_ends
from fencecheck.reference.run import run_scenario
from fencecheck.scenario import BackendSpec
from fencecheck.trace import BarrierCoarse, ClearReason, CoarseReason, MailboxCleared, MailboxSet, Record, WaitEvent
from fencecheck.vocab import ForwardMode, ResolutionRule, SharedReadEnds


@pytest.mark.parametrize(
    "declared, has_marker, expected",
    [
        (SharedReadEnds.IN_REPLAY, True, SharedReadEnds.IN_REPLAY),
        (SharedReadEnds.IN_REPLAY, False, SharedReadEnds.PRE_REPLAY),
        (SharedReadEnds.POST_REPLAY, False, SharedReadEnds.POST_REPLAY),
    ],
)
def test_resolution_after_35059_asks_backend_once(declared, has_marker, expected):
    backend = build_backends({"b": BackendSpec("b", declares={ForwardMode.DECODE: declared})})["b"]
    got = resolve_shared_read_ends(
        ResolutionRule.DECLARATION_ONLY, ForwardMode.DECODE, backend.shared_read_ends, has_marker, lambda m: False
    )
    assert got is expected
    assert backend.asked == 1


def test_post_fallback_rule_turns_markerless_in_replay_into_post_replay():
    backend = build_backends({"b": BackendSpec("b")})["b"]
    got = resolve_shared_read_ends(
        ResolutionRule.DECLARATION_ONLY_POST_FALLBACK, ForwardMode.DECODE, backend.shared_read_ends, False, lambda m: False
    )
    assert got is SharedReadEnds.POST_REPLAY


@pytest.mark.parametrize(
    "mode, last, expected, asked",
    [
        (ForwardMode.DECODE, False, SharedReadEnds.IN_REPLAY, 1),
        (ForwardMode.TARGET_VERIFY, False, SharedReadEnds.UNKNOWN, 0),
        (ForwardMode.TARGET_VERIFY, True, SharedReadEnds.IN_REPLAY, 1),
        (ForwardMode.DRAFT_EXTEND_V2, True, SharedReadEnds.UNKNOWN, 0),
    ],
)
def test_gated_rule_before_35059(mode, last, expected, asked):
    backend = build_backends({"b": BackendSpec("b")})["b"]
    got = resolve_shared_read_ends(ResolutionRule.GATED, mode, backend.shared_read_ends, True, lambda m: last)
    assert got is expected
    assert backend.asked == asked


def _publishes(trace):
    return [op for op in trace.ops if isinstance(op, MailboxSet)]


def test_in_graph_publish_hands_over_the_marker_without_recording(catalog):
    trace = run_scenario(catalog["plain-decode"], steps=1)
    (publish,) = _publishes(trace)
    assert (publish.owner, publish.event, publish.point) == ("target", "target.marker", SharedReadEnds.IN_REPLAY)
    assert not [op for op in trace.ops if isinstance(op, Record)]


def test_out_of_graph_publish_records_one_ring_event(catalog):
    trace = run_scenario(catalog["restored-graph-no-marker"], steps=1)
    records = [op for op in trace.ops if isinstance(op, Record)]
    assert len(records) == 1 and records[0].event == "target.ring0" and records[0].stream == "F"


def test_every_mailbox_writer_draws_from_the_ring_or_hands_over_the_marker(catalog):
    """A publish hands over the runner's marker (IN_REPLAY) or records an event of its model runner: the next of the
    ring, or a fresh one for a runner with ``fresh_events``."""
    for scenario in catalog.values():
        trace = run_scenario(scenario, steps=3)
        events = {e.id: e for e in trace.events}
        for op in _publishes(trace):
            if op.point is SharedReadEnds.IN_REPLAY:
                assert op.event == f"{op.by}.marker" and events[op.event].external, (scenario.name, op)
            else:
                kind = "fresh" if scenario.runners[op.by].fresh_events else "ring"
                assert op.event.startswith(f"{op.owner}.{kind}") and not events[op.event].external, (scenario.name, op)


def test_ring_events_are_handed_out_round_robin(catalog):
    trace = run_scenario(catalog["restored-graph-no-marker"], steps=3)
    assert [op.event for op in trace.ops if isinstance(op, Record)] == ["target.ring0", "target.ring1", "target.ring0"]


def test_unknown_publishes_nothing_and_leaves_the_mailbox(catalog):
    trace = run_scenario(catalog["composite-unknown-child"], steps=1)
    assert _publishes(trace) == []
    barrier = [op for op in trace.ops if isinstance(op, BarrierCoarse)]
    assert [b.reason for b in barrier] == [CoarseReason.EMPTY_MAILBOX]


def test_dspark_consumes_the_draft_mailbox_before_each_proposal(catalog):
    import dataclasses

    trace = run_scenario(catalog["dspark"], steps=4)
    consumed = [op for op in trace.ops if isinstance(op, MailboxCleared) and op.why is ClearReason.CONSUMED_BEFORE
                and op.phase == "draft_prefetch"]
    assert [op.step for op in consumed] == [1, 4]  # the normal steps
    # In the catalog the draft mailbox is always empty by then (the barrier reset it); when the draft runner has
    # published earlier in the step, F waits on that event and the mailbox is cleared before the proposal.
    s = catalog["dspark"]
    normal = s.algorithm.steps[s.step_kinds[0]]
    early = dataclasses.replace(normal[1], name="draft_warmup", consume_mailbox_before=False)
    steps = {**s.algorithm.steps, s.step_kinds[0]: (early, *normal)}
    trace = run_scenario(s.replace(algorithm=dataclasses.replace(s.algorithm, steps=steps)), steps=1)
    waits = [op for op in trace.ops if isinstance(op, WaitEvent) and op.stream == "F"]
    assert [(w.event, w.by) for w in waits] == [("draft.marker", "worker")]
    i = trace.ops.index(waits[0])
    assert trace.ops[i + 1] == MailboxCleared(1, "draft", ClearReason.CONSUMED_BEFORE, "draft_prefetch")
