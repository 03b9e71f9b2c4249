"""The one factory every z3 solver comes from, and the three-valued reading of its answer.

A query's answer is a function of the query alone:

- Every check is bounded by z3's deterministic resource limit (``rlimit``), counted in z3's own units of work, so it
  stops at the same point on any machine and under any load. The wall-clock ``timeout`` is only a safety net, minutes
  long; if it ever fires the answer is ``unknown`` (reason ``timeout``), never a verdict.
- z3's answer (and the model it finds) depends on everything its context has seen: term ids, hash-consing and the
  creation order of variables steer the search. So each independent unit of work (an obligation, a scenario check)
  builds its terms in a context of its own (``fresh_context``), and no answer depends on what ran before it.
- The solver is z3's plain SMT core (``SimpleSolver``), not the strategic solver ``SolverFor(logic)`` builds: that one
  runs tactics, and z3's integer-arithmetic tactics bound some of their sub-tactics by wall-clock time, so the work a
  check did (and, at the edge of a budget, its answer) varied with the machine's load. The plain core has no clock.
- The seed is fixed, and so is z3's version (pinned exactly in pyproject.toml): another release may search
  differently, so it may find another counterexample or need a different rlimit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import z3

from fencecheck.errors import raise_if_interrupted
from fencecheck.verdict import Verdict

LOGIC = "QF_LIA"
SEED = 7
#: The wall-clock safety net of one check (ms): far above any calibrated rlimit's need; a verdict never depends on it.
SAFETY_TIMEOUT_MS = 600_000
#: The rlimit of a query whose caller names none (checks of one concrete scenario, ``fencecheck verify``).
DEFAULT_RLIMIT = 200_000_000


@dataclass(frozen=True)
class Budget:
    """A check's limits: z3's deterministic ``rlimit`` (the bound that decides), and the wall-clock safety net."""

    rlimit: int = DEFAULT_RLIMIT
    timeout_ms: int = SAFETY_TIMEOUT_MS


@dataclass(frozen=True)
class Answer:
    """One check: the verdict, z3's reason when unknown, the rlimit it consumed and (for timings only) its time."""

    verdict: Verdict
    reason: str
    rlimit: int
    seconds: float


def fresh_context() -> z3.Context:
    """A z3 context of its own for one independent unit of work (see the module's contract)."""
    return z3.Context()


def make_solver(budget: Budget = Budget(), ctx: z3.Context | None = None) -> z3.Solver:
    """A seeded solver (z3's plain SMT core; the queries are ``QF_LIA``) in ``ctx`` (z3's main context when None), every
    check bounded by ``budget``."""
    s = z3.SimpleSolver(ctx=ctx)
    s.set("random_seed", SEED)
    s.set("timeout", budget.timeout_ms)
    s.fencecheck_timeout_ms = budget.timeout_ms  # tells a stop by the safety net from one by the rlimit (``check``)
    s.set("rlimit", budget.rlimit)
    return s


def rlimit_count(s: z3.Solver) -> int:
    """z3's resource counter of ``s``'s context (it counts for the whole context, across solvers and checks)."""
    return int(s.statistics().get_key_value("rlimit count"))


#: z3's reason for ``unknown`` when a SIGINT (Ctrl-C) arrives during a check: its own handler cancels the search.
Z3_INTERRUPTED = "interrupted from keyboard"


def check(s: z3.Solver, *assumptions) -> Answer:
    """Check ``s``: unsat -> the property holds (``PROVED``), sat -> ``COUNTEREXAMPLE``, anything else -> ``UNKNOWN``
    with z3's reason (resource limit, or the safety net's timeout). A query for a race is sat exactly when a race
    exists. ``rlimit`` is what this check consumed, the figure its budget is calibrated against."""
    raise_if_interrupted()  # a Ctrl-C a finalizer swallowed since the last check
    before = rlimit_count(s)
    t = time.perf_counter()
    answer = s.check(*assumptions)
    seconds = time.perf_counter() - t
    used = rlimit_count(s) - before
    if answer == z3.unsat:
        return Answer(Verdict.PROVED, "", used, seconds)
    if answer == z3.sat:
        return Answer(Verdict.COUNTEREXAMPLE, "", used, seconds)
    reason = s.reason_unknown()
    if reason == Z3_INTERRUPTED:  # z3 takes Ctrl-C during a check for itself: it is the user's, not a verdict
        raise KeyboardInterrupt
    return Answer(Verdict.UNKNOWN, _reason(reason, seconds, getattr(s, "fencecheck_timeout_ms", SAFETY_TIMEOUT_MS)), used, seconds)


def check_cases(s: z3.Solver, cases: list, budget: Budget) -> Answer:
    """Check ``s`` with each of ``cases`` added in turn (incrementally: push, add, check, pop), all of them within
    ``budget.rlimit`` together: ``PROVED`` when every case is, else the first ``COUNTEREXAMPLE`` (its case left
    asserted, so ``s.model()`` is its model) or ``UNKNOWN``. A disjunction split by cases this way is checked with
    the same answer as one check of the disjunction, and each check faces one case only."""
    used, seconds = 0, 0.0
    for case in cases:
        s.set("rlimit", max(budget.rlimit - used, 1))
        s.push()
        s.add(case)
        a = check(s)
        used, seconds = used + a.rlimit, seconds + a.seconds
        if a.verdict is not Verdict.PROVED:
            if a.verdict is Verdict.UNKNOWN:
                s.pop()
            return Answer(a.verdict, a.reason, used, seconds)
        s.pop()
    s.set("rlimit", budget.rlimit)
    return Answer(Verdict.PROVED, "", used, seconds)


def _reason(z3_reason: str, seconds: float, timeout_ms: int) -> str:
    """z3's reason for ``unknown`` in our words: the plain core says ``canceled`` when a limit stops it, which here is
    the rlimit unless the wall-clock safety net had run out."""
    if z3_reason != "canceled":
        return z3_reason
    if seconds * 1000 >= timeout_ms:
        return "timeout (the wall-clock safety net)"
    return "resource limit (rlimit) reached"


def solve(s: z3.Solver, *assumptions) -> tuple[Verdict, str]:
    """``check`` reduced to (verdict, reason)."""
    a = check(s, *assumptions)
    return a.verdict, a.reason


def to_smt2(s: z3.Solver) -> str:
    """The solver's assertions as an SMT-LIB2 script with its logic set and a final check-sat."""
    body = s.to_smt2()
    lines = [line for line in body.splitlines() if not line.startswith("(check-sat")]
    return f"(set-logic {LOGIC})\n" + "\n".join(lines) + "\n(check-sat)\n"


def version() -> str:
    return z3.get_version_string()
