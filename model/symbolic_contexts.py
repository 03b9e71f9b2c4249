"""The symbolic contexts of one backend (docs/verify.md): every configuration of the main theorem's family (its
assumptions, except that declarations must be honest) in which some phases run this backend, with its declaration and
reads for their mode, and the other phases run any honest backend. The family fixes the resolution rule to
``declaration_only_post_fallback`` (``sound_fallback``)."""

from __future__ import annotations

import z3

from fencecheck.errors import worker_ignores_interrupts
from fencecheck.verdict import Verdict
from fencecheck.vocab import ResolutionRule

from . import assumptions as A
from .backend_facts import ModeFacts
from .concrete import mode_class
from .counterexample import search_order, search_with
from .program import build
from .solver import Budget, check, fresh_context, make_solver
from .symconfig import SITES, Bounds, make_config

BOUNDS = Bounds(steps=2, phases=4, runners=3)

#: The resolution rule of the symbolic family, and the assumptions it holds under (model/assumptions.py).
RULE = ResolutionRule.DECLARATION_ONLY_POST_FALLBACK
ASSUMED = tuple(a for a in A.BY_NAME if a != "honest_declarations")


def _uses(p, facts: list[ModeFacts], loc: str) -> z3.BoolRef:
    options = []
    for f in facts:
        reads = [p.reads[(i, loc)] == (site in f.sites) for i, site in enumerate(SITES)]
        options.append(z3.And(p.mode == mode_class(f.mode), p.decl == int(f.declared), *reads))
    return z3.Or(*options)


def _honest(p) -> z3.BoolRef:
    return z3.And(*[z3.Implies(v, A.covered(p.decl, s)) for (s, _), v in p.reads.items()])


def symbolic(facts: list[ModeFacts], bounds: Bounds = BOUNDS, budget: Budget = Budget(), name: str = "verify"):
    """(verdict, counterexample, reason) over the symbolic context family of the backend."""
    loc = bounds.locations[0]
    ctx = fresh_context()
    return search_with(bounds, lambda b: _setup(b, facts, loc, ctx), budget, name)


def _setup(b: Bounds, facts: list[ModeFacts], loc: str, ctx: z3.Context):
    """The symbolic family's query for bound ``b``: (cfg, program, constraints), a race among them."""
    cfg = make_config(b, ctx=ctx)
    prog = build(cfg)
    per_phase = []
    uses_any = []
    for n, step in enumerate(cfg.phases):
        for i, p in enumerate(step):
            u = z3.Bool(f"uses.s{n}.p{i}", ctx)
            per_phase += [z3.Implies(u, _uses(p, facts, loc)), z3.Implies(z3.Not(u), _honest(p))]
            uses_any.append(z3.And(p.active, u))
    constraints = [*cfg.domain, *prog.constraints, *A.constraints(cfg, prog, ASSUMED), *per_phase,
                   z3.Or(*uses_any), prog.any_race()]
    return cfg, prog, constraints


def symbolic_verdict(facts: list[ModeFacts], bounds: Bounds = BOUNDS, budget: Budget = Budget()) -> Verdict:
    """``symbolic``'s verdict alone (a proposed change's check needs no counterexample): the bounds in the same order,
    each query in the same context, the first bound with a race a COUNTEREXAMPLE, the first unknown UNKNOWN."""
    loc = bounds.locations[0]
    ctx = fresh_context()
    for b in search_order(bounds):
        cfg, prog, constraints = _setup(b, facts, loc, ctx)
        solver = make_solver(budget, ctx)
        solver.add(*constraints)
        verdict = check(solver).verdict
        if verdict is not Verdict.PROVED:
            return verdict
    return Verdict.PROVED


class SymbolicVerdicts:
    """``symbolic_verdict`` of each proposed change's facts, each asked once. With ``jobs`` > 1 the facts asked for
    in advance (``prefetch``) are decided in that many worker processes; every query is built in a fresh context
    there as here, so the verdicts are the same for any ``jobs``."""

    def __init__(self, bounds: Bounds = BOUNDS, budget: Budget = Budget(), jobs: int = 1):
        self.bounds, self.budget, self.jobs = bounds, budget, jobs
        self._done: dict[str, Verdict] = {}
        self._pending: dict = {}
        self._pool = None

    def prefetch(self, many: list[list[ModeFacts]]) -> None:
        todo = {repr(f): f for f in many if repr(f) not in self._done and repr(f) not in self._pending}
        if self.jobs <= 1 or len(todo) < 2:
            return
        import multiprocessing

        if self._pool is None:  # asked again (another backend file of the same report): the same workers
            self._pool = multiprocessing.get_context("spawn").Pool(min(self.jobs, len(todo)),
                                                                  initializer=worker_ignores_interrupts)
        for key, facts in todo.items():
            self._pending[key] = self._pool.apply_async(symbolic_verdict, (facts, self.bounds, self.budget))

    def __call__(self, facts: list[ModeFacts]) -> Verdict:
        key = repr(facts)
        if key not in self._done:
            pending = self._pending.pop(key, None)
            self._done[key] = (pending.get() if pending is not None
                               else symbolic_verdict(facts, self.bounds, self.budget))
        return self._done[key]

    def close(self) -> None:
        """Stop the workers (those still deciding a change that was not needed after all)."""
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
