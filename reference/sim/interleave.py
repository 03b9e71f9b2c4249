"""Execute a trace under one device interleaving: writes stamp the step they prepare, reads record what they saw.

A schedule is an order of kernel indices that respects happens-before. A read that sees a write enqueued after it
(host order) saw data the host meant for later: the WAR race happened (a stale read, in the sense of
docs/sglang-mechanism.md#the-hazard). That is the race check's rule (``races.py``), on device operations alone; on
the reference's traces it is a read of step N seeing a stamp above N, the next batch's data.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from fencecheck.errors import ScheduleError
from fencecheck.verdict import Race, RaceId

from .hb import HappensBefore


@dataclass(frozen=True)
class Observation:
    """What one read saw: under a simulated schedule (``kernel`` is its index) or on the GPU (its output slot).
    ``seen`` is the stamp (the step label of the write it saw, 0 for the initial data); ``late`` whether that write
    was enqueued after the read in host order (the simulator knows; None on the GPU, where the stamps decide)."""

    kernel: int
    step: int
    phase: str
    site: str
    location: str
    seen: int
    late: bool | None = None

    @property
    def stale(self) -> bool:
        return self.seen > self.step if self.late is None else self.late

    @property
    def id(self) -> RaceId:
        return RaceId(self.location, self.phase, self.site, self.step)

    def key(self) -> RaceId:
        """The read's identity across steps."""
        return self.id.place()


def _ready(hb: HappensBefore, done: list[int], k) -> bool:
    for i, s in enumerate(hb.streams):
        need = k.vc[i] - 1 if s == k.stream else k.vc[i]
        if done[i] < need:
            return False
    return True


def execute(hb: HappensBefore, schedule: list[int]) -> list[Observation]:
    """Run the kernels in ``schedule`` order; raise ``ScheduleError`` if the order breaks happens-before."""
    if sorted(schedule) != list(range(len(hb.kernels))):
        raise ScheduleError("a schedule must list every kernel exactly once")
    sidx = {s: i for i, s in enumerate(hb.streams)}
    done = [0] * len(hb.streams)
    memory: dict[str, tuple[int, int]] = {}  # location -> (stamp, host index) of the last write run
    seen: list[Observation] = []
    for idx in schedule:
        k = hb.kernels[idx]
        if not _ready(hb, done, k):
            raise ScheduleError(f"kernel {idx} ({k.stream} #{k.pos}) runs before something that happens before it")
        done[sidx[k.stream]] += 1
        if k.is_write:
            memory[k.location] = (k.step, k.host)
        else:
            stamp, host = memory.get(k.location, (0, -1))
            seen.append(Observation(idx, k.step, k.phase, k.site, k.location, stamp, host > k.host))
    return seen


def host_order(hb: HappensBefore) -> list[int]:
    """Every kernel runs the moment it is enqueued (the device never lags the host): no race can show."""
    return list(range(len(hb.kernels)))


def witness_schedule(hb: HappensBefore, race: Race) -> list[int]:
    """A schedule in which ``race``'s write runs before its read: the write and everything ordered before it first,
    then the rest in host order. Valid because host order extends happens-before."""
    w = next(k for k in hb.kernels if k.host == race.write_op and k.is_write)
    own = {s: i for i, s in enumerate(hb.streams)}
    first = [k.index for k in hb.kernels if k.vc[own[k.stream]] <= w.vc[own[k.stream]]]
    chosen = set(first)
    return first + [k.index for k in hb.kernels if k.index not in chosen]


def witnesses(hb: HappensBefore, races: list[Race]) -> list[tuple[list[int], Observation | None]]:
    """For each race, its ``witness_schedule`` and the first stale read of its (location, phase, site) under it, or
    None when that schedule shows none. A schedule depends only on the race's write, so each write's schedule is
    built and run once, however many races share it."""
    by_write: dict[int, tuple[list[int], dict]] = {}
    out = []
    for race in races:
        if race.write_op not in by_write:
            schedule = witness_schedule(hb, race)
            first: dict = {}
            for o in stale_reads(hb, schedule):
                first.setdefault(o.key(), o)
            by_write[race.write_op] = (schedule, first)
        schedule, first = by_write[race.write_op]
        out.append((schedule, first.get(race.key())))
    return out


def witness_observations(hb: HappensBefore, races: list[Race]) -> list[Observation | None]:
    """For each race, the first stale read its witness schedule shows (``witnesses`` without the schedules)."""
    return [o for _, o in witnesses(hb, races)]


def random_schedule(hb: HappensBefore, rng: random.Random) -> list[int]:
    """A uniformly chosen ready kernel at each step: a random linear extension of happens-before."""
    sidx = {s: i for i, s in enumerate(hb.streams)}
    done = [0] * len(hb.streams)
    queues = {s: [k.index for k in hb.kernels if k.stream == s] for s in hb.streams}
    heads = {s: 0 for s in hb.streams}
    out: list[int] = []
    while len(out) < len(hb.kernels):
        ready = [
            queues[s][heads[s]]
            for s in hb.streams
            if heads[s] < len(queues[s]) and _ready(hb, done, hb.kernels[queues[s][heads[s]]])
        ]
        idx = rng.choice(ready)
        k = hb.kernels[idx]
        out.append(idx)
        heads[k.stream] += 1
        done[sidx[k.stream]] += 1
    return out


def stale_reads(hb: HappensBefore, schedule: list[int]) -> list[Observation]:
    return [o for o in execute(hb, schedule) if o.stale]
