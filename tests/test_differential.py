"""The model against the simulator on random concrete scenarios: the same verdict, races and trace.

The model's trace (its program run concretely) is the reference's, op for op."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from fencecheck.model.check import model_check
from fencecheck.model.concrete import concretize, layout
from fencecheck.model.emit import emit
from fencecheck.model.program import build
from fencecheck.reference.check import check_scenario
from fencecheck.reference.run import run_scenario
from fencecheck.verdict import Verdict

from strategies import scenarios


def _agree(s) -> None:
    m, r = model_check(s), check_scenario(s)
    assert m.verdict is not Verdict.UNKNOWN, m.reason
    assert m.verdict is r.verdict, (m.verdict, r.verdict)
    assert set(m.races) == {x.id for x in r.races}


@pytest.mark.slow
@settings(max_examples=250)
@given(scenarios())
def test_model_equals_simulator(s):
    _agree(s)


@pytest.mark.slow
@settings(max_examples=150)
@given(scenarios(fine_barrier=True))
def test_model_equals_simulator_under_the_fine_barrier(s):
    """Every draw takes the barrier's fine path (barrier on, after run_batch, not forced coarse): the mailbox, its
    event and the markers decide each race."""
    _agree(s)


@pytest.mark.slow
@settings(max_examples=300)
@given(scenarios())
def test_model_emits_the_reference_trace(s):
    lay = layout(s)
    assert emit(build(concretize(s, lay)), None, s, lay) == run_scenario(s)
