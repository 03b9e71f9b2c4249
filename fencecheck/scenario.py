"""A serving configuration as data: backends, runners, the phases of an algorithm's steps, the scheduler.

All types are frozen and validated on construction (``Scenario.validate``); the TOML form lives in
``scenario_io``. Every field is declared once with ``fields.spec`` (type, default, bounds, meaning, model encoding);
the schema, the TOML reader and writer, the docs tables and the SMT model's encoding derive from that declaration.
The SGLang facts the fields encode are in docs/sglang-mechanism.md.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Mapping

from .errors import ScenarioError
from .fields import LIST_MAX, NAME_MAX, STRUCTURAL, TEXT_MAX, entries, spec, tokens
from fencecheck.verdict import Expectation, RaceId, Verdict
from .vocab import (
    BarrierPlacement,
    EventLoop,
    Execution,
    ForwardMode,
    PlanJoin,
    PrepStream,
    PublishPolicy,
    ReadSite,
    ResolutionRule,
    SharedReadEnds,
    StepKind,
    canonical_location,
)

#: Key of a backend's ``reads`` that applies to every mode without its own entry.
ANY_MODE = "*"

SiteReads = Mapping[ReadSite, tuple[str, ...]]


def canonical_locations(locs) -> tuple[str, ...]:
    """``locs`` by identity: each name as its one canonical location (``vocab.canonical_location``), each location
    once, in the order first named."""
    return tuple(dict.fromkeys(canonical_location(loc) for loc in locs))


def _canonical_sites(sites: SiteReads) -> dict:
    return {site: canonical_locations(locs) for site, locs in sites.items()}


def _set(obj, name: str, value) -> None:
    """Set a field of a frozen record while it is being built (its locations, by identity)."""
    object.__setattr__(obj, name, value)

#: Documented upper bounds of a scenario (each enforced with a one-line error).
MAX_STEPS = 1_000
MAX_PHASES = 10_000  # phases in one step
MAX_SEGMENTS = 64
MAX_RING_DEPTH = 64
MAX_TABLE = 10_000  # backends, runners
MAX_LAUNCHES = 200_000  # steps x (phase launches per step, a breakable graph's segments each): the run's size


@dataclass(frozen=True)
class BackendSpec:
    """An attention backend: what it declares per mode and where it really reads.

    ``declares`` overrides the base rule per mode. A composite (``children``) declares ``max_of`` its children and
    reads what they read. A hybrid wrapper (``delegate``) declares and reads as the child that runs the mode.
    ``reads`` maps a mode (or ``"*"``) to the shared locations each site reads.
    """

    name: str = spec(meaning="the backend's name", key=True)
    declares: Mapping[ForwardMode, SharedReadEnds] = spec(
        {}, "`SharedReadEnds` per forward mode, overriding the base rule (DECODE, TARGET_VERIFY -> IN_REPLAY; "
        "every other mode -> UNKNOWN)", omit_empty=True, schema=STRUCTURAL)
    reads: Mapping[str, SiteReads] = spec(
        {}, "per forward mode (or `\"*\"` for every mode without its own entry): the shared locations read at each "
        "site", omit_empty=True, schema=STRUCTURAL)
    children: tuple[str, ...] = spec((), "a composite backend: declares `max_of` its children and reads what they "
                                     "read", omit_empty=True)
    delegate: Mapping[ForwardMode, str] = spec(
        {}, "a hybrid wrapper: per mode, the child backend that runs (and declares) it", omit_empty=True,
        schema=STRUCTURAL)
    declares_when: Mapping[str, Mapping[ForwardMode, SharedReadEnds]] = spec(
        {}, "conditional declarations: per condition `\"SETTING=VALUE\"` (a key of the scenario's `settings`), "
        "`SharedReadEnds` per mode that replace `declares` when the condition holds (the first that holds wins)",
        omit_empty=True, schema=STRUCTURAL)
    delegate_when: Mapping[str, Mapping[ForwardMode, str]] = spec(
        {}, "conditional delegation: per condition `\"SETTING=VALUE\"`, the child per mode that replaces `delegate` "
        "when the condition holds", omit_empty=True, schema=STRUCTURAL)
    note: str = spec("", "free text", text=True, omit_empty=True)

    def __post_init__(self):
        _set(self, "reads", {mode: _canonical_sites(sites) for mode, sites in self.reads.items()})

    def under(self, settings: Mapping[str, str]) -> "BackendSpec":
        """This backend with its conditional rows folded in under ``settings`` (a plain backend)."""
        if not self.declares_when and not self.delegate_when:
            return self
        declares, delegate = dict(self.declares), dict(self.delegate)
        for table, out in ((self.declares_when, declares), (self.delegate_when, delegate)):
            done: set[ForwardMode] = set()
            for cond, rows in table.items():
                if condition_holds(cond, settings):
                    for mode, value in rows.items():
                        if mode not in done:
                            out[mode] = value
                            done.add(mode)
        return dataclasses.replace(self, declares=declares, delegate=delegate, declares_when={}, delegate_when={})


def parse_condition(cond: str) -> tuple[str, str] | None:
    """``"SETTING=VALUE"`` as (setting, value); None when it is not of that form."""
    name, sep, value = cond.partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not name or not value:
        return None
    return name, value


def condition_holds(cond: str, settings: Mapping[str, str]) -> bool:
    """Whether ``"SETTING=VALUE"`` holds under ``settings`` (an unset setting holds no condition)."""
    parsed = parse_condition(cond)
    return parsed is not None and settings.get(parsed[0]) == parsed[1]


@dataclass(frozen=True)
class RunnerSpec:
    """A CUDA-graph runner and its ``model_runner``."""

    name: str = spec(meaning="the runner's name", key=True)
    marker: bool = spec(True, "the runner has its in-graph marker (false: graphs restored from an archive, runs that "
                        "never captured)", model=True)
    ring_depth: int = spec(2, "events in the model runner's ring", minimum=1, maximum=MAX_RING_DEPTH)
    publish: PublishPolicy = spec(PublishPolicy.RESOLVE, "`resolve`: resolve the backend's declaration and publish "
                                  "there (the decode graph runner); `always_pre_replay`: record and publish before every "
                                  "replay without asking (the PR-era EAGLE draft-extend runner); `clear_then_resolve`: "
                                  "set the mailbox to None after the prep, then resolve (the released draft-extend "
                                  "runner); `prefill`: the prefill rule, publishing only PRE_REPLAY, eager or graph; "
                                  "`never`", model=True)
    mailbox: str = spec("", "the runner whose model runner's mailbox (and ring) this runner publishes into (tree UNO); "
                        "empty: its own", schema={"type": "string", "maxLength": NAME_MAX})
    fresh_events: bool = spec(False, "each out-of-graph publish records a fresh event (the released SGLang) instead of "
                              "the next event of the ring", omit_empty=True)

    @property
    def mailbox_owner(self) -> str:
        return self.mailbox or self.name


@dataclass(frozen=True)
class PhaseSpec:
    """One phase of a step: a runner replaying (or eagerly running) one forward mode with one backend."""

    name: str = spec(meaning="the phase's name, unique within its step")
    runner: str = spec(meaning="the runner that runs it")
    mode: ForwardMode = spec(meaning="its forward mode")
    backend: str = spec(meaning="its attention backend")
    execution: Execution = spec(Execution.GRAPH, "`graph`; `breakable_graph` (segments, the marker in the first); "
                                "`eager` (no graph, no marker, no publish)", model=True)
    prep_stream: PrepStream = spec(PrepStream.FORWARD, "where the out-of-graph metadata prep runs: `forward`, or "
                                   "`plan` (P waits on S first)", model=True)
    plan_join: PlanJoin = spec(PlanJoin.BEFORE_REPLAY, "after a plan-stream prep, when F waits on P: "
                               "`before_replay`, `after_replay` (before any post-replay publish) or `none`", model=True)
    worker_reads_after: tuple[str, ...] = spec((), "locations the worker reads on F after the runner returns "
                                               "(NGRAM's accept)")
    clear_mailbox_after: bool = spec(False, "the worker sets the runner's mailbox to None after the phase (NGRAM)",
                                     model=True)
    consume_mailbox_before: bool = spec(False, "before the phase, F waits on the event in the runner's mailbox (if "
                                        "any) and the mailbox is cleared (DSpark before each proposal)", model=True)
    segments: int = spec(2, "graph segments of a breakable graph", minimum=1, maximum=MAX_SEGMENTS, model=True,
                         model_bound="segments", plain=1)
    other_reads: SiteReads = spec(
        {}, "reads at a site by work of the phase that is not its attention backend's (a capture hook in the same "
        "graph, the runner's or worker's own prep): the shared locations per site", omit_empty=True,
        schema=STRUCTURAL)

    def __post_init__(self):
        _set(self, "worker_reads_after", canonical_locations(self.worker_reads_after))
        _set(self, "other_reads", _canonical_sites(self.other_reads))


@dataclass(frozen=True)
class AlgorithmSpec:
    """A speculative (or plain) decoding algorithm: the phases of each kind of step and its publisher."""

    name: str = spec(meaning="the algorithm's name")
    steps: Mapping[StepKind, tuple[PhaseSpec, ...]] = spec(
        meaning="per step kind, the phases of a step of that kind, in order (`[[algorithm.steps.KIND]]`)",
        schema=STRUCTURAL)
    publisher: Mapping[StepKind, str] = spec(
        meaning="`last_shared_read_runner`: one runner name, or a table per step kind", schema=STRUCTURAL)
    last_shared_read_modes: frozenset[ForwardMode] = spec(
        frozenset(), "the modes `is_last_shared_read_phase(mode)` answers true for (used only by the `gated` rule)")
    prefill_publish_allowed: bool = spec(True, "the algorithm lets prefill publish "
                                         "(`supports_prefill_shared_read_done`: no speculation, DFlash, DSpark)",
                                         model=True)
    staged_publisher: str = spec("", "a publisher chosen per step: `last_shared_read_runner` is this runner in the "
                                 "steps where every phase of `staged_phases` runs as a graph, `publisher` otherwise "
                                 "(multi-layer EAGLE's `last_draft_extend_staged`)", omit_empty=True,
                                 schema={"type": "string", "maxLength": NAME_MAX})
    staged_phases: tuple[str, ...] = spec((), "the phases whose graph replays set the staged publisher",
                                          omit_empty=True)

    def publisher_of(self, kind: StepKind) -> str:
        """``last_shared_read_runner`` after a step of ``kind``: the staged publisher when the step's staged phases
        all run as graphs, else ``publisher``."""
        if self.staged_publisher:
            phases = {p.name: p for p in self.steps.get(kind, ())}
            if self.staged_phases and all(n in phases and phases[n].execution is not Execution.EAGER
                                          for n in self.staged_phases):
                return self.staged_publisher
        return self.publisher[kind]


@dataclass(frozen=True)
class SchedulerSpec:
    """The scheduler's WAR barrier and what it writes between steps."""

    barrier: bool = spec(True, "the WAR barrier is on", model=True)
    placement: BarrierPlacement = spec(BarrierPlacement.AFTER_RUN_BATCH, "in the `overlap` loop: `after_run_batch` "
                                       "(right after run_batch returns, since PR #31687) or `loop_top`", model=True)
    force_coarse: bool = spec(False, "`SGLANG_FORCE_COARSE_WAR_BARRIER`: always `S.wait_stream(F)`; prefill "
                              "resolves `UNKNOWN`", model=True)
    writes: tuple[str, ...] = spec((), "locations the scheduler writes between steps (empty: every location read)")
    loop: EventLoop = spec(EventLoop.OVERLAP, "the event loop: `overlap` (the barrier at `placement`), `normal` (the "
                           "forward on the schedule stream), `pp` (no barrier; the host waits for the forward before "
                           "processing results), `disagg_prefill` (fine barrier at once, a coarse one deferred past "
                           "result processing)", model=True)
    results_touch_inflight: bool = spec(True, "result processing may write shared state that the forward still in "
                                        "flight reads (the disaggregated-prefill loop's deferred coarse barrier "
                                        "relies on false)", model=True)
    prefill_read_done: bool = spec(True, "`SGLANG_ENABLE_PREFILL_WAR_READ_DONE`: prefill may publish", model=True)
    hierarchical_cache: bool = spec(False, "hierarchical cache, a HiCache storage backend or LMCache is on: prefill "
                                    "never publishes", model=True)

    def __post_init__(self):
        _set(self, "writes", canonical_locations(self.writes))


@dataclass(frozen=True)
class Scenario:
    """A whole configuration to check. ``step_kinds`` is the schedule of step kinds, cycled over ``steps``."""

    name: str = spec(meaning="the scenario's name")
    backends: Mapping[str, BackendSpec] = spec(meaning="`[backends.NAME]`: the attention backends", schema=STRUCTURAL)
    runners: Mapping[str, RunnerSpec] = spec(meaning="`[runners.NAME]`: the CUDA-graph runners", schema=STRUCTURAL)
    algorithm: AlgorithmSpec = spec(meaning="`[algorithm]`: the phases of each kind of step and the publisher",
                                    schema=STRUCTURAL)
    scheduler: SchedulerSpec = spec(SchedulerSpec(), "`[scheduler]`: the WAR barrier", schema=STRUCTURAL)
    resolution: ResolutionRule = spec(ResolutionRule.DECLARATION_ONLY, "how a declaration becomes a publish point: "
                                      "`gated` (before PR #35059), `declaration_only` (PR #35059 as merged: IN_REPLAY "
                                      "without a marker -> PRE_REPLAY), `declaration_only_post_fallback` (-> "
                                      "POST_REPLAY)", model=True)
    settings: Mapping[str, str] = spec({}, "`[settings]`: values of SGLang settings that conditional declarations "
                                       "name (`spec_algorithm`, `speculative_attention_mode`, ...)", omit_empty=True,
                                       schema=STRUCTURAL)
    steps: int = spec(3, "steps to run", minimum=1, maximum=MAX_STEPS)
    step_kinds: tuple[StepKind, ...] = spec((StepKind.NORMAL,), "the schedule of step kinds, cycled over the steps",
                                            schema={"type": "array", "minItems": 1, "maxItems": LIST_MAX,
                                                    "items": {"type": "string", "enum": tokens(StepKind)}})
    description: str = spec("", "what the scenario is", text=True, omit_empty=True)
    cites: tuple[str, ...] = spec((), "the sources of the facts it encodes", omit_empty=True,
                                  schema={"type": "array", "maxItems": LIST_MAX,
                                          "items": {"type": "string", "maxLength": TEXT_MAX}})
    expect: Expectation | None = spec(None, "`[expect]`: the verdict (`proved` / `counterexample`) and the races "
                                      "expected (location, phase, site, and step or 0 for any)", schema=STRUCTURAL)

    def __post_init__(self):
        self.validate()

    # -- derived views -------------------------------------------------------------------------------------

    def step_kind(self, step: int) -> StepKind:
        """The kind of step number ``step`` (1-based)."""
        return self.step_kinds[(step - 1) % len(self.step_kinds)]

    @functools.cached_property
    def effective_backends(self) -> Mapping[str, BackendSpec]:
        """The backends with their conditional declarations and delegation folded in under ``settings``."""
        return {name: b.under(self.settings) for name, b in self.backends.items()}

    def publisher_of(self, kind: StepKind) -> str:
        """``last_shared_read_runner`` after a step of ``kind`` (``AlgorithmSpec.publisher_of``)."""
        return self.algorithm.publisher_of(kind)

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
                for locs in phase.other_reads.values():
                    found.update(locs)
        return tuple(sorted(found))

    def written_locations(self) -> tuple[str, ...]:
        """What the scheduler writes, sorted: ``scheduler.writes``, or every location read when that is empty."""
        return tuple(sorted(self.scheduler.writes)) or self.locations()

    def replace(self, **changes) -> "Scenario":
        return dataclasses.replace(self, **changes)

    def launches(self, steps: int | None = None) -> int:
        """The size of a run: graph launches (a breakable graph's segments each) and eager phases over ``steps``."""
        steps = self.steps if steps is None else steps
        per_kind = {kind: sum(p.segments if p.execution is Execution.BREAKABLE_GRAPH else 1 for p in phases)
                    for kind, phases in self.algorithm.steps.items()}
        cycle = len(self.step_kinds)
        return sum(per_kind.get(k, 0) * ((steps - i + cycle - 1) // cycle) for i, k in enumerate(self.step_kinds))

    # -- validation ----------------------------------------------------------------------------------------

    def validate(self) -> None:
        """Raise ``ScenarioError`` naming the first reference or value that does not fit."""
        src = f"scenario {self.name!r}"

        def fail(key: str, expected: str):
            raise ScenarioError(src, key, expected)

        if not self.name:
            fail("name", "expected a non-empty name")
        _check_bounds(self, "", fail)
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
            for field_name, table in (("declares_when", backend.declares_when), ("delegate_when", backend.delegate_when)):
                for cond in table:
                    if parse_condition(cond) is None:
                        fail(f"backends.{name}.{field_name}", f"expected a condition \"SETTING=VALUE\", got {cond!r}")
            for cond, rows in backend.delegate_when.items():
                for mode, child in rows.items():
                    if child not in self.backends or child == name:
                        fail(f"backends.{name}.delegate_when.{cond}.{mode.value}",
                             f"expected a name of another backend, got {child!r}")
            if backend.children and backend.delegate_when:
                fail(f"backends.{name}", "expected either children (composite) or delegate_when (hybrid), not both")
            for key in backend.reads:
                if key != ANY_MODE and key not in ForwardMode.__members__:
                    fail(f"backends.{name}.reads.{key}", "expected a forward mode or '*'")
        self._check_backend_cycles(fail)
        for key, value in self.settings.items():
            if not key or not value or "=" in key:
                fail(f"settings.{key}", "expected a setting name without '=' and a non-empty value")
        for name, runner in self.runners.items():
            if runner.name != name:
                fail(f"runners.{name}", f"runner is named {runner.name!r}, expected {name!r}")
            _check_bounds(runner, f"runners.{name}.", fail)
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
        if algo.staged_publisher and algo.staged_publisher not in self.runners:
            fail("algorithm.staged_publisher", f"expected a runner name, got {algo.staged_publisher!r}")
        if algo.staged_publisher and not algo.staged_phases:
            fail("algorithm.staged_phases", "expected the phases that stage the publisher")
        if algo.staged_phases and not algo.staged_publisher:
            fail("algorithm.staged_publisher", "expected the runner that staged_phases select")
        names = {p.name for phases in algo.steps.values() for p in phases}
        for i, n in enumerate(algo.staged_phases):
            if n not in names:
                fail(f"algorithm.staged_phases[{i}]", f"expected a phase name, got {n!r}")
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
                _check_bounds(phase, f"{key}.", fail)
            if len(phases) > MAX_PHASES:
                fail(f"algorithm.steps.{kind.value}", f"expected at most {MAX_PHASES:,} phases in a step, got {len(phases):,}")
        for loc in self.scheduler.writes:
            if not loc:
                fail("scheduler.writes", "expected non-empty location names")
        launches = self.launches()
        if launches > MAX_LAUNCHES:
            fail("steps", f"expected a run of at most {MAX_LAUNCHES:,} phase launches (steps x phases x segments), "
                          f"got {launches:,}")
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
            conditional = [c for rows in backend.delegate_when.values() for c in rows.values()]
            for child in (*backend.children, *backend.delegate.values(), *conditional):
                visit(child)
            state[name] = 2

        for name in self.backends:
            visit(name)


def _check_bounds(obj, prefix: str, fail) -> None:
    """Every integer field of ``obj`` within the bounds its declaration states."""
    for e in entries(type(obj)):
        if e.type is not int:
            continue
        value = getattr(obj, e.name)
        if isinstance(value, bool) or not isinstance(value, int):
            fail(f"{prefix}{e.name}", f"expected an integer, got {value!r}")
        if e.info.minimum is not None and value < e.info.minimum:
            fail(f"{prefix}{e.name}", f"expected at least {e.info.minimum}, got {value}")
        if e.info.maximum is not None and value > e.info.maximum:
            fail(f"{prefix}{e.name}", f"expected at most {e.info.maximum:,}, got {value:,}")
