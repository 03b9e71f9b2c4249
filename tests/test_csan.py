"""PyTorch's CUDA stream sanitizer as a second oracle (CPU torch, synthetic ids)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch.cuda._sanitizer")

from fencecheck.model.traces import generate  # noqa: E402
from fencecheck.reference.sim import csan  # noqa: E402
from fencecheck.reference.sim.races import check_trace  # noqa: E402
from fencecheck.reference.sim.recorder import TraceDevice  # noqa: E402
from fencecheck.trace import RunBatchReturn  # noqa: E402


def _trace(build):
    d = TraceDevice()
    s, f = d.stream("S"), d.stream("F")
    build(d, s, f)
    return d.trace("t", 1)


def _keys(trace):
    return sorted({(r.location, r.phase, r.site, r.step) for r in check_trace(trace).races})


def test_unfenced_read_is_a_race_for_both():
    def build(d, s, f):
        d.read(f, "x", step=1, phase="p", site="a")
        d.mark(RunBatchReturn(1))
        d.write(s, "x", step=2)

    t = _trace(build)
    assert csan.races(t) == _keys(t) == [("x", "p", "a", 1)]


def test_event_fence_and_wait_stream_order_for_both():
    def build(d, s, f):
        e = d.event("e")
        d.read(f, "x", step=1, phase="p", site="a")
        d.record(e, f)
        d.read(f, "x", step=1, phase="p", site="b")
        d.mark(RunBatchReturn(1))
        d.wait_event(s, e)
        d.write(s, "x", step=2)
        d.wait_stream(s, f)
        d.write(s, "x", step=3)

    t = _trace(build)
    assert csan.races(t) == _keys(t) == [("x", "p", "b", 1)]


def test_wait_on_a_never_recorded_event_passes_through_for_both():
    def build(d, s, f):
        never = d.event("never")
        d.read(f, "x", step=1, phase="p", site="a")
        d.mark(RunBatchReturn(1))
        d.wait_event(s, never)
        d.write(s, "x", step=2)

    t = _trace(build)
    assert csan.races(t) == _keys(t) == [("x", "p", "a", 1)]


def test_host_sync_orders_for_both():
    def build(d, s, f):
        e = d.event("e")
        d.read(f, "x", step=1, phase="p", site="a")
        d.record(e, f)
        d.read(f, "x", step=1, phase="p", site="b")
        d.mark(RunBatchReturn(1))
        d.host_sync(e)
        d.write(s, "x", step=2)

    t = _trace(build)
    assert csan.races(t) == _keys(t) == [("x", "p", "b", 1)]


def test_graph_traces_are_not_fed(catalog):
    t = generate(catalog["plain-decode"]).trace
    assert not csan.applicable(t) and csan.compare(t, []) == "n/a"


def test_eager_scenarios_agree(catalog):
    import dataclasses

    from fencecheck.vocab import Execution

    checked = 0
    for s in catalog.values():
        steps = {k: tuple(dataclasses.replace(p, execution=Execution.EAGER) for p in ps)
                 for k, ps in s.algorithm.steps.items()}
        eager = s.replace(algorithm=dataclasses.replace(s.algorithm, steps=steps))
        mt = generate(eager)
        assert csan.applicable(mt.trace)
        assert csan.compare(mt.trace, list(mt.races)) == "agree", s.name
        checked += 1
    assert checked == len(catalog)
