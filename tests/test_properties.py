"""Properties of verdicts over random scenarios (tests/strategies.py).

Verdicts do not depend on naming; a coarse fence or a mailbox clear only ever takes races away; a coarse fence
leaves exactly the unjoined plan-stream reads. Each asserts on every draw, racy or safe."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fencecheck.reference.check import check_scenario
from fencecheck.scenario import BackendSpec, Scenario
from fencecheck.vocab import BarrierPlacement, EventLoop, PlanJoin, PrepStream

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
                                      delegate={m: bn[c] for m, c in b.delegate.items()},
                                      declares_when=dict(b.declares_when))
    runners = {rn[n]: dataclasses.replace(r, name=rn[n], mailbox=rn[r.mailbox] if r.mailbox else "")
               for n, r in s.runners.items()}
    steps = {}
    for kind, phases in s.algorithm.steps.items():
        out = []
        for p in phases:
            ph[p.name] = f"{tag}phase_{p.name}"
            out.append(dataclasses.replace(p, name=ph[p.name], runner=rn[p.runner], backend=bn[p.backend],
                                           worker_reads_after=tuple(loc[x] for x in p.worker_reads_after),
                                           other_reads={site: tuple(loc[x] for x in xs)
                                                        for site, xs in p.other_reads.items()}))
        steps[kind] = tuple(out)
    algorithm = dataclasses.replace(
        s.algorithm, name="renamed", steps=steps, publisher={k: rn[v] for k, v in s.algorithm.publisher.items()},
        staged_publisher=rn[s.algorithm.staged_publisher] if s.algorithm.staged_publisher else "",
        staged_phases=tuple(ph[n] for n in s.algorithm.staged_phases))
    scheduler = dataclasses.replace(s.scheduler, writes=tuple(loc[x] for x in s.scheduler.writes))
    return (s.replace(name=f"{tag}renamed", backends=backends, runners=runners, algorithm=algorithm,
                      scheduler=scheduler), {"loc": loc, "phase": ph})


def _ids(s: Scenario) -> set:
    return {r.id for r in check_scenario(s).races}


def _coarse(s: Scenario) -> Scenario:
    return s.replace(scheduler=dataclasses.replace(s.scheduler, force_coarse=True))


@pytest.mark.slow
@settings(max_examples=150)
@given(scenarios(), st.sampled_from(["z_", "a_", "Q"]))
def test_verdict_and_races_do_not_depend_on_naming(s, tag):
    renamed, maps = _rename(s, tag)
    a, b = check_scenario(s), check_scenario(renamed)
    assert a.verdict == b.verdict
    mapped = {(maps["loc"][r.location], maps["phase"][r.phase], r.site, r.step) for r in a.races}
    assert mapped == {(r.location, r.phase, r.site, r.step) for r in b.races}


@pytest.mark.slow
@settings(max_examples=150)
@given(scenarios(fine_barrier=True))
def test_forcing_the_coarse_fence_only_takes_races_away(s):
    """The fine barrier makes S wait on one event recorded on F; the coarse one on all of F. So every race under the
    coarse fence is a race under the fine one: asserted on every draw, racy or safe."""
    assert s.scheduler.barrier and not s.scheduler.force_coarse
    assert _ids(_coarse(s)) <= _ids(s)


@pytest.mark.slow
@settings(max_examples=100)
@given(scenarios())
def test_forcing_the_coarse_fence_only_takes_races_away_with_any_barrier(s):
    """The same with the barrier off (forcing it coarse changes nothing), at the loop top, or in any event loop but
    the disaggregated-prefill loop where result processing touches the forward in flight: there a coarse barrier is
    deferred past result processing, so forcing it adds races (tests/test_release_semantics.py shows one)."""
    assume(not (s.scheduler.loop is EventLoop.DISAGG_PREFILL and s.scheduler.results_touch_inflight))
    assert _ids(_coarse(s)) <= _ids(s)


@pytest.mark.slow
@settings(max_examples=150)
@given(scenarios(fine_barrier=True), st.data())
def test_clearing_a_mailbox_only_takes_races_away(s, data):
    """Clearing a mailbox after a phase turns a published event into the coarse fence (or changes nothing): every
    race with the clear is a race without it, on every draw."""
    (kind, phases), = s.algorithm.steps.items()
    i = data.draw(st.integers(0, len(phases) - 1))
    cleared = list(phases)
    cleared[i] = dataclasses.replace(phases[i], clear_mailbox_after=True)
    changed = s.replace(algorithm=dataclasses.replace(s.algorithm, steps={kind: tuple(cleared)}))
    assert _ids(changed) <= _ids(s)


@pytest.mark.slow
@settings(max_examples=100)
@given(scenarios())
def test_the_coarse_fence_leaves_exactly_the_unjoined_plan_stream_reads(s):
    """A coarse barrier after run_batch leaves only reads on the plan stream uncovered, and only when a phase preps
    on the plan stream without joining it before replay."""
    coarse = s.replace(scheduler=dataclasses.replace(s.scheduler, barrier=True, force_coarse=True,
                                                     placement=BarrierPlacement.AFTER_RUN_BATCH,
                                                     loop=EventLoop.OVERLAP))
    report = check_scenario(coarse)
    assert all(r.read_stream == "P" for r in report.races)
    phases = [p for ps in s.algorithm.steps.values() for p in ps]
    if all(p.prep_stream is PrepStream.FORWARD or p.plan_join is PlanJoin.BEFORE_REPLAY for p in phases):
        assert report.safe


def test_the_properties_can_take_races_away(catalog):
    """The subsets above can be strict, and the coarse fence can leave races: NGRAM without its clear races under the
    fine barrier, not under the coarse one nor with the clear; the unjoined plan stream races under both."""
    s = catalog["ngram-no-clear"]
    assert _ids(s) and _ids(_coarse(s)) == set()
    (kind, phases), = s.algorithm.steps.items()
    cleared = tuple(dataclasses.replace(p, clear_mailbox_after=True) for p in phases)
    assert _ids(s.replace(algorithm=dataclasses.replace(s.algorithm, steps={kind: cleared}))) == set()
    unjoined = check_scenario(_coarse(catalog["plan-stream-unjoined"]))
    assert unjoined.races and {r.read_stream for r in unjoined.races} == {"P"}
