"""The reference's device interface on real CUDA (PyTorch streams, events, CUDA graphs).

``CudaDevice`` records every call exactly like the simulator's ``TraceDevice`` (so conformance is checked on the same
trace format) and executes it: streams S, F, P are ``torch.cuda.Stream``s; ring events ``torch.cuda.Event``s; the
marker ``torch.cuda.Event(external=True)`` recorded inside ``torch.cuda.graph`` capture, which CUDA turns into an
event-record node (R4, R5); each shared location is a one-element int64 device tensor. A write fills it with the step
it prepares on S; a read copies it into a private output slot (in a graph: a static slot, copied into a per-launch
history right after each launch, on F, so every launch's observation is kept). A ``DelayPolicy`` puts a spin kernel
(``torch.cuda._sleep``) before chosen reads, captured into the graph for in-graph reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from fencecheck.reference.sim.recorder import TraceDevice
from fencecheck.trace import EventId, GraphId, Mark, StreamId

from fencecheck.reference.sim.interleave import Observation

from .plan import DelayPolicy

MAX_READS = 1 << 16  # observation slots per run
GRAPH_SLOTS = 64  # reads one graph may hold


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
        self.buffers = {loc: torch.zeros(1, dtype=torch.int64, device="cuda") for loc in locations}
        self.out = torch.zeros(MAX_READS, dtype=torch.int64, device="cuda")
        self.slots: list[tuple[int, str, str, str]] = []  # (step, phase, site, location) per output slot
        self.graphs: dict[str, _Graph] = {}
        self.capturing: tuple[str, _Graph] | None = None
        self.pending: list = []  # graph nodes captured so far: (site, location)

    # -- helpers ----------------------------------------------------------------------------------------------

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
        self.streams[stream].wait_event(self.events[event])  # never recorded: PyTorch does nothing (R2)

    def wait_stream(self, stream: StreamId, other: StreamId, *, by: str = "") -> None:
        self.rec.wait_stream(stream, other, by=by)
        self.streams[stream].wait_stream(self.streams[other])

    def read(self, stream: StreamId, location: str, *, step: int, phase: str, site: str, by: str = "") -> None:
        self.rec.read(stream, location, step=step, phase=phase, site=site, by=by)
        torch = self.torch
        with torch.cuda.stream(self.streams[stream]):
            if self.policy.delays(phase, site, location):
                torch.cuda._sleep(self.policy.cycles)
            if self.capturing is not None and self.capturing[0] == stream:
                g = self.capturing[1]
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
        g = _Graph(torch.cuda.CUDAGraph(), torch.zeros(GRAPH_SLOTS, dtype=torch.int64, device="cuda"), [])
        g.ctx = torch.cuda.graph(g.graph, stream=self.streams[stream])
        g.ctx.__enter__()
        self.capturing = (stream, g)

    def end_capture(self) -> GraphId:
        gid = self.rec.end_capture()
        stream, g = self.capturing
        g.ctx.__exit__(None, None, None)
        g.ctx = None
        self.graphs[gid] = g
        self.capturing = None
        return gid

    def replay(self, graph: GraphId, stream: StreamId, *, step: int, phase: str, by: str = "") -> None:
        self.rec.replay(graph, stream, step=step, phase=phase, by=by)
        g = self.graphs[graph]
        with self.torch.cuda.stream(self.streams[stream]):
            g.graph.replay()
            if g.reads:
                first = len(self.slots)
                for site, loc in g.reads:
                    self._slot(step, phase, site, loc)
                self.out[first:first + len(g.reads)].copy_(g.out[:len(g.reads)])  # after the launch, on F

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
