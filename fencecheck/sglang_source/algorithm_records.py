"""The speculative algorithms' part of the reader's document as frozen records: each algorithm's worker, the phases
of one decode step with each runner phase's publish behaviour, the publisher, and the worker's reads after the
publisher's runner with how each is (or is not yet) decided. ``to_json`` renders each as the document's
``algorithms`` rows (docs/sglang-reader.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..vocab import ReadSite
from .findings import Decision
from .records import At, ClassAt, Conditioned, Plain

#: The kind of a worker read after the publisher that is a finding.
WORKER_READ = "worker_read_after_publish"


@dataclass(frozen=True)
class Publish(Plain):
    """How a runner phase publishes into its side's mailbox: ``policy`` (a ``PublishPolicy`` value; None when the
    runner's class is not known statically), ``execution`` (``graph`` / ``eager``) and ``why`` (the source it was
    read from)."""

    policy: str | None
    execution: str
    why: str


@dataclass(frozen=True)
class Phase(Conditioned, Plain):
    """One phase of a decode step: a runner call (``kind`` ``runner``) in ``mode``, or a call of the scheduler's
    ``on_publish`` (``kind`` ``publish``, no mode), on the draft or target ``side``, under the conditions on its path,
    inside a loop (``repeat``) or not."""

    runner: str
    call: str
    mode: str | None
    kind: str
    side: str | None
    conditions: tuple[str, ...]
    repeat: str | None
    publish: Publish | None
    file: str
    line: int

    def to_json(self) -> dict:
        """The phase's row, with its path's tests one literal each (``conditions``) after their conjunction."""
        out = {}
        for k, v in super().to_json().items():
            out[k] = v
            if k == "condition":
                out["conditions"] = list(self.conditions)
        return out


@dataclass(frozen=True)
class Publisher(Conditioned, Plain):
    """The worker's publisher (a ``last_shared_read_runner`` return) and the side it is on."""

    publisher: str
    conditions: tuple[str, ...]
    side: str
    file: str
    line: int


@dataclass(frozen=True)
class After(Conditioned, Plain):
    """The publisher's runner call a worker read is ordered against, and whether a phase on the publisher's side can
    publish into its mailbox at all."""

    call: str
    file: str
    line: int
    conditions: tuple[str, ...]
    mode: str | None
    can_publish: bool


@dataclass(frozen=True)
class ReadOutcome:
    """Whether a worker read is a finding: ``status`` (``confirmed``, ``plausible``, ``unresolved``; None: not a
    finding), ``why``, and the decision of its scenario (None: none decided)."""

    status: str | None
    why: str
    decision: Decision | None = None


def host_copy_outcome(at: str) -> ReadOutcome:
    """A read copied to the host at ``at`` (file:line) at once: not a finding."""
    return ReadOutcome(None, f"copied to the host at {at} (a synchronous copy: it completes before the worker "
                             f"returns, before the scheduler's next write)")


#: A device read the reader leaves to the commands.
PENDING = ReadOutcome("unresolved", "not decided yet: `fencecheck sglang` builds its scenario and decides it with "
                                    "the simulator")


@dataclass(frozen=True)
class WorkerRead(Conditioned):
    """A worker's read of scheduler-shared state after the publisher's runner (``after``): the read, its call chain
    and conditions, the publisher it is ordered against, the runner phases before it in step order (``before``; not
    in the document: what its scenario is built from), where its data is copied to the host (None: it is not), its
    outcome, and the order the reader found it in (``found``: the worker's place among the classes ``create_worker``
    returns, in its order of members, then the read's place in that worker's decode step as walked; not in the
    document)."""

    location: str
    file: str
    line: int
    what: str
    via: tuple[str, ...]
    conditions: tuple[str, ...]
    publisher: Publisher
    after: After
    before: tuple[Phase, ...]
    host_copy: str | None
    outcome: ReadOutcome
    found: tuple[int, int]
    #: the read is in a capture tail hook: inside the graph of ``after``'s phase, after the model forward (at
    #: ``in_graph_after_marker``), not on the forward stream after the phase
    in_graph: bool = False
    #: why the read is not a finding where its scenario races: its path runs only on devices whose runners never
    #: publish (``device.PlatformPaths``); None when that does not hold (not in the document)
    bound: str | None = None
    #: per platform, the conditions of the read, its publisher and the publishing phase not settled there, None where
    #: one is false there (``algorithms._settled``); not in the document
    settled: tuple = field(default=(), compare=False, repr=False)

    def to_json(self) -> dict:
        o = self.outcome
        d = o.decision.to_json() if o.decision else {"scenario": None}
        return {"location": self.location, "file": self.file, "line": self.line, "what": self.what,
                "via": list(self.via), "condition": self.condition, "publisher": self.publisher.publisher,
                "publisher_condition": self.publisher.condition, "after": self.after.to_json(),
                "finding": None if o.status is None else {"kind": WORKER_READ, "status": o.status, **d},
                "why": o.why, **(d if o.status is None and o.decision else {}),
                **({"site": ReadSite.IN_GRAPH_AFTER_MARKER.value} if self.in_graph else {})}


@dataclass(frozen=True)
class Algorithm(Conditioned):
    """A member of ``SpeculativeAlgorithm`` with one worker class ``create_worker`` returns for it (under
    ``conditions``; ``worker`` None when it returns no class of the tree): the phases of one decode step, the
    publisher, the reads after the publisher's runner, what is unresolved, the phases of one prefill step."""

    name: str
    conditions: tuple[str, ...]
    dispatch: At | None
    worker: ClassAt | None
    phases: tuple[Phase, ...]
    publisher: tuple[Publisher, ...]
    reads_after_publisher: tuple[WorkerRead, ...]
    unresolved: tuple[str, ...]
    #: the phases of one prefill step (a batch entering the worker in ``EXTEND``), as ``phases``
    prefill_phases: tuple[Phase, ...] = ()
    #: the worker's reads after that step's publishing phase, not decided (``algorithms.PREFILL_PENDING``)
    prefill_reads_after_publisher: tuple[WorkerRead, ...] = ()

    def to_json(self) -> dict:
        return {"name": self.name, "condition": self.condition,
                "dispatch": self.dispatch.to_json() if self.dispatch else None,
                "worker": self.worker.to_json() if self.worker else None,
                "phases": [p.to_json() for p in self.phases], "publisher": [p.to_json() for p in self.publisher],
                "reads_after_publisher": [r.to_json() for r in self.reads_after_publisher],
                "unresolved": list(self.unresolved), "prefill_phases": [p.to_json() for p in self.prefill_phases],
                "prefill_reads_after_publisher": [r.to_json() for r in self.prefill_reads_after_publisher]}
