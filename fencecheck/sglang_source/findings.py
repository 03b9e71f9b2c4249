"""The reader's findings and not findings as frozen records, and the decisions the commands pair a finding with (a
scenario's verdicts, the model's answer, witnesses, generated configurations; the reader builds none). ``to_json`` renders
each as the document shows it (docs/sglang-reader.schema.json), its keys in the document's order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from .records import Conditioned, Evidence, Plain


def _why(status_why: str | None) -> dict:
    """The ``status_why`` key of a finding whose status the commands settled (``commands.reader_status``)."""
    return {} if status_why is None else {"status_why": status_why}


# --- not findings and findings --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NotFinding:
    """A read that is not a finding, with why: behind a host sync or a capture-mode test, start-up only (``mode``
    None), or on a device whose runners never publish."""

    subject: str
    mode: str | None
    location: str
    file: str
    line: int
    via: tuple[str, ...]
    why: str

    def to_json(self) -> dict:
        out = {"subject": self.subject, "mode": self.mode, "location": self.location, "file": self.file,
               "line": self.line}
        # a start-up row lists why before via
        tail = {"why": self.why, "via": list(self.via)} if self.mode is None else \
            {"via": list(self.via), "why": self.why}
        return out | tail


@dataclass(frozen=True)
class ReadOutsideDeclaration(Conditioned):
    """Reads of a backend in a mode at sites its declaration row (``declared``, by ``declared_by``, under
    ``conditions``) does not cover; ``uncovered`` holds those reads as the walker found them ((``ReadSite``,
    ``reads.Read``) pairs; not in the document). ``decision``: its scenario's, once the commands decide it; ``why``:
    why it has none, when the commands can build no scenario for it."""

    kind: ClassVar[str] = "read_outside_declaration"
    subject: str
    subject_at: str
    mode: str
    declared: str
    declared_by: str
    conditions: tuple[str, ...]
    status: str
    evidence: tuple[Evidence, ...]
    uncovered: tuple = field(default=(), compare=False, repr=False)
    decision: Decision | None = None
    why: str | None = None
    status_why: str | None = None
    #: per platform, the conditions not settled there: (platform, the row's or None, each uncovered read's or None),
    #: None where one is false on that platform (``attributes.on_platform``); not in the document
    settled: tuple = field(default=(), compare=False, repr=False)
    #: per uncovered read, the test the capture of a whole graph decides false on its path (``capture_state``), or
    #: None; not in the document
    whole_graph: tuple = field(default=(), compare=False, repr=False)

    def to_json(self) -> dict:
        return {"kind": self.kind, "subject": self.subject, "subject_at": self.subject_at, "mode": self.mode,
                "declared": self.declared, "declared_by": self.declared_by, "condition": self.condition,
                "status": self.status, **_why(self.status_why), "evidence": [e.to_json() for e in self.evidence],
                **(self.decision.to_json() if self.decision else {"scenario": None}),
                **({"why": self.why} if self.why is not None else {})}


@dataclass(frozen=True)
class UnresolvedDeclaration:
    """A declaration the evaluator could not evaluate for a mode."""

    kind: ClassVar[str] = "unresolved_declaration"
    status: ClassVar[str] = "unresolved"
    decision: ClassVar[None] = None
    subject: str
    subject_at: str
    mode: str
    evidence: tuple[Evidence, ...]

    def to_json(self) -> dict:
        return {"kind": self.kind, "subject": self.subject, "subject_at": self.subject_at, "mode": self.mode,
                "status": self.status, "scenario": None, "evidence": [e.to_json() for e in self.evidence]}


@dataclass(frozen=True)
class UnresolvedRow(Conditioned):
    """A declaration row of a backend (by ``declared_by``, under ``conditions``) left ``unresolved`` because of what
    the reader could not see below it; the evidence is the row, then each read or read path concerned."""

    status: ClassVar[str] = "unresolved"
    decision: ClassVar[None] = None
    kind: ClassVar[str]
    subject: str
    subject_at: str
    mode: str
    declared_by: str
    conditions: tuple[str, ...]
    evidence: tuple[Evidence, ...]

    def _declared(self) -> dict:
        return {}

    def to_json(self) -> dict:
        return {"kind": self.kind, "subject": self.subject, "subject_at": self.subject_at, "mode": self.mode,
                **self._declared(), "declared_by": self.declared_by, "condition": self.condition,
                "status": self.status, "evidence": [e.to_json() for e in self.evidence], "scenario": None}


@dataclass(frozen=True)
class UnknownChildDeclaration(UnresolvedRow):
    """A row that goes through a child of unknown class, with a read (or a cut read path) the backend was seen to
    make outside what the row covers at the least (``limits.floor_end``): an ``unresolved_declaration``."""

    kind: ClassVar[str] = "unresolved_declaration"


@dataclass(frozen=True)
class UnresolvedReadPath(UnresolvedRow):
    """Read paths a limit of the reader cut (``records.CutPath``) at sites the row, declaring ``declared``, does not
    cover: what they read is not known."""

    kind: ClassVar[str] = "unresolved_read_path"
    declared: str

    def _declared(self) -> dict:
        return {"declared": self.declared}


@dataclass(frozen=True)
class WorkerReadFinding(Conditioned):
    """A worker read after the publisher that is a finding: one per worker class, read and publisher, with the
    algorithms that share the worker; its evidence is the publisher's runner call, then the read."""

    kind: ClassVar[str] = "worker_read_after_publish"
    subject: str
    subject_at: str
    mode: str | None
    status: str
    conditions: tuple[str, ...]
    algorithms: tuple[str, ...]
    location: str
    evidence: tuple[Evidence, ...]
    why: str
    decision: Decision | None
    status_why: str | None = None
    #: per platform, the conditions not settled there, None where one is false there (``WorkerRead.settled``); not
    #: in the document
    settled: tuple = field(default=(), compare=False, repr=False)

    def to_json(self) -> dict:
        return {"kind": self.kind, "subject": self.subject, "subject_at": self.subject_at, "mode": self.mode,
                "status": self.status, **_why(self.status_why), "condition": self.condition,
                "algorithms": list(self.algorithms), "location": self.location, "evidence": [e.to_json() for e in self.evidence], "why": self.why,
                **(self.decision.to_json(mode=False) if self.decision else {"scenario": None})}


@dataclass(frozen=True)
class NoMarkerFallback:
    """An ``IN_REPLAY`` declaration resolved by a decode graph runner's no-marker fallback on the platforms whose
    runner has no in-graph marker while the barrier is on (``condition``): the backends that declare ``IN_REPLAY``
    for ``mode`` and read in the graph before the marker; the evidence is the fallback, the marker's factory, the
    gate and each backend's first such read. The commands build it only when its scenario races."""

    kind: ClassVar[str] = "no_marker_fallback"
    subject: str
    subject_at: str
    mode: str
    status: str
    condition: str
    backends: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    decision: Decision | None = None
    status_why: str | None = None
    declared: ClassVar[str] = "IN_REPLAY"

    def to_json(self) -> dict:
        return {"kind": self.kind, "subject": self.subject, "subject_at": self.subject_at, "mode": self.mode,
                "status": self.status, **_why(self.status_why), "declared": self.declared,
                "condition": self.condition,
                "evidence": [e.to_json() for e in self.evidence],
                **(self.decision.to_json() if self.decision else {"scenario": None}),
                "backends": list(self.backends)}


Finding = ReadOutsideDeclaration | UnresolvedDeclaration | UnresolvedReadPath | UnknownChildDeclaration | \
    WorkerReadFinding | NoMarkerFallback


# --- decisions (the commands build them) ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelAnswer:
    """The SMT model's verdict beside the simulator's: whether they agree (None when the model answers unknown) and,
    when they differ, why."""

    verdict: str
    agree: bool | None
    differ: str | None = None

    def to_json(self) -> dict:
        return {"model_verdict": self.verdict, "oracles_agree": self.agree} | (
            {"oracles_differ": self.differ} if self.differ is not None else {})


@dataclass(frozen=True)
class StaleRead(Plain):
    step: int
    phase: str
    site: str
    location: str
    seen: int


@dataclass(frozen=True)
class Witness(Plain):
    """A race replayed under its witness interleaving: the schedule and the stale read it shows (None: not
    reproduced)."""

    race: str
    schedule: tuple[int, ...]
    stale_read: StaleRead | None


@dataclass(frozen=True)
class ContextVerdict(Plain):
    """A finding decided in one generated configuration: the simulator's verdict and races there, whether the model
    agrees (None: not asked, or unknown), and whether its races are the configuration's own (``own``: the backend's
    honest twin, the same declaration reading only where it covers, races at each of them too: not the finding's)."""

    context: str
    verdict: str
    races: tuple[str, ...]
    oracles_agree: bool | None
    own: bool = False


@dataclass(frozen=True)
class Reach(Plain):
    """The least demanding generated configuration a finding races in: its name and what it needs beyond a CUDA
    machine, the overlap scheduler, no speculative algorithm and no setting (the backend's own selection, its
    path's conditions and the model it serves are the finding's, not the configuration's)."""

    configuration: str
    needs: tuple[str, ...]


@dataclass(frozen=True)
class Fix(Plain):
    """The smallest declaration change that covers every read of a finding outside its declaration (the earliest
    end whose covered sites hold them all), checked before it is printed: the simulator's and the model's verdicts
    on the finding's scenario with the change, and of the generated configurations where the finding races, how
    many the change proves and which still race with it (a race there is not this declaration's to fix: an eager
    phase reading after another phase published, a deferred barrier; their races are in the finding's ``contexts``)."""

    change: str
    declares: str | None  # None: a change to the worker (a worker read after the publisher), not a declaration
    verdict: str
    model_verdict: str
    contexts: int
    contexts_proved: int
    still_racing: tuple[str, ...]


@dataclass(frozen=True)
class Decision:
    """A finding's (or a worker read's) scenario decided: the simulator's verdict and distinct races
    (``location@phase/site``), the mode of the phase a worker read follows, the model's answer, the witnesses and
    the generated configurations (None: not asked)."""

    scenario: str
    verdict: str
    races: tuple[str, ...]
    mode: str | None = None
    model: ModelAnswer | None = None
    witness: tuple[Witness, ...] | None = None
    contexts: tuple[ContextVerdict, ...] | None = None
    fix: Fix | None = None
    reach: Reach | None = None

    def to_json(self, mode: bool = True) -> dict:
        out = {"scenario": self.scenario, "verdict": self.verdict, "races": list(self.races)}
        if mode and self.mode is not None:
            out["mode"] = self.mode
        if self.model is not None:
            out |= self.model.to_json()
        if self.witness is not None:
            out["witness"] = [w.to_json() for w in self.witness]
        if self.contexts is not None:
            out["contexts"] = [c.to_json() for c in self.contexts]
        if self.reach is not None:
            out["reach"] = self.reach.to_json()
        if self.fix is not None:
            out["fix"] = self.fix.to_json()
        return out
