"""The race check of docs/sglang-mechanism.md#the-safety-property over a trace's happens-before.

Every shared read is checked against every write of the same location enqueued after it in host order: the host
issued the write after the read, so the read still needs what the write overwrites, and happens-before must order
the write after the read. The rule reads device operations only (their host order, streams, locations and the
clocks of ``hb.py``); marks and step labels name what a report shows, never what races (docs/simulator.md, "The
race check", argues why this is the safety property and why it equals "every write enqueued after ``run_batch(N)``
returns" on the reference's traces). Clocks grow along a stream, so per (read, writing stream) only the first such
write can be the earliest race: if it is ordered after the read, every later write on that stream is too.
"""

from __future__ import annotations

import bisect
from collections import defaultdict

from fencecheck.verdict import CheckReport, Race, Verdict
from fencecheck.trace import Trace

from .hb import HappensBefore, Kernel, analyze


def _describe(k: Kernel | None) -> str:
    if k is None:
        return ""
    where = f"graph {k.graph} node {k.node}" if k.graph else f"op {k.host}"
    return f"{k.stream} kernel #{k.pos} (step {k.step} {k.phase} {k.site} read of {k.location}, {where})"


def _race(hb: HappensBefore, r: Kernel, w: Kernel) -> Race:
    sidx = hb.streams.index(r.stream)
    known = w.vc[sidx]
    last = hb.kernel_at(r.stream, known) if known else None
    if last is not None and last.step != r.step:
        last_text = f"{_describe(last)} from an earlier step"
    else:
        last_text = _describe(last)
    sync = hb.sync_at.get(w.index, {}).get(r.stream)
    via = sync.what if sync is not None else ""
    if last is not None and last.step == r.step:
        missing = (
            f"{r.stream} kernel #{r.pos} ({r.site}) -> {w.stream} op {w.host}: the event the barrier waited on was "
            f"recorded after {r.stream} kernel #{last.pos}, before this read; a record after the read is needed"
        )
    else:
        missing = (
            f"{r.stream} kernel #{r.pos} ({r.site}) -> {w.stream} op {w.host}: {w.stream} never waited on "
            f"{r.stream} work of step {r.step} before the write"
        )
    mark = hb.barrier.get(r.step)
    barrier = mark.text() if mark is not None else ""
    if barrier:
        missing += f" (step {r.step}'s barrier: {barrier})"
    return Race(
        location=r.location,
        step=r.step,
        phase=r.phase,
        site=r.site,
        read_stream=r.stream,
        read_op=r.host,
        read_node=r.node,
        read_graph=r.graph,
        write_op=w.host,
        write_stream=w.stream,
        write_step=w.step,
        write_by=hb.trace.ops[w.host].by,
        synced_up_to=last_text,
        via=via,
        missing_edge=missing,
        barrier=barrier,
    )


def find_races(hb: HappensBefore) -> list[Race]:
    """Every read that races, each with its earliest racing write, in host order of the reads: a read races when
    a write of its location enqueued after it (host order) is not ordered after it."""
    writes: dict[tuple[str, str], list[Kernel]] = defaultdict(list)  # (location, stream) -> writes in host order
    for k in hb.kernels:
        if k.is_write:
            writes[(k.location, k.stream)].append(k)
    hosts = {key: [w.host for w in ws] for key, ws in writes.items()}
    write_streams = defaultdict(list)
    for loc, stream in writes:
        write_streams[loc].append(stream)
    races: list[Race] = []
    for r in hb.kernels:
        if r.is_write:
            continue
        earliest: Kernel | None = None
        for stream in write_streams.get(r.location, ()):
            key = (r.location, stream)
            i = bisect.bisect_right(hosts[key], r.host)
            if i < len(writes[key]):
                w = writes[key][i]
                if not hb.hb(r, w) and (earliest is None or w.host < earliest.host):
                    earliest = w
        if earliest is not None:
            races.append(_race(hb, r, earliest))
    return races


def check_trace(trace: Trace) -> CheckReport:
    hb = analyze(trace)
    races = find_races(hb)
    return CheckReport(
        scenario=trace.scenario,
        steps=trace.steps,
        verdict=Verdict.COUNTEREXAMPLE if races else Verdict.PROVED,
        races=tuple(races),
        ops=len(trace.ops),
        kernels=len(hb.kernels),
    )
