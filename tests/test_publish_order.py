"""Where each publish lies among a phase's reads, checked in the quick run.

An honest backend for each publish point is safe in both engines and the two emit the same trace, op for op (the slow
differential test checks this on random scenarios; these are the cases a misplaced publish breaks)."""

from __future__ import annotations

import pytest
from fencecheck.model.check import model_check
from fencecheck.model.traces import generate
from fencecheck.reference.check import check_scenario
from fencecheck.reference.run import run_scenario

from fencecheck.verdict import RaceId, Verdict
from fencecheck.files.scenario_io import loads
from fencecheck.trace import MailboxSet, Read, Record
from fencecheck.vocab import COVERED_SITES, ReadSite, SharedReadEnds

SCENARIO = """name = "publish-{point}"
steps = 2

[backends.b]
declares = {{ DECODE = "{point}" }}
reads.DECODE = {{ {reads} }}

[runners.target]

[algorithm]
name = "none"
publisher = "target"

[[algorithm.steps.normal]]
name = "decode"
runner = "target"
mode = "DECODE"
backend = "b"
"""

POINTS = (SharedReadEnds.PRE_REPLAY, SharedReadEnds.IN_REPLAY, SharedReadEnds.POST_REPLAY)


def _scenario(point: SharedReadEnds, sites) -> object:
    reads = ", ".join(f'{site.value} = ["req_to_token"]' for site in ReadSite if site in sites)
    return loads(SCENARIO.format(point=point.name, reads=reads), f"publish-{point.name}.toml")


@pytest.mark.parametrize("point", POINTS, ids=lambda p: p.name)
def test_an_honest_backend_is_safe_in_both_engines_and_they_emit_one_trace(point):
    """Reads at every site the declaration covers: the publish follows them all, so the barrier's event orders
    every read of the step before the next step's writes."""
    s = _scenario(point, COVERED_SITES[point])
    assert check_scenario(s).verdict is Verdict.PROVED
    assert model_check(s).verdict is Verdict.PROVED
    assert generate(s).trace.ops == run_scenario(s).ops


def test_the_post_replay_publish_follows_the_post_replay_reads():
    """``POST_REPLAY`` means the reads end by the end of the runner's replay call: the ring event is recorded after
    every post-replay read of the phase, in host order and on F."""
    trace = run_scenario(_scenario(SharedReadEnds.POST_REPLAY, {ReadSite.POST_REPLAY}))
    for step in (1, 2):
        reads = [i for i, op in enumerate(trace.ops)
                 if isinstance(op, Read) and op.step == step and op.site == ReadSite.POST_REPLAY.value]
        published = next(i for i, op in enumerate(trace.ops) if isinstance(op, MailboxSet) and op.step == step)
        record = max(i for i, op in enumerate(trace.ops[:published]) if isinstance(op, Record))
        assert reads and max(reads) < record and trace.ops[record].stream == "F"


@pytest.mark.parametrize("point", POINTS[:2], ids=lambda p: p.name)
def test_a_post_replay_read_under_an_earlier_publish_races_in_both_engines(point):
    """The comparison can fail: a read after the replay that the declaration does not cover races."""
    s = _scenario(point, {ReadSite.POST_REPLAY})
    expected = {RaceId("req_to_token", "decode", "post_replay", step) for step in (1, 2)}
    sim = check_scenario(s)
    assert sim.verdict is Verdict.COUNTEREXAMPLE and {r.id for r in sim.races} == expected
    model = model_check(s)
    assert model.verdict is Verdict.COUNTEREXAMPLE and set(model.races) == expected
