"""The facts of the reader's document as frozen records: the backends with their declarations and reads, the
workers' publishers, the barrier and the runners (the findings are in ``findings``, the algorithms in
``algorithm_records``).

Each record renders its part of the JSON document (docs/sglang-reader.schema.json) with ``to_json``, its keys in the
document's order. Conditions and call chains are tuples of source texts; the document shows a record's conditions
as one text joined with `` and `` (``condition``), null when there are none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

from .children import Option


def slug(text: str) -> str:
    """A class or map name as a scenario-name fragment: ``DSparkWorkerV2`` -> ``d-spark-worker-v2`` (the reader's
    scenario names: backend findings', worker reads' and generated configurations' alike)."""
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", text)
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def condition_text(conditions: tuple[str, ...]) -> str | None:
    """The conditions as the document shows them: joined with `` and ``, None when there are none."""
    return " and ".join(conditions) if conditions else None


def _json(value):
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    return value


class Plain:
    """A record the document shows field by field, in field order: ``cls`` as ``class``, a tuple as a list, a record
    as its own ``to_json``, the ``conditions`` of a ``Conditioned`` record as its ``condition``."""

    def to_json(self) -> dict:
        out = {}
        for f in fields(self):
            if f.name == "conditions" and isinstance(self, Conditioned):
                out["condition"] = self.condition
            else:
                out["class" if f.name == "cls" else f.name] = _json(getattr(self, f.name))
        return out


class Conditioned:
    """A record with ``conditions`` (source texts): ``condition`` is them as the document shows them."""

    conditions: tuple[str, ...]

    @property
    def condition(self) -> str | None:
        return condition_text(self.conditions)


@dataclass(frozen=True)
class At(Plain):
    file: str
    line: int


@dataclass(frozen=True)
class ClassAt(Plain):
    """A class (or the class a function is defined in; None for a module-level function) and a file:line."""

    cls: str | None
    file: str
    line: int


@dataclass(frozen=True)
class Evidence(Plain):
    file: str
    line: int
    what: str


# --- declarations and reads -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeclRow:
    """One row of a declaration: its conditions and end (a ``SharedReadEnds`` member, ``delegate(...)``,
    ``max_of(...)``); an unresolved row has end ``unresolved``, the ``reason`` and the ``line`` evaluation stopped
    at."""

    conditions: tuple[str, ...]
    end: str
    reason: str | None = None
    line: int | None = None

    @property
    def unresolved(self) -> bool:
        return self.reason is not None

    @property
    def condition(self) -> str | None:
        """As the document shows it: ``otherwise`` for an unconditional row (among conditional ones), None for an
        unresolved row."""
        return None if self.unresolved else condition_text(self.conditions) or "otherwise"

    def to_json(self) -> dict:
        if self.unresolved:
            return {"condition": None, "end": self.end, "reason": self.reason, "line": self.line}
        return {"condition": self.condition, "end": self.end}


def unresolved_row(reason: str, line: int | None) -> DeclRow:
    return DeclRow((), "unresolved", reason, line)


@dataclass(frozen=True)
class Declaration:
    """A backend's declaration for one mode (or its prefill snapshot's): its rows in source order."""

    rows: tuple[DeclRow, ...]

    @property
    def plain(self) -> bool:
        """One row with no condition: the document shows its end alone."""
        return len(self.rows) == 1 and not self.rows[0].conditions and not self.rows[0].unresolved

    def to_json(self) -> str | list:
        return self.rows[0].end if self.plain else [r.to_json() for r in self.rows]


@dataclass(frozen=True)
class BackendRead(Plain):
    """A read of scheduler-shared state by a backend in one mode at one site, with its call chain (``via``: each hop
    ``Class.method (file:line)``) and the conditions on its path."""

    mode: str
    site: str
    location: str
    file: str
    line: int
    what: str
    via: tuple[str, ...]
    conditions: tuple[str, ...]


@dataclass(frozen=True)
class CutPath(Plain):
    """A read path of a backend in one mode at one site that a limit of the reader cut (``reads.Cut``): the
    ``limit``, the call not followed (``file``/``line``/``what``), its call chain and conditions, and what it lies
    behind (``a host sync at FILE:LINE`` or ``a capture-mode test at FILE:LINE``: what is below it is no finding;
    None)."""

    mode: str
    site: str
    limit: str
    file: str
    line: int
    what: str
    via: tuple[str, ...]
    conditions: tuple[str, ...]
    behind: str | None


@dataclass(frozen=True)
class Snapshot(Plain):
    """A backend's prefill snapshot hook (``_snapshot_prefill_shared_reads``) and its declaration for ``EXTEND``."""

    cls: str
    file: str
    line: int
    declares: Declaration


@dataclass(frozen=True)
class Backend:
    """An ``AttentionBackend`` subclass: where it is, its bases and MRO, where its ``shared_read_ends`` is defined,
    its declaration per mode, its children (known and passed by constructing calls), the calls left unfollowed, its
    reads outside host syncs and the read paths a limit cut (``cut_paths``)."""

    cls: str
    file: str
    line: int
    module: str
    bases: tuple[str, ...]
    mro_classes: tuple[str, ...]  # its MRO, by class name
    declared_in: ClassAt | None
    kind: str  # base, inherited or override
    traits: tuple[str, ...]
    declares: tuple[tuple[str, Declaration], ...]  # (mode, declaration), in the modes' order
    prefill_snapshot: Snapshot | None
    children: tuple[tuple[str, str], ...]  # (attribute, class), sorted
    passed_children: tuple[tuple[str, tuple[Option, ...]], ...]  # (attribute, options), sorted
    unfollowed: tuple[str, ...]
    reads: tuple[BackendRead, ...]
    cut_paths: tuple[CutPath, ...]
    #: the qualified names of the functions on its read chains, host-synced ones included (not in the document:
    #: what drift fingerprints for its reads)
    chain_keys: frozenset = field(default=frozenset(), compare=False, repr=False)

    @property
    def at(self) -> str:
        return f"{self.file}:{self.line}"

    def to_json(self) -> dict:
        return {
            "class": self.cls, "file": self.file, "line": self.line, "module": self.module,
            "bases": list(self.bases), "mro": list(self.mro_classes),
            "declared_in": self.declared_in.to_json() if self.declared_in else None,
            "kind": self.kind, "traits": list(self.traits),
            "declares": {m: d.to_json() for m, d in self.declares},
            "prefill_snapshot": self.prefill_snapshot.to_json() if self.prefill_snapshot else None,
            "children": dict(self.children),
            "passed_children": {a: [o.to_json() for o in opts] for a, opts in self.passed_children},
            "unfollowed": list(self.unfollowed),
            "reads": [r.to_json() for r in self.reads],
            "cut_paths": [c.to_json() for c in self.cut_paths],
        }


# --- workers, barrier, runners --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WorkerPublisher(Conditioned, Plain):
    """One return of a worker's ``last_shared_read_runner``: the publisher it names, under its conditions."""

    cls: str
    file: str
    line: int
    publisher: str
    conditions: tuple[str, ...]
    defined_in: ClassAt
    returns_at: At


@dataclass(frozen=True)
class BarrierCall(Plain):
    event_loop: str
    cls: str | None
    file: str
    line: int


@dataclass(frozen=True)
class EventLoop(Plain):
    event_loop: str
    cls: str | None
    file: str
    line: int
    barrier_lines: tuple[int, ...]


@dataclass(frozen=True)
class Barrier(Plain):
    """Where ``_apply_war_barrier`` is defined, its call sites, and the scheduler's event loops."""

    defined: tuple[ClassAt, ...]
    calls: tuple[BarrierCall, ...]
    event_loops: tuple[EventLoop, ...]


@dataclass(frozen=True)
class RunnerMethod(Plain):
    cls: str
    name: str
    file: str
    line: int


@dataclass(frozen=True)
class RunnerEvent(Plain):
    line: int
    file: str
    event: str  # clear, resolve, publish or prefill_publish


@dataclass(frozen=True)
class Runner(Plain):
    """A runner class with an ``execute`` or ``replay`` entry: how it publishes, read from its entry's events."""

    cls: str
    file: str
    line: int
    publish: str
    method: RunnerMethod
    events: tuple[RunnerEvent, ...]
