"""Differential test: on random concrete scenarios the model's verdict and races equal the simulator's."""

from __future__ import annotations

from hypothesis import given, settings

from fencecheck.model.check import model_check
from fencecheck.reference.check import check_scenario

from strategies import scenarios


@settings(max_examples=500)
@given(scenarios())
def test_model_equals_simulator(s):
    m, r = model_check(s), check_scenario(s)
    assert m.verdict is r.verdict, (m.verdict, r.verdict)
    assert set(m.races) == {x.id for x in r.races}
