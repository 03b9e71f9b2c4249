"""A symbolic configuration: every knob of a scenario as a z3 variable, within bounds.

Steps are configured independently (each step has its own phases and publisher), which covers every schedule of
step kinds; a concrete scenario ties steps of one kind together by giving them equal values. Declarations and read
sites are per phase: the model needs only the effective declaration of the phase's backend for its mode and the
locations each site reads (composite and hybrid backends are flattened by ``model.concrete``).

Knobs (the scenario fields declared with ``model=True``, ``fencecheck.fields``) get one variable each, named after
the field and encoded by ``fields.encode``: Booleans as Booleans, a member of a vocabulary by its index in the enum,
an integer within its bounds. The rest is structural: which phases are active, each phase's runner (an index),
mode class (0 DECODE, 1 TARGET_VERIFY, 2 any other mode, 3 EXTEND), declaration (1..4 = PRE_REPLAY..UNKNOWN), read sites and
worker reads per location; each runner's mailbox owner; the publisher per step; what ``is_last_shared_read_phase``
answers per mode class; which locations the scheduler writes. All integers, no bit-vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import z3

from fencecheck import fields as F
from fencecheck.scenario import AlgorithmSpec, PhaseSpec, RunnerSpec, Scenario, SchedulerSpec
from fencecheck.vocab import (
    COVERED_SITES,
    BarrierPlacement,
    EventLoop,
    Execution,
    PlanJoin,
    PrepStream,
    PublishPolicy,
    ModeFamily,
    ReadSite,
    ResolutionRule,
    SharedReadEnds,
)

SITES = tuple(ReadSite)  # pre_replay, in_graph_before_marker, in_graph_after_marker, post_replay
#: A declaration as the model encodes it: its ``SharedReadEnds`` value, ordered by lateness.
PRE, IN, POST, UNKNOWN = (int(e) for e in SharedReadEnds)
#: A phase's mode as the model encodes it: its ``ModeFamily`` value.
DECODE, VERIFY, OTHER, EXTEND = (int(f) for f in ModeFamily)
MODE_CLASSES = len(ModeFamily)


def index(member) -> int:
    """A vocabulary member as the model encodes it (``fields.encode``: its index in its enum)."""
    return list(type(member)).index(member)


GRAPH, BREAKABLE, EAGER = (index(e) for e in (Execution.GRAPH, Execution.BREAKABLE_GRAPH, Execution.EAGER))
RESOLVE, ALWAYS_PRE, NEVER, CLEAR_THEN_RESOLVE, PREFILL = (
    index(p) for p in (PublishPolicy.RESOLVE, PublishPolicy.ALWAYS_PRE_REPLAY, PublishPolicy.NEVER,
                       PublishPolicy.CLEAR_THEN_RESOLVE, PublishPolicy.PREFILL))
LOOP_OVERLAP, LOOP_NORMAL, LOOP_PP, LOOP_DISAGG_PREFILL = (
    index(e) for e in (EventLoop.OVERLAP, EventLoop.NORMAL, EventLoop.PP, EventLoop.DISAGG_PREFILL))
JOIN_BEFORE, JOIN_AFTER, JOIN_NONE = (index(j) for j in (PlanJoin.BEFORE_REPLAY, PlanJoin.AFTER_REPLAY, PlanJoin.NONE))
ON_PLAN = index(PrepStream.PLAN)
LOOP_TOP = index(BarrierPlacement.LOOP_TOP)
GATED, DECL_ONLY, POST_FALLBACK = (index(r) for r in (ResolutionRule.GATED, ResolutionRule.DECLARATION_ONLY,
                                                       ResolutionRule.DECLARATION_ONLY_POST_FALLBACK))

#: Sites each declaration covers: fencecheck.vocab.COVERED_SITES by declaration value and site index.
COVERS = {int(d): {SITES.index(s) for s in sites} for d, sites in COVERED_SITES.items()}

#: The knobs of each level, in declaration order.
PHASE_KNOBS = F.model_knobs(PhaseSpec)
RUNNER_KNOBS = F.model_knobs(RunnerSpec)
GLOBAL_KNOBS = F.model_knobs(Scenario) + F.model_knobs(SchedulerSpec) + F.model_knobs(AlgorithmSpec)


@dataclass(frozen=True)
class Bounds:
    """How big the family is: steps, phases per step, runners, shared locations."""

    steps: int = 2
    phases: int = 4
    runners: int = 3
    locations: tuple[str, ...] = ("req_to_token",)
    segments: int = 2  # most segments of a breakable graph

    def text(self) -> str:
        return f"{self.steps} steps, <= {self.phases} phases, {self.runners} runners, {len(self.locations)} location(s)"


class _Knobs:
    """Knob values by field name (``p.execution``, ``r.publish``, ``cfg.barrier``): z3 terms or Python values."""

    knobs: dict

    def __getattr__(self, name: str):
        knobs = self.__dict__.get("knobs")
        if knobs is not None and name in knobs:
            return knobs[name]
        raise AttributeError(name)


@dataclass
class PhaseVars(_Knobs):
    active: z3.BoolRef
    runner: z3.ArithRef
    mode: z3.ArithRef
    decl: z3.ArithRef
    reads: dict[tuple[int, str], z3.BoolRef]  # (site index, location) -> reads it
    worker: dict[str, z3.BoolRef]  # location -> worker reads it after the phase
    knobs: dict  # PhaseSpec field name -> variable

    def reads_any(self) -> z3.BoolRef:
        if isinstance(self.active, bool):
            return self.active and any((*self.reads.values(), *self.worker.values()))
        return z3.And(self.active, z3.Or(*self.reads.values(), *self.worker.values()))

    def on_plan(self):
        """The metadata prep runs on the plan stream."""
        return self.prep_stream == ON_PLAN

    def structural(self) -> list:
        return [self.active, self.runner, self.mode, self.decl]


@dataclass
class RunnerVars(_Knobs):
    owner: z3.ArithRef  # index of the runner whose model runner (mailbox) it uses
    knobs: dict  # RunnerSpec field name -> variable


@dataclass
class SymConfig(_Knobs):
    bounds: Bounds
    phases: list[list[PhaseVars]]  # [step][phase]
    publisher: list[z3.ArithRef]  # per step
    runners: list[RunnerVars]
    is_last: list[z3.BoolRef]  # per mode class: is_last_shared_read_phase(mode)
    written: dict[str, z3.BoolRef]
    knobs: dict  # Scenario, SchedulerSpec and AlgorithmSpec field name -> variable (resolution, barrier, loop, ...)
    domain: list[z3.BoolRef] = field(default_factory=list)

    @property
    def ctx(self) -> z3.Context:
        """The z3 context the configuration's variables live in."""
        return self.knobs["resolution"].ctx

    def loop_top(self):
        """The barrier is applied at the top of the loop, not after run_batch returns."""
        return self.placement == LOOP_TOP

    def all_vars(self) -> list[z3.ExprRef]:
        out: list[z3.ExprRef] = [*self.knobs.values(), *self.written.values()]
        out += self.publisher + self.is_last
        for r in self.runners:
            out += [r.owner, *r.knobs.values()]
        for step in self.phases:
            for p in step:
                out += [*p.structural(), *p.knobs.values(), *p.reads.values(), *p.worker.values()]
        return out


def _in(x: z3.ArithRef, lo: int, hi: int) -> z3.BoolRef:
    return z3.And(x >= lo, x <= hi)


def _knob_vars(knobs, prefix: str, bounds: Bounds, dom: list, ctx: z3.Context | None) -> dict:
    out = {}
    for k in knobs:
        name = f"{prefix}{k.name}"
        rng = F.domain(k, bounds)
        if rng is None:
            out[k.name] = z3.Bool(name, ctx)
        else:
            out[k.name] = z3.Int(name, ctx)
            dom.append(_in(out[k.name], *rng))
    return out


def make_config(bounds: Bounds, tag: str = "", ctx: z3.Context | None = None) -> SymConfig:
    """Fresh variables for ``bounds`` plus their domain constraints (``cfg.domain``), in ``ctx`` (z3's main context
    when None); a program built over them (``model.program.build``) stays in that context."""
    t = f"{tag}." if tag else ""
    Bool = lambda name: z3.Bool(name, ctx)  # noqa: E731
    Int = lambda name: z3.Int(name, ctx)  # noqa: E731
    dom: list[z3.BoolRef] = []
    runners = []
    for r in range(bounds.runners):
        owner = Int(f"{t}r{r}.owner")
        dom.append(_in(owner, 0, bounds.runners - 1))
        runners.append(RunnerVars(owner, _knob_vars(RUNNER_KNOBS, f"{t}r{r}.", bounds, dom, ctx)))
    phases = []
    publisher = []
    for n in range(bounds.steps):
        step = []
        for i in range(bounds.phases):
            pre = f"{t}s{n}.p{i}"
            pv = PhaseVars(
                active=Bool(f"{pre}.active"),
                runner=Int(f"{pre}.runner"),
                mode=Int(f"{pre}.mode"),
                decl=Int(f"{pre}.decl"),
                reads={(s, loc): Bool(f"{pre}.read.{SITES[s].value}.{loc}") for s in range(4) for loc in bounds.locations},
                worker={loc: Bool(f"{pre}.worker.{loc}") for loc in bounds.locations},
                knobs=_knob_vars(PHASE_KNOBS, f"{pre}.", bounds, dom, ctx),
            )
            dom += [_in(pv.runner, 0, bounds.runners - 1), _in(pv.mode, 0, MODE_CLASSES - 1), _in(pv.decl, PRE, UNKNOWN)]
            if i == 0:
                dom.append(pv.active)  # every step runs at least one phase
            else:
                dom.append(z3.Implies(pv.active, step[i - 1].active))  # phases are a prefix
            step.append(pv)
        phases.append(step)
        pub = Int(f"{t}s{n}.publisher")
        dom.append(_in(pub, 0, bounds.runners - 1))
        publisher.append(pub)
    return SymConfig(
        bounds=bounds,
        phases=phases,
        publisher=publisher,
        runners=runners,
        is_last=[Bool(f"{t}is_last.{m}") for m in range(MODE_CLASSES)],
        written={loc: Bool(f"{t}written.{loc}") for loc in bounds.locations},
        knobs=_knob_vars(GLOBAL_KNOBS, t, bounds, dom, ctx),
        domain=dom,
    )


def select(index: z3.ArithRef, values: list, default=None):
    """``values[index]`` for a symbolic index (an if-then-else chain); plain indexing for a concrete one."""
    if isinstance(index, int):
        return values[index] if 0 <= index < len(values) else (values[-1] if default is None else default)
    out = values[-1] if default is None else default
    for i in range(len(values) - 2 if default is None else len(values) - 1, -1, -1):
        out = z3.If(index == i, values[i], out)
    return out
