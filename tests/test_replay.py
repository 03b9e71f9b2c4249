"""Replaying a corpus record on the simulator: conformance with its first divergence, verdict, witness, schedules."""

from __future__ import annotations

import dataclasses

from fencecheck.files.corpus_io import CorpusRecord
from fencecheck.model.traces import generate
from fencecheck.reference.replay import conformance, priority_schedule, replay
from fencecheck.reference.sim.hb import analyze
from fencecheck.reference.sim.interleave import stale_reads
from fencecheck.verdict import Verdict
from fencecheck.trace import BarrierFine, EventDecl, MailboxCleared, MailboxSet, Write, ring_event


def _record(s) -> CorpusRecord:
    mt = generate(s)
    return CorpusRecord(f"t/{s.name}", "test", 1, s, mt.trace, mt.verdict, mt.races, mt.witness)


def test_conformance_names_prefix_and_first_divergence(catalog):
    rec = _record(catalog["plain-decode"])
    ops = list(rec.trace.ops)
    i = next(n for n, op in enumerate(ops) if isinstance(op, Write) and op.step == 2)
    ops[i] = dataclasses.replace(ops[i], step=9)
    bad = dataclasses.replace(rec.trace, ops=tuple(ops))
    c = conformance(bad, rec.trace)
    assert not c.ok and c.matched == i and "step=9" in c.expected and "step=2" in c.actual
    assert c.detail == f"ops[{i}].step: expected 9, got 2"


def test_a_protocol_difference_in_a_mark_fails_with_the_field_named(catalog):
    rec = _record(catalog["restored-graph-no-marker"])
    ops = list(rec.trace.ops)
    i = next(n for n, op in enumerate(ops) if isinstance(op, BarrierFine))
    ops[i] = dataclasses.replace(ops[i], event=ring_event("target", 1))
    c = conformance(rec.trace, dataclasses.replace(rec.trace, ops=tuple(ops)))
    assert not c.ok and c.matched == i
    assert c.detail == f"ops[{i}].event: expected 'target.ring0', got 'target.ring1'"
    j = next(n for n, op in enumerate(ops) if isinstance(op, MailboxSet))
    ops[j] = MailboxCleared(ops[j].step, ops[j].owner, "cleared_after", "decode", by=ops[j].by)
    c = conformance(rec.trace, dataclasses.replace(rec.trace, ops=tuple(ops)))
    assert c.matched == j and c.detail == f"ops[{j}]: expected mark mailbox_set, got mark mailbox_cleared"


def test_a_prose_difference_is_not_a_divergence(catalog):
    """A downstream adapter labels its ops in its own words (``by``): the protocol is what is compared."""
    rec = _record(catalog["restored-graph-no-marker"])
    assert rec.trace.ops[0].by == "scheduler:prepare"
    relabelled = tuple(dataclasses.replace(op, by=f"Scheduler#{n}") for n, op in enumerate(rec.trace.ops))
    other = dataclasses.replace(rec.trace, ops=relabelled, scenario="their name", meta={})
    c = conformance(rec.trace, other)
    assert c.ok and c.matched == c.total == len(rec.trace.ops)


def test_a_declaration_difference_is_named(catalog):
    rec = _record(catalog["plain-decode"])
    events = (EventDecl(rec.trace.events[0].id, False),) + rec.trace.events[1:]
    c = conformance(rec.trace, dataclasses.replace(rec.trace, events=events))
    assert not c.ok and c.detail == ("events[0]: expected EventDecl(id='target.marker', external=True), "
                                     "got EventDecl(id='target.marker', external=False)")


def test_the_whole_trace_must_be_consumed(catalog):
    rec = _record(catalog["plain-decode"])
    short = dataclasses.replace(rec.trace, ops=rec.trace.ops[:-1])
    c = conformance(short, rec.trace)
    assert not c.ok and c.expected == "<end of trace>"
    assert not conformance(rec.trace, short).ok


def test_replay_of_a_race_shows_the_witness(catalog):
    res = replay(_record(catalog["ngram-no-clear"]))
    assert res.ok and res.witness_shown is True and res.schedules == 0


def test_replay_of_a_safe_trace_runs_adversarial_schedules(catalog):
    res = replay(_record(catalog["eagle-v2"]))
    assert res.ok and res.schedules == 10 and res.stale_seen == 0


def test_extreme_schedules_do_show_races_when_there_are_some(catalog):
    hb = analyze(generate(catalog["barrier-disabled"]).trace)
    assert stale_reads(hb, priority_schedule(hb, ("S", "P", "F")))
    assert not stale_reads(hb, priority_schedule(hb, ("F", "P", "S")))


def test_a_wrong_expectation_is_a_disagreement(catalog):
    rec = _record(catalog["eagle-v2"])
    res = replay(dataclasses.replace(rec, expected=Verdict.COUNTEREXAMPLE))
    assert not res.ok


def test_a_broken_witness_is_a_disagreement(catalog):
    rec = _record(catalog["ngram-no-clear"])
    witness = {**rec.witness, "schedule": list(reversed(rec.witness["schedule"]))}
    res = replay(dataclasses.replace(rec, witness=witness))
    assert res.witness_shown is False and not res.ok


def test_the_documented_contract_is_the_compared_fields():
    """docs/regress.md's table of compared and free fields is what ``conformance`` compares."""
    import re
    from pathlib import Path

    from fencecheck.trace import DEVICE_OPS, MARK_TYPES, protocol_fields

    text = (Path(__file__).parent.parent / "docs" / "regress.md").read_text()
    rows = dict(re.findall(r"^\| (`[a-z_]+`(?: `[a-z_]+`)?) \| ([a-z_, ]+) \| by \|$", text, re.M))
    want = {f"`{t.kind}`": ", ".join(protocol_fields(t)) for t in DEVICE_OPS}
    want |= {f"`mark` `{k.value}`": ", ".join(protocol_fields(t)) for k, t in MARK_TYPES.items()}
    assert rows == want
