"""The named assumptions of the main theorem, as constraints on a symbolic configuration.

SGLang states one assumption (docs/sglang-mechanism.md#the-last-reading-runner: ``last_shared_read_runner`` names the runner of the step's last reading
phase) and the #35059 TODO names a second (the POST_REPLAY fallback). The model needs the others listed here; each
is shown necessary by an obligation that drops it alone and gets a counterexample.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import z3

from .program import Program
from .symconfig import (
    ALWAYS_PRE,
    COVERS,
    JOIN_BEFORE,
    LOOP_DISAGG_PREFILL,
    LOOP_NORMAL,
    LOOP_OVERLAP,
    LOOP_PP,
    NEVER,
    POST_FALLBACK,
    SITES,
    PhaseVars,
    SymConfig,
    select,
)


def last_reading(step: list[PhaseVars], i: int) -> z3.BoolRef:
    """Phase ``i`` reads shared state (backend or worker reads) and no later phase of the step does."""
    return z3.And(step[i].reads_any(), *[z3.Not(q.reads_any()) for q in step[i + 1:]])


def covered(decl: z3.ArithRef, site: int) -> z3.BoolRef:
    return z3.Or(*[decl == d for d, sites in COVERS.items() if site in sites])


@dataclass(frozen=True)
class Assumption:
    name: str
    statement: str
    source: str  # where it comes from: SGLang's own contract, the #35059 TODO, or found by fencecheck
    build: Callable[[SymConfig, Program], z3.BoolRef]


def _fallback(cfg, prog):
    return cfg.resolution == POST_FALLBACK


def _publisher(cfg, prog):
    return z3.And(*[
        z3.Implies(last_reading(step, i), cfg.publisher[n] == step[i].runner)
        for n, step in enumerate(cfg.phases) for i in range(len(step))
    ])


def _honest(cfg, prog):
    return z3.And(*[
        z3.Implies(z3.And(p.active, p.reads[(s, loc)]), covered(p.decl, s))
        for step in cfg.phases for p in step for (s, loc) in p.reads
    ])


def _plan_joined(cfg, prog):
    return z3.And(*[z3.Implies(z3.And(p.active, p.on_plan()), p.plan_join == JOIN_BEFORE) for step in cfg.phases for p in step])


def _barrier_on(cfg, prog):
    return z3.Or(cfg.barrier, cfg.loop == LOOP_NORMAL, cfg.loop == LOOP_PP)


def _after_run_batch(cfg, prog):
    return z3.Or(cfg.loop != LOOP_OVERLAP, z3.Not(cfg.loop_top()), z3.Not(cfg.results_touch_inflight))


def _deferred_untouched(cfg, prog):
    return z3.Implies(cfg.loop == LOOP_DISAGG_PREFILL, z3.Not(cfg.results_touch_inflight))


def _last_resolves(cfg, prog):
    out = []
    for step in cfg.phases:
        for i, p in enumerate(step):
            policy = select(p.runner, [r.publish for r in cfg.runners])
            resolves = z3.And(policy != ALWAYS_PRE, policy != NEVER)
            out.append(z3.Implies(last_reading(step, i), z3.Or(resolves, p.clear_mailbox_after)))
    return z3.And(*out)


def _last_publishes(cfg, prog):
    out = []
    for n, step in enumerate(cfg.phases):
        for i, p in enumerate(step):
            leaves = z3.Or(prog.publishes[(n + 1, i)], prog.clears_before_resolve[(n + 1, i)], p.clear_mailbox_after)
            out.append(z3.Implies(last_reading(step, i), leaves))
    return z3.And(*out)


def _worker_cleared(cfg, prog):
    out = []
    for step in cfg.phases:
        for i, p in enumerate(step):
            out.append(z3.Implies(z3.And(last_reading(step, i), z3.Or(*p.worker.values())), p.clear_mailbox_after))
    return z3.And(*out)


ASSUMPTIONS: tuple[Assumption, ...] = (
    Assumption("named_runner_is_last_reader",
               "last_shared_read_runner names the runner of each step's last phase that reads shared state",
               "SGLang's contract (docs/sglang-mechanism.md#the-last-reading-runner)", _publisher),
    Assumption("sound_fallback",
               "IN_REPLAY on a runner without its marker resolves to POST_REPLAY (declaration-only rule)",
               "the TODO of PR #35059 (docs/sglang-mechanism.md#resolution)", _fallback),
    Assumption("honest_declarations",
               "every backend read lies within the sites its declaration for that mode covers",
               "implicit in SharedReadEnds (docs/sglang-mechanism.md#the-sharedreadends-declaration)", _honest),
    Assumption("plan_stream_joined_before_replay",
               "a metadata prep on the plan stream is joined into F (F.wait_stream(P)) before the launch",
               "found by fencecheck (docs/sglang-mechanism.md#streams, #the-war-barrier)", _plan_joined),
    Assumption("barrier_on", "the WAR barrier is enabled, or the event loop orders the scheduler's writes after the "
               "forward without it (the non-overlap loop, pipeline parallel)",
               "docs/sglang-mechanism.md#disabled-and-coarse-barriers, docs/sglang-0.5.23.md#13-every-event-loop",
               _barrier_on),
    Assumption("barrier_after_run_batch", "in the overlap loop the barrier is applied right after run_batch returns "
               "(PR #31687), or result processing before it writes nothing the forward in flight reads",
               "docs/sglang-mechanism.md#barrier-placement", _after_run_batch),
    Assumption("deferred_barrier_results_untouched",
               "in the disaggregated-prefill loop, result processing (which runs before the deferred coarse "
               "barrier) writes nothing the forward in flight reads",
               "SGLang's comment on the deferred barrier, not verified against result processing "
               "(docs/sglang-0.5.23.md#72-disaggregated-prefill-overlap-loop-the-deferred-barrier)",
               _deferred_untouched),
    Assumption("last_reader_resolves",
               "the runner of the last reading phase publishes by resolving its backend's declaration (resolve, "
               "clear_then_resolve, prefill; not unconditionally before replay, not never), or the worker clears "
               "the mailbox after it",
               "found by fencecheck: the EAGLE draft-extend runner publishes without asking (docs/sglang-mechanism.md#other-publishers)", _last_resolves),
    Assumption("last_reader_publishes",
               "the last reading phase puts an event in the mailbox (a graph that does not resolve to UNKNOWN, or a "
               "prefill that publishes, eager or graph), or its runner clears the mailbox before resolving, or the "
               "worker clears the mailbox after it",
               "found by fencecheck: UNKNOWN, eager and gated prefill phases leave the mailbox as it was (docs/sglang-mechanism.md#unknown-publishes-nothing, docs/sglang-0.5.23.md#45-prefill-extend-publishes)", _last_publishes),
    Assumption("worker_reads_cleared",
               "worker reads after the last reading phase come with a mailbox clear after it",
               "NGRAM's fix (docs/sglang-mechanism.md#ngram-clears-the-mailbox)", _worker_cleared),
)

BY_NAME = {a.name: a for a in ASSUMPTIONS}


def constraints(cfg: SymConfig, prog: Program, names) -> list[z3.BoolRef]:
    return [BY_NAME[n].build(cfg, prog) for n in names]


__all__ = ["ASSUMPTIONS", "Assumption", "BY_NAME", "SITES", "constraints", "covered", "last_reading"]
