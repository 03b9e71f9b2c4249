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
