"""Replay corpus traces against the reference on the simulator: conformance, verdict, witness, adversarial
interleavings. Each check's outcome is a value; nothing here raises on a disagreement."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from fencecheck.files.corpus_io import CorpusRecord
from fencecheck.verdict import Verdict
from fencecheck.trace import Mark, Trace, protocol_fields

from .run import run_scenario
from .sim.hb import HappensBefore, analyze
from .sim.interleave import random_schedule, stale_reads
from .sim.races import find_races

RANDOM_SCHEDULES = 8
EXTREME_ORDERS = (("S", "P", "F"), ("S", "F", "P"))  # writes as early as the order allows, reads as late


@dataclass
class Conformance:
    ok: bool
    matched: int  # length of the longest matched prefix of ops
    total: int
    expected: str = ""  # the first divergent op, expected and actual (empty when ok)
    actual: str = ""
    detail: str = ""  # the first difference, named: "ops[12].event: expected ..., got ..." or "events[1]: ..."


@dataclass
class ReplayResult:
    id: str
    family: str
    conformance: Conformance
    verdict: Verdict
    expected: Verdict
    races_agree: bool
    witness_shown: bool | None = None  # races: the witness interleaving showed the stale read
    schedules: int = 0  # safe traces: adversarial interleavings run
    stale_seen: int = 0  # ... and how many showed a stale read (must be 0)
    csan: str = "n/a"  # second oracle: "agree", "DISAGREE: ...", or "n/a" (the trace replays graphs)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (self.conformance.ok and self.verdict is self.expected and self.races_agree
                and self.witness_shown is not False and self.stale_seen == 0 and not self.csan.startswith("DISAGREE"))


def _label(item) -> str:
    return f"mark {item.mark.value}" if isinstance(item, Mark) else getattr(item, "kind", type(item).__name__)


def first_difference(where: str, a, b) -> str:
    """The first protocol field in which ``a`` and ``b`` differ, as ``where.field: expected X, got Y``."""
    if type(a) is not type(b):
        return f"{where}: expected {_label(a)}, got {_label(b)}"
    for name in protocol_fields(a):
        x, y = getattr(a, name), getattr(b, name)
        if x != y:
            return f"{where}.{name}: expected {x!r}, got {y!r}"
    return ""


def conformance(expected: Trace, actual: Trace) -> Conformance:
    """Whether ``actual`` runs the protocol of ``expected``: equal ops in equal order, then equal streams, events
    and graphs, every field compared except the free ``by`` (and the trace's ``scenario`` name and ``meta``). The
    whole trace must be consumed (equal lengths). A difference names the longest matched prefix and the first
    divergent op and field."""
    n = 0
    for a, b in zip(expected.ops, actual.ops):
        if a != b:
            break
        n += 1
    total = len(expected.ops)
    if n < max(total, len(actual.ops)):
        exp = expected.ops[n] if n < total else None
        act = actual.ops[n] if n < len(actual.ops) else None
        if exp is None or act is None:
            detail = f"ops[{n}]: expected {'<end of trace>' if exp is None else _label(exp)}, got " + (
                "<end of trace>" if act is None else _label(act))
        else:
            detail = first_difference(f"ops[{n}]", exp, act)
        return Conformance(False, n, total, "<end of trace>" if exp is None else repr(exp),
                           "<end of trace>" if act is None else repr(act), detail)
    for what in ("streams", "events", "graphs"):
        xs, ys = getattr(expected, what), getattr(actual, what)
        if xs != ys:
            j = next((j for j, (x, y) in enumerate(zip(xs, ys)) if x != y), min(len(xs), len(ys)))
            x = repr(xs[j]) if j < len(xs) else "<none>"
            y = repr(ys[j]) if j < len(ys) else "<none>"
            return Conformance(False, n, total, detail=f"{what}[{j}]: expected {x}, got {y}")
    return Conformance(True, n, total)


def priority_schedule(hb: HappensBefore, order: tuple[str, ...]) -> list[int]:
    """Greedy linear extension: among ready kernels, the stream earliest in ``order`` runs first."""
    sidx = {s: i for i, s in enumerate(hb.streams)}
    queues = {s: [k.index for k in hb.kernels if k.stream == s] for s in hb.streams}
    heads = {s: 0 for s in hb.streams}
    done = [0] * len(hb.streams)
    out = []
    rank = {s: order.index(s) if s in order else len(order) for s in hb.streams}
    while len(out) < len(hb.kernels):
        for s in sorted(hb.streams, key=rank.get):
            if heads[s] < len(queues[s]):
                k = hb.kernels[queues[s][heads[s]]]
                if all(done[i] >= (k.vc[i] - 1 if t == k.stream else k.vc[i]) for i, t in enumerate(hb.streams)):
                    out.append(k.index)
                    heads[s] += 1
                    done[sidx[s]] += 1
                    break
        else:  # pragma: no cover - happens-before is acyclic, so some kernel is always ready
            raise RuntimeError("no ready kernel")
    return out


def replay(record: CorpusRecord, seed: int = 0, with_csan: bool = True) -> ReplayResult:
    actual = run_scenario(record.scenario, record.trace.steps)
    conf = conformance(record.trace, actual)
    hb = analyze(record.trace)
    races = find_races(hb)
    verdict = Verdict.COUNTEREXAMPLE if races else Verdict.PROVED
    got = sorted({(r.location, r.phase, r.site, r.step) for r in races})
    res = ReplayResult(record.id, record.family, conf, verdict, record.expected,
                       got == sorted(set(map(tuple, record.races))))
    if record.expected is Verdict.COUNTEREXAMPLE and record.witness:
        w = record.witness["race"]
        try:
            stale = stale_reads(hb, list(record.witness["schedule"]))
        except Exception as err:  # a witness that breaks happens-before is a disagreement, reported as such
            res.witness_shown = False
            res.notes.append(f"witness rejected: {err}")
        else:
            res.witness_shown = any((o.location, o.phase, o.site, o.step) == (w["location"], w["phase"], w["site"], w["step"])
                                    for o in stale)
    elif verdict is Verdict.PROVED:
        rng = random.Random(f"{seed}:{record.id}")
        schedules = [random_schedule(hb, rng) for _ in range(RANDOM_SCHEDULES)]
        schedules += [priority_schedule(hb, order) for order in EXTREME_ORDERS]
        res.schedules = len(schedules)
        res.stale_seen = sum(bool(stale_reads(hb, sch)) for sch in schedules)
    if with_csan:
        from .sim import csan

        res.csan = csan.compare(record.trace, got)
    return res
