"""The reference implementation bound to the adapter interface regression suites replay against
(``fencecheck.adapter.FenceAdapter``): the reference protocol on the trace-recording device."""

from __future__ import annotations

from fencecheck.scenario import Scenario
from fencecheck.trace import Trace

from .run import run_scenario


class ReferenceAdapter:
    """fencecheck's own reference implementation on the trace-recording device."""

    name = "fencecheck.reference"

    def run(self, scenario: Scenario, steps: int) -> Trace:
        return run_scenario(scenario, steps)
