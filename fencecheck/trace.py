"""The one trace format: the host-ordered device operations of a run, shared by reference, simulator, model and GPU.

A ``Trace`` lists streams, events (sorted by id; ``external`` ones can be recorded inside graphs), captured graphs
(sorted by id; each a linear chain of nodes: reads, external record nodes, and internal records that capture turns
into graph edges) and the host-ordered operations: device operations (records, waits, host synchronizes, reads,
writes, graph launches) and marks (host-side events with no device effect: run_batch boundaries, resolutions,
mailbox changes, the barrier's choice).

This module owns every name in a trace: ids are built only by ``stream_id``, ``ring_event``, ``fresh_event``,
``forward_done_event``, ``marker_event`` and ``graph_id``; a mark is one of a closed set of kinds (``MarkKind``),
each with typed fields. The one free-text field is ``by`` (who issued an operation, for people): it is excluded
from equality, so two traces are equal exactly when their protocols are (docs/regress.md states the contract).

JSON round trip: ``Trace.to_json`` / ``fencecheck.trace_json.parse_json`` (which validates a document as strictly
as a scenario file: a malformed one raises ``TraceError`` naming the file and the key).
"""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass, field
from typing import ClassVar, NewType, Union

from .vocab import PUBLISHING_ENDS, WORKER_SITE, ForwardMode, ReadSite, SharedReadEnds, StepKind, Stream

StreamId = NewType("StreamId", str)
EventId = NewType("EventId", str)
GraphId = NewType("GraphId", str)

FORMAT = "fencecheck-trace/2"

#: Every site a read may carry: a backend's sites and the worker's (``WORKER_SITE``, after a runner returns).
SITES: tuple[str, ...] = tuple(s.value for s in ReadSite) + (WORKER_SITE,)


def _prose() -> str:
    """The ``by`` field: free text for people, excluded from equality (and so from conformance)."""
    return field(default="", compare=False)


# -- ids ----------------------------------------------------------------------------------------------------------


def stream_id(stream: Stream) -> StreamId:
    """The id of one of the streams (docs/sglang-mechanism.md#streams): S, F, P."""
    return StreamId(Stream(stream).value)


def ring_event(owner: str, i: int) -> EventId:
    """Event ``i`` of model runner ``owner``'s ring ``shared_read_done_events``."""
    return EventId(f"{owner}.ring{i}")


def fresh_event(owner: str, n: int) -> EventId:
    """The ``n``-th (from 0) fresh event recorded into model runner ``owner``'s mailbox by a runner with
    ``fresh_events`` (a new ``torch.cuda.Event`` per publish instead of the next of the ring)."""
    return EventId(f"{owner}.fresh{n}")


def forward_done_event() -> EventId:
    """The event the pipeline-parallel loop records on F when ``run_batch`` returns and the host synchronises on
    before processing results (R8)."""
    return EventId("scheduler.forward_done")


def marker_event(runner: str) -> EventId:
    """CUDA-graph runner ``runner``'s in-graph marker ``in_graph_metadata_prep_done`` (an external event)."""
    return EventId(f"{runner}.marker")


def graph_id(runner: str, phase: str, mode: ForwardMode, backend: str, segment: int) -> GraphId:
    """The graph ``runner`` captures for ``phase`` run in ``mode`` with ``backend``, segment ``segment``."""
    return GraphId(f"{runner}/{phase}/{ForwardMode(mode).value}/{backend}#{segment}")


# -- host-side labels (the free ``by`` text; compared by nothing) -------------------------------------------------

BY_WORKER = "worker"
BY_SCHEDULER = "scheduler"


class WritePurpose(str, enum.Enum):
    """Why the scheduler writes shared state between steps (shown in ``by``)."""

    PREPARE = "prepare"
    PROCESS_AND_PREPARE = "process+prepare"
    PROCESS_RESULTS = "process results"
    PROCESS_RESULTS_UNFENCED = "process results, before the deferred barrier"


#: ``by`` of the schedule stream's wait on F in the non-overlap loop: the forward runs on S itself, so everything the
#: scheduler issues after ``run_batch`` is stream-ordered after it (R7 is how the trace expresses that).
BY_FORWARD_ON_S = f"{BY_SCHEDULER}:forward on S"
#: ``by`` of the pipeline-parallel loop's record on F and host synchronize (R1, R8).
BY_HOST_SYNC = f"{BY_SCHEDULER}:host synchronize before processing results"


def write_by(purpose: WritePurpose) -> str:
    return f"{BY_SCHEDULER}:{WritePurpose(purpose).value}"


# -- graph nodes ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadNode:
    """A kernel inside a graph that reads a shared location."""

    location: str
    site: str
    kind: ClassVar[str] = "read"


@dataclass(frozen=True)
class RecordNode:
    """An event-record node (``cudaEventRecordExternal`` during capture): records ``event`` on every launch (R4, R5)."""

    event: EventId
    kind: ClassVar[str] = "record"


@dataclass(frozen=True)
class InternalRecordNode:
    """A default-flag record issued during capture: it became a graph edge and records no real event (R4)."""

    event: EventId
    kind: ClassVar[str] = "record_internal"


GraphNode = Union[ReadNode, RecordNode, InternalRecordNode]
NODE_TYPES: tuple[type, ...] = (ReadNode, RecordNode, InternalRecordNode)


@dataclass(frozen=True)
class Graph:
    id: GraphId
    runner: str
    nodes: tuple[GraphNode, ...]


@dataclass(frozen=True)
class EventDecl:
    id: EventId
    external: bool = False


# -- host-ordered device operations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    """``event.record(stream)`` (R1)."""

    stream: StreamId
    event: EventId
    by: str = _prose()
    kind: ClassVar[str] = "record"


@dataclass(frozen=True)
class WaitEvent:
    """``stream.wait_event(event)`` (R2, R3)."""

    stream: StreamId
    event: EventId
    by: str = _prose()
    kind: ClassVar[str] = "wait_event"


@dataclass(frozen=True)
class WaitStream:
    """``stream.wait_stream(other)`` (R7)."""

    stream: StreamId
    other: StreamId
    by: str = _prose()
    kind: ClassVar[str] = "wait_stream"


@dataclass(frozen=True)
class HostSync:
    """``event.synchronize()`` (``cudaEventSynchronize``): the host blocks until ``event``'s snapshot has completed,
    so every operation the host issues afterwards, on any stream, starts after it (R8)."""

    event: EventId
    by: str = _prose()
    kind: ClassVar[str] = "host_sync"


@dataclass(frozen=True)
class Read:
    """An out-of-graph kernel on ``stream`` reading ``location`` for ``step``'s ``phase`` at ``site``."""

    stream: StreamId
    location: str
    step: int
    phase: str
    site: str
    by: str = _prose()
    kind: ClassVar[str] = "read"


@dataclass(frozen=True)
class Write:
    """A scheduler write of ``location``, stamped with the step it prepares."""

    stream: StreamId
    location: str
    step: int
    by: str = _prose()
    kind: ClassVar[str] = "write"


@dataclass(frozen=True)
class Replay:
    """A launch of ``graph`` on ``stream`` for ``step``'s ``phase`` (R5, R6)."""

    stream: StreamId
    graph: GraphId
    step: int
    phase: str
    by: str = _prose()
    kind: ClassVar[str] = "replay"


# -- marks: host-side events with no device effect --------------------------------------------------------------


class MarkKind(str, enum.Enum):
    """The closed set of marks."""

    RUN_BATCH_BEGIN = "run_batch_begin"
    RUN_BATCH_RETURN = "run_batch_return"
    RESOLVE = "resolve"
    MAILBOX_SET = "mailbox_set"
    MAILBOX_CLEARED = "mailbox_cleared"
    BARRIER_DISABLED = "barrier_disabled"
    BARRIER_FINE = "barrier_fine"
    BARRIER_COARSE = "barrier_coarse"


class ClearReason(str, enum.Enum):
    """Why a mailbox was set to None: the worker consumed it before a phase (DSpark) or cleared it after one
    (NGRAM), the barrier reset it after reading it (docs/sglang-mechanism.md#the-war-barrier,
    #one-decode-step-per-algorithm), or a ``clear_then_resolve`` runner cleared it after its out-of-graph prep,
    before resolving (docs/sglang-0.5.23.md#47-the-eagle-draft-extend-runner)."""

    CONSUMED_BEFORE = "consumed_before"
    CLEARED_AFTER = "cleared_after"
    BARRIER_RESET = "barrier_reset"
    CLEARED_BEFORE_RESOLVE = "cleared_before_resolve"


class CoarseReason(str, enum.Enum):
    """Why the barrier fell back to ``S.wait_stream(F)``: coarse was forced, or the mailbox held no event."""

    FORCED = "forced"
    EMPTY_MAILBOX = "empty_mailbox"


#: The publish points a mailbox can be set at (``UNKNOWN`` publishes nothing).
PUBLISH_POINTS = PUBLISHING_ENDS


class Mark:
    """Base of the marks. Every mark has a ``step`` and the free ``by``; ``mark`` is its kind."""

    kind: ClassVar[str] = "mark"
    mark: ClassVar[MarkKind]

    def text(self) -> str:
        """The mark for people (reports); nothing parses it."""
        raise NotImplementedError


@dataclass(frozen=True)
class RunBatchBegin(Mark):
    """``run_batch(step)`` begins a step of kind ``step_kind``."""

    step: int
    step_kind: StepKind
    by: str = _prose()
    mark: ClassVar[MarkKind] = MarkKind.RUN_BATCH_BEGIN

    def text(self) -> str:
        return f"run_batch({self.step}) begins ({self.step_kind.value})"


@dataclass(frozen=True)
class RunBatchReturn(Mark):
    """``run_batch(step)`` returns: the safety property is stated from here (writes enqueued after it must follow
    every read of the step); the race check reads the host order of the device ops instead, which on the
    reference's traces is the same check (docs/simulator.md, "The race check")."""

    step: int
    by: str = _prose()
    mark: ClassVar[MarkKind] = MarkKind.RUN_BATCH_RETURN

    def text(self) -> str:
        return f"run_batch({self.step}) returns"


@dataclass(frozen=True)
class Resolve(Mark):
    """A runner resolved ``phase``'s declaration for ``mode`` to the publish point ``resolved``
    (docs/sglang-mechanism.md#resolution)."""

    step: int
    phase: str
    mode: ForwardMode
    resolved: SharedReadEnds
    by: str = _prose()
    mark: ClassVar[MarkKind] = MarkKind.RESOLVE

    def text(self) -> str:
        return f"{self.phase}: {self.mode.value} -> {self.resolved.name}"


@dataclass(frozen=True)
class MailboxSet(Mark):
    """Model runner ``owner``'s mailbox now holds ``event``, published at ``point`` (a ring event recorded on F
    for ``PRE_REPLAY``/``POST_REPLAY``, the runner's marker for ``IN_REPLAY``)."""

    step: int
    owner: str
    event: EventId
    point: SharedReadEnds
    by: str = _prose()
    mark: ClassVar[MarkKind] = MarkKind.MAILBOX_SET

    def text(self) -> str:
        return f"{self.owner} <- {self.event} ({self.point.name})"


@dataclass(frozen=True)
class MailboxCleared(Mark):
    """Model runner ``owner``'s mailbox now holds None, for ``why``; ``phase`` names the phase the worker consumed
    it before or cleared it after (empty for a barrier reset)."""

    step: int
    owner: str
    why: ClearReason
    phase: str = ""
    by: str = _prose()
    mark: ClassVar[MarkKind] = MarkKind.MAILBOX_CLEARED

    def text(self) -> str:
        return f"{self.owner} <- None ({self.why.value}{' ' + self.phase if self.phase else ''})"


@dataclass(frozen=True)
class BarrierDisabled(Mark):
    """``_apply_war_barrier`` returned at once: the barrier is off."""

    step: int
    by: str = _prose()
    mark: ClassVar[MarkKind] = MarkKind.BARRIER_DISABLED

    def text(self) -> str:
        return "disabled"


@dataclass(frozen=True)
class BarrierFine(Mark):
    """The barrier makes S wait on ``event``, taken from the publisher's mailbox."""

    step: int
    event: EventId
    by: str = _prose()
    mark: ClassVar[MarkKind] = MarkKind.BARRIER_FINE

    def text(self) -> str:
        return f"fine: S waits on {self.event}"


@dataclass(frozen=True)
class BarrierCoarse(Mark):
    """The barrier makes S wait on all of F, for ``reason``."""

    step: int
    reason: CoarseReason
    by: str = _prose()
    mark: ClassVar[MarkKind] = MarkKind.BARRIER_COARSE

    def text(self) -> str:
        why = "forced" if self.reason is CoarseReason.FORCED else "empty mailbox"
        return f"coarse ({why}): S waits on F"


BARRIER_MARKS: tuple[type, ...] = (BarrierDisabled, BarrierFine, BarrierCoarse)
MARK_TYPES: dict[MarkKind, type] = {t.mark: t for t in (RunBatchBegin, RunBatchReturn, Resolve, MailboxSet,
                                                         MailboxCleared, BarrierDisabled, BarrierFine, BarrierCoarse)}
DEVICE_OPS: tuple[type, ...] = (Record, WaitEvent, WaitStream, HostSync, Read, Write, Replay)

Op = Union[Record, WaitEvent, WaitStream, HostSync, Read, Write, Replay, RunBatchBegin, RunBatchReturn, Resolve, MailboxSet,
           MailboxCleared, BarrierDisabled, BarrierFine, BarrierCoarse]


def protocol_fields(obj) -> tuple[str, ...]:
    """The fields of an op, node or declaration that are part of the protocol: all but the free ``by``."""
    return tuple(f.name for f in dataclasses.fields(obj) if f.compare)


def _encode(value):
    if isinstance(value, SharedReadEnds):
        return value.name
    if isinstance(value, enum.Enum):
        return value.value
    return value


def encode_item(obj) -> dict:
    """An op or a graph node as its JSON object: its tag (``op``, plus ``mark`` for marks; ``node``) first."""
    if isinstance(obj, NODE_TYPES):
        head = {"node": obj.kind}
    elif isinstance(obj, Mark):
        head = {"op": "mark", "mark": obj.mark.value}
    else:
        head = {"op": obj.kind}
    return {**head, **{f.name: _encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}


@dataclass(frozen=True)
class Trace:
    """A whole run: what was declared and what the host enqueued, in host order. ``meta`` (the resolution rule the
    run used) is information for people and compared by nothing, like ``scenario``'s name."""

    scenario: str
    steps: int
    streams: tuple[StreamId, ...]
    events: tuple[EventDecl, ...]
    graphs: tuple[Graph, ...]
    ops: tuple[Op, ...]
    meta: dict = field(default_factory=dict, compare=False)

    def graph(self, gid: GraphId) -> Graph:
        for g in self.graphs:
            if g.id == gid:
                return g
        raise KeyError(gid)

    # -- JSON -------------------------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "scenario": self.scenario,
            "steps": self.steps,
            "streams": list(self.streams),
            "events": [{"id": e.id, "external": e.external} for e in self.events],
            "graphs": [{"id": g.id, "runner": g.runner, "nodes": [encode_item(n) for n in g.nodes]} for g in self.graphs],
            "ops": [encode_item(op) for op in self.ops],
            "meta": dict(self.meta),
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)
