"""Executing a trace under a device interleaving: schedules checked against happens-before, stale reads, witnesses."""

from __future__ import annotations

import random

import pytest

from fencecheck.errors import ScheduleError
from fencecheck.reference.run import run_scenario
from fencecheck.reference.sim.hb import analyze
from fencecheck.reference.sim.interleave import execute, random_schedule, stale_reads


def test_execute_rejects_a_schedule_that_breaks_happens_before(catalog):
    hb = analyze(run_scenario(catalog["plain-decode"], steps=2))
    order = list(range(len(hb.kernels)))
    order[0], order[1] = order[1], order[0]  # the first read before the write it must follow
    with pytest.raises(ScheduleError):
        execute(hb, order)
    with pytest.raises(ScheduleError):
        execute(hb, order[:-1])


def test_random_schedules_are_valid_and_can_show_races(catalog):
    hb = analyze(run_scenario(catalog["barrier-disabled"], steps=3))
    rng = random.Random(7)
    shown = sum(bool(stale_reads(hb, random_schedule(hb, rng))) for _ in range(200))
    assert 0 < shown < 200  # some interleavings hide the race, some show it


def test_reads_see_the_stamp_of_their_own_step_in_host_order(catalog):
    hb = analyze(run_scenario(catalog["eagle-v2"], steps=3))
    seen = execute(hb, list(range(len(hb.kernels))))
    assert seen and all(o.seen == o.step for o in seen)


@pytest.mark.parametrize("name", ["barrier-disabled", "multi-layer-eagle-first", "breakable-graph-in-replay"])
def test_witnesses_shared_by_one_write_are_the_per_race_witnesses(catalog, name):
    from fencecheck.reference.sim.interleave import witness_observations, witness_schedule
    from fencecheck.reference.sim.races import check_trace

    trace = run_scenario(catalog[name], steps=3)
    hb, races = analyze(trace), check_trace(trace).races
    assert len({r.write_op for r in races}) < len(races)  # some races share their write
    one_by_one = [next((o for o in stale_reads(hb, witness_schedule(hb, r)) if o.key() == r.key()), None)
                  for r in races]
    assert witness_observations(hb, list(races)) == one_by_one
    assert all(o is not None and o.stale for o in one_by_one)
