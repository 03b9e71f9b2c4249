"""The model worker: runs the phases of a step and names ``last_shared_read_runner`` (docs/sglang-mechanism.md#the-last-reading-runner, docs/sglang-mechanism.md#one-decode-step-per-algorithm)."""

from __future__ import annotations

from fencecheck.scenario import Scenario
from fencecheck.trace import BY_WORKER, WORKER_SITE, ClearReason, RunBatchBegin, RunBatchReturn, StreamId
from fencecheck.vocab import StepKind

from .backends import build_backends
from .device import Device
from .resolution import PrefillSwitches
from .runners import CudaGraphRunner, ModelRunner


class ModelWorker:
    """Owns the runners of a scenario and executes ``run_batch`` for one step."""

    def __init__(self, device: Device, scenario: Scenario, streams: dict[str, StreamId]):
        self.device = device
        self.scenario = scenario
        self.streams = streams
        self.backends = build_backends(dict(scenario.effective_backends))
        self.model_runners: dict[str, ModelRunner] = {}
        for spec in scenario.runners.values():
            owner = spec.mailbox_owner
            if owner not in self.model_runners:
                self.model_runners[owner] = ModelRunner(device, owner, scenario.runners[owner].ring_depth)
        last_modes = scenario.algorithm.last_shared_read_modes
        sched = scenario.scheduler
        prefill = PrefillSwitches(sched.force_coarse, sched.prefill_read_done,
                                  scenario.algorithm.prefill_publish_allowed, sched.hierarchical_cache)
        self.runners = {
            name: CudaGraphRunner(
                device,
                spec,
                self.model_runners[spec.mailbox_owner],
                streams,
                scenario.resolution,
                lambda mode, _m=last_modes: mode in _m,
                prefill,
            )
            for name, spec in scenario.runners.items()
        }
        for phases in scenario.algorithm.steps.values():
            for phase in phases:
                self.runners[phase.runner].prepare(phase, self.backends[phase.backend])

    def last_shared_read_runner(self, kind: StepKind) -> ModelRunner:
        """The model runner whose mailbox the scheduler's barrier reads after a step of ``kind``."""
        runner = self.runners[self.scenario.publisher_of(kind)]
        return runner.model_runner

    def run_batch(self, step: int, kind: StepKind) -> None:
        dev, s, f = self.device, self.streams["S"], self.streams["F"]
        dev.mark(RunBatchBegin(step, kind, BY_WORKER))
        dev.wait_stream(f, s, by=BY_WORKER)  # each run_batch begins with F.wait_stream(S) (docs/sglang-mechanism.md#the-war-barrier)
        for phase in self.scenario.algorithm.steps[kind]:
            runner = self.runners[phase.runner]
            if phase.consume_mailbox_before:
                mr = runner.model_runner
                if mr.shared_read_done_event is not None:
                    dev.wait_event(f, mr.shared_read_done_event, by=BY_WORKER)
                mr.clear(ClearReason.CONSUMED_BEFORE, step=step, phase=phase.name)
            runner.run(phase, self.backends[phase.backend], step)
            for loc in sorted(phase.worker_reads_after):
                dev.read(f, loc, step=step, phase=phase.name, site=WORKER_SITE, by=BY_WORKER)
            if phase.clear_mailbox_after:
                runner.model_runner.clear(ClearReason.CLEARED_AFTER, step=step, phase=phase.name)
        dev.mark(RunBatchReturn(step, BY_WORKER))

