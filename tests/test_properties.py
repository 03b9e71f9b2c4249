"""Property tests: verdicts do not depend on naming; a coarse fence never turns safe into race."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from fencecheck.reference.check import check_scenario
from fencecheck.scenario import AlgorithmSpec, BackendSpec, Scenario

from strategies import LOCATIONS, scenarios


def _rename(s: Scenario, tag: str) -> tuple[Scenario, dict]:
    """Every runner, backend, phase and location renamed; returns the scenario and the location/phase maps."""
    rn = {n: f"{tag}runner_{n}" for n in s.runners}
    bn = {n: f"{tag}backend_{n}" for n in s.backends}
    loc = {l: f"{tag}loc_{l}" for l in LOCATIONS}
    ph = {}
    backends = {}
    for n, b in s.backends.items():
        reads = {m: {site: tuple(loc[x] for x in xs) for site, xs in sites.items()} for m, sites in b.reads.items()}
        backends[bn[n]] = BackendSpec(bn[n], declares=dict(b.declares), reads=reads,
                                      children=tuple(bn[c] for c in b.children),
                                      delegate={m: bn[c] for m, c in b.delegate.items()})
    runners = {rn[n]: dataclasses.replace(r, name=rn[n], mailbox=rn[r.mailbox] if r.mailbox else "")
               for n, r in s.runners.items()}
    steps = {}
    for kind, phases in s.algorithm.steps.items():
        out = []
        for p in phases:
            ph[p.name] = f"{tag}phase_{p.name}"
            out.append(dataclasses.replace(p, name=ph[p.name], runner=rn[p.runner], backend=bn[p.backend],
                                           worker_reads_after=tuple(loc[x] for x in p.worker_reads_after)))
        steps[kind] = tuple(out)
    algorithm = AlgorithmSpec("renamed", steps, {k: rn[v] for k, v in s.algorithm.publisher.items()},
                              s.algorithm.last_shared_read_modes)
    scheduler = dataclasses.replace(s.scheduler, writes=tuple(loc[x] for x in s.scheduler.writes))
    return (Scenario(f"{tag}renamed", backends, runners, algorithm, scheduler, s.resolution, s.steps, s.step_kinds),
            {"loc": loc, "phase": ph})


@settings(max_examples=150)
@given(scenarios(), st.sampled_from(["z_", "a_", "Q"]))
def test_verdict_and_races_do_not_depend_on_naming(s, tag):
    renamed, maps = _rename(s, tag)
    a, b = check_scenario(s), check_scenario(renamed)
    assert a.verdict == b.verdict
    mapped = {(maps["loc"][r.location], maps["phase"][r.phase], r.site, r.step) for r in a.races}
    assert mapped == {(r.location, r.phase, r.site, r.step) for r in b.races}


@settings(max_examples=150)
@given(scenarios())
def test_forcing_the_coarse_fence_never_turns_safe_into_race(s):
    coarse = s.replace(scheduler=dataclasses.replace(s.scheduler, force_coarse=True))
    if check_scenario(s).safe:
        assert check_scenario(coarse).safe


@settings(max_examples=150)
@given(scenarios(), st.data())
def test_clearing_a_mailbox_never_turns_safe_into_race(s, data):
    """Clearing a mailbox after a phase turns a published event into the coarse fence (or changes nothing)."""
    (kind, phases), = s.algorithm.steps.items()
    i = data.draw(st.integers(0, len(phases) - 1))
    cleared = list(phases)
    cleared[i] = dataclasses.replace(phases[i], clear_mailbox_after=True)
    changed = s.replace(algorithm=dataclasses.replace(s.algorithm, steps={kind: tuple(cleared)}))
    if check_scenario(s).safe:
        assert check_scenario(changed).safe


@settings(max_examples=100)
@given(scenarios())
def test_the_coarse_fence_is_safe_unless_the_plan_stream_is_left_unjoined(s):
    """The property can fail: a coarse barrier leaves exactly the reads on an unjoined plan stream uncovered."""
    coarse = s.replace(scheduler=dataclasses.replace(s.scheduler, barrier=True, force_coarse=True,
                                                     placement=s.scheduler.placement.AFTER_RUN_BATCH))
    report = check_scenario(coarse)
    assert all(r.read_stream == "P" for r in report.races)
