"""A verdict is a function of the device operations alone: marks and step labels only name what a report shows.

Every racy catalog trace (both catalogs) keeps its races, read for read and write for write, under any re-placement
of its marks the trace reader accepts (run_batch windows anywhere that still hold every read and launch of their
step, the other marks anywhere, step labels of reads, launches, writes and marks rewritten to match); the model's
races of the scenario are the simulator's on every such trace; and the model's race terms equal the host-order rule
(docs/simulator.md, "The race check")."""

from __future__ import annotations

import dataclasses
import json

import pytest
import z3
from fencecheck.model.program import build
from fencecheck.model.solver import Budget, fresh_context, make_solver, solve
from fencecheck.model.symconfig import Bounds, make_config
from fencecheck.model.traces import generate
from fencecheck.reference.run import run_scenario
from fencecheck.reference.sim.hb import analyze
from fencecheck.reference.sim.interleave import witnesses
from fencecheck.reference.sim.races import check_trace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fencecheck.files.catalog import VERSIONS, load_catalog
from fencecheck.verdict import Verdict
from fencecheck.trace import (
    Mark,
    Read,
    Replay,
    RunBatchBegin,
    RunBatchReturn,
    StepKind,
    Trace,
    Write,
)
from fencecheck.trace_json import parse, parse_json

RACY = {f"{v}/{s.name}": s for v in VERSIONS for s in load_catalog(v) if s.expect.verdict is Verdict.COUNTEREXAMPLE}


def _device(trace: Trace) -> list[int]:
    """Host index of each device op (the ops without the marks), in order."""
    return [i for i, op in enumerate(trace.ops) if not isinstance(op, Mark)]


def _races(trace: Trace) -> set[tuple]:
    """Each racing read and its earliest racing write, by device-op index (marks do not count), node and place."""
    dev = {h: i for i, h in enumerate(_device(trace))}
    return {(dev[r.read_op], r.read_node, r.location, r.site, r.phase, dev[r.write_op]) for r in check_trace(trace).races}


def _unlabelled(trace: Trace) -> list:
    """The device ops with their step labels blanked: what the device runs, in host order."""
    return [dataclasses.replace(op, step=0) if hasattr(op, "step") else op
            for op in trace.ops if not isinstance(op, Mark)]


def _valid(trace: Trace) -> Trace:
    """``trace`` through the trace reader: what ``fencecheck check t.json`` would decide."""
    return parse(json.loads(trace.to_json()), "moved.json")


def _replace_marks(trace: Trace, draw) -> Trace:
    """The device ops of ``trace`` in their order, with every mark re-placed and every step label redrawn."""
    dev = [op for op in trace.ops if not isinstance(op, Mark)]
    marks = [op for op in trace.ops if isinstance(op, Mark) and not isinstance(op, (RunBatchBegin, RunBatchReturn))]
    kinds = {op.step: op.step_kind for op in trace.ops if isinstance(op, RunBatchBegin)}
    steps = draw(st.integers(1, trace.steps + 1), label="steps")
    reading = [i for i, op in enumerate(dev) if isinstance(op, (Read, Replay))]
    lo, hi = reading[0], reading[-1]
    # Gap g lies before dev[g]. Window k is [begin[k], end[k]); between two windows lie no reads or launches.
    begin = [draw(st.integers(0, lo), label="first begin")]
    cuts = sorted(draw(st.lists(st.integers(begin[0], hi + 1), min_size=steps - 1, max_size=steps - 1), label="cuts"))
    end = []
    for k, cut in enumerate(cuts):
        room = cut
        limit = cuts[k + 1] if k + 1 < len(cuts) else len(dev)
        while room < limit and not isinstance(dev[room], (Read, Replay)):
            room += 1
        end.append(cut)
        begin.append(draw(st.integers(cut, room), label="begin"))
    end.append(draw(st.integers(max(hi + 1, begin[-1]), len(dev)), label="last end"))

    def window(i: int) -> int:
        return next(k + 1 for k in range(steps) if begin[k] <= i < end[k])

    labels = st.integers(0, steps + 1)
    out_dev = []
    for i, op in enumerate(dev):
        if isinstance(op, (Read, Replay)):
            op = dataclasses.replace(op, step=window(i))
        elif isinstance(op, Write):
            op = dataclasses.replace(op, step=draw(labels, label="write step"))
        out_dev.append(op)
    at: dict[int, list] = {g: [] for g in range(len(dev) + 1)}
    for k in range(steps):
        at[begin[k]].append(RunBatchBegin(k + 1, kinds.get(k + 1, StepKind.NORMAL)))
        at[end[k]].append(RunBatchReturn(k + 1))
    for m in marks:
        g = draw(st.integers(0, len(dev)), label="mark gap")
        slot = draw(st.integers(0, len(at[g])), label="mark slot")
        at[g].insert(slot, dataclasses.replace(m, step=draw(labels, label="mark step")))
    ops = []
    for g in range(len(dev) + 1):
        ops += at[g]
        if g < len(dev):
            ops.append(out_dev[g])
    return _valid(dataclasses.replace(trace, steps=steps, ops=tuple(ops)))


@pytest.fixture(scope="module")
def racy_traces():
    return {name: run_scenario(s) for name, s in RACY.items()}


def test_every_racy_catalog_scenario_is_here(racy_traces):
    assert len(RACY) >= 19 and {n.split("/")[0] for n in RACY} == set(VERSIONS)
    assert all(check_trace(t).races for t in racy_traces.values())


def test_the_reference_writes_nothing_inside_run_batch():
    """Why the host-order rule is "every write after run_batch(N) returns" on the reference's traces: no write lies
    between a run_batch's marks, so the writes after a read of step N are those after its run_batch_return."""
    for v in VERSIONS:
        for s in load_catalog(v):
            running = None
            for op in run_scenario(s).ops:
                if isinstance(op, RunBatchBegin):
                    running = op.step
                elif isinstance(op, RunBatchReturn):
                    running = None
                assert not (isinstance(op, Write) and running is not None), (v, s.name, op)


@pytest.fixture(scope="module")
def model_races():
    return {name: set(generate(s).races) for name, s in RACY.items()}


def _keeps_its_races(name: str, trace: Trace, moved: Trace, by_model: set) -> None:
    """Re-placed marks keep every race (the read, its place and its earliest write, by device op), the witness
    still shows each, and the model's races of the scenario are still the simulator's, by the original labels."""
    assert _unlabelled(moved) == _unlabelled(trace)
    report = check_trace(moved)
    assert report.verdict is Verdict.COUNTEREXAMPLE
    assert _races(moved) == _races(trace)
    assert all(o is not None for _, o in witnesses(analyze(moved), list(report.distinct())))
    original = [trace.ops[h] for h in _device(trace)]
    dev = {h: i for i, h in enumerate(_device(moved))}
    assert {(r.location, r.phase, r.site, original[dev[r.read_op]].step) for r in report.races} == by_model, name


_SETTINGS = {"deadline": None, "derandomize": True,
             "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]}


@settings(max_examples=40, **_SETTINGS)
@given(name=st.sampled_from(sorted(RACY)), data=st.data())
def test_no_replacement_of_marks_hides_a_race(racy_traces, model_races, name, data):
    """Any racy catalog scenario, any re-placement of its marks (the quick run)."""
    trace = racy_traces[name]
    _keeps_its_races(name, trace, _replace_marks(trace, data.draw), model_races[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RACY))
@settings(max_examples=100, **_SETTINGS)
@given(data=st.data())
def test_no_replacement_of_marks_hides_a_race_of_any_scenario(racy_traces, model_races, name, data):
    """Every racy catalog scenario, many re-placements each."""
    trace = racy_traces[name]
    _keeps_its_races(name, trace, _replace_marks(trace, data.draw), model_races[name])


# -- two edits of the run_batch marks, each still a race --------------------------------------------------------------


@pytest.fixture
def minimax():
    """``fencecheck trace fencecheck/catalog/sglang-0.5.23/race-minimax-sparse-decode.toml -o t.json``."""
    s = next(s for s in load_catalog("sglang-0.5.23") if s.name == "race-minimax-sparse-decode")
    return json.loads(run_scenario(s).to_json())


def _in_graph_after_marker_race(doc) -> set:
    report = check_trace(parse_json(json.dumps(doc), "t.json"))
    assert report.verdict is Verdict.COUNTEREXAMPLE
    return {(r.location, r.site, r.step) for r in report.races}


def test_run_batch_return_moved_past_the_barrier_and_writes_still_races(minimax):
    """Each run_batch_return moved to just before the next step's run_batch_begin (the last to the end): the
    scheduler's barrier and writes now lie inside run_batch's window, the device ops are unchanged."""
    ops = minimax["ops"]
    returns = {op["step"]: op for op in ops if op.get("mark") == "run_batch_return"}
    moved = []
    for op in ops:
        if op.get("mark") == "run_batch_return":
            continue
        if op.get("mark") == "run_batch_begin" and op["step"] > 1:
            moved.append(returns[op["step"] - 1])
        moved.append(op)
    moved.append(returns[max(returns)])
    minimax["ops"] = moved
    assert ("req_to_token", "in_graph_after_marker", 1) in _in_graph_after_marker_race(minimax)


def test_next_steps_writes_inside_run_batch_and_the_last_ones_dropped_still_races(minimax):
    """The writes after each run_batch_return moved to just before it (inside the window, after the reads), the
    last step's writes dropped: writes the host issued after the reads, unordered after them."""
    ops = minimax["ops"]
    steps = minimax["steps"]
    out, pending = [], []
    ret_at = None
    for op in ops:
        if op.get("mark") == "run_batch_return":
            ret_at = op["step"]
            out.append(op)
        elif op.get("op") == "write" and ret_at is not None:
            if ret_at < steps:
                pending.append(op)
        else:
            if op.get("mark") == "run_batch_begin":
                ret_at = None
            out.append(op)
        if op.get("mark") == "run_batch_begin" and op["step"] > 1:
            ret = next(i for i, o in enumerate(out) if o.get("mark") == "run_batch_return" and o["step"] == op["step"] - 1)
            out[ret:ret] = pending
            pending = []
    minimax["ops"] = out
    assert not any(o.get("op") == "write" and o["step"] == steps + 1 for o in out)
    assert ("req_to_token", "in_graph_after_marker", 1) in _in_graph_after_marker_race(minimax)


# -- the model: its race terms are the host-order rule -----------------------------------------------------------


@pytest.mark.parametrize("steps,phases,runners,locations,havoc",
                         [(2, 1, 3, ("a", "b"), False), (2, 1, 2, ("a",), True),
                          pytest.param(3, 1, 2, ("a",), False, marks=pytest.mark.slow),
                          pytest.param(2, 2, 2, ("a",), False, marks=pytest.mark.slow),
                          pytest.param(3, 2, 2, ("a",), False, marks=pytest.mark.slow)])
def test_model_race_terms_equal_the_host_order_rule(steps, phases, runners, locations, havoc):
    """``Program.race_of`` (the first candidate write after run_batch(N)) equals ``race_in_host_order`` (every
    write after the read in host order) on every configuration within the bounds, from the initial state and from
    a free one."""
    ctx = fresh_context()
    cfg = make_config(Bounds(steps=steps, phases=phases, runners=runners, locations=locations), ctx=ctx)
    prog = build(cfg, havoc=havoc)
    solver = make_solver(Budget(rlimit=100_000_000), ctx)
    solver.add(*cfg.domain, *prog.constraints,
               z3.Or(*[prog.race_of(r) != prog.race_in_host_order(r) for r in prog.reads]))
    assert solve(solver)[0] is Verdict.PROVED


def test_a_rule_that_skips_the_steps_own_candidates_differs():
    """The comparison can fail: a rule that looks only at writes after the next step's candidates (what a
    run_batch_return moved past the writes made the simulator do) misses races ``race_of`` finds."""
    ctx = fresh_context()
    cfg = make_config(Bounds(steps=2, phases=1, runners=2, locations=("a",)), ctx=ctx)
    prog = build(cfg)

    def late(r):
        skip = {id(w) for w in prog.first_writes[(r.step, r.location)]}
        ws = [w for w in prog.writes_after(r) if id(w) not in skip]
        return z3.And(r.guard, z3.Or(*[z3.And(w.guard, w.vc[r.stream] < r.pos) for w in ws], ctx), ctx)

    solver = make_solver(Budget(rlimit=30_000_000), ctx)
    solver.add(*cfg.domain, *prog.constraints, z3.Or(*[prog.race_of(r) != late(r) for r in prog.reads]))
    assert solve(solver)[0] is Verdict.COUNTEREXAMPLE


def test_model_race_terms_equal_the_host_order_rule_on_every_catalog_scenario():
    """Concretely, read for read, on every scenario of both catalogs."""
    from fencecheck.model.concrete import concretize, layout

    reads = 0
    for v in VERSIONS:
        for s in load_catalog(v):
            prog = build(concretize(s, layout(s, None)))
            for r in prog.reads:
                assert bool(prog.race_of(r)) == bool(prog.race_in_host_order(r)), (v, s.name, r)
                reads += 1
    assert reads > 1000
