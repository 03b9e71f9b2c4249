"""The reference's device interface on real CUDA (PyTorch streams, events, CUDA graphs).

``CudaDevice`` records every call like the simulator's ``TraceDevice`` (so the calls can be compared with the
trace) and executes it: streams S, F, P are ``torch.cuda.Stream``s (non-blocking); ring events
``torch.cuda.Event``s; the marker a ``torch.cuda.Event(external=True)`` recorded inside ``torch.cuda.graph`` capture,
which CUDA turns into an event-record node (R4, R5); each shared location is a one-element int64 device tensor.
Every kernel is issued on the stream the trace names. A write fills its location with the step it prepares, on
that stream; a read copies its location into a private observation slot (in a graph: a static slot, copied into a
per-launch history right after each launch, on the launch stream, so every launch's observation is kept). A
``DelayPolicy`` puts a spin kernel (``torch.cuda._sleep``) before chosen reads, captured into the graph for in-graph
reads. ``observations()`` synchronizes and reads the slots back; ``gpu.observe`` judges them against the trace.

Buffers are allocated and initialized on the current (default) stream, which nothing orders the non-blocking
streams after, so every allocation is followed by a device synchronize before any stream uses it.
"""

from __future__ import annotations

from dataclasses import dataclass

from fencecheck.reference.sim.recorder import TraceDevice
from fencecheck.trace import EventId, GraphId, Mark, StreamId

from fencecheck.reference.sim.interleave import Observation

from .observe import INITIAL, UNSET
from .plan import DelayPolicy

MAX_READS = 1 << 16  # observation slots per run
GRAPH_SLOTS = 64  # reads one graph may hold


def missing_features(torch) -> str:
    """Empty when ``torch`` has what ``CudaDevice`` needs (a CUDA device, ``Event(external=True)`` from torch 2.8,
    the ``_sleep`` spin kernel); otherwise what is missing, in words."""
    if not torch.cuda.is_available():
        return "no CUDA device here"
    if not hasattr(torch.cuda, "_sleep"):
        return f"torch {torch.__version__} has no torch.cuda._sleep"
    try:
        torch.cuda.Event(external=True)
    except TypeError:
        return f"torch {torch.__version__}: torch.cuda.Event takes no external= (torch >= 2.8 needed)"
    return ""


@dataclass
class _Graph:
    graph: object  # torch.cuda.CUDAGraph
    out: object  # static output tensor of the graph's reads
    reads: list  # (site, location) per node read, in node order
    ctx: object = None


class CudaDevice:
    """Implements ``fencecheck.reference.device.Device`` on CUDA; ``observations()`` after the run."""

    def __init__(self, locations, policy: DelayPolicy = DelayPolicy(), torch=None):
        if torch is None:
            import torch
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device")
        self.torch = torch
        self.policy = policy
        self.rec = TraceDevice()
        self.streams: dict[str, object] = {}
        self.events: dict[str, object] = {}
        # Shared buffers exist before any capture, so graphs read the same memory the scheduler writes.
        self.buffers = {loc: self._alloc(1, INITIAL) for loc in locations}
        self.out = self._alloc(MAX_READS, UNSET)
        self.slots: list[tuple[int, str, str, str]] = []  # (step, phase, site, location) per output slot
        self.graphs: dict[str, _Graph] = {}
        self.capturing: tuple[str, _Graph] | None = None

    # -- helpers ----------------------------------------------------------------------------------------------

    def _alloc(self, n: int, value: int):
        """A device tensor of ``n`` int64 cells holding ``value``, ready for use on any stream."""
        torch = self.torch
        t = torch.zeros(n, dtype=torch.int64, device="cuda")
        if value:
            t.fill_(value)
        torch.cuda.synchronize()  # the fill ran on the default stream; the non-blocking streams are not ordered after it
        return t

    def _buf(self, location: str):
        return self.buffers[location]

    def _slot(self, step: int, phase: str, site: str, location: str) -> int:
        self.slots.append((step, phase, site, location))
        if len(self.slots) > MAX_READS:
            raise RuntimeError("too many reads for one run")
        return len(self.slots) - 1

    # -- the Device interface ---------------------------------------------------------------------------------

    def stream(self, name: str) -> StreamId:
        sid = self.rec.stream(name)
        if name not in self.streams:
            self.streams[name] = self.torch.cuda.Stream()
        return sid

    def event(self, name: str, external: bool = False) -> EventId:
        eid = self.rec.event(name, external)
        self.events[name] = self.torch.cuda.Event(external=True) if external else self.torch.cuda.Event()
        return eid

    def record(self, event: EventId, stream: StreamId, *, by: str = "") -> None:
        self.rec.record(event, stream, by=by)
        # During capture on `stream`, an external event becomes an event-record node (R4); others an internal edge.
        self.events[event].record(self.streams[stream])

    def wait_event(self, stream: StreamId, event: EventId, *, by: str = "") -> None:
        self.rec.wait_event(stream, event, by=by)
        # Never recorded: PyTorch does nothing (R2). Last recorded with default flags during a capture: CUDA refuses (R4).
        self.streams[stream].wait_event(self.events[event])

    def wait_stream(self, stream: StreamId, other: StreamId, *, by: str = "") -> None:
        self.rec.wait_stream(stream, other, by=by)
        self.streams[stream].wait_stream(self.streams[other])

    def host_sync(self, event: EventId, *, by: str = "") -> None:
        self.rec.host_sync(event, by=by)
        self.events[event].synchronize()  # R8: cudaEventSynchronize

    def read(self, stream: StreamId, location: str, *, step: int, phase: str, site: str, by: str = "") -> None:
        self.rec.read(stream, location, step=step, phase=phase, site=site, by=by)
        torch = self.torch
        with torch.cuda.stream(self.streams[stream]):
            if self.policy.delays(phase, site, location):
                torch.cuda._sleep(self.policy.cycles)
            if self.capturing is not None and self.capturing[0] == stream:
                g = self.capturing[1]
                if len(g.reads) == GRAPH_SLOTS:
                    raise RuntimeError(f"more than {GRAPH_SLOTS} reads in one graph")
                g.out[len(g.reads):len(g.reads) + 1].copy_(self._buf(location))
                g.reads.append((site, location))
            else:
                i = self._slot(step, phase, site, location)
                self.out[i:i + 1].copy_(self._buf(location))

    def write(self, stream: StreamId, location: str, *, step: int, by: str = "") -> None:
        self.rec.write(stream, location, step=step, by=by)
        with self.torch.cuda.stream(self.streams[stream]):
            self._buf(location).fill_(step)

    def begin_capture(self, stream: StreamId, name: str, *, runner: str) -> None:
        self.rec.begin_capture(stream, name, runner=runner)
        torch = self.torch
        g = _Graph(torch.cuda.CUDAGraph(), self._alloc(GRAPH_SLOTS, UNSET), [])
        g.ctx = torch.cuda.graph(g.graph, stream=self.streams[stream])
        g.ctx.__enter__()
        self.capturing = (stream, g)

    def end_capture(self) -> GraphId:
        gid = self.rec.end_capture()
        stream, g = self.capturing
        self.capturing = None
        g.ctx.__exit__(None, None, None)
        g.ctx = None
        self.graphs[gid] = g
        return gid

    def abort(self, err: BaseException) -> None:
        """Close a capture left open by ``err`` (a CUDA error mid-capture), so the process can go on."""
        if self.capturing is not None:
            _, g = self.capturing
            self.capturing = None
            try:
                g.ctx.__exit__(type(err), err, err.__traceback__)
            except Exception:  # ending a capture that CUDA already invalidated raises; the capture is closed either way
                pass

    def replay(self, graph: GraphId, stream: StreamId, *, step: int, phase: str, by: str = "") -> None:
        self.rec.replay(graph, stream, step=step, phase=phase, by=by)
        g = self.graphs[graph]
        with self.torch.cuda.stream(self.streams[stream]):
            g.graph.replay()
            if g.reads:
                first = len(self.slots)
                for site, loc in g.reads:
                    self._slot(step, phase, site, loc)
                self.out[first:first + len(g.reads)].copy_(g.out[:len(g.reads)])  # after the launch, same stream

    def mark(self, mark: Mark) -> None:
        self.rec.mark(mark)

    # -- results ----------------------------------------------------------------------------------------------

    def observations(self) -> list[Observation]:
        self.torch.cuda.synchronize()
        seen = self.out[: len(self.slots)].tolist()
        return [Observation(i, step, phase, site, loc, int(v))
                for i, ((step, phase, site, loc), v) in enumerate(zip(self.slots, seen))]

    def trace(self, scenario: str, steps: int, meta: dict | None = None):
        return self.rec.trace(scenario, steps, meta)
