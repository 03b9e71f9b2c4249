"""The overlap scheduler and its WAR barrier ``_apply_war_barrier`` (sglang-fence.md section 5)."""

from __future__ import annotations

from fencecheck.scenario import Scenario
from fencecheck.trace import StreamId
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

    def _write_all(self, stamp: int, why: str) -> None:
        for loc in self.scenario.written_locations():
            self.device.write(self.streams["S"], loc, step=stamp, by=f"scheduler:{why}")

    def _apply_war_barrier(self, step: int, kind: StepKind | None) -> None:
        """Read the publisher's mailbox, always reset it, and make S wait on the event or, with none, on F."""
        dev, spec = self.device, self.scenario.scheduler
        s, f = self.streams["S"], self.streams["F"]
        if not spec.barrier:
            dev.mark("barrier", step=step, detail="disabled", by="scheduler")
            return
        event = None
        if kind is not None:
            model_runner = self.worker.last_shared_read_runner(kind)
            event = model_runner.shared_read_done_event
            model_runner.set_mailbox(None, step=step, by="scheduler", how="barrier reset")
        if event is not None and not spec.force_coarse:
            dev.mark("barrier", step=step, detail=f"fine: S waits on {event}", by="scheduler")
            dev.wait_event(s, event, by="scheduler")
        else:
            why = "forced" if event is not None else "empty mailbox"
            dev.mark("barrier", step=step, detail=f"coarse ({why}): S waits on F", by="scheduler")
            dev.wait_stream(s, f, by="scheduler")

    def run(self, steps: int) -> None:
        """The event loop for ``steps`` steps. Writes carry the step they prepare (writes after run_batch(n): n+1)."""
        sc = self.scenario
        if sc.scheduler.placement is BarrierPlacement.AFTER_RUN_BATCH:
            self._write_all(1, "prepare")
            for n in range(1, steps + 1):
                kind = sc.step_kind(n)
                self.worker.run_batch(n, kind)
                self._apply_war_barrier(n, kind)
                self._write_all(n + 1, "process+prepare")
        else:
            prev: StepKind | None = None
            for n in range(1, steps + 1):
                self._apply_war_barrier(n - 1, prev)
                self._write_all(n, "prepare")
                kind = sc.step_kind(n)
                self.worker.run_batch(n, kind)
                self._write_all(n + 1, "process results")
                prev = kind
