"""The model's traces of concrete scenarios, fast: the host program run in the concrete domain (the same program
the proofs use symbolically), giving the trace, the model's verdict and races, and a witness interleaving."""

from __future__ import annotations

from dataclasses import astuple, dataclass

from fencecheck.verdict import Verdict
from fencecheck.scenario import Scenario
from fencecheck.trace import Trace

from .concrete import concretize, layout
from .emit import emit, witness_schedule
from .program import ReadSlot, build


@dataclass(frozen=True)
class ModelTrace:
    scenario: Scenario
    trace: Trace
    verdict: Verdict
    races: tuple[tuple[str, str, str, int], ...]  # distinct (location, phase, site, step), host order of the reads
    witness: dict | None  # for a race: the first racing read and the interleaving that shows it


def generate(s: Scenario, steps: int | None = None) -> ModelTrace:
    lay = layout(s, steps)
    prog = build(concretize(s, lay))
    trace = emit(prog, None, s, lay)
    racing: list[ReadSlot] = [r for r in prog.reads if prog.race_of(r)]
    races = tuple(dict.fromkeys(astuple(r.race_id(s)) for r in racing))  # distinct, host order
    witness = None
    if racing:
        r = racing[0]
        witness = {
            "race": r.witness_race(s),
            "schedule": witness_schedule(prog, None, r),
        }
    return ModelTrace(s, trace, Verdict.COUNTEREXAMPLE if racing else Verdict.PROVED, races, witness)
