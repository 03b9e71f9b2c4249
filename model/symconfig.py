"""A symbolic configuration: every knob of a scenario as a z3 variable, within bounds.

Steps are configured independently (each step has its own phases and publisher), which covers every schedule of
step kinds; a concrete scenario ties steps of one kind together by giving them equal values. Declarations and read
sites are per phase: the model needs only the effective declaration of the phase's backend for its mode and the
locations each site reads (composite and hybrid backends are flattened by ``model.concrete``).

Encodings (all integers, no bit-vectors): declaration 1..4 = PRE_REPLAY..UNKNOWN; mode class 0 DECODE,
1 TARGET_VERIFY, 2 any other mode; execution 0 graph, 1 breakable graph, 2 eager; publish policy 0 resolve,
1 always_pre_replay, 2 never; plan join 0 before_replay, 1 after_replay, 2 none; rule 0 gated,
1 declaration_only, 2 declaration_only_post_fallback.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import z3

from fencecheck.vocab import COVERED_SITES, ReadSite

SITES = tuple(ReadSite)  # pre_replay, in_graph_before_marker, in_graph_after_marker, post_replay
PRE, IN, POST, UNKNOWN = 1, 2, 3, 4
DECODE, VERIFY, OTHER = 0, 1, 2
GRAPH, BREAKABLE, EAGER = 0, 1, 2
RESOLVE, ALWAYS_PRE, NEVER = 0, 1, 2
JOIN_BEFORE, JOIN_AFTER, JOIN_NONE = 0, 1, 2
GATED, DECL_ONLY, POST_FALLBACK = 0, 1, 2

#: Sites each declaration covers: fencecheck.vocab.COVERED_SITES by declaration value and site index.
COVERS = {int(d): {SITES.index(s) for s in sites} for d, sites in COVERED_SITES.items()}


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


@dataclass
class PhaseVars:
    active: z3.BoolRef
    runner: z3.ArithRef
    mode: z3.ArithRef
    decl: z3.ArithRef
    reads: dict[tuple[int, str], z3.BoolRef]  # (site index, location) -> reads it
    worker: dict[str, z3.BoolRef]  # location -> worker reads it after the phase
    clear: z3.BoolRef
    execution: z3.ArithRef
    plan: z3.BoolRef
    join: z3.ArithRef
    segments: z3.ArithRef
    consume: z3.BoolRef  # F waits on the mailbox's event and clears it before the phase (DSpark)

    def reads_any(self) -> z3.BoolRef:
        if isinstance(self.active, bool):
            return self.active and any((*self.reads.values(), *self.worker.values()))
        return z3.And(self.active, z3.Or(*self.reads.values(), *self.worker.values()))


@dataclass
class RunnerVars:
    marker: z3.BoolRef
    publish: z3.ArithRef
    owner: z3.ArithRef  # index of the runner whose model runner (mailbox) it uses


@dataclass
class SymConfig:
    bounds: Bounds
    phases: list[list[PhaseVars]]  # [step][phase]
    publisher: list[z3.ArithRef]  # per step
    runners: list[RunnerVars]
    is_last: list[z3.BoolRef]  # per mode class: is_last_shared_read_phase(mode)
    rule: z3.ArithRef
    barrier: z3.BoolRef
    loop_top: z3.BoolRef
    force_coarse: z3.BoolRef
    written: dict[str, z3.BoolRef]
    domain: list[z3.BoolRef] = field(default_factory=list)

    def all_vars(self) -> list[z3.ExprRef]:
        out: list[z3.ExprRef] = [self.rule, self.barrier, self.loop_top, self.force_coarse, *self.written.values()]
        out += self.publisher + self.is_last
        for r in self.runners:
            out += [r.marker, r.publish, r.owner]
        for step in self.phases:
            for p in step:
                out += [p.active, p.runner, p.mode, p.decl, p.clear, p.execution, p.plan, p.join, p.segments, p.consume]
                out += list(p.reads.values()) + list(p.worker.values())
        return out


def _in(x: z3.ArithRef, lo: int, hi: int) -> z3.BoolRef:
    return z3.And(x >= lo, x <= hi)


def make_config(bounds: Bounds, tag: str = "", ctx: z3.Context | None = None) -> SymConfig:
    """Fresh variables for ``bounds`` plus their domain constraints (``cfg.domain``), in ``ctx`` (z3's main context
    when None); a program built over them (``model.program.build``) stays in that context."""
    t = f"{tag}." if tag else ""
    Bool = lambda name: z3.Bool(name, ctx)  # noqa: E731
    Int = lambda name: z3.Int(name, ctx)  # noqa: E731
    dom: list[z3.BoolRef] = []
    runners = []
    for r in range(bounds.runners):
        rv = RunnerVars(Bool(f"{t}r{r}.marker"), Int(f"{t}r{r}.publish"), Int(f"{t}r{r}.owner"))
        dom += [_in(rv.publish, 0, 2), _in(rv.owner, 0, bounds.runners - 1)]
        runners.append(rv)
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
                clear=Bool(f"{pre}.clear"),
                execution=Int(f"{pre}.execution"),
                plan=Bool(f"{pre}.plan"),
                join=Int(f"{pre}.join"),
                segments=Int(f"{pre}.segments"),
                consume=Bool(f"{pre}.consume"),
            )
            dom += [
                _in(pv.runner, 0, bounds.runners - 1),
                _in(pv.mode, 0, 2),
                _in(pv.decl, 1, 4),
                _in(pv.execution, 0, 2),
                _in(pv.join, 0, 2),
                _in(pv.segments, 1, bounds.segments),
            ]
            if i == 0:
                dom.append(pv.active)  # every step runs at least one phase
            else:
                dom.append(z3.Implies(pv.active, step[i - 1].active))  # phases are a prefix
            step.append(pv)
        phases.append(step)
        pub = Int(f"{t}s{n}.publisher")
        dom.append(_in(pub, 0, bounds.runners - 1))
        publisher.append(pub)
    rule = Int(f"{t}rule")
    dom.append(_in(rule, 0, 2))
    return SymConfig(
        bounds=bounds,
        phases=phases,
        publisher=publisher,
        runners=runners,
        is_last=[Bool(f"{t}is_last.{m}") for m in range(3)],
        rule=rule,
        barrier=Bool(f"{t}barrier"),
        loop_top=Bool(f"{t}loop_top"),
        force_coarse=Bool(f"{t}force_coarse"),
        written={loc: Bool(f"{t}written.{loc}") for loc in bounds.locations},
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
