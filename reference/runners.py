"""Model runners (mailbox and event ring) and CUDA-graph runners (resolve, publish, replay).

Mirrors docs/sglang-mechanism.md#streams-and-runners and docs/sglang-mechanism.md#resolution-and-publish: each ``ModelRunner`` owns the mailbox ``shared_read_done_event`` (None =
coarse fence) and the ring ``shared_read_done_events``; each ``CudaGraphRunner`` owns its in-graph marker
``in_graph_metadata_prep_done``, an external event created lazily at its first capture and recorded in every graph
it captures, right after the in-graph metadata prep.
"""

from __future__ import annotations

from typing import Callable

from fencecheck.scenario import PhaseSpec, RunnerSpec
from fencecheck.trace import (
    BY_WORKER,
    ClearReason,
    EventId,
    GraphId,
    MailboxCleared,
    MailboxSet,
    Resolve,
    StreamId,
    fresh_event,
    graph_id,
    marker_event,
    ring_event,
)
from fencecheck.vocab import (
    Execution,
    ForwardMode,
    PlanJoin,
    PrepStream,
    PublishPolicy,
    ReadSite,
    ResolutionRule,
    SharedReadEnds,
)

from .backends import AttentionBackend
from .device import Device
from .resolution import (
    PrefillSwitches,
    prefill_publishes,
    resolve_prefill_shared_read_ends,
    resolve_shared_read_ends,
)


def phase_sites(phase: PhaseSpec, backend: AttentionBackend) -> dict[ReadSite, tuple[str, ...]]:
    """What ``phase`` reads at each site: its backend's reads and the phase's reads by other work."""
    sites = dict(backend.read_sites(phase.mode))
    for site, locs in phase.other_reads.items():
        sites[site] = tuple(sorted(set(sites.get(site, ())) | set(locs)))
    return sites


class EventRing:
    """``shared_read_done_events``: reusable events handed out round robin (docs/sglang-mechanism.md#the-mailbox-and-the-event-ring)."""

    def __init__(self, device: Device, owner: str, depth: int):
        self.events = [device.event(ring_event(owner, i)) for i in range(depth)]
        self._next = 0

    def next(self) -> EventId:
        event = self.events[self._next]
        self._next = (self._next + 1) % len(self.events)
        return event


class ModelRunner:
    """The part of a model that owns the mailbox the scheduler's barrier reads."""

    def __init__(self, device: Device, name: str, ring_depth: int):
        self.device = device
        self.name = name
        self.shared_read_done_event: EventId | None = None
        self.shared_read_done_events = EventRing(device, name, ring_depth)
        self._fresh = 0

    def fresh_event(self) -> EventId:
        """A new event for one publish (a runner with ``fresh_events``), numbered per model runner."""
        event = self.device.event(fresh_event(self.name, self._fresh))
        self._fresh += 1
        return event

    def publish(self, event: EventId, point: SharedReadEnds, *, step: int, by: str) -> None:
        """Put ``event`` in the mailbox, published at ``point``; last write wins (docs/sglang-mechanism.md#publishing)."""
        self.shared_read_done_event = event
        self.device.mark(MailboxSet(step, self.name, event, point, by))

    def clear(self, why: ClearReason, *, step: int, phase: str = "", by: str = BY_WORKER) -> None:
        """Set the mailbox to None (``phase``: the phase the worker consumed it before or cleared it after)."""
        self.shared_read_done_event = None
        self.device.mark(MailboxCleared(step, self.name, why, phase, by))


class CudaGraphRunner:
    """A decode CUDA-graph runner (or one of its publish variants) bound to one ``ModelRunner``."""

    def __init__(
        self,
        device: Device,
        spec: RunnerSpec,
        model_runner: ModelRunner,
        streams: dict[str, StreamId],
        rule: ResolutionRule,
        is_last_shared_read_phase: Callable[[ForwardMode], bool],
        prefill: PrefillSwitches = PrefillSwitches(),
    ):
        self.device = device
        self.spec = spec
        self.model_runner = model_runner
        self.streams = streams
        self.rule = rule
        self.is_last_shared_read_phase = is_last_shared_read_phase
        self.prefill = prefill
        self.in_graph_metadata_prep_done: EventId | None = None
        self._graphs: dict[tuple[str, str, str, int], GraphId] = {}

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def has_marker(self) -> bool:
        return self.in_graph_metadata_prep_done is not None

    # -- capture ----------------------------------------------------------------------------------------------

    def _graph(self, phase: PhaseSpec, segment: int, sites: dict[ReadSite, tuple[str, ...]], step: int) -> GraphId:
        """The captured graph of ``phase``'s segment, captured on first use (capture runs no work)."""
        # Graphs are keyed by what decides their content (mode, backend, segment) and the phase's name, so two
        # kinds of step that run a same-named phase differently capture two graphs.
        key = (phase.name, phase.mode.value, phase.backend, segment)
        if key in self._graphs:
            return self._graphs[key]
        dev, f = self.device, self.streams["F"]
        if self.spec.marker and self.in_graph_metadata_prep_done is None:
            self.in_graph_metadata_prep_done = dev.event(marker_event(self.name), external=True)
        dev.begin_capture(f, graph_id(self.name, phase.name, phase.mode, phase.backend, segment), runner=self.name)
        if segment == 0:
            for loc in sites.get(ReadSite.IN_GRAPH_BEFORE_MARKER, ()):
                dev.read(f, loc, step=step, phase=phase.name, site=ReadSite.IN_GRAPH_BEFORE_MARKER.value)
            if self.in_graph_metadata_prep_done is not None:
                # R4: an external event recorded during capture becomes an event-record node.
                dev.record(self.in_graph_metadata_prep_done, f)
        for loc in sites.get(ReadSite.IN_GRAPH_AFTER_MARKER, ()):
            dev.read(f, loc, step=step, phase=phase.name, site=ReadSite.IN_GRAPH_AFTER_MARKER.value)
        gid = dev.end_capture()
        self._graphs[key] = gid
        return gid

    def prepare(self, phase: PhaseSpec, backend: AttentionBackend) -> None:
        """Capture every graph ``phase`` will replay (SGLang captures at start-up, before the first step)."""
        if phase.execution is Execution.EAGER:
            return
        sites = phase_sites(phase, backend)
        segments = phase.segments if phase.execution is Execution.BREAKABLE_GRAPH else 1
        for seg in range(segments):
            self._graph(phase, seg, sites, step=0)

    # -- publish ----------------------------------------------------------------------------------------------

    def _publish_out_of_graph(self, step: int, point: SharedReadEnds) -> None:
        mr = self.model_runner
        event = mr.fresh_event() if self.spec.fresh_events else mr.shared_read_done_events.next()
        self.device.record(event, self.streams["F"], by=self.name)
        self.model_runner.publish(event, point, step=step, by=self.name)

    def _publish_in_graph(self, step: int) -> None:
        # No new record: the barrier binds to the record node inside the replay just launched (R2, R5).
        self.model_runner.publish(self.in_graph_metadata_prep_done, SharedReadEnds.IN_REPLAY, step=step, by=self.name)

    # -- one phase --------------------------------------------------------------------------------------------

    def run(self, phase: PhaseSpec, backend: AttentionBackend, step: int) -> SharedReadEnds | None:
        """Run ``phase`` for ``step``; returns the resolved publish point (None when nothing was resolved).

        Per publish policy (``fencecheck.vocab.PublishPolicy``): ``resolve`` resolves before the prep and publishes
        PRE before the launch, IN at the marker, POST after the replay; ``clear_then_resolve`` clears the mailbox
        after the prep and then resolves and publishes as ``resolve`` does; ``prefill`` resolves with the prefill
        rule after the prep and publishes only PRE_REPLAY, there, eager or graph alike; ``always_pre_replay``
        publishes before every launch. Eager execution publishes only under ``prefill``."""
        dev, s, f = self.device, self.streams["S"], self.streams["F"]
        sites = phase_sites(phase, backend)
        policy = self.spec.publish
        graph = phase.execution is not Execution.EAGER
        resolved: SharedReadEnds | None = None
        if graph and policy is PublishPolicy.RESOLVE:
            resolved = self._resolve(phase, backend, step)

        # Load the batch: the out-of-graph metadata prep, on F or on the plan stream P.
        prep = f
        if phase.prep_stream is PrepStream.PLAN:
            prep = self.streams["P"]
            dev.wait_stream(prep, s, by=self.name)
        for loc in sites.get(ReadSite.PRE_REPLAY, ()):
            dev.read(prep, loc, step=step, phase=phase.name, site=ReadSite.PRE_REPLAY.value, by=self.name)
        joins_before = phase.prep_stream is PrepStream.PLAN and phase.plan_join is PlanJoin.BEFORE_REPLAY
        joins_after = phase.prep_stream is PrepStream.PLAN and phase.plan_join is PlanJoin.AFTER_REPLAY
        if joins_before:
            dev.wait_stream(f, prep, by=self.name)

        if graph and policy is PublishPolicy.CLEAR_THEN_RESOLVE:
            # An UNKNOWN resolution must discard any earlier phase's event
            # (docs/sglang-0.5.23.md#47-the-eagle-draft-extend-runner).
            self.model_runner.clear(ClearReason.CLEARED_BEFORE_RESOLVE, step=step, phase=phase.name, by=self.name)
            resolved = self._resolve(phase, backend, step)
        if policy is PublishPolicy.PREFILL:
            prefill = resolve_prefill_shared_read_ends(phase.mode, backend.shared_read_ends, self.prefill)
            dev.mark(Resolve(step, phase.name, phase.mode, prefill, self.name))
            # Right after the prep, before the forward or the replay; never clears
            # (docs/sglang-0.5.23.md#45-prefill-extend-publishes).
            if prefill_publishes(prefill, self.prefill):
                self._publish_out_of_graph(step, SharedReadEnds.PRE_REPLAY)

        if not graph:
            # Eager forward: no graph, no marker; only the prefill policy publishes (above).
            for site in (ReadSite.IN_GRAPH_BEFORE_MARKER, ReadSite.IN_GRAPH_AFTER_MARKER):
                for loc in sites.get(site, ()):
                    dev.read(f, loc, step=step, phase=phase.name, site=site.value, by=self.name)
        else:
            if policy is PublishPolicy.ALWAYS_PRE_REPLAY or resolved is SharedReadEnds.PRE_REPLAY:
                self._publish_out_of_graph(step, SharedReadEnds.PRE_REPLAY)
            segments = phase.segments if phase.execution is Execution.BREAKABLE_GRAPH else 1
            for seg in range(segments):
                dev.replay(self._graph(phase, seg, sites, step), f, step=step, phase=phase.name, by=self.name)
            if resolved is SharedReadEnds.IN_REPLAY:
                self._publish_in_graph(step)

        if joins_after:
            dev.wait_stream(f, prep, by=self.name)
        for loc in sites.get(ReadSite.POST_REPLAY, ()):
            dev.read(f, loc, step=step, phase=phase.name, site=ReadSite.POST_REPLAY.value, by=self.name)
        if resolved is SharedReadEnds.POST_REPLAY:
            self._publish_out_of_graph(step, SharedReadEnds.POST_REPLAY)
        # UNKNOWN publishes nothing: the mailbox keeps whatever it held (docs/sglang-mechanism.md#unknown-publishes-nothing).
        return resolved

    def _resolve(self, phase: PhaseSpec, backend: AttentionBackend, step: int) -> SharedReadEnds:
        resolved = resolve_shared_read_ends(
            self.rule, phase.mode, backend.shared_read_ends, self.has_marker, self.is_last_shared_read_phase
        )
        self.device.mark(Resolve(step, phase.name, phase.mode, resolved, self.name))
        return resolved
