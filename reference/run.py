"""Run a scenario through the reference protocol on a device and return the host-ordered trace."""

from __future__ import annotations

from fencecheck.scenario import Scenario
from fencecheck.trace import Trace, stream_id
from fencecheck.vocab import PrepStream, Stream

from .device import Device
from .scheduler import Scheduler
from .sim.recorder import TraceDevice
from .worker import ModelWorker


def open_streams(device: Device, scenario: Scenario) -> dict:
    """The streams the scenario uses, by name: S and F, and P when a phase preps on the plan stream."""
    used = [Stream.S, Stream.F]
    if any(p.prep_stream is PrepStream.PLAN for phases in scenario.algorithm.steps.values() for p in phases):
        used.append(Stream.P)
    return {s.value: device.stream(stream_id(s)) for s in used}


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
