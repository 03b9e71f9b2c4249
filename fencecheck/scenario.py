"""A serving configuration as data: backends, runners, the phases of an algorithm's steps, the scheduler.

All types are frozen and validated on construction (``Scenario.validate``); the TOML form lives in
``scenario_io``. The facts each field encodes are in ../shared/docs/sglang-fence.md, cited by section.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Mapping

from .errors import ScenarioError
from .report import Expectation, RaceId, Verdict
from .vocab import (
    BarrierPlacement,
    Execution,
    ForwardMode,
    PlanJoin,
    PrepStream,
    PublishPolicy,
    ReadSite,
    ResolutionRule,
    SharedReadEnds,
    StepKind,
)

#: Key of a backend's ``reads`` that applies to every mode without its own entry.
ANY_MODE = "*"

SiteReads = Mapping[ReadSite, tuple[str, ...]]


@dataclass(frozen=True)
class BackendSpec:
    """An attention backend: what it declares per mode and where it really reads (section 3).

    ``declares`` overrides the base rule per mode. A composite (``children``) declares ``max_of`` its children and
    reads what they read. A hybrid wrapper (``delegate``) declares and reads as the child that runs the mode.
    ``reads`` maps a mode (or ``"*"``) to the shared locations each site reads.
    """

    name: str
    declares: Mapping[ForwardMode, SharedReadEnds] = field(default_factory=dict)
    reads: Mapping[str, SiteReads] = field(default_factory=dict)
    children: tuple[str, ...] = ()
    delegate: Mapping[ForwardMode, str] = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True)
class RunnerSpec:
    """A CUDA-graph runner and its ``model_runner`` (section 2).

    ``marker``: the runner has its in-graph marker (False for restored graphs and runs that never captured).
    ``ring_depth``: events in ``shared_read_done_events``. ``mailbox``: whose ``model_runner`` mailbox this runner
    publishes into (tree UNO's two instances share the target's); empty means its own.
    """

    name: str
    marker: bool = True
    ring_depth: int = 2
    publish: PublishPolicy = PublishPolicy.RESOLVE
    mailbox: str = ""

    @property
    def mailbox_owner(self) -> str:
        return self.mailbox or self.name


@dataclass(frozen=True)
class PhaseSpec:
    """One phase of a step: a runner replaying (or eagerly running) one forward mode with one backend.

    ``prep_stream``/``plan_join``: where the out-of-graph metadata prep runs and how F joins P afterwards.
    ``worker_reads_after``: shared locations the worker reads on F after the runner returns (NGRAM's accept).
    ``clear_mailbox_after``: the worker sets the runner's mailbox to None after the phase (NGRAM, section 6).
    ``consume_mailbox_before``: before the phase the worker makes F wait on the event in the runner's mailbox, if any,
    and clears the mailbox (DSpark before each proposal, section 7).
    ``segments``: graph segments of a breakable graph (the marker sits in the first, section 4).
    """

    name: str
    runner: str
    mode: ForwardMode
    backend: str
    execution: Execution = Execution.GRAPH
    prep_stream: PrepStream = PrepStream.FORWARD
    plan_join: PlanJoin = PlanJoin.BEFORE_REPLAY
    worker_reads_after: tuple[str, ...] = ()
    clear_mailbox_after: bool = False
    consume_mailbox_before: bool = False
    segments: int = 2


@dataclass(frozen=True)
class AlgorithmSpec:
    """A speculative (or plain) decoding algorithm: the phases of each kind of step and its publisher.

    ``publisher`` is ``last_shared_read_runner`` per step kind (section 6). ``last_shared_read_modes`` is what the
    algorithm's ``is_last_shared_read_phase(mode)`` answers True for (used only by the pre-#35059 gated rule).
    """

    name: str
    steps: Mapping[StepKind, tuple[PhaseSpec, ...]]
    publisher: Mapping[StepKind, str]
    last_shared_read_modes: frozenset[ForwardMode] = frozenset()


@dataclass(frozen=True)
class SchedulerSpec:
    """The scheduler's WAR barrier (section 5). ``writes``: shared locations it writes between steps."""

    barrier: bool = True
    placement: BarrierPlacement = BarrierPlacement.AFTER_RUN_BATCH
    force_coarse: bool = False
    writes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    """A whole configuration to check. ``step_kinds`` is the schedule of step kinds, cycled over ``steps``."""

    name: str
    backends: Mapping[str, BackendSpec]
    runners: Mapping[str, RunnerSpec]
    algorithm: AlgorithmSpec
    scheduler: SchedulerSpec = SchedulerSpec()
    resolution: ResolutionRule = ResolutionRule.DECLARATION_ONLY
    steps: int = 3
    step_kinds: tuple[StepKind, ...] = (StepKind.NORMAL,)
    description: str = ""
    cites: tuple[str, ...] = ()
    expect: Expectation | None = None

    def __post_init__(self):
        self.validate()

    # -- derived views -------------------------------------------------------------------------------------

    def step_kind(self, step: int) -> StepKind:
        """The kind of step number ``step`` (1-based)."""
        return self.step_kinds[(step - 1) % len(self.step_kinds)]

    def locations(self) -> tuple[str, ...]:
        """Every shared location some backend or worker reads, sorted."""
        found: set[str] = set()
        for backend in self.backends.values():
            for sites in backend.reads.values():
                for locs in sites.values():
                    found.update(locs)
        for phases in self.algorithm.steps.values():
            for phase in phases:
                found.update(phase.worker_reads_after)
        return tuple(sorted(found))

    def written_locations(self) -> tuple[str, ...]:
        """What the scheduler writes, sorted: ``scheduler.writes``, or every location read when that is empty."""
        return tuple(sorted(self.scheduler.writes)) or self.locations()

    def replace(self, **changes) -> "Scenario":
        return dataclasses.replace(self, **changes)

    # -- validation ----------------------------------------------------------------------------------------

    def validate(self) -> None:
        """Raise ``ScenarioError`` naming the first reference or value that does not fit."""
        src = f"scenario {self.name!r}"

        def fail(key: str, expected: str):
            raise ScenarioError(src, key, expected)

        if not self.name:
            fail("name", "expected a non-empty name")
        if self.steps < 1:
            fail("steps", "expected a step count of at least 1")
        if not self.step_kinds:
            fail("step_kinds", "expected at least one step kind")
        for name, backend in self.backends.items():
            if backend.name != name:
                fail(f"backends.{name}", f"backend is named {backend.name!r}, expected {name!r}")
            for child in backend.children:
                if child not in self.backends or child == name:
                    fail(f"backends.{name}.children", f"expected a name of another backend, got {child!r}")
            for mode, child in backend.delegate.items():
                if child not in self.backends or child == name:
                    fail(f"backends.{name}.delegate.{mode.value}", f"expected a name of another backend, got {child!r}")
            if backend.children and backend.delegate:
                fail(f"backends.{name}", "expected either children (composite) or delegate (hybrid), not both")
            for key in backend.reads:
                if key != ANY_MODE and key not in ForwardMode.__members__:
                    fail(f"backends.{name}.reads.{key}", "expected a forward mode or '*'")
        self._check_backend_cycles(fail)
        for name, runner in self.runners.items():
            if runner.name != name:
                fail(f"runners.{name}", f"runner is named {runner.name!r}, expected {name!r}")
            if runner.ring_depth < 1:
                fail(f"runners.{name}.ring_depth", "expected a ring depth of at least 1")
            if runner.mailbox and runner.mailbox not in self.runners:
                fail(f"runners.{name}.mailbox", f"expected a runner name, got {runner.mailbox!r}")
        algo = self.algorithm
        for kind in self.step_kinds:
            if kind not in algo.steps:
                fail("step_kinds", f"step kind {kind.value!r} has no phases in algorithm.steps")
            if kind not in algo.publisher:
                fail("algorithm.publisher", f"expected a publisher for step kind {kind.value!r}")
        for kind, runner in algo.publisher.items():
            if runner not in self.runners:
                fail(f"algorithm.publisher.{kind.value}", f"expected a runner name, got {runner!r}")
        for kind, phases in algo.steps.items():
            seen: set[str] = set()
            for i, phase in enumerate(phases):
                key = f"algorithm.steps.{kind.value}[{i}]"
                if phase.name in seen:
                    fail(f"{key}.name", f"expected phase names unique within a step, {phase.name!r} repeats")
                seen.add(phase.name)
                if phase.runner not in self.runners:
                    fail(f"{key}.runner", f"expected a runner name, got {phase.runner!r}")
                if phase.backend not in self.backends:
                    fail(f"{key}.backend", f"expected a backend name, got {phase.backend!r}")
                if phase.segments < 1:
                    fail(f"{key}.segments", "expected at least 1 segment")
        for loc in self.scheduler.writes:
            if not loc:
                fail("scheduler.writes", "expected non-empty location names")
        if self.expect is not None and self.expect.verdict not in (Verdict.PROVED, Verdict.COUNTEREXAMPLE):
            fail("expect.verdict", "expected 'proved' or 'counterexample'")

    def _check_backend_cycles(self, fail) -> None:
        state: dict[str, int] = {}

        def visit(name: str):
            if state.get(name) == 1:
                fail(f"backends.{name}", "expected no cycle through children/delegate")
            if state.get(name) == 2:
                return
            state[name] = 1
            backend = self.backends[name]
            for child in (*backend.children, *backend.delegate.values()):
                visit(child)
            state[name] = 2

        for name in self.backends:
            visit(name)
