"""Happens-before of a trace by vector clocks: CUDA rules R1-R8 of docs/cuda-rules.md.

Only kernels (reads and writes) tick a stream's clock; records, waits and graph record nodes move clocks between
streams. For a fixed host order every binding is decided by that order, so this is exact, not an approximation:
kernel ``a`` happens before kernel ``b`` iff ``b.vc[a.stream] >= a.vc[a.stream]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fencecheck.trace import (
    BARRIER_MARKS,
    HostSync,
    InternalRecordNode,
    Mark,
    Read,
    ReadNode,
    Record,
    RecordNode,
    Replay,
    Trace,
    WaitEvent,
    WaitStream,
    Write,
)


@dataclass(frozen=True)
class Kernel:
    """A read or write as the device runs it. ``host`` is the index of its op in ``trace.ops``; ``node`` its index in
    the replayed graph (-1 outside graphs); ``pos`` its 1-based position on its stream; ``vc`` its vector clock."""

    index: int
    host: int
    node: int
    stream: str
    is_write: bool
    location: str
    step: int
    phase: str
    site: str
    graph: str
    pos: int
    vc: tuple[int, ...]


@dataclass(frozen=True)
class Sync:
    """The host op (a wait) that last raised a stream's knowledge of another stream, and what it bound to."""

    host: int
    what: str


@dataclass
class HappensBefore:
    """The kernels of a trace with their clocks, plus what the race explainer needs."""

    trace: Trace
    streams: tuple[str, ...]
    kernels: list[Kernel] = field(default_factory=list)
    by_stream_pos: dict[tuple[str, int], int] = field(default_factory=dict)
    #: for each write kernel index: per other stream, the Sync that gave the write's stream its knowledge of it.
    sync_at: dict[int, dict[str, Sync]] = field(default_factory=dict)
    #: step -> the first barrier mark of that step (what the barrier did after it).
    barrier: dict[int, Mark] = field(default_factory=dict)

    def hb(self, a: Kernel, b: Kernel) -> bool:
        """True when ``a`` happens before ``b`` (``a`` is not ``b``)."""
        si = self.streams.index(a.stream)
        return a.index != b.index and b.vc[si] >= a.vc[si]

    def kernel_at(self, stream: str, pos: int) -> Kernel | None:
        i = self.by_stream_pos.get((stream, pos))
        return None if i is None else self.kernels[i]


def analyze(trace: Trace) -> HappensBefore:
    """Give every kernel of ``trace`` its vector clock."""
    streams = tuple(trace.streams)
    sidx = {s: i for i, s in enumerate(streams)}
    n = len(streams)
    clock = {s: [0] * n for s in streams}
    source: dict[str, dict[str, Sync]] = {s: {} for s in streams}
    snapshot: dict[str, tuple[tuple[int, ...], Sync] | None] = {e.id: None for e in trace.events}
    graph_done: dict[str, tuple[int, ...]] = {}
    graphs = {g.id: g for g in trace.graphs}
    out = HappensBefore(trace, streams)

    def join(stream: str, other: tuple[int, ...], via: Sync) -> None:
        mine = clock[stream]
        for i, v in enumerate(other):
            if v > mine[i]:
                mine[i] = v
                source[stream][streams[i]] = via

    def kernel(host: int, node: int, stream: str, is_write: bool, loc: str, step: int, phase: str, site: str, graph: str):
        c = clock[stream]
        c[sidx[stream]] += 1
        k = Kernel(len(out.kernels), host, node, stream, is_write, loc, step, phase, site, graph, c[sidx[stream]], tuple(c))
        out.kernels.append(k)
        out.by_stream_pos[(stream, k.pos)] = k.index
        if is_write:
            out.sync_at[k.index] = dict(source[stream])

    for h, op in enumerate(trace.ops):
        if isinstance(op, Read):
            kernel(h, -1, op.stream, False, op.location, op.step, op.phase, op.site, "")
        elif isinstance(op, Write):
            kernel(h, -1, op.stream, True, op.location, op.step, "", "", "")
        elif isinstance(op, Record):
            # R1: the record snapshots the work enqueued on the stream now; a re-record overwrites it.
            snapshot[op.event] = (tuple(clock[op.stream]), Sync(h, f"{op.event} recorded on {op.stream} (op {h})"))
        elif isinstance(op, WaitEvent):
            # R2: binds to the latest snapshot at call time; never recorded -> no-op. R3: later work waits.
            snap = snapshot[op.event]
            if snap is not None:
                join(op.stream, snap[0], Sync(h, f"{op.stream}.wait_event({op.event}) -> {snap[1].what}"))
        elif isinstance(op, WaitStream):
            # R7: wait_stream = record a fresh event on `other` now and wait on it.
            join(op.stream, tuple(clock[op.other]), Sync(h, f"{op.stream}.wait_stream({op.other}) (op {h})"))
        elif isinstance(op, HostSync):
            # R8: the host blocks until the snapshot completed; everything it issues later, on any stream, follows.
            snap = snapshot[op.event]
            if snap is not None:
                for s in streams:
                    join(s, snap[0], Sync(h, f"host synchronized on {op.event} -> {snap[1].what}"))
        elif isinstance(op, Replay):
            # R6: a launch is ordered after prior work on its stream and after prior launches of the same graph.
            if op.graph in graph_done:
                join(op.stream, graph_done[op.graph], Sync(h, f"earlier launch of {op.graph}"))
            for j, nd in enumerate(graphs[op.graph].nodes):
                if isinstance(nd, ReadNode):
                    kernel(h, j, op.stream, False, nd.location, op.step, op.phase, nd.site, op.graph)
                elif isinstance(nd, RecordNode):
                    # R5: the record node records on every launch, after its predecessors in the graph.
                    where = f"record node of {nd.event} in {op.graph}, launch op {h}"
                    snapshot[nd.event] = (tuple(clock[op.stream]), Sync(h, where))
                elif isinstance(nd, InternalRecordNode):
                    pass  # R4: captured with default flags: an internal edge, no real event is recorded.
            graph_done[op.graph] = tuple(clock[op.stream])
        elif isinstance(op, BARRIER_MARKS):
            out.barrier.setdefault(op.step, op)
    return out
