"""The model's verdict on one concrete scenario: pin the symbolic configuration to it and ask for a race."""

from __future__ import annotations

from dataclasses import dataclass, field

import z3

from fencecheck.verdict import RaceId, Verdict
from fencecheck.scenario import Scenario

from .concrete import layout, pin
from .program import Program, build
from .solver import Budget, check, fresh_context, make_solver
from .symconfig import make_config


@dataclass(frozen=True)
class ModelReport:
    scenario: str
    steps: int
    verdict: Verdict
    races: tuple[RaceId, ...] = ()
    reason: str = ""
    solver: object = field(default=None, compare=False, repr=False)  # the query, for SMT-LIB2 export
    rlimit: int = 0  # what the query consumed of z3's resource limit
    seconds: float = field(default=0.0, compare=False)  # for timings only

    @property
    def safe(self) -> bool:
        return self.verdict is Verdict.PROVED


def model_check(s: Scenario, steps: int | None = None, budget: Budget = Budget(),
                ctx: z3.Context | None = None) -> ModelReport:
    """PROVED when no device interleaving of the run races, COUNTEREXAMPLE with every racing read, or UNKNOWN.

    The query is built in ``ctx``, a context of its own when None, so the answer depends on ``s`` alone."""
    ctx = ctx if ctx is not None else fresh_context()
    lay = layout(s, steps)
    cfg = make_config(lay.bounds(s), ctx=ctx)
    prog = build(cfg)
    solver = make_solver(budget, ctx)
    solver.add(*cfg.domain, *prog.constraints, *pin(cfg, s, lay))
    solver.add(prog.any_race())
    a = check(solver)
    if a.verdict is not Verdict.COUNTEREXAMPLE:
        return ModelReport(s.name, lay.steps, a.verdict, (), a.reason, solver, a.rlimit, a.seconds)
    model = solver.model()
    races = tuple(r.race_id(s) for r in prog.reads if z3.is_true(model.eval(prog.race_of(r), model_completion=True)))
    return ModelReport(s.name, lay.steps, a.verdict, races, "", solver, a.rlimit, a.seconds)


__all__ = ["ModelReport", "Program", "model_check"]
