"""The overlap scheduler and its WAR barrier ``_apply_war_barrier`` (docs/sglang-mechanism.md#the-war-barrier)."""

from __future__ import annotations

from fencecheck.scenario import Scenario
from fencecheck.trace import (
    BY_SCHEDULER,
    BarrierCoarse,
    BarrierDisabled,
    BarrierFine,
    ClearReason,
    CoarseReason,
    StreamId,
    WritePurpose,
    write_by,
)
from fencecheck.vocab import BarrierPlacement, StepKind

from .device import Device
from .worker import ModelWorker


class Scheduler:
    """Writes scheduler-shared state on S between steps and fences those writes with the barrier."""

    def __init__(self, device: Device, scenario: Scenario, worker: ModelWorker, streams: dict[str, StreamId]):
        self.device = device
        self.scenario = scenario
        self.worker = worker
        self.streams = streams

    def _write_all(self, stamp: int, why: WritePurpose) -> None:
        for loc in self.scenario.written_locations():
            self.device.write(self.streams["S"], loc, step=stamp, by=write_by(why))

    def _apply_war_barrier(self, step: int, kind: StepKind | None) -> None:
        """Read the publisher's mailbox, always reset it, and make S wait on the event or, with none, on F."""
        dev, spec = self.device, self.scenario.scheduler
        s, f = self.streams["S"], self.streams["F"]
        if not spec.barrier:
            dev.mark(BarrierDisabled(step, BY_SCHEDULER))
            return
        event = None
        if kind is not None:
            model_runner = self.worker.last_shared_read_runner(kind)
            event = model_runner.shared_read_done_event
            model_runner.clear(ClearReason.BARRIER_RESET, step=step, by=BY_SCHEDULER)
        if event is not None and not spec.force_coarse:
            dev.mark(BarrierFine(step, event, BY_SCHEDULER))
            dev.wait_event(s, event, by=BY_SCHEDULER)
        else:
            why = CoarseReason.FORCED if event is not None else CoarseReason.EMPTY_MAILBOX
            dev.mark(BarrierCoarse(step, why, BY_SCHEDULER))
            dev.wait_stream(s, f, by=BY_SCHEDULER)

    def run(self, steps: int) -> None:
        """The event loop for ``steps`` steps. Writes carry the step they prepare (writes after run_batch(n): n+1)."""
        sc = self.scenario
        if sc.scheduler.placement is BarrierPlacement.AFTER_RUN_BATCH:
            self._write_all(1, WritePurpose.PREPARE)
            for n in range(1, steps + 1):
                kind = sc.step_kind(n)
                self.worker.run_batch(n, kind)
                self._apply_war_barrier(n, kind)
                self._write_all(n + 1, WritePurpose.PROCESS_AND_PREPARE)
        else:
            prev: StepKind | None = None
            for n in range(1, steps + 1):
                self._apply_war_barrier(n - 1, prev)
                self._write_all(n, WritePurpose.PREPARE)
                kind = sc.step_kind(n)
                self.worker.run_batch(n, kind)
                self._write_all(n + 1, WritePurpose.PROCESS_RESULTS)
                prev = kind
