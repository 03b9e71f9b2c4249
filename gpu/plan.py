"""CPU-side planning for GPU replays (no torch needed): which reads get a spin before them, how observed stamps are
read back into stale reads, and how replays of one trace add up.

Making a race visible (anchors.md, Jepsen/Elle idea): writes stamp the step they prepare, reads copy what they saw
into private outputs, checked after a synchronize; a spin kernel before chosen reads widens the window. For a
race, the model's witness says the write runs before the racing read: spinning before every read with the racing
read's (phase, site, location) lets the unfenced write overtake it. A race-free trace is run under the heaviest
delays (a spin before every read) and must never show a stale read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fencecheck.reference.sim.interleave import Observation

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
    """Replays of one corpus trace on the GPU."""

    id: str
    expected_races: frozenset[tuple[str, str, str, int]]
    replays: int = 0
    conformant: int = 0
    manifested: int = 0  # replays that showed a stale read of an expected race
    unexpected: int = 0  # replays that showed a stale read nobody expected (must stay 0)
    stale_keys: set = field(default_factory=set)
    csan: str = "n/a"

    def add(self, observations: list[Observation], conformant: bool) -> None:
        self.replays += 1
        self.conformant += conformant
        stale = {o.id for o in observations if o.stale}
        self.stale_keys |= stale
        if stale - self.expected_races:
            self.unexpected += 1
        if stale & self.expected_races:
            self.manifested += 1

    @property
    def rate(self) -> float:
        return self.manifested / self.replays if self.replays else 0.0

    @property
    def ok(self) -> bool:
        if self.conformant != self.replays or self.unexpected:
            return False
        if self.expected_races:
            return self.rate >= 0.99
        return self.manifested == 0 and not self.stale_keys
