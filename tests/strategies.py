"""Hypothesis strategies for random concrete scenarios (shared by property and differential tests)."""

from __future__ import annotations

from hypothesis import strategies as st

from fencecheck.scenario import AlgorithmSpec, BackendSpec, PhaseSpec, RunnerSpec, Scenario, SchedulerSpec
from fencecheck.vocab import (
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
)

LOCATIONS = ("req_to_token", "full_to_swa_index_mapping")
#: Conditions of conditional declarations, and the settings a scenario may hold them under.
CONDITIONS = ("spec_algorithm=EAGLE", "speculative_attention_mode=decode")
SETTINGS = ({}, {"spec_algorithm": "EAGLE"}, {"spec_algorithm": "NGRAM", "speculative_attention_mode": "decode"})
MODES = (ForwardMode.DECODE, ForwardMode.TARGET_VERIFY, ForwardMode.DRAFT_EXTEND_V2, ForwardMode.EXTEND)


@st.composite
def site_reads(draw):
    out = {}
    for site in ReadSite:
        locs = draw(st.lists(st.sampled_from(LOCATIONS), unique=True, max_size=2))
        if locs:
            out[site] = tuple(locs)
    return out


def _staged(draw, runners, phases) -> dict:
    """Sometimes a publisher staged by a subset of the phases (multi-layer EAGLE), else none."""
    if not draw(st.booleans()):
        return {}
    names = [p.name for p in phases]
    staged = draw(st.lists(st.sampled_from(names), unique=True, min_size=1, max_size=len(names)))
    return {"staged_publisher": draw(st.sampled_from(sorted(runners))), "staged_phases": tuple(staged)}


@st.composite
def scenarios(draw, max_phases: int = 4, max_runners: int = 3, fine_barrier: bool = False):
    """A random concrete scenario: 1-3 backends, 1-3 runners, 1-4 phases, every knob of the vocabulary."""
    n_backends = draw(st.integers(1, 3))
    backends = {}
    for i in range(n_backends):
        name = f"b{i}"
        declares = draw(st.dictionaries(st.sampled_from(MODES), st.sampled_from(list(SharedReadEnds)), max_size=3))
        reads = {m.value: draw(site_reads()) for m in MODES}
        when = draw(st.dictionaries(st.sampled_from(CONDITIONS), st.dictionaries(
            st.sampled_from(MODES), st.sampled_from(list(SharedReadEnds)), min_size=1, max_size=2), max_size=1))
        backends[name] = BackendSpec(name, declares=declares, reads=reads, declares_when=when)
    n_runners = draw(st.integers(1, max_runners))
    runners = {}
    for i in range(n_runners):
        name = f"r{i}"
        mailbox = draw(st.sampled_from([""] + [f"r{j}" for j in range(i)])) if i else ""
        runners[name] = RunnerSpec(
            name,
            marker=draw(st.booleans()),
            ring_depth=draw(st.integers(1, 3)),
            publish=draw(st.sampled_from(list(PublishPolicy))),
            mailbox=mailbox,
            fresh_events=draw(st.booleans()),
        )
    phases = []
    for i in range(draw(st.integers(1, max_phases))):
        prep = draw(st.sampled_from(list(PrepStream)))
        phases.append(
            PhaseSpec(
                name=f"p{i}",
                runner=draw(st.sampled_from(sorted(runners))),
                mode=draw(st.sampled_from(MODES)),
                backend=draw(st.sampled_from(sorted(backends))),
                execution=draw(st.sampled_from(list(Execution))),
                prep_stream=prep,
                plan_join=draw(st.sampled_from(list(PlanJoin))),
                worker_reads_after=tuple(draw(st.lists(st.sampled_from(LOCATIONS), unique=True, max_size=1))),
                clear_mailbox_after=draw(st.booleans()),
                consume_mailbox_before=draw(st.booleans()),
                segments=draw(st.integers(1, 2)),
                other_reads=draw(st.sampled_from([{}, {}, draw(site_reads())])),
            )
        )
    algorithm = AlgorithmSpec(
        name="random",
        steps={StepKind.NORMAL: tuple(phases)},
        publisher={StepKind.NORMAL: draw(st.sampled_from(sorted(runners)))},
        last_shared_read_modes=frozenset(draw(st.lists(st.sampled_from(MODES), unique=True))),
        prefill_publish_allowed=draw(st.booleans()),
        **_staged(draw, runners, phases),
    )
    scheduler = SchedulerSpec(
        barrier=True if fine_barrier else draw(st.booleans()),
        placement=BarrierPlacement.AFTER_RUN_BATCH if fine_barrier else draw(st.sampled_from(list(BarrierPlacement))),
        force_coarse=False if fine_barrier else draw(st.booleans()),
        loop=EventLoop.OVERLAP if fine_barrier else draw(st.sampled_from(list(EventLoop))),
        results_touch_inflight=draw(st.booleans()),
        prefill_read_done=draw(st.booleans()),
        hierarchical_cache=draw(st.booleans()),
    )
    return Scenario(
        name="random",
        backends=backends,
        runners=runners,
        algorithm=algorithm,
        scheduler=scheduler,
        resolution=draw(st.sampled_from(list(ResolutionRule))),
        settings=draw(st.sampled_from(SETTINGS)),
        steps=2,
    )
