"""The proof obligations: verdicts as expected, non-vacuity, and every counterexample replayed by the simulator."""

from __future__ import annotations

import dataclasses
import io

import pytest
import z3

from fencecheck.cli import main
from fencecheck.model.counterexample import _read_count
from fencecheck.proofs import obligations as O
from fencecheck.proofs.runner import evaluate
from fencecheck.reference.check import check_scenario
from fencecheck.reference.run import run_scenario
from fencecheck.reference.sim.hb import analyze
from fencecheck.reference.sim.interleave import stale_reads
from fencecheck.report import RaceId, Verdict
from fencecheck.vocab import ResolutionRule


@pytest.fixture(scope="module")
def results():
    return {ob.name: evaluate(ob) for ob in O.OBLIGATIONS}


def test_every_obligation_is_as_expected(results):
    bad = {n: (r.verdict.value, r.reason, r.notes) for n, r in results.items() if not r.ok}
    assert not bad


def test_main_theorem_is_proved_with_both_non_vacuity_checks(results):
    for name in ("main_theorem", "unbounded_steps", "ngram_with_clear"):
        r = results[name]
        assert r.verdict is Verdict.PROVED
        assert [ok for _, ok in r.nonvacuity] == [True, True]


def test_induction_has_base_step_and_safety(results):
    labels = [q.label.split(":")[0] for q in results["unbounded_steps"].queries[:3]]
    assert labels == ["base", "step", "safety"]
    assert all(q.verdict is Verdict.PROVED for q in results["unbounded_steps"].queries[:3])


def test_each_assumption_is_needed(results):
    from fencecheck.model.assumptions import ASSUMPTIONS

    for a in ASSUMPTIONS:
        r = results[f"needs/{a.name}"]
        assert r.verdict is Verdict.COUNTEREXAMPLE and r.counterexample is not None


def _with_ce(results):
    return [r for r in results.values() if r.counterexample is not None]


def test_counterexamples_replay_in_the_simulator(results):
    for r in _with_ce(results):
        ce = r.counterexample
        report = check_scenario(ce.scenario)
        name = r.obligation.name
        assert not report.safe, name
        assert {rc.id for rc in report.races} == {RaceId(*c) for c in ce.races}, name
        # The model's own trace is the reference's trace of the emitted scenario, op for op.
        assert ce.trace == run_scenario(ce.scenario), name
        # The simulator accepts the model's interleaving (it respects happens-before) and shows the stale read.
        hb = analyze(ce.trace)
        stale = stale_reads(hb, ce.schedule)
        loc, phase, site = ce.race_key()
        assert any((o.location, o.phase, o.site, o.step) == (loc, phase, site, ce.race.step) for o in stale), name


def test_counterexamples_are_minimal(results):
    for r in _with_ce(results):
        ce = r.counterexample
        # Every smaller bound tried before had no counterexample.
        assert all(q.verdict is Verdict.PROVED for q in r.queries[:-1]), r.obligation.name
        assert ce.bounds.phases == 1 or ce.bounds.steps >= 1
    # And no counterexample with fewer reads exists at the same bounds (checked afresh for one obligation).
    ob = O.OBLIGATIONS[[o.name for o in O.OBLIGATIONS].index("needs/named_runner_is_last_reader")]
    ce = results[ob.name].counterexample
    from fencecheck.model import assumptions as A
    from fencecheck.model.program import build
    from fencecheck.model.solver import make_solver
    from fencecheck.model.symconfig import make_config

    cfg = make_config(ce.bounds)
    prog = build(cfg)
    s = make_solver()
    s.add(*cfg.domain, *prog.constraints, *A.constraints(cfg, prog, ob.assumptions), prog.any_race(),
          _read_count(cfg) <= ce.reads - 1)
    assert s.check() == z3.unsat


def test_the_gates_findings_hold_in_the_simulator(results):
    for name in ("gates_redundant_except_ngram", "gates_redundant_with_markers"):
        s = results[name].counterexample.scenario
        assert s.resolution is ResolutionRule.DECLARATION_ONLY
        assert not check_scenario(s).safe
        assert check_scenario(s.replace(resolution=ResolutionRule.GATED)).safe


def test_prove_cli_writes_docs_and_exits_0(tmp_path):
    out = io.StringIO()
    code = main(["prove", "--only", "needs/barrier_on", "ngram_*", "--docs", str(tmp_path)], out, io.StringIO())
    assert code == 0
    text = (tmp_path / "proofs.md").read_text()
    assert "## needs/barrier_on" in text and "## ngram_with_clear" in text and "z3 " in text
    assert (tmp_path / "counterexamples" / "needs__barrier_on.toml").exists()
    assert "3 obligations" in out.getvalue()


def test_unknown_has_its_own_exit_code_and_is_never_proved(monkeypatch):
    starved = dataclasses.replace(O.OBLIGATIONS[0], rlimit=1)
    monkeypatch.setattr(O, "OBLIGATIONS", [starved])
    monkeypatch.setattr(O, "catalog_obligations", lambda: [])
    out = io.StringIO()
    code = main(["prove"], out, io.StringIO())
    assert code == 3
    assert "unknown" in out.getvalue() and "proved          proved" not in out.getvalue()


def test_a_wrong_expectation_exits_1(monkeypatch):
    wrong = dataclasses.replace(O.OBLIGATIONS[0], expected=Verdict.COUNTEREXAMPLE, name="main_theorem_expected_wrong")
    monkeypatch.setattr(O, "OBLIGATIONS", [wrong])
    monkeypatch.setattr(O, "catalog_obligations", lambda: [])
    assert main(["prove"], io.StringIO(), io.StringIO()) == 1


def test_bad_only_pattern_is_bad_input():
    err = io.StringIO()
    assert main(["prove", "--only", "nothing-like-this"], io.StringIO(), err) == 2
    assert err.getvalue().count("\n") == 1
