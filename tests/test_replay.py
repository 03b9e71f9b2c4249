from __future__ import annotations

import dataclasses

from fencecheck.corpus_io import CorpusRecord
from fencecheck.model.traces import generate
from fencecheck.reference.replay import conformance, priority_schedule, replay
from fencecheck.reference.sim.hb import analyze
from fencecheck.reference.sim.interleave import stale_reads
from fencecheck.report import Verdict
from fencecheck.trace import Write


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
