"""Verdicts and races as values, shared by the simulator, the model and the reports."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field


class Verdict(str, enum.Enum):
    """Three values end to end. ``UNKNOWN`` (timeout, resource limit) is never shown as ``PROVED``."""

    PROVED = "proved"
    COUNTEREXAMPLE = "counterexample"
    UNKNOWN = "unknown"


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

    def key(self) -> tuple[str, str, str]:
        """The race's identity across steps: location, phase and site of the read."""
        return (self.location, self.phase, self.site)

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

    @property
    def safe(self) -> bool:
        return self.verdict is Verdict.PROVED

    def distinct(self) -> list[Race]:
        """The first race of each (location, phase, site)."""
        seen: dict[tuple[str, str, str], Race] = {}
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
            "distinct_races": [list(r.key()) for r in self.distinct()],
            "notes": list(self.notes),
        }
