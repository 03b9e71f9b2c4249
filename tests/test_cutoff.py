"""The argument for any number of phases, runners and steps (proofs/cutoff.py over model/cutoff.py)."""

from __future__ import annotations

import pytest
import z3

from fencecheck.model import assumptions as A
from fencecheck.model import cutoff as C
from fencecheck.model.program import build
from fencecheck.model.solver import Budget, check, fresh_context, make_solver
from fencecheck.model.symconfig import LOOP_DISAGG_PREFILL, LOOP_NORMAL, LOOP_OVERLAP, LOOP_PP, Bounds, make_config
from fencecheck.proofs import cutoff as PC
from fencecheck.proofs import obligations as O
from fencecheck.proofs.report import markdown
from fencecheck.proofs.runner import evaluate
from fencecheck.report import Verdict

BY_NAME = {o.name: o for o in O.OBLIGATIONS}


def _short(label: str) -> str:
    return label.split(":")[0]


@pytest.fixture(scope="module")
def phases():
    return evaluate(BY_NAME["unbounded_phases"])


@pytest.mark.slow
def test_every_query_of_the_phase_induction_is_proved_and_not_vacuous(phases):
    assert phases.verdict is Verdict.PROVED and phases.ok
    assert [q.label for q in phases.queries[:len(PC.PHASES)]] == list(PC.PHASES)
    assert all(q.verdict is Verdict.PROVED for q in phases.queries[:len(PC.PHASES)])
    assert phases.nonvacuity == [("premises satisfiable", True), ("race once the fence is taken away", True)]


@pytest.mark.slow
def test_the_argument_is_in_the_generated_document(phases):
    text = markdown([phases])
    assert "## Any number of phases, runners and steps" in text
    for label in PC.PHASES:
        assert f"- {label}: proved." in text


@pytest.mark.parametrize("name, fails", [
    ("unbounded_phases/broken_invariant", "fails: last, after, end"),
    ("unbounded_phases/reads_after_publish", "fails: after"),
    ("unbounded_runners/mailbox_by_runner", "fails: frame"),
    ("unbounded_runners/marker_unrenamed",
     "fails: symmetry (phase, swap), symmetry (phase, rotate), symmetry (end, swap), symmetry (end, rotate)"),
])
def test_each_broken_part_is_caught_where_it_breaks(name, fails):
    r = evaluate(BY_NAME[name])
    assert r.verdict is Verdict.COUNTEREXAMPLE and r.ok
    assert r.notes == [fails]


@pytest.mark.slow
def test_the_runner_frame_and_symmetry_are_proved():
    r = evaluate(BY_NAME["unbounded_runners"])
    assert r.verdict is Verdict.PROVED and r.ok
    assert [(q.label, q.verdict) for q in r.queries] == [(label, Verdict.PROVED) for label in PC.RUNNERS]


def test_the_generators_are_a_swap_and_a_rotation():
    swap, rotate = PC.generators(6)
    assert swap == (1, 0, 2, 3, 4, 5) and rotate == (1, 2, 3, 4, 5, 0)


def test_the_pieces_are_checked_with_the_runner_cutoff():
    for o in O.OBLIGATIONS:
        if o.kind == "phases":
            assert o.bounds.runners == C.RUNNER_CUTOFF == 6, o.name


def test_an_unknown_query_makes_the_argument_unknown():
    starved = O.Obligation("unbounded_phases", "", "phases", Verdict.PROVED, O.PIECE_BOUNDS, rlimit=1_000)
    r = evaluate(starved)
    assert r.verdict is Verdict.UNKNOWN and not r.ok
    assert "base" not in r.reason and "before" in r.reason


def test_an_assumption_the_argument_does_not_place_is_an_error(monkeypatch):
    monkeypatch.setitem(A.BY_NAME, "new_assumption", A.ASSUMPTIONS[0])
    with pytest.raises(KeyError, match="new_assumption"):
        PC.per_phase(O.ALL)


def test_every_assumption_is_placed():
    assert set(PC.per_phase(O.ALL)) | set(PC.LAST_READER) == set(O.ALL)
    assert not set(PC.per_phase(O.ALL)) & set(PC.LAST_READER)


# -- the composition check can fail ------------------------------------------------------------------------------


def _composition(bounds: Bounds) -> Verdict:
    ctx = fresh_context()
    cfg = make_config(bounds, "b", ctx)
    prog = build(cfg, "b", havoc=True)
    p, race = C.composed(cfg, "b.pieces")
    s = make_solver(Budget(rlimit=20_000_000), ctx)
    s.add(*cfg.domain, *prog.constraints, *p.prog.constraints, prog.state_in.invariant(bounds.runners),
          C.same_state(prog.state_in, p.state_in),
          z3.Or(prog.any_race() != race, z3.Not(C.same_state(prog.state_out, p.state_out))))
    return check(s).verdict


SMALL = Bounds(steps=1, phases=1, runners=1)


def test_the_pieces_compose_into_the_program():
    assert _composition(SMALL) is Verdict.PROVED


def test_pieces_that_leave_out_run_batchs_wait_differ_from_the_program(monkeypatch):
    monkeypatch.setattr(C, "_begin", lambda b, step: None)
    assert _composition(SMALL) is Verdict.COUNTEREXAMPLE


def test_a_summary_that_forgets_a_stream_differs_from_the_program(monkeypatch):
    fold = C.fold_reads
    monkeypatch.setattr(C, "fold_reads", lambda m, reads, d: fold(m, [r for r in reads if r.stream == "F"], d))
    assert _composition(SMALL) is Verdict.COUNTEREXAMPLE


def test_a_step_end_that_knows_only_the_overlap_loop_differs_from_the_program(monkeypatch):
    def overlap_only(b, step, last):
        lt = b.cfg.loop_top()
        b.barrier(b.d.Not(lt), step, b.cfg.publisher[step - 1])
        first = b.writes(b.d.BoolVal(True), step + 1, lambda env: None)
        return {loc: [w] for loc, w in first.items()}

    monkeypatch.setattr(C, "_end", overlap_only)
    assert _composition(SMALL) is Verdict.COUNTEREXAMPLE


# -- the end of a step needs the assumptions on result processing -------------------------------------------------


def _end_race(names, extra=lambda cfg: []):
    """The ``end`` query under ``names`` and ``extra(cfg)``: (verdict, the solver, the configuration, the candidate
    first writes)."""
    ctx = fresh_context()
    cfg = make_config(C.piece_bounds(), "e", ctx)
    p, first = C.step_end(cfg)
    start = z3.Or(C.after_last_reader(cfg, p.state_in, p.max_in),
                  z3.And(C.before_last_reader(cfg, p.state_in, p.max_in), C.no_reads(p.max_in)))
    s = make_solver(Budget(rlimit=2_000_000), ctx)
    s.add(*p.constraints, *A.constraints(cfg, p.prog, names), start, C.race_of_summary(first, p.max_in, p.builder.d),
          *extra(cfg))
    return check(s).verdict, s, cfg, first, p.state_in


@pytest.mark.parametrize("dropped, loop", [("deferred_barrier_results_untouched", LOOP_DISAGG_PREFILL),
                                           ("barrier_after_run_batch", LOOP_OVERLAP)])
def test_the_end_races_through_result_processing_without_its_assumption(dropped, loop):
    names = PC.per_phase(O.ALL)
    assert _end_race(names)[0] is Verdict.PROVED
    verdict, s, cfg, first, _ = _end_race(tuple(n for n in names if n != dropped))
    assert verdict is Verdict.COUNTEREXAMPLE
    m = s.model()
    (unfenced, _), = first.values()
    assert m.eval(cfg.loop).as_long() == loop and z3.is_true(m.eval(cfg.results_touch_inflight))
    assert z3.is_true(m.eval(unfenced.guard, model_completion=True))  # result processing's write, before the barrier


@pytest.mark.parametrize("loop, expected", [(LOOP_NORMAL, Verdict.PROVED), (LOOP_PP, Verdict.PROVED),
                                            (LOOP_OVERLAP, Verdict.COUNTEREXAMPLE)])
def test_with_the_barrier_off_only_the_loops_that_order_s_after_f_end_race_free(loop, expected):
    names = tuple(n for n in PC.per_phase(O.ALL) if n != "barrier_on")
    verdict, s, cfg, first, state = _end_race(names, lambda cfg: [cfg.loop == loop, z3.Not(cfg.barrier)])
    assert verdict is expected
    if verdict is Verdict.COUNTEREXAMPLE:  # the issued write knows of F only what S knew before the step ended
        m = s.model()
        w = next(w for ws in first.values() for w in ws if z3.is_true(m.eval(w.guard, model_completion=True)))
        assert all(z3.is_true(m.eval(w.vc[x] == state.clock["S"][x], model_completion=True)) for x in w.vc)


# -- the summary --------------------------------------------------------------------------------------------------


def test_the_summary_is_the_largest_issued_position_per_stream():
    ctx = fresh_context()
    cfg = make_config(C.piece_bounds(1), "t", ctx)
    p = C.one_phase(cfg)
    loc = cfg.bounds.locations[0]
    s = make_solver(Budget(rlimit=2_000_000), ctx)
    # A phase whose prep runs on F and that reads before and after the launch: positions grow only by reads, so the F
    # maximum becomes F's own position after the phase (above the 5 it started from); the P maximum stays.
    ph = cfg.phases[0][0]
    s.add(*p.constraints, p.state_in.invariant(1), *[v == 3 for v in p.max_in.values()],
          p.state_in.clock["F"]["F"] == 5, z3.Not(ph.on_plan()), ph.reads[(0, loc)], ph.reads[(3, loc)])
    assert check(s).verdict is Verdict.COUNTEREXAMPLE  # such a phase exists
    s.add(z3.Or(p.max_out[("F", loc)] <= 5, p.max_out[("F", loc)] != p.state_out.clock["F"]["F"],
                p.max_out[("P", loc)] != 3))
    assert check(s).verdict is Verdict.PROVED


def test_the_argument_names_every_query_of_the_phase_induction():
    for label in PC.PHASES:
        assert f"`{label.split(':')[0].split(' (')[0]}`" in PC.ARGUMENT, label
    for name in ("unbounded_phases/broken_invariant", "unbounded_phases/reads_after_publish",
                 "unbounded_runners/mailbox_by_runner", "unbounded_runners/marker_unrenamed"):
        assert f"`{name}`" in PC.ARGUMENT and name in BY_NAME
