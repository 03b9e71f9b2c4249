"""The one factory every z3 solver comes from: fixed seeds, a timeout and a resource limit, so a query stops at the
same point on any machine; and the three-valued reading of its answer."""

from __future__ import annotations

from dataclasses import dataclass

import z3

from fencecheck.report import Verdict

LOGIC = "QF_LIA"
SEED = 7


@dataclass(frozen=True)
class Budget:
    """A query's limits: wall-clock ``timeout_ms`` and z3's deterministic ``rlimit``."""

    timeout_ms: int = 60_000
    rlimit: int = 50_000_000


def make_solver(budget: Budget = Budget()) -> z3.Solver:
    s = z3.SolverFor(LOGIC)
    s.set("random_seed", SEED)
    s.set("timeout", budget.timeout_ms)
    s.set("rlimit", budget.rlimit)
    return s


def solve(s: z3.Solver, *assumptions) -> tuple[Verdict, str]:
    """Check ``s``: unsat -> the property holds (``PROVED``), sat -> ``COUNTEREXAMPLE``, anything else -> ``UNKNOWN``
    with z3's reason (timeout, resource limit). A query for a race is sat exactly when a race exists."""
    answer = s.check(*assumptions)
    if answer == z3.unsat:
        return Verdict.PROVED, ""
    if answer == z3.sat:
        return Verdict.COUNTEREXAMPLE, ""
    return Verdict.UNKNOWN, s.reason_unknown()


def to_smt2(s: z3.Solver) -> str:
    """The solver's assertions as an SMT-LIB2 script with its logic set and a final check-sat."""
    body = s.to_smt2()
    lines = [line for line in body.splitlines() if not line.startswith("(check-sat")]
    return f"(set-logic {LOGIC})\n" + "\n".join(lines) + "\n(check-sat)\n"


def version() -> str:
    return z3.get_version_string()
