"""The SMT model against the other oracles: verdicts, races, and the traces it emits."""

from __future__ import annotations

import pytest

from fencecheck.files.catalog import PR_ERA, load_catalog
from fencecheck.model.check import model_check
from fencecheck.model.concrete import layout, pin
from fencecheck.model.emit import emit
from fencecheck.model.program import build
from fencecheck.model.solver import Budget, make_solver, solve
from fencecheck.model.symconfig import make_config
from fencecheck.reference.check import check_scenario
from fencecheck.reference.run import run_scenario
from fencecheck.verdict import Verdict

SCENARIOS = {s.name: s for s in load_catalog(PR_ERA)}
#: A few scenarios checked in the quick run (-m "not slow"): safe, racing, graph runners with markers, plan stream.
QUICK = ("plain-decode", "ngram-no-clear", "eagle-v2", "plan-stream-unjoined")


def _catalog_params():
    return [pytest.param(n, marks=() if n in QUICK else pytest.mark.slow) for n in sorted(SCENARIOS)]


@pytest.mark.parametrize("name", _catalog_params())
def test_model_agrees_with_simulator_race_for_race(name):
    s = SCENARIOS[name]
    m, r = model_check(s), check_scenario(s)
    assert m.verdict is r.verdict
    assert set(m.races) == {x.id for x in r.races}


@pytest.mark.parametrize("name", _catalog_params())
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
    report = model_check(SCENARIOS["plain-decode"], budget=Budget(rlimit=1))
    assert report.verdict is Verdict.UNKNOWN and not report.safe
    assert "resource limit" in report.reason


def test_a_check_depends_on_its_scenario_alone():
    """Each check builds its query in a z3 context of its own: the work it does (z3's rlimit count, a measure that
    is the same on every machine) and its answer are the same whatever was checked before."""
    s = SCENARIOS["ngram-no-clear"]
    first = model_check(s)
    for other in ("plain-decode", "restored-graph-no-marker"):
        model_check(SCENARIOS[other])
    again = model_check(s)
    assert (again.verdict, again.races, again.rlimit) == (first.verdict, first.races, first.rlimit)
    assert first.rlimit > 0 and first.solver.ctx is not again.solver.ctx



@pytest.mark.parametrize("steps,phases,runners,locations",
                         [pytest.param(2, 2, 2, ("a",), marks=pytest.mark.slow), (2, 1, 3, ("a", "b"))])
def test_knowledge_races_equal_clock_races(steps, phases, runners, locations):
    """From the initial state races are decided by per-read knowledge Booleans (model/program.py); on every
    configuration within the bounds each read races by them exactly when it races by the integer clocks
    (``Program.race_by_clock``)."""
    import z3

    from fencecheck.model.solver import fresh_context
    from fencecheck.model.symconfig import Bounds

    ctx = fresh_context()
    cfg = make_config(Bounds(steps=steps, phases=phases, runners=runners, locations=locations), ctx=ctx)
    prog = build(cfg)
    assert all(w.know is not None for ws in prog.first_writes.values() for w in ws)
    solver = make_solver(Budget(rlimit=30_000_000), ctx)
    solver.add(*cfg.domain, *prog.constraints, z3.Or(*[prog.race_of(r) != prog.race_by_clock(r) for r in prog.reads]))
    assert solve(solver)[0] is Verdict.PROVED


def test_check_cases_answers_as_one_check_of_the_disjunction():
    """Cases checked one at a time: proved when each is, the first satisfiable case's model, and one shared rlimit:
    a budget the cases together exceed is unknown, never proved."""
    import z3

    from fencecheck.model.solver import check_cases, fresh_context

    ctx = fresh_context()
    x, y = z3.Int("x", ctx), z3.Int("y", ctx)
    base = [x >= 0, x <= 3, y == x + 1]
    s = make_solver(Budget(), ctx)
    s.add(*base)
    assert check_cases(s, [y == 0, y > 4], Budget()).verdict is Verdict.PROVED
    a = check_cases(s, [y == 0, y == 3, y == 4], Budget())
    assert a.verdict is Verdict.COUNTEREXAMPLE and s.model().eval(x).as_long() == 2
    s = make_solver(Budget(), ctx)
    s.add(*base)
    one = check_cases(s, [y == 0], Budget())
    assert one.verdict is Verdict.PROVED and one.rlimit > 0
    s = make_solver(Budget(rlimit=one.rlimit + 1), ctx)
    s.add(*base)
    assert check_cases(s, [y == 0, y == -1, y == -2], Budget(rlimit=one.rlimit + 1)).verdict is Verdict.UNKNOWN
