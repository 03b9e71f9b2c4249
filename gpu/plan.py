"""CPU-side planning for GPU replays (no torch needed): which reads get a spin before them, and how the judged
replays of one trace add up.

Making a race visible (the idea of Jepsen's Elle): writes stamp the step they prepare, reads copy what they saw
into private outputs, checked after a synchronize; a spin kernel before chosen reads widens the window. For a
race, the model's witness says the write runs before the racing read: spinning before every read with the racing
read's (phase, site, location) lets the unfenced write overtake it. A race-free trace is run under the heaviest
delays (a spin before every read) and must never show a stale read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fencecheck.verdict import RaceId

from .observe import Judgement

#: Spin length before a delayed read, in GPU clock cycles (about 1 ms at the H200's 1.98 GHz).
SPIN_CYCLES = 2_000_000


@dataclass(frozen=True)
class DelayPolicy:
    """Reads to delay: every read (``all_reads``) or those whose (phase, site, location) is in ``keys``."""

    keys: frozenset[tuple[str, str, str]] = frozenset()
    all_reads: bool = False
    cycles: int = SPIN_CYCLES

    def delays(self, phase: str, site: str, location: str) -> bool:
        return self.all_reads or (phase, site, location) in self.keys

    @classmethod
    def for_record(cls, races, witness, cycles: int = SPIN_CYCLES) -> "DelayPolicy":
        """The witness's racing read for a race; every read for a race-free trace."""
        if races and witness:
            w = witness["race"]
            return cls(frozenset({(w["phase"], w["site"], w["location"])}), False, cycles)
        return cls(frozenset(), True, cycles)


@dataclass
class TraceOnGpu:
    """Replays of one corpus trace on the GPU: how many fit the trace (``conformant``: the reference issued the
    trace's calls and the observations fit its happens-before, see ``observe``), how many the device refused with
    an error, and which stale reads showed."""

    id: str
    expected_races: frozenset[RaceId]
    replays: int = 0
    conformant: int = 0
    errors: int = 0  # replays the device refused (a CUDA error)
    manifested: int = 0  # replays that showed a stale read of an expected race
    unexpected: int = 0  # replays that showed a stale read nobody expected (must stay 0)
    stale_keys: set = field(default_factory=set)
    problem: str = ""  # the first non-conformance or error, in words
    csan: str = "n/a"

    def add(self, judgement: Judgement, calls_match: bool = True, calls_problem: str = "") -> None:
        self.replays += 1
        fits = calls_match and judgement.ok
        self.conformant += fits
        if not fits and not self.problem:
            self.problem = judgement.problem or calls_problem or "the device's calls differ from the trace"
        stale = judgement.stale
        self.stale_keys |= stale
        if stale - self.expected_races:
            self.unexpected += 1
        if stale & self.expected_races:
            self.manifested += 1

    def refused(self, error: str) -> None:
        self.replays += 1
        self.errors += 1
        if not self.problem:
            self.problem = error

    @property
    def rate(self) -> float:
        return self.manifested / self.replays if self.replays else 0.0

    @property
    def ok(self) -> bool:
        if self.errors or self.conformant != self.replays or self.unexpected or not self.replays:
            return False
        if self.expected_races:
            return self.rate >= 0.99
        return self.manifested == 0 and not self.stale_keys
