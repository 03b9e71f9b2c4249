"""Check a scenario on the default device: run the reference protocol, then the simulator's race check."""

from __future__ import annotations

from fencecheck.verdict import CheckReport
from fencecheck.scenario import Scenario

from .run import run_scenario
from .sim.races import check_trace


def check_scenario(scenario: Scenario, steps: int | None = None) -> CheckReport:
    """The simulator's verdict on ``scenario`` run for ``steps`` steps (default: the scenario's own)."""
    return check_trace(run_scenario(scenario, steps))
