"""The small device interface the reference protocol is written against.

Two implementations: ``fencecheck.reference.sim.recorder.TraceDevice`` (the default: records the host-ordered trace
for the CPU simulator) and the CUDA device of ``fencecheck.gpu``. The protocol code never asks the device anything
back except handles, so every implementation sees the same call sequence for the same scenario.
"""

from __future__ import annotations

from typing import Protocol

from fencecheck.trace import EventId, GraphId, Mark, StreamId


class Device(Protocol):
    """Streams, events, graph capture and replay, and reads/writes of named shared locations.

    While a capture is open on a stream, ``read`` and ``record`` on that stream become graph nodes instead of
    running: a record of an ``external`` event becomes an event-record node (R4), any other record becomes an
    internal graph edge that records nothing real.
    """

    def stream(self, name: str) -> StreamId: ...

    def event(self, event: EventId, external: bool = False) -> EventId:
        """Create ``event`` (its id from ``fencecheck.trace.ring_event``, ``fresh_event``, ``forward_done_event``
        or ``marker_event``)."""
        ...

    def record(self, event: EventId, stream: StreamId, *, by: str = "") -> None: ...

    def wait_event(self, stream: StreamId, event: EventId, *, by: str = "") -> None: ...

    def wait_stream(self, stream: StreamId, other: StreamId, *, by: str = "") -> None: ...

    def host_sync(self, event: EventId, *, by: str = "") -> None:
        """Block the host until ``event``'s latest record has completed (``cudaEventSynchronize``, R8)."""
        ...

    def read(self, stream: StreamId, location: str, *, step: int, phase: str, site: str, by: str = "") -> None: ...

    def write(self, stream: StreamId, location: str, *, step: int, by: str = "") -> None: ...

    def begin_capture(self, stream: StreamId, graph: GraphId, *, runner: str) -> None:
        """Start capturing ``graph`` (its id from ``fencecheck.trace.graph_id``) on ``stream``."""
        ...

    def end_capture(self) -> GraphId: ...

    def replay(self, graph: GraphId, stream: StreamId, *, step: int, phase: str, by: str = "") -> None: ...

    def mark(self, mark: Mark) -> None:
        """A host-side event with no device effect (run_batch boundaries, resolutions, mailbox changes, barrier
        choices), one of the typed marks of ``fencecheck.trace``."""
        ...
