"""GPU litmus tests for the CUDA rules the model relies on (R1-R8, restated in docs/gpu.md), written directly
against PyTorch so they check the rules independently of the reference and the model.

Each test runs many trials. A shared int64 ``x`` starts at 0 in every trial; the scheduler-side stream S writes 1;
reads on F copy ``x`` into private outputs, some after a spin kernel so that an unordered write overtakes them. A
read that sees 1 is stale. Each test states, per read, ``never`` stale (ordered before the write by the rule) or
``mostly`` stale (not ordered: the write overtakes it in at least 99% of trials), and the observed counts decide it.
A test may instead expect CUDA to refuse a call (``refuse``): it passes when every trial's call raised. A rule the
GPU contradicts is a model bug: the report names it.

Run: ``python3 -m fencecheck.gpu.litmus [--trials N] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field

from .plan import SPIN_CYCLES


class Refused(Exception):
    """A call CUDA refused where the litmus test expects it to (``Litmus.refuse``)."""


@dataclass
class Litmus:
    name: str
    rule: str
    expect: dict[str, str]  # read name -> "never" | "mostly"
    refuse: str = ""  # the call CUDA must refuse in every trial ("" when none)
    stale: dict[str, int] = field(default_factory=dict)
    trials: int = 0
    refusals: int = 0
    refusal: str = ""  # what CUDA said, the first time
    error: str = ""

    @property
    def ok(self) -> bool:
        if self.error or not self.trials:
            return False
        if self.refuse and self.refusals != self.trials:
            return False
        for read, want in self.expect.items():
            n = self.stale.get(read, 0)
            if want == "never" and n != 0:
                return False
            if want == "mostly" and n < 0.99 * self.trials:
                return False
        return True

    def text(self) -> str:
        status = "ok" if self.ok else "CONTRADICTS THE MODEL"
        seen = f"refused {self.refusals}/{self.trials}" if self.refuse else f"trials {self.trials}"
        extra = f" ({self.refusal})" if self.refusal else ""
        return f"{self.rule} {self.name}: {status} ({seen}, stale {self.stale}){extra}{' ' + self.error if self.error else ''}"

    def to_dict(self) -> dict:
        return {"rule": self.rule, "name": self.name, "expect": self.expect, "refuse": self.refuse,
                "trials": self.trials, "stale": self.stale, "refusals": self.refusals, "refusal": self.refusal,
                "error": self.error, "ok": self.ok}


class _Rig:
    def __init__(self, torch, cycles: int):
        self.t = torch
        self.cycles = cycles
        self.S, self.F, self.P = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
        self.x = torch.zeros(1, dtype=torch.int64, device="cuda")
        self.out = torch.zeros(16, dtype=torch.int64, device="cuda")
        self.names: list[str] = []

    def reset(self):
        self.t.cuda.synchronize()
        self.x.zero_()
        self.out.fill_(-1)
        self.names = []
        self.t.cuda.synchronize()

    def read(self, stream, name: str, spin: bool = False):
        with self.t.cuda.stream(stream):
            if spin:
                self.t.cuda._sleep(self.cycles)
            i = len(self.names)
            self.names.append(name)
            self.out[i:i + 1].copy_(self.x)

    def write(self, value: int = 1):
        with self.t.cuda.stream(self.S):
            self.x.fill_(value)

    def seen(self) -> dict[str, int]:
        self.t.cuda.synchronize()
        vals = self.out[: len(self.names)].tolist()
        return dict(zip(self.names, vals))


def _run(lit: Litmus, trials: int, rig: _Rig, body) -> Litmus:
    try:
        for _ in range(trials):
            rig.reset()
            try:
                body(rig)
            except Refused as err:
                lit.refusals += 1
                lit.refusal = lit.refusal or str(err)
            for name, v in rig.seen().items():
                lit.stale[name] = lit.stale.get(name, 0) + (v >= 1)
            lit.trials += 1
    except Exception as err:  # a call that PyTorch/CUDA refuses unexpectedly is a finding, reported as such
        lit.error = f"{err.__class__.__name__}: {err}"
    return lit


def tests(torch, trials: int, cycles: int = SPIN_CYCLES) -> list[Litmus]:
    rig = _Rig(torch, cycles)
    Ev = torch.cuda.Event
    out = []

    def r1(r):
        e = Ev()
        r.read(r.F, "before_record")
        e.record(r.F)
        r.read(r.F, "after_record", spin=True)
        r.S.wait_event(e)
        r.write()

    out.append(_run(Litmus("record snapshots enqueued work", "R1", {"before_record": "never", "after_record": "mostly"}),
                    trials, rig, r1))

    def r2_call_time(r):
        e = Ev()
        r.read(r.F, "first")
        e.record(r.F)
        r.S.wait_event(e)
        r.read(r.F, "second", spin=True)
        e.record(r.F)  # re-recorded after the wait was enqueued: the wait keeps its binding
        r.write()

    out.append(_run(Litmus("a wait binds at call time", "R2", {"first": "never", "second": "mostly"}),
                    trials, rig, r2_call_time))

    def r2_never(r):
        e = Ev()
        r.read(r.F, "read", spin=True)
        r.S.wait_event(e)  # never recorded: passes through
        r.write()

    out.append(_run(Litmus("a wait on a never-recorded event passes through", "R2", {"read": "mostly"}),
                    trials, rig, r2_never))

    def r3(r):
        e = Ev()
        r.read(r.F, "read", spin=True)
        e.record(r.F)
        r.write(1)  # enqueued before the wait: not ordered
        r.S.wait_event(e)
        r.write(2)

    out.append(_run(Litmus("a wait orders only later work", "R3", {"read": "mostly"}), trials, rig, r3))

    def graph_of(r, body):
        g = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=r.F):
            body()
        return g

    def r5(r):
        marker = Ev(external=True)

        def body():
            with torch.cuda.stream(r.F):
                torch.cuda._sleep(r.cycles)
                r.out[0:1].copy_(r.x)
            marker.record(r.F)  # external: an event-record node
            with torch.cuda.stream(r.F):
                torch.cuda._sleep(r.cycles)
                r.out[1:2].copy_(r.x)

        g = graph_of(r, body)
        r.names = ["before_marker", "after_marker"]
        with torch.cuda.stream(r.F):
            g.replay()
            g.replay()
        r.S.wait_event(marker)  # issued after the second launch: binds to its record node
        r.write()

    out.append(_run(Litmus("an external record node records on every launch; a wait binds to the latest launch",
                           "R5", {"before_marker": "never", "after_marker": "mostly"}), trials, rig, r5))

    def r6(r):
        def body():
            with torch.cuda.stream(r.F):
                r.out[0:1].copy_(r.x)

        g = graph_of(r, body)
        r.names = ["launch_read"]
        with torch.cuda.stream(r.F):
            torch.cuda._sleep(r.cycles)
            r.x.fill_(5)  # prior work on the launch stream
            g.replay()

    lit6 = Litmus("a launch is ordered after prior work on its stream", "R6", {"launch_read": "mostly"})
    out.append(_run(lit6, trials, rig, r6))  # 'stale' here means it saw the prior write (5 >= 1): must be always

    def r7(r):
        r.read(r.F, "before")
        r.S.wait_stream(r.F)
        r.read(r.F, "after", spin=True)
        r.write()

    out.append(_run(Litmus("wait_stream covers work enqueued so far", "R7", {"before": "never", "after": "mostly"}),
                    trials, rig, r7))

    def r8(r):
        e = Ev()
        r.read(r.F, "before_record", spin=True)
        e.record(r.F)
        r.read(r.F, "after_record", spin=True)
        e.synchronize()  # the host returns once the snapshot completed; S never waits on F
        r.write()

    out.append(_run(Litmus("a host synchronize orders later work after the snapshot", "R8",
                           {"before_record": "never", "after_record": "mostly"}), trials, rig, r8))

    # Last: it provokes a CUDA error on purpose.
    def r4(r):
        e = Ev(external=False)

        def body():
            with torch.cuda.stream(r.F):
                r.out[0:1].copy_(r.x)
            e.record(r.F)  # default flags during capture: an internal edge, no real record

        g = graph_of(r, body)
        r.names = ["read"]
        with torch.cuda.stream(r.F):
            g.replay()
        try:
            r.S.wait_event(e)  # outside the capture, on an event last recorded in it
        except RuntimeError as err:
            raise Refused(f"{err.__class__.__name__}: {err}".splitlines()[0]) from None
        r.write()

    out.append(_run(Litmus("a wait outside capture on a default-flag event last recorded during capture is refused "
                           "(cudaErrorCapturedEvent), not a no-op", "R4", {}, refuse="S.wait_event"),
                    trials, rig, r4))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="fencecheck.gpu.litmus")
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("fencecheck.gpu.litmus: PyTorch is not installed", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("fencecheck.gpu.litmus: no CUDA device here", file=sys.stderr)
        return 2
    results = tests(torch, args.trials)
    for lit in results:
        print(lit.text())
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "trials": args.trials,
                       "tests": [x.to_dict() for x in results], "ok": all(x.ok for x in results)}, f, indent=2)
    return 0 if all(x.ok for x in results) else 1


if __name__ == "__main__":
    sys.exit(main())
