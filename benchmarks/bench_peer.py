"""The symbolic proof against explicit enumeration, on one family, side by side in one run.

  python3 -m benchmarks.bench_peer [--phases 1 2 3 4] [--sample N] [--rlimit N]

The family F(k), k phases per step (docs/performance.md states it in words): 2 steps of the same kind; 2 runners,
each with or without its marker and publishing by resolving, always before replay or never, the second with its own
mailbox or the first's; per phase its runner, forward mode (DECODE or TARGET_VERIFY), declaration (any of 4), every
set of read sites the declaration covers, execution (graph, breakable graph of 2 segments, eager), metadata prep on
the forward stream or on the plan stream joined before the launch, a worker read after it or not, a mailbox clear
after it or not; the barrier fine or forced coarse. The POST_REPLAY fallback, the barrier on and after run_batch,
and the named runner the runner of the last reading phase (the first runner when no phase reads). Kept: the
configurations the main theorem's assumptions admit (the last reading phase resolves or is cleared after, runs as a
graph with a declaration other than UNKNOWN or is cleared after, and is cleared after if the worker reads). Every
member is race-free; each side shows that.

- explicit: the simulator (``reference.check.check_scenario``) on each configuration; and, a faster explicit peer,
  the model run concretely (``model.concrete.concretize`` + ``program.build`` in Python values). Both are measured
  on a seeded uniform sample of the family (rejection sampling over the product) and extrapolated to the family's
  exact size (counted, not sampled).
- symbolic: one z3 query over the same family (the configuration constrained to it, under the assumptions) for
  k phases; and the unbounded argument (``unbounded_phases`` + ``unbounded_runners``), which covers every k at once.

Every z3 check is bounded by its rlimit; the seconds are this machine's.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import time

import z3

from fencecheck import fields as F
from fencecheck.model import assumptions as A
from fencecheck.model.program import build
from fencecheck.model.solver import Budget, check, fresh_context, make_solver
from fencecheck.model.symconfig import GLOBAL_KNOBS, JOIN_BEFORE, PHASE_KNOBS, RUNNER_KNOBS, Bounds, index, make_config
from fencecheck.verdict import Verdict
from fencecheck.vocab import (
    COVERED_SITES,
    Execution,
    ForwardMode,
    PrepStream,
    PublishPolicy,
    ReadSite,
    ResolutionRule,
    SharedReadEnds,
    StepKind,
)

LOC = "req_to_token"
MODES = (ForwardMode.DECODE, ForwardMode.TARGET_VERIFY)
EXECUTIONS = (Execution.GRAPH, Execution.BREAKABLE_GRAPH, Execution.EAGER)
POLICIES = (PublishPolicy.RESOLVE, PublishPolicy.ALWAYS_PRE_REPLAY, PublishPolicy.NEVER)
PREPS = (PrepStream.FORWARD, PrepStream.PLAN)
RUNNERS = ("r0", "r1")


def _site_sets(decl: SharedReadEnds) -> list[tuple[ReadSite, ...]]:
    sites = [s for s in ReadSite if s in COVERED_SITES[decl]]
    return [c for k in range(len(sites) + 1) for c in itertools.combinations(sites, k)]


#: One phase: (runner, mode, declaration, sites read, execution, prep stream, worker reads after, clear after).
PHASES = [
    (runner, mode, decl, sites, execution, prep, worker, clear)
    for runner in (0, 1) for mode in MODES for decl in SharedReadEnds for sites in _site_sets(decl)
    for execution in EXECUTIONS for prep in PREPS for worker in (False, True) for clear in (False, True)
]
#: One runner: (marker, publish policy).
RUNNER_SETTINGS = list(itertools.product((True, False), POLICIES))
#: The rest: (the second runner shares the first's mailbox, the barrier forced coarse).
GLOBALS = list(itertools.product((False, True), (False, True)))


def reads(phase) -> bool:
    return bool(phase[3]) or phase[6]


def admitted(phase, runners) -> bool:
    """The last reading phase under the assumptions that speak of it."""
    runner, _, decl, _, execution, _, worker, clear = phase
    policy = runners[runner][1]
    resolves = policy is PublishPolicy.RESOLVE or clear
    publishes = (execution is not Execution.EAGER and decl is not SharedReadEnds.UNKNOWN) or clear
    return resolves and publishes and (clear or not worker)


def member(config) -> bool:
    phases, runners, _ = config
    last = [p for p in phases if reads(p)]
    return not last or admitted(last[-1], runners)


def publisher(phases) -> int:
    last = [p for p in phases if reads(p)]
    return last[-1][0] if last else 0


def family_size(k: int) -> int:
    """Members of F(k), counted exactly: the last reading phase at position j, anything before, no read after."""
    quiet = sum(not reads(p) for p in PHASES)
    total = 0
    for runners in itertools.product(RUNNER_SETTINGS, repeat=2):
        ok = sum(reads(p) and admitted(p, runners) for p in PHASES)
        per = quiet ** k + sum(len(PHASES) ** j * ok * quiet ** (k - 1 - j) for j in range(k))
        total += per * len(GLOBALS)
    return total


def sample(k: int, n: int, seed: int = 7):
    """``n`` members of F(k), uniform (rejection sampling over the product), seeded."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        config = (tuple(rng.choice(PHASES) for _ in range(k)), tuple(rng.choice(RUNNER_SETTINGS) for _ in RUNNERS),
                  rng.choice(GLOBALS))
        if member(config):
            out.append(config)
    return out


def scenario(config, name: str = "peer"):
    from fencecheck.scenario import AlgorithmSpec, BackendSpec, PhaseSpec, RunnerSpec, Scenario, SchedulerSpec

    phases, runners, (share, coarse) = config
    backends, specs = {}, []
    for i, (runner, mode, decl, sites, execution, prep, worker, clear) in enumerate(phases):
        backends[f"b{i}"] = BackendSpec(f"b{i}", declares={mode: decl}, reads={mode.value: {s: (LOC,) for s in sites}})
        specs.append(PhaseSpec(f"p{i}", RUNNERS[runner], mode, f"b{i}", execution=execution, prep_stream=prep,
                               worker_reads_after=(LOC,) if worker else (), clear_mailbox_after=clear, segments=2))
    return Scenario(
        name=name, backends=backends,
        runners={r: RunnerSpec(r, marker=m, publish=p, mailbox="r0" if (r == "r1" and share) else "")
                 for r, (m, p) in zip(RUNNERS, runners)},
        algorithm=AlgorithmSpec("peer", {StepKind.NORMAL: tuple(specs)}, {StepKind.NORMAL: RUNNERS[publisher(phases)]}),
        scheduler=SchedulerSpec(force_coarse=coarse), resolution=ResolutionRule.DECLARATION_ONLY_POST_FALLBACK, steps=2,
    )


# -- the symbolic side --------------------------------------------------------------------------------------------


def family_constraints(cfg) -> list:
    """``cfg`` (2 steps, k phases, 2 runners) restricted to F(k)."""
    handled_phase = {"execution", "prep_stream", "plan_join", "clear_mailbox_after", "segments"}
    out = [cfg.resolution == index(ResolutionRule.DECLARATION_ONLY_POST_FALLBACK), cfg.barrier,
           z3.Not(cfg.loop_top()), cfg.runners[0].owner == 0, *[z3.Not(x) for x in cfg.is_last]]
    for loc, w in cfg.written.items():  # the scheduler writes every location some phase reads
        w_read = [v for step in cfg.phases for p in step for (_, l), v in p.reads.items() if l == loc]
        w_read += [p.worker[loc] for step in cfg.phases for p in step]
        out.append(w == z3.Or(*w_read))
    out += [cfg.knobs[k.name] == F.encode(k, k.plain) for k in GLOBAL_KNOBS
            if k.name not in ("resolution", "barrier", "placement", "force_coarse")]
    out += [r.knobs[k.name] == F.encode(k, k.plain) for r in cfg.runners for k in RUNNER_KNOBS
            if k.name not in ("marker", "publish")]
    for step in cfg.phases:
        for p in step:
            out += [p.active, p.mode <= 1, p.plan_join == JOIN_BEFORE, p.segments == 2]
            out += [p.knobs[k.name] == F.encode(k, k.plain) for k in PHASE_KNOBS if k.name not in handled_phase]
            out += [z3.Implies(v, A.covered(p.decl, s)) for (s, _), v in p.reads.items()]
    first = cfg.phases[0]
    for step in cfg.phases[1:]:  # steps of one kind
        for p, q in zip(first, step):
            out += [x == y for x, y in zip([*p.structural(), *p.knobs.values(), *p.reads.values(), *p.worker.values()],
                                           [*q.structural(), *q.knobs.values(), *q.reads.values(), *q.worker.values()])]
    for n, step in enumerate(cfg.phases):  # the first runner is named when no phase reads
        out.append(z3.Implies(z3.Not(z3.Or(*[p.reads_any() for p in step])), cfg.publisher[n] == 0))
    return out


def symbolic(k: int, rlimit: int) -> tuple[Verdict, int, float, float]:
    """One query over F(k): verdict, rlimit consumed, wall-clock and CPU seconds (building included)."""
    t, cpu = time.perf_counter(), time.process_time()
    ctx = fresh_context()
    cfg = make_config(Bounds(steps=2, phases=k, runners=2), ctx=ctx)
    prog = build(cfg)
    s = make_solver(Budget(rlimit=rlimit), ctx)
    s.add(*cfg.domain, *prog.constraints, *family_constraints(cfg),
          *A.constraints(cfg, prog, [a.name for a in A.ASSUMPTIONS]), prog.any_race())
    a = check(s)
    return a.verdict, a.rlimit, time.perf_counter() - t, time.process_time() - cpu


def unbounded() -> tuple[str, float, float]:
    from fencecheck.proofs.suite import prove_all

    t, cpu = time.perf_counter(), time.process_time()
    results = prove_all(["unbounded_phases", "unbounded_runners"])
    return ", ".join(r.verdict.value for r in results), time.perf_counter() - t, time.process_time() - cpu


def same_family(configs, k: int) -> bool:
    """Each sampled scenario, pinned, satisfies the symbolic family's constraints (the two sides agree on F(k))."""
    from fencecheck.model.concrete import layout, pin

    for c in configs:
        s = scenario(c)
        ctx = fresh_context()
        cfg = make_config(Bounds(steps=2, phases=k, runners=2), ctx=ctx)
        solver = make_solver(Budget(rlimit=5_000_000), ctx)
        solver.add(*cfg.domain, *pin(cfg, s, layout(s)), *family_constraints(cfg))
        if check(solver).verdict is not Verdict.COUNTEREXAMPLE:
            return False
    return True


# -- the explicit side --------------------------------------------------------------------------------------------


def explicit(configs) -> tuple[float, float, int]:
    """CPU seconds per configuration with the simulator and with the concrete model (scenario building excluded),
    and how many raced."""
    from fencecheck.model.concrete import concretize, layout
    from fencecheck.reference.check import check_scenario

    scenarios = [scenario(c, f"peer-{i}") for i, c in enumerate(configs)]
    cpu = time.process_time()
    raced = sum(not check_scenario(s).safe for s in scenarios)
    sim = (time.process_time() - cpu) / len(scenarios)
    cpu = time.process_time()
    raced += sum(bool(build(concretize(s, layout(s))).any_race()) for s in scenarios)
    model = (time.process_time() - cpu) / len(scenarios)
    return sim, model, raced


def num(x: float) -> str:
    """A count or a time, grouped below 10^7, in powers of ten above."""
    return f"{x:,.0f}" if x < 1e7 else f"{x:.1e}".replace("e+", "e")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phases", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--sample", type=int, default=1000, help="configurations the explicit side runs per k")
    parser.add_argument("--rlimit", type=int, default=200_000_000, help="rlimit of each symbolic query")
    args = parser.parse_args()
    print(f"per phase {len(PHASES)} choices, per runner {len(RUNNER_SETTINGS)}, {len(GLOBALS)} global; sample "
          f"{args.sample} per k (seed 7); times are CPU seconds of this process (wall-clock in brackets)")
    verdicts, wall, cpu = unbounded()
    print(f"unbounded argument, every k at once (unbounded_phases, unbounded_runners): {verdicts}, {cpu:.2f} s "
          f"({wall:.2f} s)")
    print("| k | family size | explicit: simulator per config / whole family | concrete model per config / whole "
          "family | symbolic: one query | explicit (faster) / symbolic | explicit / unbounded argument |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    rows = []
    for k in args.phases:
        size = family_size(k)
        configs = sample(k, args.sample)
        assert same_family(configs[:20], k), "the sample is not in the symbolic family"
        sim, model, raced = explicit(configs)
        assert raced == 0, f"{raced} sampled configurations race"
        verdict, used, sym_wall, sym = symbolic(k, args.rlimit)
        best = size * min(sim, model)
        answered = verdict is not Verdict.UNKNOWN
        rows.append((k, size, best, sym if answered else None))
        print(f"| {k} | {num(size)} | {sim * 1e3:.2f} ms / {num(size * sim)} s | {model * 1e3:.2f} ms / "
              f"{num(size * model)} s | {verdict.value}, {used / 1e6:.1f}M rlimit, {sym:.2f} s ({sym_wall:.2f} s) | "
              f"{num(best / sym) + 'x' if answered else '-'} | {num(best / cpu)}x |", flush=True)
    print("growth per added phase (k-1 -> k): family size, explicit time, symbolic query time")
    for (_, s0, e0, y0), (k, s1, e1, y1) in zip(rows, rows[1:]):
        print(f"  {k}: x{num(s1 / s0)}, x{num(e1 / e0)}, " + (f"x{y1 / y0:.1f}" if y0 and y1 else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
