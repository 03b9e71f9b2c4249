"""``TraceDevice``: the simulator's device. It executes nothing; it records the host-ordered trace that the
happens-before engine (``hb``) and the interleaving executor (``interleave``) then give CUDA meaning."""

from __future__ import annotations

from fencecheck.errors import FencecheckError
from fencecheck.trace import (
    EventDecl,
    EventId,
    Graph,
    GraphId,
    HostSync,
    InternalRecordNode,
    Mark,
    Read,
    ReadNode,
    Record,
    RecordNode,
    Replay,
    StreamId,
    Trace,
    WaitEvent,
    WaitStream,
    Write,
)


class TraceDevice:
    """Implements ``reference.device.Device`` by appending to a trace."""

    def __init__(self):
        self._streams: list[StreamId] = []
        self._events: dict[EventId, EventDecl] = {}
        self._graphs: list[Graph] = []
        self._ops: list = []
        self._capture: tuple[StreamId, GraphId, str, list] | None = None

    # -- handles ----------------------------------------------------------------------------------------------

    def stream(self, name: str) -> StreamId:
        sid = StreamId(name)
        if sid not in self._streams:
            self._streams.append(sid)
        return sid

    def event(self, event: EventId, external: bool = False) -> EventId:
        eid = EventId(event)
        if eid in self._events:
            raise FencecheckError(f"event {eid!r} created twice")
        self._events[eid] = EventDecl(eid, external)
        return eid

    # -- operations -------------------------------------------------------------------------------------------

    def _capturing(self, stream: StreamId) -> list | None:
        if self._capture is not None and self._capture[0] == stream:
            return self._capture[3]
        return None

    def record(self, event: EventId, stream: StreamId, *, by: str = "") -> None:
        nodes = self._capturing(stream)
        if nodes is not None:
            # R4: only an external event recorded during capture becomes an event-record node.
            nodes.append(RecordNode(event) if self._events[event].external else InternalRecordNode(event))
        else:
            self._ops.append(Record(stream, event, by))

    def wait_event(self, stream: StreamId, event: EventId, *, by: str = "") -> None:
        if self._capturing(stream) is not None:
            raise FencecheckError("waits inside a capture are not part of the modelled protocol")
        self._ops.append(WaitEvent(stream, event, by))

    def wait_stream(self, stream: StreamId, other: StreamId, *, by: str = "") -> None:
        if self._capturing(stream) is not None:
            raise FencecheckError("waits inside a capture are not part of the modelled protocol")
        self._ops.append(WaitStream(stream, other, by))

    def host_sync(self, event: EventId, *, by: str = "") -> None:
        if self._capture is not None:
            raise FencecheckError("a host synchronize inside a capture is not part of the modelled protocol")
        self._ops.append(HostSync(event, by))

    def read(self, stream: StreamId, location: str, *, step: int, phase: str, site: str, by: str = "") -> None:
        nodes = self._capturing(stream)
        if nodes is not None:
            nodes.append(ReadNode(location, site))
        else:
            self._ops.append(Read(stream, location, step, phase, site, by))

    def write(self, stream: StreamId, location: str, *, step: int, by: str = "") -> None:
        self._ops.append(Write(stream, location, step, by))

    def begin_capture(self, stream: StreamId, graph: GraphId, *, runner: str) -> None:
        if self._capture is not None:
            raise FencecheckError("nested capture")
        self._capture = (stream, graph, runner, [])

    def end_capture(self) -> GraphId:
        if self._capture is None:
            raise FencecheckError("end_capture without begin_capture")
        _, gid, runner, nodes = self._capture
        self._capture = None
        self._graphs.append(Graph(gid, runner, tuple(nodes)))
        return gid

    def replay(self, graph: GraphId, stream: StreamId, *, step: int, phase: str, by: str = "") -> None:
        self._ops.append(Replay(stream, graph, step, phase, by))

    def mark(self, mark: Mark) -> None:
        if not isinstance(mark, Mark):
            raise FencecheckError(f"not a mark: {mark!r}")
        self._ops.append(mark)

    # -- result -----------------------------------------------------------------------------------------------

    def trace(self, scenario: str, steps: int, meta: dict | None = None) -> Trace:
        return Trace(
            scenario=scenario,
            steps=steps,
            streams=tuple(self._streams),
            # Declarations in canonical order (by id): the order of creation depends on the order a scenario lists
            # its runners and step kinds, which carries no meaning.
            events=tuple(sorted(self._events.values(), key=lambda e: e.id)),
            graphs=tuple(sorted(self._graphs, key=lambda g: g.id)),
            ops=tuple(self._ops),
            meta=meta or {},
        )
