"""Run a scenario through the reference protocol on a device and return the host-ordered trace."""

from __future__ import annotations

from fencecheck.scenario import Scenario
from fencecheck.trace import Trace

from .device import Device
from .scheduler import Scheduler
from .sim.recorder import TraceDevice
from .worker import ModelWorker


def open_streams(device: Device, scenario: Scenario) -> dict:
    streams = {"S": device.stream("S"), "F": device.stream("F")}
    if any(p.prep_stream.value == "plan" for phases in scenario.algorithm.steps.values() for p in phases):
        streams["P"] = device.stream("P")
    return streams


def drive(device: Device, scenario: Scenario, steps: int | None = None) -> int:
    """Set up the worker and scheduler on ``device`` and run the loop; returns the step count run."""
    steps = steps or scenario.steps
    streams = open_streams(device, scenario)
    worker = ModelWorker(device, scenario, streams)
    Scheduler(device, scenario, worker, streams).run(steps)
    return steps


def run_scenario(scenario: Scenario, steps: int | None = None) -> Trace:
    """The trace of ``scenario`` for ``steps`` steps (default: the scenario's own) on the simulator's device."""
    device = TraceDevice()
    n = drive(device, scenario, steps)
    return device.trace(scenario.name, n, meta={"resolution": scenario.resolution.value})
