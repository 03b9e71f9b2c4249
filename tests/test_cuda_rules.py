"""One test per CUDA rule R1-R8 (docs/cuda-rules.md) as the simulator encodes it.

Each test builds a tiny trace by hand on the simulator's device and asks whether a read happens before a write.
Every test has a twin that shows the opposite outcome, so no rule test passes by ordering everything or nothing.
"""

from __future__ import annotations

from fencecheck.reference.sim.hb import analyze
from fencecheck.reference.sim.recorder import TraceDevice


def _dev():
    d = TraceDevice()
    return d, d.stream("S"), d.stream("F"), d.stream("P")


def _order(d):
    """(hb, reads, writes) with kernels listed in host order."""
    hb = analyze(d.trace("rules", 1))
    reads = [k for k in hb.kernels if not k.is_write]
    writes = [k for k in hb.kernels if k.is_write]
    return hb, reads, writes


def test_r1_record_snapshots_work_enqueued_at_call_time():
    d, s, f, _ = _dev()
    e = d.event("e")
    d.read(f, "x", step=1, phase="p", site="a")
    d.record(e, f)
    d.read(f, "x", step=1, phase="p", site="b")  # enqueued after the record: not in its snapshot
    d.wait_event(s, e)
    d.write(s, "x", step=2)
    hb, (r1, r2), (w,) = _order(d)
    assert hb.hb(r1, w)
    assert not hb.hb(r2, w)


def test_r1_re_record_overwrites_the_snapshot():
    d, s, f, _ = _dev()
    e = d.event("e")
    d.read(f, "x", step=1, phase="p", site="a")
    d.record(e, f)
    d.read(f, "x", step=1, phase="p", site="b")
    d.record(e, f)  # the re-record now covers the second read too
    d.wait_event(s, e)
    d.write(s, "x", step=2)
    hb, (r1, r2), (w,) = _order(d)
    assert hb.hb(r1, w) and hb.hb(r2, w)


def test_r2_wait_binds_at_call_time_not_to_later_records():
    d, s, f, _ = _dev()
    e = d.event("e")
    d.read(f, "x", step=1, phase="p", site="a")
    d.record(e, f)
    d.wait_event(s, e)
    d.read(f, "x", step=1, phase="p", site="b")
    d.record(e, f)  # after the wait was enqueued: does not change what S waited for
    d.write(s, "x", step=2)
    hb, (r1, r2), (w,) = _order(d)
    assert hb.hb(r1, w)
    assert not hb.hb(r2, w)


def test_r2_wait_on_never_recorded_event_is_a_no_op():
    d, s, f, _ = _dev()
    never = d.event("never")
    d.read(f, "x", step=1, phase="p", site="a")
    d.wait_event(s, never)
    d.write(s, "x", step=2)
    hb, (r,), (w,) = _order(d)
    assert not hb.hb(r, w)


def test_r3_wait_orders_only_later_work_on_the_waiting_stream():
    d, s, f, _ = _dev()
    e = d.event("e")
    d.read(f, "x", step=1, phase="p", site="a")
    d.record(e, f)
    d.write(s, "x", step=2)  # enqueued before the wait: unordered
    d.wait_event(s, e)
    d.write(s, "x", step=3)
    hb, (r,), (w_before, w_after) = _order(d)
    assert not hb.hb(r, w_before)
    assert hb.hb(r, w_after)


def test_r4_default_record_during_capture_records_no_real_event():
    d, s, f, _ = _dev()
    internal = d.event("internal", external=False)
    d.begin_capture(f, "g", runner="r")
    d.read(f, "x", step=0, phase="p", site="in")
    d.record(internal, f)
    g = d.end_capture()
    d.replay(g, f, step=1, phase="p")
    d.wait_event(s, internal)  # the event was never really recorded: no-op
    d.write(s, "x", step=2)
    hb, (r,), (w,) = _order(d)
    assert not hb.hb(r, w)


def test_r4_external_record_during_capture_is_a_record_node():
    d, s, f, _ = _dev()
    ext = d.event("ext", external=True)
    d.begin_capture(f, "g", runner="r")
    d.read(f, "x", step=0, phase="p", site="in")
    d.record(ext, f)
    g = d.end_capture()
    d.replay(g, f, step=1, phase="p")
    d.wait_event(s, ext)
    d.write(s, "x", step=2)
    hb, (r,), (w,) = _order(d)
    assert hb.hb(r, w)


def test_r5_record_node_records_on_every_launch_and_wait_binds_to_latest_launch():
    d, s, f, _ = _dev()
    ext = d.event("ext", external=True)
    d.begin_capture(f, "g", runner="r")
    d.read(f, "x", step=0, phase="p", site="in")
    d.record(ext, f)
    d.read(f, "x", step=0, phase="p", site="after")
    g = d.end_capture()
    d.replay(g, f, step=1, phase="p")
    d.wait_event(s, ext)  # binds to the first launch's record node
    d.write(s, "x", step=2)
    d.replay(g, f, step=2, phase="p")
    d.wait_event(s, ext)  # a wait issued after the second launch binds to that launch's record node
    d.write(s, "x", step=3)
    hb, (a_in, a_after, b_in, b_after), (w1, w2) = _order(d)
    assert hb.hb(a_in, w1) and not hb.hb(a_after, w1)
    assert hb.hb(b_in, w2) and not hb.hb(b_after, w2)
    assert not hb.hb(b_in, w1)


def test_r6_launches_of_one_graph_are_ordered_across_streams():
    d, s, f, p = _dev()
    d.begin_capture(f, "g", runner="r")
    d.read(f, "x", step=0, phase="p", site="in")
    g = d.end_capture()
    d.replay(g, f, step=1, phase="p")
    d.replay(g, p, step=1, phase="p")  # ordered after the launch on F (R6)
    d.begin_capture(f, "h", runner="r")
    d.read(f, "x", step=0, phase="p", site="in")
    h = d.end_capture()
    d.replay(h, p, step=1, phase="p")  # a different graph on P: not ordered after the launch of g on F
    hb, (on_f, on_p, other), _ = _order(d)
    assert hb.hb(on_f, on_p)
    assert hb.hb(on_p, other)  # stream order on P
    d2, s2, f2, p2 = _dev()
    d2.begin_capture(f2, "h", runner="r")
    d2.read(f2, "x", step=0, phase="p", site="in")
    h2 = d2.end_capture()
    d2.read(f2, "x", step=1, phase="p", site="eager")
    d2.replay(h2, p2, step=1, phase="p")
    hb2, (eager, launched), _ = _order(d2)
    assert not hb2.hb(eager, launched)


def test_r7_wait_stream_covers_work_enqueued_so_far_only():
    d, s, f, _ = _dev()
    d.read(f, "x", step=1, phase="p", site="a")
    d.wait_stream(s, f)
    d.read(f, "x", step=1, phase="p", site="b")
    d.write(s, "x", step=2)
    hb, (r1, r2), (w,) = _order(d)
    assert hb.hb(r1, w)
    assert not hb.hb(r2, w)


def test_happens_before_is_transitive_across_three_streams():
    d, s, f, p = _dev()
    e1, e2 = d.event("e1"), d.event("e2")
    d.read(p, "x", step=1, phase="p", site="plan")
    d.record(e1, p)
    d.wait_event(f, e1)
    d.read(f, "x", step=1, phase="p", site="a")
    d.record(e2, f)
    d.wait_event(s, e2)
    d.write(s, "x", step=2)
    hb, (rp, rf), (w,) = _order(d)
    assert hb.hb(rp, rf) and hb.hb(rf, w) and hb.hb(rp, w)


def test_r8_host_sync_orders_later_work_on_every_stream():
    d, s, f, p = _dev()
    e = d.event("e")
    d.read(f, "x", step=1, phase="p", site="a")
    d.record(e, f)
    d.host_sync(e)
    d.write(s, "x", step=2)  # issued after the host returned: after the read, with no stream wait at all
    d.write(p, "x", step=2)
    hb, (r,), (ws, wp) = _order(d)
    assert hb.hb(r, ws) and hb.hb(r, wp)
    # twin: the same without the synchronize leaves the write unordered
    d2, s2, f2, _ = _dev()
    e2 = d2.event("e")
    d2.read(f2, "x", step=1, phase="p", site="a")
    d2.record(e2, f2)
    d2.write(s2, "x", step=2)
    hb2, (r2,), (w2,) = _order(d2)
    assert not hb2.hb(r2, w2)


def test_r8_host_sync_covers_the_snapshot_only():
    d, s, f, _ = _dev()
    e, never = d.event("e"), d.event("never")
    d.read(f, "x", step=1, phase="p", site="a")
    d.record(e, f)
    d.read(f, "x", step=1, phase="p", site="b")  # after the record: not in the snapshot the host waits for
    d.host_sync(e)
    d.host_sync(never)  # never recorded: completes at once, orders nothing
    d.write(s, "x", step=2)
    hb, (r1, r2), (w,) = _order(d)
    assert hb.hb(r1, w)
    assert not hb.hb(r2, w)
