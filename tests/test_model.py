"""The SMT model against the other oracles: verdicts, races, and the traces it emits."""

from __future__ import annotations

import pytest

from fencecheck.catalog import load_catalog
from fencecheck.model.check import model_check
from fencecheck.model.concrete import layout, pin
from fencecheck.model.emit import emit
from fencecheck.model.program import build
from fencecheck.model.solver import Budget, make_solver, solve
from fencecheck.model.symconfig import make_config
from fencecheck.reference.check import check_scenario
from fencecheck.reference.run import run_scenario
from fencecheck.report import Verdict

SCENARIOS = {s.name: s for s in load_catalog()}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_model_agrees_with_simulator_race_for_race(name):
    s = SCENARIOS[name]
    m, r = model_check(s), check_scenario(s)
    assert m.verdict is r.verdict
    assert set(m.races) == {x.id for x in r.races}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_model_emits_the_reference_trace(name):
    s = SCENARIOS[name]
    lay = layout(s)
    cfg = make_config(lay.bounds(s))
    prog = build(cfg)
    solver = make_solver()
    solver.add(*cfg.domain, *prog.constraints, *pin(cfg, s, lay))
    assert solve(solver)[0] is Verdict.COUNTEREXAMPLE  # satisfiable: the pinned configuration exists
    assert emit(prog, solver.model(), s, lay) == run_scenario(s)


def test_pinning_leaves_one_configuration():
    s = SCENARIOS["eagle-v2"]
    lay = layout(s)
    cfg = make_config(lay.bounds(s))
    prog = build(cfg)
    solver = make_solver()
    solver.add(*cfg.domain, *prog.constraints, *pin(cfg, s, lay))
    assert solve(solver)[0] is Verdict.COUNTEREXAMPLE
    model = solver.model()
    import z3

    solver.add(z3.Or(*[v != model.eval(v, model_completion=True) for v in cfg.all_vars()]))
    assert solve(solver)[0] is Verdict.PROVED


def test_out_of_budget_is_unknown_never_proved():
    report = model_check(SCENARIOS["multi-layer-eagle-final"], budget=Budget(timeout_ms=60_000, rlimit=1))
    assert report.verdict is Verdict.UNKNOWN and not report.safe
    assert report.reason
