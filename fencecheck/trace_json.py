"""Reading a trace document, validated as strictly as a scenario file.

A document is accepted only when every object has exactly its keys (``by`` is the one optional field of an op),
every value has its type (a boolean is not an integer, a float is not an integer, strings where strings belong,
enumerations spelled as in ``fencecheck.trace``), every count and name is within the bounds below, declarations are
unique and referenced before use, and the ops have the protocol's shape: every step 1..``steps`` has its
``run_batch_begin`` and ``run_batch_return`` marks, in order, and every read and graph launch of step N lies between
the two marks of step N. Anything else raises ``TraceError``: one line naming the file, the key and what was
expected. docs/simulator.md ("Trace files") restates these rules.
"""

from __future__ import annotations

import dataclasses
import json

from .errors import TraceError
from .trace import (
    DEVICE_OPS,
    FORMAT,
    MARK_TYPES,
    NODE_TYPES,
    PUBLISH_POINTS,
    SITES,
    ClearReason,
    CoarseReason,
    EventDecl,
    EventId,
    Graph,
    GraphId,
    InternalRecordNode,
    Mark,
    MailboxCleared,
    Read,
    ReadNode,
    RecordNode,
    Replay,
    RunBatchBegin,
    RunBatchReturn,
    StreamId,
    Trace,
)
from .vocab import ForwardMode, ResolutionRule, SharedReadEnds, StepKind, Stream, canonical_location

#: Bounds of a trace document.
MAX_STEPS = 100_000
MAX_OPS = 2_000_000
MAX_EVENTS = 100_000
MAX_GRAPHS = 100_000
MAX_NODES = 10_000  # per graph
MAX_NAME = 256  # characters of a name or id (scenario, location, phase, runner, owner, event, graph)
MAX_PROSE = 1_000  # characters of a ``by`` text
MAX_DEPTH = 64  # nesting of JSON arrays and objects

_TOP = ("format", "scenario", "steps", "streams", "events", "graphs", "ops")
_OP_TYPES: dict[str, type] = {t.kind: t for t in DEVICE_OPS}
_NODES: dict[str, type] = {t.kind: t for t in NODE_TYPES}
_MARKS: dict[str, type] = {k.value: t for k, t in MARK_TYPES.items()}


def _show(value) -> str:
    text = json.dumps(value) if isinstance(value, (str, int, float, bool, type(None))) else type(value).__name__
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} {text}" if isinstance(value, (str, int, float, bool)) else kind


def _key(where: str, key) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


class _Reader:
    def __init__(self, source: str):
        self.source = source

    def fail(self, key: str, expected: str):
        raise TraceError(self.source, key, expected)

    # -- values -----------------------------------------------------------------------------------------------

    def obj(self, value, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
        if not isinstance(value, dict):
            self.fail(where, f"expected an object, got {_show(value)}")
        for k in value:
            if k not in required and k not in optional:
                self.fail(_key(where, k), "unknown key")
        for k in required:
            if k not in value:
                self.fail(_key(where, k), "missing required key")
        return value

    def array(self, value, where: str, most: int) -> list:
        if not isinstance(value, list):
            self.fail(where, f"expected an array, got {_show(value)}")
        if len(value) > most:
            self.fail(where, f"expected at most {most:,} items, got {len(value):,}")
        return value

    def integer(self, value, where: str, lo: int, hi: int) -> int:
        if type(value) is not int:
            self.fail(where, f"expected an integer, got {_show(value)}")
        if not lo <= value <= hi:
            self.fail(where, f"expected an integer in {lo}..{hi:,}, got {value}")
        return value

    def boolean(self, value, where: str) -> bool:
        if type(value) is not bool:
            self.fail(where, f"expected true or false, got {_show(value)}")
        return value

    def text(self, value, where: str, most: int = MAX_PROSE) -> str:
        if type(value) is not str:
            self.fail(where, f"expected a string, got {_show(value)}")
        if len(value) > most:
            self.fail(where, f"expected at most {most} characters, got {len(value):,}")
        if not value.isprintable():
            self.fail(where, f"expected text without control characters, got {_show(value)}")
        return value

    def name(self, value, where: str, empty: bool = False) -> str:
        self.text(value, where, MAX_NAME)
        if not value and not empty:
            self.fail(where, "expected a non-empty name")
        return value

    def choice(self, value, where: str, allowed: dict):
        if type(value) is not str or value not in allowed:
            self.fail(where, f"expected one of {', '.join(allowed)}, got {_show(value)}")
        return allowed[value]

    # -- fields of ops and nodes (by name; the same name has the same type everywhere) --------------------------

    def field(self, name: str, value, where: str, owner: type):
        if name == "by":
            return self.text(value, where)
        if name == "step":
            return self.integer(value, where, 0, MAX_STEPS + 1)
        if name == "site":
            return self.choice(value, where, {s: s for s in SITES})
        if name == "step_kind":
            return self.choice(value, where, {k.value: k for k in StepKind})
        if name == "mode":
            return self.choice(value, where, {m.value: m for m in ForwardMode})
        if name == "resolved":
            return self.choice(value, where, {e.name: e for e in SharedReadEnds})
        if name == "point":
            return self.choice(value, where, {e.name: e for e in PUBLISH_POINTS})
        if name == "why":
            return self.choice(value, where, {r.value: r for r in ClearReason})
        if name == "reason":
            return self.choice(value, where, {r.value: r for r in CoarseReason})
        if name == "location":  # locations by identity: an alias is its canonical location
            return canonical_location(self.name(value, where))
        # stream, other, event, graph, phase, owner: names (references are checked afterwards)
        return self.name(value, where, empty=owner is MailboxCleared and name == "phase")

    def item(self, value, where: str, tag: str, types: dict[str, type]):
        """An op or a node: the tag picks the type, whose fields are all required except ``by``."""
        if not isinstance(value, dict):
            self.fail(where, f"expected an object, got {_show(value)}")
        typ = self.choice(value.get(tag), _key(where, tag), types) if tag in value else self.fail(
            _key(where, tag), "missing required key")
        extra = ()
        if typ is Mark:
            typ = self.choice(value.get("mark"), _key(where, "mark"), _MARKS) if "mark" in value else self.fail(
                _key(where, "mark"), "missing required key")
            extra = ("mark",)
        fields = [f.name for f in dataclasses.fields(typ)]
        self.obj(value, where, (tag, *extra, *(f for f in fields if f != "by")), ("by",) if "by" in fields else ())
        return typ(**{f: self.field(f, value[f], _key(where, f), typ) for f in fields if f in value})


def _no_duplicate_keys(source: str):
    def hook(pairs):
        out = {}
        for k, v in pairs:
            if k in out:
                raise TraceError(source, k, "duplicate key in one object")
            out[k] = v
        return out

    return hook


def _depth(value, most: int) -> bool:
    """Whether ``value`` nests arrays and objects deeper than ``most`` (iteratively: no recursion limit)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            if d > most:
                return True
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False


def parse_json(text: str, source: str) -> Trace:
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys(source))
    except json.JSONDecodeError as err:
        raise TraceError(source, "", f"not valid JSON ({err.msg} at line {err.lineno})") from None
    except RecursionError:
        raise TraceError(source, "", f"expected JSON nested at most {MAX_DEPTH} deep") from None
    return parse(data, source)


def parse(data, source: str) -> Trace:
    """The trace ``data`` describes (a JSON document's value), or ``TraceError``."""
    r = _Reader(source)
    if _depth(data, MAX_DEPTH):
        r.fail("", f"expected JSON nested at most {MAX_DEPTH} deep")
    r.obj(data, "", _TOP, ("meta",))
    if data["format"] != FORMAT:
        r.fail("format", f"expected {FORMAT!r}, got {_show(data['format'])}")
    scenario = r.name(data["scenario"], "scenario")
    steps = r.integer(data["steps"], "steps", 1, MAX_STEPS)

    streams = []
    for i, s in enumerate(r.array(data["streams"], "streams", len(Stream))):
        sid = r.choice(s, f"streams[{i}]", {x.value: StreamId(x.value) for x in Stream})
        if sid in streams:
            r.fail(f"streams[{i}]", f"duplicate stream {sid!r}")
        streams.append(sid)

    events: dict[EventId, EventDecl] = {}
    for i, e in enumerate(r.array(data["events"], "events", MAX_EVENTS)):
        w = f"events[{i}]"
        r.obj(e, w, ("id", "external"))
        eid = EventId(r.name(e["id"], f"{w}.id"))
        if eid in events:
            r.fail(f"{w}.id", f"duplicate event {eid!r}")
        events[eid] = EventDecl(eid, r.boolean(e["external"], f"{w}.external"))

    graphs: dict[GraphId, Graph] = {}
    for i, g in enumerate(r.array(data["graphs"], "graphs", MAX_GRAPHS)):
        w = f"graphs[{i}]"
        r.obj(g, w, ("id", "runner", "nodes"))
        gid = GraphId(r.name(g["id"], f"{w}.id"))
        if gid in graphs:
            r.fail(f"{w}.id", f"duplicate graph {gid!r}")
        runner = r.name(g["runner"], f"{w}.runner")
        nodes = []
        for j, n in enumerate(r.array(g["nodes"], f"{w}.nodes", MAX_NODES)):
            node = r.item(n, f"{w}.nodes[{j}]", "node", _NODES)
            if not isinstance(node, ReadNode):
                where = f"{w}.nodes[{j}].event"
                if node.event not in events:
                    r.fail(where, f"undeclared event {node.event!r}")
                # R4: only an external event recorded during capture becomes a record node.
                if events[node.event].external != isinstance(node, RecordNode):
                    want = "an external" if isinstance(node, RecordNode) else "a non-external"
                    r.fail(where, f"expected {want} event for a {node.kind} node, got {node.event!r}")
            nodes.append(node)
        graphs[gid] = Graph(gid, runner, tuple(nodes))

    ops = []
    checker = _Protocol(r, steps, set(streams), events, graphs)
    for i, o in enumerate(r.array(data["ops"], "ops", MAX_OPS)):
        op = r.item(o, f"ops[{i}]", "op", {**_OP_TYPES, "mark": Mark})
        checker.op(i, op)
        ops.append(op)
    checker.end(len(ops))

    meta = {}
    if "meta" in data:
        r.obj(data["meta"], "meta", (), ("resolution",))
        if "resolution" in data["meta"]:
            meta["resolution"] = r.choice(data["meta"]["resolution"], "meta.resolution",
                                          {x.value: x.value for x in ResolutionRule})
    return Trace(scenario, steps, tuple(streams), tuple(events.values()), tuple(graphs.values()), tuple(ops), meta)


class _Protocol:
    """The ops' references and shape: declared streams, events and graphs; the run_batch marks of every step in
    order; reads and launches of step N inside run_batch(N); every step within 0..steps+1."""

    def __init__(self, r: _Reader, steps: int, streams: set, events: dict, graphs: dict):
        self.r, self.steps, self.streams, self.events, self.graphs = r, steps, streams, events, graphs
        self.next = (RunBatchBegin, 1)  # the run_batch mark expected next
        self.running: int | None = None  # the step whose run_batch is open

    def op(self, i: int, op) -> None:
        r, w = self.r, f"ops[{i}]"
        for attr, known in (("stream", self.streams), ("other", self.streams), ("event", self.events),
                            ("graph", self.graphs)):
            val = getattr(op, attr, None)
            if val is not None and val not in known:
                r.fail(f"{w}.{attr}", f"undeclared {'stream' if attr == 'other' else attr} {val!r}")
        step = getattr(op, "step", 0)
        if step > self.steps + 1:
            r.fail(f"{w}.step", f"expected a step in 0..{self.steps + 1} (the trace has {self.steps} steps), "
                                f"got {op.step}")
        if isinstance(op, (RunBatchBegin, RunBatchReturn)):
            typ, n = self.next
            if not isinstance(op, typ) or op.step != n:
                r.fail(f"{w}.mark", f"expected {self._name(typ, n)}, got {self._name(type(op), op.step)}")
            if isinstance(op, RunBatchBegin):
                self.next, self.running = (RunBatchReturn, n), n
            else:
                self.next, self.running = (RunBatchBegin, n + 1), None
        elif isinstance(op, MailboxCleared) and (op.why is ClearReason.BARRIER_RESET) != (op.phase == ""):
            want = "an empty phase for a barrier reset" if op.phase else f"the phase it was {op.why.value.replace('_', ' ')}"
            r.fail(f"{w}.phase", f"expected {want}, got {_show(op.phase)}")
        elif isinstance(op, (Read, Replay)) and op.step != self.running:
            what = "read" if isinstance(op, Read) else "graph launch"
            now = f"run_batch({self.running}) is running" if self.running else "no run_batch is running"
            r.fail(f"{w}.step", f"expected a {what} of step {op.step} inside run_batch({op.step}) ({now})")

    def end(self, count: int) -> None:
        typ, n = self.next
        if n <= self.steps:
            after = f"after ops[{count - 1}]" if count else "in ops"
            self.r.fail("ops", f"expected {self._name(typ, n)} {after}, got the end of the ops "
                               f"(every step 1..{self.steps} has run_batch_begin and run_batch_return, in order)")

    def _name(self, typ: type, n: int) -> str:
        if typ is RunBatchBegin and n > self.steps:
            return f"no run_batch after step {self.steps}"
        return f"{typ.mark.value} of step {n}"
