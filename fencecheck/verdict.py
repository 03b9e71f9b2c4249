"""Verdicts, race identities and agreement as values, shared by the simulator, the model, the proofs and the reports.

One vocabulary: a verdict is ``proved`` (no race / the property holds), ``counterexample`` (a race / the property
fails, with the evidence) or ``unknown`` (a solver ran out of budget; never shown as proved). One race identity:
``RaceId`` (location, phase, site, step). One agreement: ``agreement`` (an expectation against a result) and
``oracles_agree`` (two results against each other).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import asdict, dataclass, field
from typing import Iterable

from fencecheck.vocab import canonical_location


class Verdict(str, enum.Enum):
    """Three values end to end. ``UNKNOWN`` (resource limit) is never shown as ``PROVED``."""

    PROVED = "proved"
    COUNTEREXAMPLE = "counterexample"
    UNKNOWN = "unknown"

    @property
    def text(self) -> str:
        """How a person reads it in a report: ``proved``, ``COUNTEREXAMPLE``, ``UNKNOWN`` (the last two stand out)."""
        return self.value if self is Verdict.PROVED else self.value.upper()


@dataclass(frozen=True, order=True)
class RaceId:
    """The identity of a racing read: the shared ``location``, the reading ``phase`` (its name), the ``site`` and
    the ``step`` (1-based; 0 = any step). Every oracle (simulator, model, GPU) and every expectation names races so."""

    location: str
    phase: str
    site: str
    step: int = 0

    def place(self) -> "RaceId":
        """The same read in any step."""
        return RaceId(self.location, self.phase, self.site, 0)

    def text(self) -> str:
        at = f" in step {self.step}" if self.step else ""
        return f"{self.location}@{self.phase}/{self.site}{at}"

    def to_dict(self) -> dict:
        return {"location": self.location, "phase": self.phase, "site": self.site, "step": self.step}


@dataclass(frozen=True)
class Expectation:
    """The verdict a scenario expects, with the specific races when it expects any (step 0 = any step)."""

    verdict: Verdict
    races: tuple[RaceId, ...] = ()

    def __post_init__(self):
        # Locations by identity: an expected race on an alias is the race on its canonical location.
        races = tuple(dataclasses.replace(r, location=canonical_location(r.location)) for r in self.races)
        object.__setattr__(self, "races", races)


def agreement(expect: Expectation, verdict: Verdict, races: Iterable[RaceId]) -> tuple[bool, str]:
    """Whether a result meets an expectation, and if not, one line saying how it differs.

    The verdicts must be equal. When the expectation lists races, the places (location, phase, site) that race must
    be exactly the listed ones, and a listed race with a step must race in that step."""
    races = set(races)
    if verdict is not expect.verdict:
        return False, f"verdict {verdict.value}, expected {expect.verdict.value}"
    if expect.races:
        got = {r.place() for r in races}
        want = {r.place() for r in expect.races}
        if got != want:
            extra = ", ".join(r.text() for r in sorted(got - want)) or "none"
            missing = ", ".join(r.text() for r in sorted(want - got)) or "none"
            return False, f"races differ: unexpected {extra}; missing {missing}"
        for r in expect.races:
            if r.step and r not in races:
                return False, f"expected {r.text()}, which races only in steps " + ", ".join(
                    str(x.step) for x in sorted(races) if x.place() == r.place())
    return True, ""


def oracles_agree(a: tuple[Verdict, Iterable[RaceId]], b: tuple[Verdict, Iterable[RaceId]]) -> tuple[bool, str]:
    """Whether two oracles' results on one run agree: equal verdicts and equal racing reads, step for step."""
    (va, ra), (vb, rb) = a, b
    ra, rb = set(ra), set(rb)
    if va is not vb:
        return False, f"verdicts differ: {va.value} vs {vb.value}"
    if ra != rb:
        only_a = ", ".join(r.text() for r in sorted(ra - rb)) or "none"
        only_b = ", ".join(r.text() for r in sorted(rb - ra)) or "none"
        return False, f"races differ: only in the first {only_a}; only in the second {only_b}"
    return True, ""


@dataclass(frozen=True)
class Race:
    """A shared read of step ``step`` not ordered before a scheduler write enqueued after ``run_batch(step)``.

    ``synced_up_to`` names the last kernel of the read's stream that the writer's stream was ordered after when the
    write was enqueued (empty: none of this step), ``via`` the wait that ordered it, and ``missing_edge`` the
    happens-before edge whose absence is the race.
    """

    location: str
    step: int
    phase: str
    site: str
    read_stream: str
    read_op: int
    read_node: int
    read_graph: str
    write_op: int
    write_stream: str
    write_step: int
    write_by: str
    synced_up_to: str
    via: str
    missing_edge: str
    barrier: str = ""  # what the barrier of the read's step did

    @property
    def id(self) -> RaceId:
        return RaceId(self.location, self.phase, self.site, self.step)

    def key(self) -> RaceId:
        """The race's identity across steps: location, phase and site of the read."""
        return self.id.place()

    def read_text(self) -> str:
        where = f"graph {self.read_graph} node {self.read_node}" if self.read_graph else f"op {self.read_op}"
        return (
            f"read of {self.location} by step {self.step} phase {self.phase!r} at {self.site} "
            f"on {self.read_stream} ({where})"
        )

    def write_text(self) -> str:
        return f"write of {self.location} for step {self.write_step} on {self.write_stream} (op {self.write_op}, {self.write_by})"

    def explain(self) -> str:
        return "\n".join(
            [
                f"RACE {self.read_text()}",
                f"  vs {self.write_text()}",
                f"  {self.write_stream} was ordered after {self.synced_up_to or 'no kernel of this step'}"
                + (f" via {self.via}" if self.via else ""),
                f"  missing edge: {self.missing_edge}",
            ]
        )


@dataclass(frozen=True)
class Finding:
    """A dishonest declaration: ``backend`` reads ``location`` at ``site`` in phase ``phase`` (mode ``mode``), outside
    what its declaration ``declared`` covers (``vocab.COVERED_SITES``). ``via`` names the wrappers (composite or
    hybrid) between the phase's backend and ``backend``, outermost first; empty when it is the phase's backend."""

    phase: str
    mode: str
    backend: str
    via: tuple[str, ...]
    declared: str
    site: str
    location: str

    def key(self) -> tuple:
        return (self.phase, self.mode, self.backend, self.site, self.location)

    def text(self) -> str:
        """One line: ``DISHONEST backend 'fa3' (in 'hybrid' of phase 'decode', DECODE) declares IN_REPLAY but reads
        req_to_token at post_replay``."""
        where = f"in {'/'.join(repr(v) for v in self.via)} of phase {self.phase!r}" if self.via else f"phase {self.phase!r}"
        return (f"DISHONEST backend {self.backend!r} ({where}, {self.mode}) declares {self.declared} but reads "
                f"{self.location} at {self.site}, outside what {self.declared} covers")

    def to_dict(self) -> dict:
        return {"phase": self.phase, "mode": self.mode, "backend": self.backend, "via": list(self.via),
                "declared": self.declared, "site": self.site, "location": self.location, "text": self.text()}


@dataclass(frozen=True)
class CheckReport:
    """The simulator's verdict on one scenario run for ``steps`` steps. Over a fixed host order happens-before is
    exact, so ``PROVED`` here means: no device interleaving of this run races."""

    scenario: str
    steps: int
    verdict: Verdict
    races: tuple[Race, ...] = ()
    ops: int = 0
    kernels: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    findings: tuple[Finding, ...] = ()

    @property
    def safe(self) -> bool:
        """No race (the verdict alone; a dishonest declaration is a finding, not a race)."""
        return self.verdict is Verdict.PROVED

    @property
    def clean(self) -> bool:
        """No race and no finding: what ``check`` exits 0 for."""
        return self.safe and not self.findings

    def distinct(self) -> list[Race]:
        """The first race of each (location, phase, site)."""
        seen: dict[RaceId, Race] = {}
        for race in self.races:
            seen.setdefault(race.key(), race)
        return list(seen.values())

    def to_dict(self) -> dict:
        return {
            "scenario": self.scenario,
            "steps": self.steps,
            "verdict": self.verdict.value,
            "safe": self.safe,
            "ops": self.ops,
            "kernels": self.kernels,
            "races": [asdict(r) for r in self.races],
            "distinct_races": [r.key().to_dict() for r in self.distinct()],
            "notes": list(self.notes),
            "findings": [f.to_dict() for f in self.findings],
        }
