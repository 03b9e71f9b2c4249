"""Second solver: cvc5 gives z3's answer on the cheap queries, exported as SMT-LIB2.

Every query that z3 answers within 2,000,000 rlimit (a measure of z3's work, the same on every machine), of the
obligations whose every check is cheap (given at most 4x that), exported as SMT-LIB2 (QF_LIA) and read back by cvc5,
must get the same answer."""

from __future__ import annotations

import pytest

from fencecheck.model.solver import to_smt2
from fencecheck.proofs.obligations import OBLIGATIONS
from fencecheck.proofs.runner import evaluate
from fencecheck.verdict import Verdict

cvc5 = pytest.importorskip("cvc5")
CHEAP = 2_000_000


def cvc5_answer(text: str) -> str:
    tm = cvc5.TermManager()
    solver = cvc5.Solver(tm)
    parser = cvc5.InputParser(solver)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "fencecheck")
    symbols = parser.getSymbolManager()
    out = ""
    while True:
        cmd = parser.nextCommand()
        if cmd.isNull():
            break
        out += cmd.invoke(solver, symbols)
    return out.strip()


def _queries():
    for ob in OBLIGATIONS:
        if ob.rlimit > 4 * CHEAP:  # the costly ones: their few cheap queries are not worth their evaluation here
            continue
        for q in evaluate(ob).queries:
            if q.rlimit <= CHEAP and q.verdict is not Verdict.UNKNOWN:
                yield ob.name, q


@pytest.mark.slow
def test_cvc5_agrees_with_z3_on_every_cheap_query():
    checked = 0
    for name, q in _queries():
        text = to_smt2(q.solver)
        assert text.startswith("(set-logic QF_LIA)")
        want = {Verdict.PROVED: "unsat", Verdict.COUNTEREXAMPLE: "sat"}[q.verdict]
        assert cvc5_answer(text) == want, (name, q.label)
        checked += 1
    assert checked >= 30
