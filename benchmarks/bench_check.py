"""Benchmarks of the simulator's check (issue 2 targets). Run: python3 benchmarks/bench_check.py

Targets: a 10,000-operation trace checked in under 1 s; the whole catalog, start-up included, in under 5 s.
Figures are medians of several runs in one process (the check) or of several fresh processes (the catalog), and
are reported against their budgets as ratios, since these machines are noisy.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

from fencecheck.catalog import load_catalog
from fencecheck.reference.run import run_scenario
from fencecheck.reference.sim.races import check_trace


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    catalog = {s.name: s for s in load_catalog()}
    rows = []
    for name in ("eagle-v2", "ngram-no-clear", "multi-layer-eagle-first"):
        s = catalog[name]
        per_step = len(run_scenario(s, 10).ops) / 10
        steps = int(10_000 / per_step) + 1
        trace = run_scenario(s, steps)
        gen = _median(lambda: run_scenario(s, steps), 3)
        chk = _median(lambda: check_trace(trace), 5)
        report = check_trace(trace)
        rows.append((name, len(trace.ops), report.kernels, len(report.races), gen, chk))
    print(f"{'scenario':26} {'ops':>6} {'kernels':>7} {'races':>6} {'generate s':>10} {'check s':>8} {'check/1s':>8}")
    for name, ops, kernels, races, gen, chk in rows:
        print(f"{name:26} {ops:6d} {kernels:7d} {races:6d} {gen:10.3f} {chk:8.3f} {chk / 1.0:8.2f}")
    exe = shutil.which("fencecheck") or f"{sys.executable} -m fencecheck.cli"
    cmd = exe.split() + ["catalog"]
    wall = _median(lambda: subprocess.run(cmd, check=True, capture_output=True), 5)
    print(f"\nwhole catalog ({len(catalog)} scenarios), fresh process, start-up included: {wall:.3f} s "
          f"= {wall / 5.0:.2f} of the 5 s budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
