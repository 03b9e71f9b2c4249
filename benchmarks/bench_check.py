"""Speed of the simulator's check. Run: python3 benchmarks/bench_check.py

1. Traces of about 10,000 operations (three catalog scenarios run for as many steps as that takes): generating each
   with the reference protocol and checking it. Budget: under 1 s per check.
2. ``fencecheck check`` of one step with 10,000 phases, safe (the catalog's ``plain-decode`` phase repeated, barrier
   on) and racy (the same with the barrier off: two racing reads per phase), side by side in one run: a fresh
   process per run, start-up and loading the scenario file included, and the same work split in one process
   (load, reference run, race check, report text). The two columns should be close: the check is near-linear in the
   trace whether it finds races or not.
3. The whole catalog, a fresh process per run, start-up included. Budget: under 5 s.

Figures are medians of several runs (timings are noisy); budgets are shown as ratios measured/budget. The commands
run the fencecheck this process imports: run the benchmark as ``python3 -m benchmarks.bench_check`` from a checkout to
measure the checkout.
"""

from __future__ import annotations

import dataclasses
import io
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fencecheck
from fencecheck.files.catalog import PR_ERA, load_catalog
from fencecheck.commands.main import main as cli_main
from fencecheck.reference.run import run_scenario
from fencecheck.reference.sim.races import check_trace
from fencecheck.files.scenario_io import dump, load

PHASES = 10_000


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


#: Where the imported fencecheck lives: the command runs from there, so it runs the same code this process does.
HOME = Path(fencecheck.__file__).resolve().parent.parent


def _cli(*args: str):
    return lambda: subprocess.run([sys.executable, "-m", "fencecheck", *args], cwd=HOME, capture_output=True)


def many_phases(base, phases: int, barrier: bool):
    """``base``'s one phase repeated ``phases`` times in one step (distinct names), with the barrier on or off."""
    kind = base.step_kinds[0]
    (phase,) = base.algorithm.steps[kind]
    steps = {kind: tuple(dataclasses.replace(phase, name=f"{phase.name}{i}") for i in range(phases))}
    return base.replace(
        name=f"{base.name}-{phases}-phases-{'safe' if barrier else 'racy'}",
        algorithm=dataclasses.replace(base.algorithm, steps=steps),
        scheduler=dataclasses.replace(base.scheduler, barrier=barrier),
        expect=None,
        steps=1,
    )


def traces_of_10k_ops(catalog) -> None:
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


def safe_and_racy(catalog, phases: int = PHASES, repeat: int = 3) -> None:
    cols = []
    with tempfile.TemporaryDirectory() as tmp:
        for barrier in (True, False):
            s = many_phases(catalog["plain-decode"], phases, barrier)
            path = str(Path(tmp) / f"{s.name}.toml")
            dump(s, path)
            loaded = load(path)
            trace = run_scenario(loaded)
            report = check_trace(trace)
            cols.append({
                "ops / kernels": f"{len(trace.ops):,} / {report.kernels:,}",
                "racing reads (distinct)": f"{len(report.races):,} ({len(report.distinct()):,})",
                "exit code": _cli("check", path)().returncode,
                "fencecheck check, fresh process": _median(_cli("check", path), repeat),
                "the same in one process": _median(lambda: cli_main(["check", path], io.StringIO(), io.StringIO()),
                                                   repeat),
                "  load the scenario file": _median(lambda: load(path), repeat),
                "  reference run": _median(lambda: run_scenario(loaded), repeat),
                "  race check": _median(lambda: check_trace(trace), repeat),
            })
    print(f"\nfencecheck check of one step of {phases:,} phases, barrier on (safe) and off (racy); "
          f"medians of {repeat} runs")
    print(f"{'':34} {'safe':>18} {'racy':>18}")
    for key in cols[0]:
        a, b = cols[0][key], cols[1][key]
        if isinstance(a, float):
            print(f"{key:34} {a:17.2f}s {b:17.2f}s")
        else:
            print(f"{key:34} {a!s:>18} {b!s:>18}")


def whole_catalog(catalog) -> None:
    wall = _median(_cli("catalog"), 5)
    print(f"\nwhole catalog ({len(catalog)} scenarios), fresh process, start-up included: {wall:.3f} s "
          f"= {wall / 5.0:.2f} of the 5 s budget")


def main() -> int:
    catalog = {s.name: s for s in load_catalog(PR_ERA)}
    traces_of_10k_ops(catalog)
    safe_and_racy(catalog)
    whole_catalog(catalog)
    return 0


if __name__ == "__main__":
    sys.exit(main())
