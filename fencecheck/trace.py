"""The one trace format: the host-ordered device operations of a run, shared by reference, simulator, model and GPU.

A ``Trace`` lists streams, events (sorted by id) (``external`` ones can be recorded inside graphs), captured graphs (sorted by id; each a linear
chain of nodes: reads, external record nodes, and internal records that capture turns into graph edges) and the
host-ordered operations. Ids are distinct types so a stream can never stand in for an event. JSON round trip:
``Trace.to_json`` / ``Trace.from_json``; a malformed document raises ``TraceError`` naming the field.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import ClassVar, NewType, Union

from .errors import TraceError

StreamId = NewType("StreamId", str)
EventId = NewType("EventId", str)
GraphId = NewType("GraphId", str)

FORMAT = "fencecheck-trace/1"

#: Site label of reads the worker does on F after a runner returns (not a backend site).
WORKER_SITE = "worker_after"


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


@dataclass(frozen=True)
class Graph:
    id: GraphId
    runner: str
    nodes: tuple[GraphNode, ...]


@dataclass(frozen=True)
class EventDecl:
    id: EventId
    external: bool = False


# -- host-ordered operations ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    """``event.record(stream)`` (R1)."""

    stream: StreamId
    event: EventId
    by: str = ""
    kind: ClassVar[str] = "record"


@dataclass(frozen=True)
class WaitEvent:
    """``stream.wait_event(event)`` (R2, R3)."""

    stream: StreamId
    event: EventId
    by: str = ""
    kind: ClassVar[str] = "wait_event"


@dataclass(frozen=True)
class WaitStream:
    """``stream.wait_stream(other)`` (R7)."""

    stream: StreamId
    other: StreamId
    by: str = ""
    kind: ClassVar[str] = "wait_stream"


@dataclass(frozen=True)
class Read:
    """An out-of-graph kernel on ``stream`` reading ``location`` for ``step``'s ``phase`` at ``site``."""

    stream: StreamId
    location: str
    step: int
    phase: str
    site: str
    by: str = ""
    kind: ClassVar[str] = "read"


@dataclass(frozen=True)
class Write:
    """A scheduler write of ``location``, stamped with the step it prepares."""

    stream: StreamId
    location: str
    step: int
    by: str = ""
    kind: ClassVar[str] = "write"


@dataclass(frozen=True)
class Replay:
    """A launch of ``graph`` on ``stream`` for ``step``'s ``phase`` (R5, R6)."""

    stream: StreamId
    graph: GraphId
    step: int
    phase: str
    by: str = ""
    kind: ClassVar[str] = "replay"


@dataclass(frozen=True)
class Mark:
    """A host-side event with no device effect: ``run_batch_begin``/``run_batch_return`` (step), a publish, a
    mailbox change, the barrier's choice. ``run_batch_return`` is what the safety property is anchored on."""

    what: str
    step: int = 0
    detail: str = ""
    by: str = ""
    kind: ClassVar[str] = "mark"


Op = Union[Record, WaitEvent, WaitStream, Read, Write, Replay, Mark]
_OP_TYPES: dict[str, type] = {t.kind: t for t in (Record, WaitEvent, WaitStream, Read, Write, Replay, Mark)}
_NODE_TYPES: dict[str, type] = {t.kind: t for t in (ReadNode, RecordNode, InternalRecordNode)}


@dataclass(frozen=True)
class Trace:
    """A whole run: what was declared and what the host enqueued, in host order."""

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
        def enc(obj) -> dict:
            return {"op" if not isinstance(obj, (ReadNode, RecordNode, InternalRecordNode)) else "node": obj.kind,
                    **dataclasses.asdict(obj)}

        return {
            "format": FORMAT,
            "scenario": self.scenario,
            "steps": self.steps,
            "streams": list(self.streams),
            "events": [dataclasses.asdict(e) for e in self.events],
            "graphs": [{"id": g.id, "runner": g.runner, "nodes": [enc(n) for n in g.nodes]} for g in self.graphs],
            "ops": [enc(op) for op in self.ops],
            "meta": self.meta,
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    @classmethod
    def from_json(cls, text: str, source: str = "<trace>") -> "Trace":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise TraceError(source, "", f"not valid JSON ({err.msg} at line {err.lineno})") from None
        return cls.from_dict(data, source)

    @classmethod
    def from_dict(cls, data, source: str = "<trace>") -> "Trace":
        def need(obj, key, typ, where):
            if not isinstance(obj, dict) or key not in obj:
                raise TraceError(source, f"{where}.{key}" if where else key, "missing required key")
            val = obj[key]
            if not isinstance(val, typ) or (typ is int and isinstance(val, bool)):
                raise TraceError(source, f"{where}.{key}" if where else key, f"expected {typ.__name__}, got {val!r}")
            return val

        def dec(obj, types, tag, where):
            if not isinstance(obj, dict):
                raise TraceError(source, where, "expected an object")
            kind = obj.get(tag)
            if kind not in types:
                raise TraceError(source, f"{where}.{tag}", f"expected one of {', '.join(types)}, got {kind!r}")
            typ = types[kind]
            kwargs = {}
            for f in dataclasses.fields(typ):
                if f.name in obj:
                    want = int if f.type in ("int",) else (bool if f.type == "bool" else str)
                    kwargs[f.name] = need(obj, f.name, want, where)
                elif f.default is dataclasses.MISSING:
                    raise TraceError(source, f"{where}.{f.name}", "missing required key")
            extra = set(obj) - {f.name for f in dataclasses.fields(typ)} - {tag}
            if extra:
                raise TraceError(source, f"{where}.{sorted(extra)[0]}", f"unknown key for {tag} {kind!r}")
            return typ(**kwargs)

        if not isinstance(data, dict):
            raise TraceError(source, "", "expected a JSON object")
        fmt = data.get("format")
        if fmt != FORMAT:
            raise TraceError(source, "format", f"expected {FORMAT!r}, got {fmt!r}")
        streams = tuple(StreamId(s) for s in need(data, "streams", list, ""))
        events = []
        for i, e in enumerate(need(data, "events", list, "")):
            events.append(EventDecl(EventId(need(e, "id", str, f"events[{i}]")), bool(e.get("external", False))))
        graphs = []
        for i, g in enumerate(need(data, "graphs", list, "")):
            w = f"graphs[{i}]"
            nodes = tuple(dec(n, _NODE_TYPES, "node", f"{w}.nodes[{j}]") for j, n in enumerate(need(g, "nodes", list, w)))
            graphs.append(Graph(GraphId(need(g, "id", str, w)), need(g, "runner", str, w), nodes))
        ops = tuple(dec(o, _OP_TYPES, "op", f"ops[{i}]") for i, o in enumerate(need(data, "ops", list, "")))
        trace = cls(
            scenario=need(data, "scenario", str, ""),
            steps=need(data, "steps", int, ""),
            streams=streams,
            events=tuple(events),
            graphs=tuple(graphs),
            ops=ops,
            meta=data.get("meta", {}) if isinstance(data.get("meta", {}), dict) else {},
        )
        trace.check_references(source)
        return trace

    def check_references(self, source: str = "<trace>") -> None:
        """Raise ``TraceError`` if an op names a stream, event or graph the trace does not declare."""
        streams, events, graphs = set(self.streams), {e.id for e in self.events}, {g.id for g in self.graphs}
        for g in self.graphs:
            for j, n in enumerate(g.nodes):
                if isinstance(n, (RecordNode, InternalRecordNode)) and n.event not in events:
                    raise TraceError(source, f"graph {g.id}.nodes[{j}].event", f"undeclared event {n.event!r}")
        for i, op in enumerate(self.ops):
            for attr, known in (("stream", streams), ("other", streams), ("event", events), ("graph", graphs)):
                val = getattr(op, attr, None)
                if val is not None and val not in known:
                    raise TraceError(source, f"ops[{i}].{attr}", f"undeclared {attr} {val!r}")
