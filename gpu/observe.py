"""What a device really did, judged against the trace it was meant to run (no torch needed).

A device run leaves observations: one per read kernel, per launch for reads inside a graph, each holding the
stamp the read saw (writes stamp the step they prepare; buffers start at ``INITIAL``; an observation slot nobody
wrote still holds ``UNSET``). They are judged, as Jepsen's Elle judges a database's history, against the trace's
happens-before (``fencecheck.reference.sim.hb``, rules R1-R7), not against the device's own log of what it was
asked to do:

- every read of the trace was observed, in the trace's order of read kernels, and actually ran (no ``UNSET``);
- every stamp seen is one some execution allowed by happens-before can produce: the last write ordered before the
  read (``INITIAL`` when none is) or a write unordered with the read that no such write overwrites; never a write
  ordered after the read. A read that saw anything else ran somewhere the trace does not put it (another stream,
  a missing wait, memory not yet initialized);
- a stale read (a stamp above the read's step) is a write-after-read race, to be compared with the model's.
"""

from __future__ import annotations

from dataclasses import dataclass

from fencecheck.reference.sim.hb import HappensBefore, Kernel, analyze
from fencecheck.reference.sim.interleave import Observation
from fencecheck.verdict import RaceId
from fencecheck.trace import Trace

INITIAL = 0  # what shared buffers hold before the first write
UNSET = -1  # what an observation slot holds until its read copies into it


def allowed_stamps(hb: HappensBefore) -> list[frozenset[int]]:
    """Per read kernel (in kernel order), the stamps an execution respecting happens-before can let it see."""
    writes: dict[str, list[Kernel]] = {}
    for k in hb.kernels:
        if k.is_write:
            writes.setdefault(k.location, []).append(k)
    out = []
    for r in hb.kernels:
        if r.is_write:
            continue
        ws = writes.get(r.location, [])
        before = [w for w in ws if hb.hb(w, r)]
        seen = {w.step for w in ws
                if not hb.hb(r, w) and not any(hb.hb(w, v) for v in before)}
        if not before:
            seen.add(INITIAL)
        out.append(frozenset(seen))
    return out


@dataclass(frozen=True)
class Expected:
    """What a trace lets its reads observe: their identities in kernel order and the stamps each may see."""

    reads: tuple[tuple[int, str, str, str], ...]  # (step, phase, site, location)
    allowed: tuple[frozenset[int], ...]

    @classmethod
    def of(cls, trace: Trace) -> "Expected":
        hb = analyze(trace)
        reads = tuple((k.step, k.phase, k.site, k.location) for k in hb.kernels if not k.is_write)
        return cls(reads, tuple(allowed_stamps(hb)))


@dataclass(frozen=True)
class Judgement:
    """One device run's observations against its trace. ``problem`` is the first thing that does not fit, in words
    (empty when everything fits); ``stale`` the races the run showed."""

    problem: str
    impossible: int  # reads that saw a stamp no execution allowed by the trace can produce
    stale: frozenset[RaceId]

    @property
    def ok(self) -> bool:
        return not self.problem


def judge(expected: Expected, observations: list[Observation]) -> Judgement:
    stale = frozenset(o.id for o in observations if o.seen != UNSET and o.stale)
    got = tuple((o.step, o.phase, o.site, o.location) for o in observations)
    if got != expected.reads:
        n = next((i for i, (a, b) in enumerate(zip(expected.reads, got)) if a != b), min(len(got), len(expected.reads)))
        want = expected.reads[n] if n < len(expected.reads) else "<no more reads>"
        have = got[n] if n < len(got) else "<no more observations>"
        return Judgement(f"read {n}: the trace has {want}, the device observed {have}", 0, stale)
    unset = [i for i, o in enumerate(observations) if o.seen == UNSET]
    if unset:
        o = observations[unset[0]]
        return Judgement(f"{len(unset)} read(s) never ran, first {o.id.text()}", 0, stale)
    bad = [(o, ok) for o, ok in zip(observations, expected.allowed) if o.seen not in ok]
    if bad:
        o, ok = bad[0]
        return Judgement(f"{len(bad)} read(s) saw a stamp the trace's happens-before forbids, first {o.id.text()} "
                         f"saw {o.seen}, allowed {sorted(ok)}", len(bad), stale)
    return Judgement("", 0, stale)
