"""Benchmarks of the SMT model. Figures go to docs/performance.md with the command that produced them.

  python3 benchmarks/bench_model.py obligations   # every obligation, as `fencecheck prove` runs them (prove_all)
  python3 benchmarks/bench_model.py scaling [--rlimit N] [--whole] [--clocks]   # main theorem: phases 1-8 x steps 2-4
  python3 benchmarks/bench_model.py enumeration   # symbolic proof vs explicit enumeration with the simulator

Every query is bounded by z3's deterministic rlimit, never by wall-clock time: which cells answer, and the rlimit each
consumes, are the same on every machine; the seconds beside them are this machine's.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time

import z3

from fencecheck.model import assumptions as A
from fencecheck.model.program import build
from fencecheck.model.solver import Budget, check, check_cases, fresh_context, make_solver, solve
from fencecheck.model.symconfig import Bounds, make_config
from fencecheck.verdict import Verdict


def calibrated(need: int, headroom: int = 4) -> int:
    """``headroom`` x ``need``, rounded up to two significant digits: the rlimit an obligation is given."""
    x = headroom * need
    unit = 10 ** max(len(str(x)) - 2, 0)
    return math.ceil(x / unit) * unit


def obligations() -> None:
    from fencecheck.proofs.suite import prove_all

    t, cpu = time.perf_counter(), time.process_time()
    results = prove_all()
    total, cpu = time.perf_counter() - t, time.process_time() - cpu
    print(f"{len(results)} obligations, {sum(r.ok for r in results)} as expected, {total:.2f} s in all "
          f"({cpu:.2f} s of CPU time)")
    print("slowest:")
    for r in sorted(results, key=lambda r: -r.seconds)[:5]:
        print(f"  {r.obligation.name}: {r.seconds:.2f} s")
    print("rlimit: obligation, most one check consumed, rlimit given, headroom, 4x rounded (calibration)")
    for r in results:
        need, given = r.rlimit_used, r.obligation.rlimit
        print(f"  {r.obligation.name}: {need:,} of {given:,} ({given / max(need, 1):.1f}x; calibrated "
              f"{calibrated(need):,})")


def scaling(rlimit: int, whole: bool = False, clocks: bool = False) -> None:
    """The main theorem's query per cell. By default the race is checked step by step (``check_cases``: one
    incremental check per step's race, in one solver, the cell's rlimit shared by them); ``whole``: one check of the
    race in any step, as the ``main_theorem`` obligation runs it. ``clocks``: races by integer clocks, not knowledge
    (``model.program.build``)."""
    names = [a.name for a in A.ASSUMPTIONS]
    how = "one check of the race in any step" if whole else "one incremental check per step's race"
    how += "; integer clocks" if clocks else "; knowledge"
    print(f"main theorem, 3 runners, 1 location; {how}; rlimit {rlimit:,} per cell; rlimit consumed / seconds")
    print("phases " + " ".join(f"{f'steps={n}':>24}" for n in (2, 3, 4)))
    for phases in range(1, 9):
        cells = []
        for steps in (2, 3, 4):
            ctx = fresh_context()
            cfg = make_config(Bounds(steps, phases, 3), ctx=ctx)
            prog = build(cfg, knowledge=not clocks)
            budget = Budget(rlimit=rlimit)
            s = make_solver(budget, ctx)
            premises = [*cfg.domain, *prog.constraints, *A.constraints(cfg, prog, names)]
            if whole:  # the obligation's query, term for term
                s.add(*premises, prog.any_race())
                a = check(s)
            else:
                s.add(*premises)
                a = check_cases(s, [prog.any_race([n]) for n in range(1, steps + 1)], budget)
            cells.append(f"{a.rlimit / 1e6:7.1f}M {a.seconds:6.2f} s {a.verdict.value[:7]:>7}"
                         if a.verdict is not Verdict.UNKNOWN else f"> {rlimit / 1e6:.0f}M unknown")
        print(f"{phases:6d} " + " ".join(f"{c:>24}" for c in cells), flush=True)


# -- symbolic against explicit, on one family -----------------------------------------------------------------------

FAMILY = "1 step, 1-2 phases, 1 runner (marker or not), modes DECODE/TARGET_VERIFY, every declaration with every " \
         "honest set of read sites, graph or eager, forward-stream prep, POST_REPLAY fallback, barrier after run_batch; " \
         "the last phase reads and runs as a graph with a declaration other than UNKNOWN"


def enumerate_family():
    from fencecheck.scenario import AlgorithmSpec, BackendSpec, PhaseSpec, RunnerSpec, Scenario
    from fencecheck.vocab import COVERED_SITES, Execution, ForwardMode, ReadSite, ResolutionRule, SharedReadEnds, StepKind

    per_phase = []
    for mode in (ForwardMode.DECODE, ForwardMode.TARGET_VERIFY):
        for decl in SharedReadEnds:
            sites = sorted(COVERED_SITES[decl], key=list(ReadSite).index)
            for k in range(len(sites) + 1):
                for chosen in itertools.combinations(sites, k):
                    for execution in (Execution.GRAPH, Execution.EAGER):
                        per_phase.append((mode, decl, chosen, execution))
    for n_phases in (1, 2):
        for marker in (True, False):
            for combo in itertools.product(per_phase, repeat=n_phases):
                _, last_decl, last_sites, last_exec = combo[-1]
                if not last_sites or last_exec is Execution.EAGER or last_decl is SharedReadEnds.UNKNOWN:
                    continue  # the last phase reads, and publishes for its reads (the theorem's assumptions)
                backends, phases = {}, []
                for i, (mode, decl, chosen, execution) in enumerate(combo):
                    backends[f"b{i}"] = BackendSpec(f"b{i}", declares={mode: decl},
                                                    reads={mode.value: {s: ("req_to_token",) for s in chosen}})
                    phases.append(PhaseSpec(f"p{i}", "r0", mode, f"b{i}", execution=execution, segments=1))
                yield Scenario(
                    name="enum", backends=backends, runners={"r0": RunnerSpec("r0", marker=marker)},
                    algorithm=AlgorithmSpec("enum", {StepKind.NORMAL: tuple(phases)}, {StepKind.NORMAL: "r0"}),
                    resolution=ResolutionRule.DECLARATION_ONLY_POST_FALLBACK, steps=1,
                )


def family_constraints(cfg):
    from fencecheck.model.symconfig import COVERS

    out = [cfg.resolution == 2, cfg.barrier, z3.Not(cfg.loop_top()), z3.Not(cfg.force_coarse), cfg.publisher[0] == 0,
           cfg.runners[0].publish == 0, cfg.runners[0].owner == 0, *[v for v in cfg.written.values()]]
    for p in cfg.phases[0]:
        out += [p.runner == 0, z3.Or(p.mode == 0, p.mode == 1), z3.Or(p.execution == 0, p.execution == 2),
                z3.Not(p.on_plan()), p.plan_join == 0, z3.Not(p.clear_mailbox_after), p.segments == 1, *[z3.Not(v) for v in p.worker.values()]]
        for (site, _), v in p.reads.items():
            out.append(z3.Implies(v, z3.Or(*[p.decl == d for d, s in COVERS.items() if site in s])))
    step = cfg.phases[0]
    for i, p in enumerate(step):
        last = z3.And(p.active, *([z3.Not(step[i + 1].active)] if i + 1 < len(step) else []))
        out.append(z3.Implies(last, z3.And(z3.Or(*p.reads.values()), p.execution == 0, p.decl != 4)))
    return out


def enumeration() -> None:
    from fencecheck.reference.check import check_scenario

    t = time.perf_counter()
    ctx = fresh_context()
    cfg = make_config(Bounds(steps=1, phases=2, runners=1), ctx=ctx)
    prog = build(cfg)
    s = make_solver(Budget(), ctx)
    s.add(*cfg.domain, *prog.constraints, *family_constraints(cfg), prog.any_race())
    verdict, _ = solve(s)
    symbolic = time.perf_counter() - t
    t = time.perf_counter()
    count = races = 0
    for scenario in enumerate_family():
        count += 1
        races += not check_scenario(scenario).safe
    explicit = time.perf_counter() - t
    print(f"family: {FAMILY}")
    print(f"symbolic (build + one z3 query): {verdict.value} in {symbolic:.3f} s")
    print(f"explicit (simulator on each of {count} scenarios): {races} racing, {explicit:.2f} s")
    print(f"ratio explicit/symbolic: {explicit / symbolic:.0f}x")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["obligations", "scaling", "enumeration"])
    parser.add_argument("--rlimit", type=int, default=200_000_000, help="rlimit of each scaling cell")
    parser.add_argument("--whole", action="store_true", help="scaling: one check per cell, not one per step")
    parser.add_argument("--clocks", action="store_true", help="scaling: races by integer clocks, not knowledge")
    args = parser.parse_args()
    {"obligations": obligations, "scaling": lambda: scaling(args.rlimit, args.whole, args.clocks), "enumeration": enumeration}[args.what]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
