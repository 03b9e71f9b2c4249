"""Evaluate proof obligations: verdict, rlimit, encoding size, non-vacuity, minimal counterexamples.

Every query comes from ``fencecheck.model.solver.make_solver`` with the obligation's calibrated rlimit; an obligation
whose query answers neither sat nor unsat is ``UNKNOWN`` with the solver's reason, never ``PROVED``. Each obligation
builds its terms in a z3 context of its own, so its verdict and counterexample do not depend on which obligations ran
before it or in which order.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable

import z3

from fencecheck.model import assumptions as A
from fencecheck.model.counterexample import Counterexample, search_with
from fencecheck.model.program import build
from fencecheck.model.solver import Answer, Budget, check, fresh_context, make_solver
from fencecheck.model.symconfig import DECL_ONLY, GATED, VERIFY, Bounds, SymConfig, make_config
from fencecheck.verdict import Verdict, oracles_agree
from fencecheck.vocab import EventLoop

from .obligations import Obligation, catalog_scenarios


@dataclass
class Query:
    """One query of an obligation (one or more solver checks), kept for the table and for SMT-LIB2 export."""

    label: str
    solver: z3.Solver
    verdict: Verdict
    expect: Verdict  # what this query must answer for the obligation to hold as expected
    reason: str = ""
    rlimit: int = 0  # the most z3 rlimit one of its checks consumed (a function of the query alone)
    checks: int = 1
    seconds: float = 0.0  # wall-clock, for timings only: never in a verdict or a generated document
    assertions: int = 0  # the query's assertions, kept when ``detach`` drops the solver

    @property
    def size(self) -> int:
        return len(self.solver.assertions()) if self.solver is not None else self.assertions

    @classmethod
    def of(cls, label: str, solver: z3.Solver, verdict: Verdict, expect: Verdict, answers: list[Answer]) -> "Query":
        reason = "; ".join(a.reason for a in answers if a.verdict is Verdict.UNKNOWN)
        return cls(label, solver, verdict, expect, reason, max(a.rlimit for a in answers), len(answers),
                   sum(a.seconds for a in answers))


@dataclass
class Result:
    obligation: Obligation
    verdict: Verdict
    seconds: float = 0.0  # wall-clock of the whole evaluation, for timings only
    cpu: float = 0.0  # CPU seconds of the evaluating process, for timings only (less sensitive to other load)
    reason: str = ""
    queries: list[Query] = field(default_factory=list)
    nonvacuity: list[tuple[str, bool]] = field(default_factory=list)
    counterexample: Counterexample | None = None
    notes: list[str] = field(default_factory=list)
    agrees: bool = True  # scenario obligations: the simulator agrees
    races: tuple = ()  # scenario obligations: the model's racing reads (RaceId), each once, in RaceId order

    @property
    def ok(self) -> bool:
        return self.verdict is self.obligation.expected and self.agrees and all(ok for _, ok in self.nonvacuity)

    @property
    def size(self) -> int:
        """Encoding size: assertions of the obligation's largest query."""
        return max((q.size for q in self.queries), default=0)

    @property
    def rlimit_used(self) -> int:
        """The most rlimit one check of the obligation consumed: the figure its ``rlimit`` is calibrated against."""
        return max((q.rlimit for q in self.queries), default=0)


def query_budget(ob: Obligation, label: str) -> Budget:
    """The budget of each check of ``ob``'s query ``label``: the obligation's calibrated rlimit."""
    return Budget(rlimit=ob.rlimit)


def _query(label: str, constraints: list, ob: Obligation, expect: Verdict, ctx: z3.Context) -> Query:
    s = make_solver(query_budget(ob, label), ctx)
    s.add(*constraints)
    a = check(s)
    return Query.of(label, s, a.verdict, expect, [a])


# -- restrictions named by Obligation.extra ----------------------------------------------------------------------


def extra(name: str, cfg: SymConfig, prog) -> z3.BoolRef:
    if name == "rule_as_merged":
        return cfg.resolution == DECL_ONLY
    if name == "ngram":  # one target verify phase per step whose worker then reads every location
        return z3.And(*[z3.And(step[0].mode == VERIFY, *step[0].worker.values()) for step in cfg.phases])
    if name == "no_clear":
        return z3.And(*[z3.Not(p.clear_mailbox_after) for step in cfg.phases for p in step])
    if name == "clear":
        return z3.And(*[z3.Implies(p.active, p.clear_mailbox_after) for step in cfg.phases for p in step])
    if name == "all_markers":
        return z3.And(*[r.marker for r in cfg.runners])
    if name == "wrong_publisher":
        return z3.Or(*[z3.And(A.last_reading(step, i), cfg.publisher[n] != step[i].runner)
                       for n, step in enumerate(cfg.phases) for i in range(len(step))])
    raise KeyError(name)


def _premises(ob: Obligation, cfg, prog, names) -> list:
    return [*cfg.domain, *prog.constraints, *A.constraints(cfg, prog, names), *[extra(e, cfg, prog) for e in ob.extra]]


def _some_read(prog) -> z3.BoolRef:
    return z3.Or(*[r.guard for r in prog.reads])


def _nonvacuity(ob: Obligation, res: Result, cfg: SymConfig, prog, havoc: bool = False) -> None:
    """The premises can hold with a read issued, and once the barrier is taken away a race is reachable."""
    ctx = cfg.ctx
    inv = [prog.state_in.invariant(cfg.bounds.runners)] if havoc else []
    q1 = _query("premises satisfiable", _premises(ob, cfg, prog, ob.assumptions) + inv + [_some_read(prog)], ob,
                Verdict.COUNTEREXAMPLE, ctx)
    names = tuple(n for n in ob.assumptions if n != "barrier_on")
    q2 = _query("race once the fence is taken away",
                _premises(ob, cfg, prog, names) + inv + [z3.Not(cfg.barrier), prog.any_race()], ob,
                Verdict.COUNTEREXAMPLE, ctx)
    res.queries += [q1, q2]
    res.nonvacuity += [(q1.label, q1.verdict is Verdict.COUNTEREXAMPLE), (q2.label, q2.verdict is Verdict.COUNTEREXAMPLE)]


Setup = Callable[[Bounds], tuple]


def setup_for(ob: Obligation, ctx: z3.Context) -> Setup:
    """``bounds -> (cfg, prog, constraints)``: the query of a ``safety`` or ``compare`` obligation at ``bounds``,
    built in ``ctx``; satisfiable exactly when the family at those bounds has a counterexample."""
    if ob.kind == "compare":
        return _compare_setup(ob, ctx)
    if ob.kind != "safety":
        raise ValueError(f"{ob.name}: a {ob.kind} obligation has no per-bound query")

    def setup(b: Bounds):
        c = make_config(b, ctx=ctx)
        p = build(c)
        return c, p, _premises(ob, c, p, ob.assumptions) + [p.any_race()]

    return setup


def _search(ob: Obligation, res: Result, setup: Setup) -> None:
    """The minimal counterexample search; its queries are the obligation's, its verdict the obligation's."""

    def log(label, solver, verdict, answers):
        res.queries.append(Query.of(label, solver, verdict, ob.expected, answers))

    verdict, ce, reason = search_with(ob.bounds, setup, query_budget(ob, "search"), _ce_name(ob), log)
    res.verdict, res.reason, res.counterexample = verdict, reason, ce


def _safety(ob: Obligation, res: Result, ctx: z3.Context) -> None:
    setup = setup_for(ob, ctx)
    if ob.expected is Verdict.COUNTEREXAMPLE:
        # Smallest bounds first: the first satisfiable one is the counterexample; if none is, that is a proof
        # over every bound up to ob.bounds (each smaller family is checked on its own).
        _search(ob, res, setup)
        if res.verdict is Verdict.PROVED:
            cfg, prog, _ = setup(ob.bounds)
            _nonvacuity(ob, res, cfg, prog)
    else:
        cfg, prog, constraints = setup(ob.bounds)
        q = _query("race within bounds", constraints, ob, ob.expected, ctx)
        res.queries.append(q)
        res.verdict, res.reason = q.verdict, q.reason
        if q.verdict is Verdict.COUNTEREXAMPLE:
            _search(ob, res, setup)
        elif q.verdict is Verdict.PROVED:
            _nonvacuity(ob, res, cfg, prog)


INDUCTION = ("base: the initial state satisfies the invariant", "step: any step preserves the invariant",
             "safety: from any invariant state, a step is race-free")


def _induction(ob: Obligation, res: Result, ctx: z3.Context) -> None:
    R = ob.bounds.runners
    cfg = make_config(ob.bounds, ctx=ctx)
    prog = build(cfg, havoc=True)
    base = _query(INDUCTION[0], [prog.state_in.is_initial(R), z3.Not(prog.state_in.invariant(R))], ob,
                  Verdict.PROVED, ctx)
    step = _query(INDUCTION[1],
                  [*cfg.domain, *prog.constraints, prog.state_in.invariant(R), z3.Not(prog.state_out.invariant(R))],
                  ob, Verdict.PROVED, ctx)
    safe = _query(INDUCTION[2], _premises(ob, cfg, prog, ob.assumptions) + [prog.state_in.invariant(R), prog.any_race()],
                  ob, Verdict.PROVED, ctx)
    res.queries += [base, step, safe]
    verdicts = {q.verdict for q in (base, step, safe)}
    if verdicts == {Verdict.PROVED}:
        res.verdict = Verdict.PROVED
        _nonvacuity(ob, res, cfg, prog, havoc=True)
    elif Verdict.UNKNOWN in verdicts:
        res.verdict = Verdict.UNKNOWN
        res.reason = "; ".join(f"{q.label.split(':')[0]}: {q.reason}" for q in (base, step, safe)
                               if q.verdict is Verdict.UNKNOWN)
    else:
        res.verdict = Verdict.COUNTEREXAMPLE
        res.notes.append("failed: " + ", ".join(q.label for q in (base, step, safe) if q.verdict is not Verdict.PROVED))


def _compare_setup(ob: Obligation, ctx: z3.Context) -> Setup:
    """Two programs over one configuration, differing only in the rule: gated (old) and declaration-only (new)."""

    def setup(b: Bounds):
        new = make_config(b, "new", ctx)
        old = make_config(b, "old", ctx)
        p_new, p_old = build(new, "new"), build(old, "old")
        same = [x == y for x, y in zip(new.all_vars(), old.all_vars()) if not x.eq(new.resolution)]
        truthful = old.is_last[VERIFY] == z3.And(*[
            z3.Or(*[z3.And(A.last_reading(step, i), step[i].mode == VERIFY) for i in range(len(step))])
            for step in new.phases
        ])
        no_worker = [z3.Not(v) for step in new.phases for p in step for v in p.worker.values()]
        constraints = [
            *new.domain, *old.domain, *p_new.constraints, *p_old.constraints, *same, truthful, *no_worker,
            *A.constraints(new, p_new, ob.assumptions), *[extra(e, new, p_new) for e in ob.extra],
            new.resolution == DECL_ONLY, old.resolution == GATED,
            z3.Not(p_old.any_race()), p_new.any_race(),
        ]
        return new, p_new, constraints

    return setup


def _compare(ob: Obligation, res: Result, ctx: z3.Context) -> None:
    _search(ob, res, _compare_setup(ob, ctx))
    if res.verdict is Verdict.COUNTEREXAMPLE:
        res.notes.append("the same configuration under resolution = 'gated' is race-free")


#: The non-vacuity of a race-free catalog configuration: it races once the fence is taken away; where its event
#: loop orders the scheduler's writes without the fence (``normal``, ``pp``), once that loop is the overlap loop too.
UNFENCED = "race once the fence is taken away"
UNORDERED = "race once the fence is taken away under the overlap loop"


def _scenario(ob: Obligation, res: Result, ctx: z3.Context) -> None:
    """The model's verdict and races on the configuration, by its program run on the configuration's concrete values
    (``model.decision.Decision``: the host program the solver is asked about, on values instead of variables; on every
    catalog configuration both give the same verdict and races, tests/test_proofs.py), against the simulator's."""
    from fencecheck.model.decision import Decision
    from fencecheck.reference.check import check_scenario

    s = catalog_scenarios(ob.catalog)[ob.scenario]
    report = Decision(s).report
    res.verdict = report.verdict
    sim = check_scenario(s)
    res.agrees, why = oracles_agree((report.verdict, report.races), (sim.verdict, [r.id for r in sim.races]))
    if not res.agrees:
        res.notes.append(f"simulator disagrees with the model: {why}")
    res.races = tuple(sorted(set(report.races)))
    res.notes.append(f"model and simulator: {len(res.races)} racing (read, step) pairs")
    if report.verdict is Verdict.PROVED:
        label, bare = unordered(s)
        res.nonvacuity.append((label, Decision(bare).report.verdict is Verdict.COUNTEREXAMPLE))


def unordered(s):
    """(label, ``s`` with the ordering of the scheduler's writes after the forward taken away): its barrier off, and
    where its event loop orders the writes without the barrier, the overlap loop in its place."""
    scheduler = dataclasses.replace(s.scheduler, barrier=False)
    if s.scheduler.loop in (EventLoop.NORMAL, EventLoop.PP):
        return UNORDERED, s.replace(scheduler=dataclasses.replace(scheduler, loop=EventLoop.OVERLAP))
    return UNFENCED, s.replace(scheduler=scheduler)


def _ce_name(ob: Obligation) -> str:
    return ob.name.replace("/", "-").replace("_", "-")


def _phases(ob: Obligation, res: Result, ctx: z3.Context) -> None:
    from .cutoff import evaluate_into  # the induction over phases and the runner frame (proofs.cutoff)

    evaluate_into(ob, res, ctx, _query)


KINDS = {"safety": _safety, "induction": _induction, "compare": _compare, "scenario": _scenario, "phases": _phases}


def detach(res: Result) -> Result:
    """``res`` without its z3 objects (each query's solver, the counterexample's symbolic terms), so that it can be
    sent between processes; everything the documents, the table and the timings show is kept."""
    for q in res.queries:
        if q.solver is not None:
            q.assertions, q.solver = len(q.solver.assertions()), None
    ce = res.counterexample
    if ce is not None:
        res.counterexample = dataclasses.replace(ce, race=dataclasses.replace(ce.race, guard=None, pos=None))
    return res


def evaluate(ob: Obligation) -> Result:
    """``ob``'s result, in a z3 context of its own: the same whatever was evaluated before."""
    res = Result(ob, Verdict.UNKNOWN)
    t, cpu = time.perf_counter(), time.process_time()
    KINDS[ob.kind](ob, res, fresh_context())
    res.seconds, res.cpu = time.perf_counter() - t, time.process_time() - cpu
    return res
