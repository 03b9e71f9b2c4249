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
from fencecheck.proofs.documents import markdown
from fencecheck.proofs.runner import evaluate
from fencecheck.verdict import Verdict

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
    ("unbounded_phases/broken_invariant", "fails: last, after, end, end (last step)"),
    ("unbounded_phases/reads_after_publish", "fails: after"),
    ("unbounded_phases/segment_reads_unstretched", "fails: segments"),
    ("unbounded_phases/summary_forgets_plan_stream", "fails: fold"),
    ("unbounded_runners/mailbox_by_runner", "fails: frame"),
    pytest.param("unbounded_runners/marker_unrenamed",
                 "fails: symmetry (phase, swap), symmetry (phase, rotate), symmetry (end, swap), "
                 "symmetry (end, rotate), symmetry (last end, swap), symmetry (last end, rotate), "
                 "symmetry (invariants)", marks=pytest.mark.slow),
    pytest.param("unbounded_runners/marker_role_dropped",
                 "fails: projection (phase premises), projection (end), projection (end premises), "
                 "projection (invariants)", marks=pytest.mark.slow),
])
def test_each_broken_part_is_caught_where_it_breaks(name, fails):
    r = evaluate(BY_NAME[name])
    assert r.verdict is Verdict.COUNTEREXAMPLE and r.ok
    assert r.notes == [fails]


@pytest.mark.slow
def test_the_runner_frame_and_symmetry_are_proved():
    r = evaluate(BY_NAME["unbounded_runners"])
    assert r.verdict is Verdict.PROVED and r.ok
    main = r.queries[:len(PC.RUNNERS)]
    assert [(q.label, q.verdict) for q in main] == [(label, Verdict.PROVED) for label in PC.RUNNERS]
    assert r.nonvacuity == [("projection premises satisfiable", True)]


def test_the_generators_are_a_swap_and_a_rotation():
    swap, rotate = PC.generators(7)
    assert swap == (1, 0, 2, 3, 4, 5, 6) and rotate == (1, 2, 3, 4, 5, 6, 0)


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


# -- the pieces are build's own run ------------------------------------------------------------------------------


def _composition(bounds: Bounds, budget: int = 20_000_000) -> Verdict:
    """``build``'s race against the race of the summaries of the same configuration's run observed at its
    boundaries (both from the initial state)."""
    ctx = fresh_context()
    cfg = make_config(bounds, "b", ctx)
    prog = build(cfg, "b")
    p, race = C.composed(cfg, "b.pieces")
    s = make_solver(Budget(rlimit=budget), ctx)
    s.add(*cfg.domain, *prog.constraints, *p.prog.constraints, prog.any_race() != race)
    return check(s).verdict


SMALL = Bounds(steps=2, phases=1, runners=1)


@pytest.mark.slow
def test_the_summaries_race_exactly_when_the_program_does():
    assert _composition(SMALL) is Verdict.PROVED


def test_a_summary_that_forgets_a_stream_differs_from_the_program(monkeypatch):
    fold = C.fold_reads
    monkeypatch.setattr(C, "fold_reads", lambda m, reads, d: fold(m, [r for r in reads if r.stream == "F"], d))
    assert _composition(SMALL) is Verdict.COUNTEREXAMPLE


def test_a_summary_of_the_last_phase_alone_differs_from_the_program(monkeypatch):
    phase = C.Sliced.phase

    def last_only(self, step, i, p):  # the summary emptied as every phase begins, not as run_batch does
        self.summary = {k: self.d.IntVal(0) for k in self.summary}
        phase(self, step, i, p)

    monkeypatch.setattr(C.Sliced, "phase", last_only)
    assert _composition(Bounds(steps=1, phases=2, runners=1)) is Verdict.COUNTEREXAMPLE


def test_a_read_outside_every_observed_phase_is_an_error(monkeypatch):
    monkeypatch.setattr(C.Sliced, "phase", C._Builder.phase)  # the phases run unobserved: no summary holds their reads
    with pytest.raises(RuntimeError, match="outside every phase"):
        C.composed(make_config(SMALL, "b", fresh_context()))


def test_a_piece_whose_boundary_is_never_reached_is_an_error(monkeypatch):
    monkeypatch.setattr(C.Sliced, "run_batch", C._Builder.run_batch)
    with pytest.raises(RuntimeError, match="never reached"):
        C.step_begin(make_config(C.piece_bounds(1), "b", fresh_context()))


def test_each_piece_runs_from_its_own_boundary():
    ctx = fresh_context()
    cfg = make_config(C.piece_bounds(1), "p", ctx)
    p = C.one_phase(cfg)
    assert str(p.state_in.clock["F"]["F"]) == "phase.phase10.init.vc.F.F"  # a free variable, not the run's state
    assert len(p.builder.extras) == 1  # the second segment's read, stretched
    assert p.reads == p.prog.reads and {(r.step, r.phase) for r in p.reads} == {(1, 0)}  # the phase's reads, all
    assert not z3.is_int_value(p.state_in.clock["F"]["F"]) and p.state_out is not p.state_in


# -- a breakable graph's later segments --------------------------------------------------------------------------


def test_three_segments_are_a_stretch_of_the_second():
    """The phase as build issues it with 3 segments from a state equals the stretched phase of 2 segments from the
    same state, the stretch one exactly when the third segment reads."""
    ctx = fresh_context()
    three = make_config(Bounds(steps=1, phases=1, runners=2, segments=3), "t", ctx)
    two = make_config(Bounds(steps=1, phases=1, runners=2, segments=2), "w", ctx)
    pt, pw = C.one_phase(three, "t", stretch=None), C.one_phase(two, "w")
    p3, p2 = three.phases[0][0], two.phases[0][0]
    same = [x == y for x, y in zip(three.all_vars(), two.all_vars()) if not x.eq(p3.segments)]
    third = z3.And(p3.active, p3.execution == C.BREAKABLE, p3.segments > 2, p3.reads[(2, "req_to_token")])
    s = make_solver(Budget(rlimit=5_000_000), ctx)
    s.add(*pt.constraints, *pw.constraints, *same, p2.segments == z3.If(p3.segments > 2, 2, p3.segments),
          C.same_state(pt.state_in, pw.state_in), *[pt.max_in[k] == pw.max_in[k] for k in pt.max_in],
          pw.builder.extras[0] == z3.If(third, 1, 0))
    s.add(z3.Not(z3.And(C.same_state(pt.state_out, pw.state_out),
                        *[pt.max_out[k] == pw.max_out[k] for k in pt.max_out])))
    assert check(s).verdict is Verdict.PROVED


# -- the end of a step needs the assumptions on result processing -------------------------------------------------


def _end_race(names, extra=lambda cfg: []):
    """The ``end`` query under ``names`` and ``extra(cfg)``: (verdict, the solver, the configuration, the candidate
    first writes)."""
    ctx = fresh_context()
    cfg = make_config(C.end_bounds(C.piece_bounds()), "e", ctx)
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
    for label in PC.RUNNERS:
        short = label.split(":")[0]
        assert f"`{short}`" in PC.ARGUMENT or f"`{short.split(' (')[0]}`" in PC.ARGUMENT, label
    for name in ("unbounded_phases/broken_invariant", "unbounded_phases/reads_after_publish",
                 "unbounded_phases/segment_reads_unstretched", "unbounded_phases/summary_forgets_plan_stream",
                 "unbounded_runners/mailbox_by_runner", "unbounded_runners/marker_unrenamed",
                 "unbounded_runners/marker_role_dropped"):
        assert f"`{name}`" in PC.ARGUMENT and name in BY_NAME


def test_a_phase_later_in_a_later_step_is_the_phase_piece():
    """The phase queries run phase 0 of step 1; phase 1 of step 2 (the same knobs, from the same state) does the
    same: the step and phase index only name terms."""
    ctx = fresh_context()
    big = make_config(Bounds(steps=2, phases=2, runners=2), "l", ctx)
    one = make_config(C.piece_bounds(2), "o", ctx)
    b = C.sliced(big, "l", free={(C.PHASE, 2, 1)}, stop=(C.AFTER, 2, 1), stretch="yes")
    later = C._piece(b, (C.PHASE, 2, 1), (C.AFTER, 2, 1))
    first = C.one_phase(one, "o")
    p, q = big.phases[1][1], one.phases[0][0]

    def knobs(c, v):
        return [*c.knobs.values(), *c.written.values(), *c.is_last,
                *[x for r in c.runners for x in (r.owner, *r.knobs.values())],
                v.runner, v.mode, v.decl, *v.knobs.values(), *v.reads.values(), *v.worker.values()]

    s = make_solver(Budget(rlimit=5_000_000), ctx)
    s.add(*later.constraints, *first.constraints, p.active, *[x == y for x, y in zip(knobs(big, p), knobs(one, q))],
          C.same_state(later.state_in, first.state_in), *[later.max_in[k] == first.max_in[k] for k in later.max_in],
          *[x == y for x, y in zip(b.extras[-1:], first.builder.extras)])
    s.add(z3.Not(z3.And(C.same_state(later.state_out, first.state_out),
                        *[later.max_out[k] == first.max_out[k] for k in later.max_out])))
    assert check(s).verdict is Verdict.PROVED
