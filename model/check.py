"""The model's verdict on one concrete scenario: pin the symbolic configuration to it and ask for a race."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import z3

from fencecheck.report import RaceId, Verdict
from fencecheck.scenario import Scenario

from .concrete import layout, pin
from .program import Program, ReadSlot, build
from .solver import Budget, make_solver, solve
from .symconfig import make_config


@dataclass(frozen=True)
class ModelReport:
    scenario: str
    steps: int
    verdict: Verdict
    races: tuple[RaceId, ...] = ()
    reason: str = ""
    solver: object = field(default=None, compare=False, repr=False)  # the query, for SMT-LIB2 export
    seconds: float = 0.0

    @property
    def safe(self) -> bool:
        return self.verdict is Verdict.PROVED


def model_check(s: Scenario, steps: int | None = None, budget: Budget = Budget()) -> ModelReport:
    """PROVED when no device interleaving of the run races, COUNTEREXAMPLE with every racing read, or UNKNOWN."""
    lay = layout(s, steps)
    cfg = make_config(lay.bounds(s))
    prog = build(cfg)
    solver = make_solver(budget)
    solver.add(*cfg.domain, *prog.constraints, *pin(cfg, s, lay))
    solver.add(prog.any_race())
    t = time.perf_counter()
    verdict, reason = solve(solver)
    seconds = time.perf_counter() - t
    if verdict is not Verdict.COUNTEREXAMPLE:
        return ModelReport(s.name, lay.steps, verdict, (), reason, solver, seconds)
    model = solver.model()
    races = tuple(_race(s, r) for r in prog.reads if z3.is_true(model.eval(prog.race_of(r), model_completion=True)))
    return ModelReport(s.name, lay.steps, verdict, races, "", solver, seconds)


def _race(s: Scenario, r: ReadSlot) -> RaceId:
    phase = s.algorithm.steps[s.step_kind(r.step)][r.phase].name
    return RaceId(r.location, phase, r.site, r.step)


__all__ = ["ModelReport", "Program", "model_check"]
