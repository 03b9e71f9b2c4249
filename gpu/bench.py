"""GPU performance of the fence (needs CUDA): per race-free catalog scenario, the time from a step's launch until
the scheduler may write, with the fine-grained fence against the coarse one (the overlap each declaration buys,
in microseconds and as a ratio); and the cost of an event record and a stream wait against an empty kernel launch.

Each graph gets ``WORK_CYCLES`` of spin after its reads, standing for the model's kernels, so a fence that publishes
at the marker or before the replay lets the scheduler write while they still run. A scenario whose scheduler never
applies the barrier (the non-overlap loops) has nothing to time: it is listed as untimed, with the reason.

Run: ``python3 -m fencecheck.gpu.bench [--json FILE]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys

from fencecheck.verdict import Verdict
from fencecheck.trace import BARRIER_MARKS, RunBatchBegin

from .device import CudaDevice, missing_features
from .plan import DelayPolicy

WORK_CYCLES = 400_000  # about 200 us of "model kernels" per graph
REPEATS = 20


class TimedCudaDevice(CudaDevice):
    """Marks, per step, a timing event on F when run_batch begins and on S right before the first write after the
    barrier: their distance is how long the scheduler waited."""

    def __init__(self, locations, work_cycles: int = WORK_CYCLES, torch=None):
        super().__init__(locations, DelayPolicy(), torch)
        self.work_cycles = work_cycles
        self.starts: dict[int, object] = {}
        self.writes: dict[int, object] = {}
        self._barrier_step: int | None = None

    def mark(self, mark):
        super().mark(mark)
        if isinstance(mark, RunBatchBegin):
            e = self.torch.cuda.Event(enable_timing=True)
            e.record(self.streams["F"])
            self.starts[mark.step] = e
        elif isinstance(mark, BARRIER_MARKS):
            self._barrier_step = mark.step

    def write(self, stream, location, *, step, by=""):
        if self._barrier_step is not None and self._barrier_step not in self.writes:
            e = self.torch.cuda.Event(enable_timing=True)
            e.record(self.streams[stream])
            self.writes[self._barrier_step] = e
        super().write(stream, location, step=step, by=by)

    def end_capture(self):
        stream = self.capturing[0]
        with self.torch.cuda.stream(self.streams[stream]):
            self.torch.cuda._sleep(self.work_cycles)  # the model's kernels after the reads
        return super().end_capture()

    def waited_us(self) -> list[float]:
        self.torch.cuda.synchronize()
        return [self.starts[n].elapsed_time(self.writes[n]) * 1000 for n in sorted(self.writes) if n in self.starts]


def time_scenario(scenario, coarse: bool, torch) -> float | None:
    """The median wait over ``REPEATS`` runs (us); None when no step has a scheduler write after the barrier."""
    from fencecheck.reference.run import drive

    s = scenario
    if coarse:
        s = s.replace(scheduler=dataclasses.replace(s.scheduler, force_coarse=True))
    samples = []
    for _ in range(REPEATS):
        dev = TimedCudaDevice(sorted(set(s.locations()) | set(s.written_locations())), torch=torch)
        drive(dev, s, s.steps)
        samples += dev.waited_us()
    return statistics.median(samples) if samples else None


def untimed_because(scenario) -> str:
    """Why ``scenario`` has no wait to time."""
    from fencecheck.reference.run import run_scenario

    if not any(isinstance(op, BARRIER_MARKS) for op in run_scenario(scenario).ops):
        return f"its scheduler never applies the barrier (loop {scenario.scheduler.loop.value})"
    return "no scheduler write follows the barrier in its trace"


def op_costs(torch, n: int = 2000) -> dict[str, float]:
    """Device time per op (us), each measured as n back-to-back ops between two timing events on one stream."""
    s, other = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.zeros(1, device="cuda")

    def timed(fn) -> float:
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(s):
            a.record(s)
            for _ in range(n):
                fn()
            b.record(s)
        torch.cuda.synchronize()
        return a.elapsed_time(b) * 1000 / n

    ev = torch.cuda.Event()
    ev.record(other)
    return {
        "empty kernel launch": timed(lambda: x.add_(0)),
        "event record": timed(lambda: ev.record(s)),
        "stream wait on an event": timed(lambda: s.wait_event(ev)),
        "wait_stream": timed(lambda: s.wait_stream(other)),
    }


def main(argv=None, torch=None) -> int:
    """``python3 -m fencecheck.gpu.bench [--json FILE]``; ``torch`` replaces the torch module (a stand-in in tests)."""
    p = argparse.ArgumentParser(prog="fencecheck.gpu.bench")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if torch is None:
        try:
            import torch
        except ImportError:
            print("fencecheck.gpu.bench: PyTorch is not installed", file=sys.stderr)
            return 2
    missing = missing_features(torch)
    if missing:
        print(f"fencecheck.gpu.bench: {missing}", file=sys.stderr)
        return 2
    from fencecheck.files.catalog import PR_ERA, VERSIONS, load_catalog

    rows, untimed = [], []
    for version, s in ((v, s) for v in VERSIONS for s in load_catalog(v)):
        if s.expect is not None and s.expect.verdict is not Verdict.PROVED:
            continue
        name = s.name if version == PR_ERA else f"{version}/{s.name}"
        fine, coarse = time_scenario(s, False, torch), time_scenario(s, True, torch)
        if fine is None or coarse is None:
            why = untimed_because(s)
            untimed.append({"scenario": name, "why": why})
            print(f"{name}: not timed: {why}")
            continue
        rows.append({"scenario": name, "fine_us": round(fine, 1), "coarse_us": round(coarse, 1),
                     "overlap_us": round(coarse - fine, 1), "ratio": round(coarse / fine, 2) if fine else None})
        print(f"{name}: fine {fine:.1f} us, coarse {coarse:.1f} us, overlap {coarse - fine:.1f} us")
    costs = op_costs(torch)
    for k, v in costs.items():
        print(f"{k}: {v:.2f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "scenarios": rows,
                       "untimed": untimed, "op_costs_us": costs, "work_cycles": WORK_CYCLES, "repeats": REPEATS},
                      f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
