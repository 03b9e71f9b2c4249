"""The scheduler's event loops and the WAR barrier ``_apply_war_barrier`` (docs/sglang-mechanism.md#the-war-barrier;
the loops of the released SGLang: docs/sglang-0.5.23.md#13-every-event-loop,
docs/sglang-0.5.23.md#72-disaggregated-prefill-overlap-loop-the-deferred-barrier)."""

from __future__ import annotations

from fencecheck.scenario import Scenario
from fencecheck.trace import (
    BY_FORWARD_ON_S,
    BY_HOST_SYNC,
    BY_SCHEDULER,
    BarrierCoarse,
    BarrierDisabled,
    BarrierFine,
    ClearReason,
    CoarseReason,
    StreamId,
    WritePurpose,
    forward_done_event,
    write_by,
)
from fencecheck.vocab import BarrierPlacement, EventLoop, StepKind

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

    def _fine_now(self, kind: StepKind) -> bool:
        """``_war_barrier_is_coarse`` negated: the barrier is on, the publisher's mailbox holds an event (read without
        clearing it) and coarse is not forced."""
        spec = self.scenario.scheduler
        event = self.worker.last_shared_read_runner(kind).shared_read_done_event
        return spec.barrier and event is not None and not spec.force_coarse

    def run(self, steps: int) -> None:
        """The event loop for ``steps`` steps. Writes carry the step they prepare (writes after run_batch(n): n+1).

        ``overlap``: the barrier at ``placement``; at the loop top, result processing writes unfenced before it
        (unless ``results_touch_inflight`` is false). ``normal``: the forward runs on S, so S is ordered after all
        of F when run_batch returns (R7). ``pp``: an event recorded on F at run_batch's return and a host synchronize
        on it before result processing (R1, R8). ``disagg_prefill``: the fine barrier at once when the mailbox holds
        an event; otherwise result processing writes first (unfenced, unless ``results_touch_inflight`` is false),
        then the coarse barrier, then the next batch's preparation. ``placement`` applies to the overlap loop only."""
        sc = self.scenario
        spec = sc.scheduler
        dev, s, f = self.device, self.streams["S"], self.streams["F"]
        if spec.loop is EventLoop.OVERLAP and spec.placement is BarrierPlacement.LOOP_TOP:
            prev: StepKind | None = None
            for n in range(1, steps + 1):
                self._apply_war_barrier(n - 1, prev)
                self._write_all(n, WritePurpose.PREPARE)
                kind = sc.step_kind(n)
                self.worker.run_batch(n, kind)
                if spec.results_touch_inflight:
                    self._write_all(n + 1, WritePurpose.PROCESS_RESULTS)
                prev = kind
            return
        done = forward_done_event() if spec.loop is EventLoop.PP else None
        if done is not None:
            dev.event(done)
        self._write_all(1, WritePurpose.PREPARE)
        for n in range(1, steps + 1):
            kind = sc.step_kind(n)
            self.worker.run_batch(n, kind)
            if spec.loop is EventLoop.NORMAL:
                dev.wait_stream(s, f, by=BY_FORWARD_ON_S)
            elif spec.loop is EventLoop.PP:
                dev.record(done, f, by=BY_HOST_SYNC)
                dev.host_sync(done, by=BY_HOST_SYNC)
            elif spec.loop is EventLoop.DISAGG_PREFILL and spec.barrier and not self._fine_now(kind):
                if spec.results_touch_inflight:
                    self._write_all(n + 1, WritePurpose.PROCESS_RESULTS_UNFENCED)
                self._apply_war_barrier(n, kind)
                self._write_all(n + 1, WritePurpose.PREPARE)
                continue
            else:  # overlap after run_batch; disaggregated prefill's fine barrier, or with the barrier off
                self._apply_war_barrier(n, kind)
            self._write_all(n + 1, WritePurpose.PROCESS_AND_PREPARE)
