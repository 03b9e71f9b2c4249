"""The model's own trace: the program's issued slots under a concrete solution, in the shared trace format.

Which operations exist, in which order and with which stamps comes from the symbolic program; names (runners,
phases, graphs, ring events) come from the scenario the solution is read as. The result is meant to equal, op for
op, what the reference implementation emits for that scenario: that equality is the conformance check.
"""

from __future__ import annotations

import z3

from fencecheck.scenario import Scenario
from fencecheck.trace import (
    BY_HOST_SYNC,
    BY_SCHEDULER,
    BY_WORKER,
    BarrierCoarse,
    BarrierDisabled,
    BarrierFine,
    ClearReason,
    CoarseReason,
    EventDecl,
    EventId,
    Graph,
    HostSync,
    MailboxCleared,
    MailboxSet,
    Read,
    ReadNode,
    Record,
    RecordNode,
    Replay,
    Resolve,
    RunBatchBegin,
    RunBatchReturn,
    StreamId,
    Trace,
    WaitEvent,
    WaitStream,
    Write,
    forward_done_event,
    fresh_event,
    graph_id,
    marker_event,
    ring_event,
    stream_id,
)
from fencecheck.vocab import EventLoop, Execution, PrepStream, SharedReadEnds, Stream

from .concrete import Layout, read_sites
from .program import Program, ReadSlot, WriteSlot
from .symconfig import SITES


def value(model: z3.ModelRef | None, term) -> int:
    """An integer term's value: itself when the program ran concretely, else the solution's."""
    if isinstance(term, int):
        return int(term)
    return model.eval(term, model_completion=True).as_long()


def truth(model: z3.ModelRef | None, term) -> bool:
    if isinstance(term, bool):
        return term
    return z3.is_true(model.eval(term, model_completion=True))


class _Env:
    def __init__(self, prog: Program, model: z3.ModelRef, s: Scenario, lay: Layout):
        self.prog, self.model, self.s, self.lay = prog, model, s, lay
        self.ops: list = []
        owners = []
        for spec in s.runners.values():
            if spec.mailbox_owner not in owners:
                owners.append(spec.mailbox_owner)
        self.events: list[EventDecl] = [
            EventDecl(ring_event(o, i)) for o in owners for i in range(s.runners[o].ring_depth)
        ]
        if s.scheduler.loop is EventLoop.PP:
            self.events.append(EventDecl(forward_done_event()))
        self.ring_next = {o: 0 for o in owners}
        self.fresh_next = {o: 0 for o in owners}
        self.mailbox: dict[str, EventId | None] = {o: None for o in owners}
        self.markers: dict[str, EventId] = {}
        self.graphs: dict[tuple, Graph] = {}
        self._pending: EventId | None = None  # the event the barrier took from the mailbox it just reset
        self._capture_all()

    # -- concrete values ----------------------------------------------------------------------------------------

    def i(self, term) -> int:
        return value(self.model, term)

    def b(self, term) -> bool:
        return truth(self.model, term)

    def phase_spec(self, step: int, i: int):
        return self.s.algorithm.steps[self.s.step_kind(step)][i]

    def runner_name(self, step: int, i: int) -> str:
        return self.phase_spec(step, i).runner

    def owner(self, runner: str) -> str:
        return self.s.runners[runner].mailbox_owner

    # -- graphs, captured at start-up like the worker does ------------------------------------------------------

    def _capture_all(self) -> None:
        for phases in self.s.algorithm.steps.values():
            for ph in phases:
                if ph.execution is Execution.EAGER:
                    continue
                sites = read_sites(self.s, ph.backend, ph.mode)
                for site, locs in ph.other_reads.items():  # work of the phase that is not the backend's
                    sites[SITES.index(site)] |= set(locs)
                segments = ph.segments if ph.execution is Execution.BREAKABLE_GRAPH else 1
                for seg in range(segments):
                    key = (ph.runner, ph.name, ph.mode.value, ph.backend, seg)
                    if key in self.graphs:
                        continue
                    spec = self.s.runners[ph.runner]
                    if spec.marker and ph.runner not in self.markers:
                        self.markers[ph.runner] = marker_event(ph.runner)
                        self.events.append(EventDecl(self.markers[ph.runner], True))
                    nodes = []
                    if seg == 0:
                        nodes += [ReadNode(loc, SITES[1].value) for loc in sorted(sites[1])]
                        if ph.runner in self.markers:
                            nodes.append(RecordNode(self.markers[ph.runner]))
                    nodes += [ReadNode(loc, SITES[2].value) for loc in sorted(sites[2])]
                    gid = graph_id(ph.runner, ph.name, ph.mode, ph.backend, seg)
                    self.graphs[key] = Graph(gid, ph.runner, tuple(nodes))

    # -- operations the program's slots emit ---------------------------------------------------------------------

    @staticmethod
    def stream(name: str) -> StreamId:
        return stream_id(Stream(name))

    def run_batch_begin(self, step: int) -> None:
        self.ops.append(RunBatchBegin(step, self.s.step_kind(step), BY_WORKER))

    def run_batch_return(self, step: int) -> None:
        self.ops.append(RunBatchReturn(step, BY_WORKER))

    def read(self, stream: str, loc: str, step: int, i: int, site: str, by: str | None = None) -> None:
        ph = self.phase_spec(step, i)
        self.ops.append(Read(self.stream(stream), loc, step, ph.name, site, by or ph.runner))

    def write(self, loc: str, stamp: int, by: str) -> None:
        self.ops.append(Write(stream_id(Stream.S), loc, stamp, by))

    def wait_stream(self, stream: str, other: str, by: str) -> None:
        self.ops.append(WaitStream(self.stream(stream), self.stream(other), by))

    def _clear_mailbox(self, owner: str, step: int, why: ClearReason, phase: str = "", by: str = BY_WORKER) -> None:
        self.mailbox[owner] = None
        self.ops.append(MailboxCleared(step, owner, why, phase, by))

    def mark_resolve(self, step: int, i: int) -> None:
        ph = self.phase_spec(step, i)
        resolved = SharedReadEnds(self.i(self.prog.resolved[(step, i)]))
        self.ops.append(Resolve(step, ph.name, ph.mode, resolved, ph.runner))

    def publish_ring(self, step: int, i: int, point: int) -> None:
        """Record the owner's next ring event (a fresh event, for a runner with ``fresh_events``) on F and publish
        it at ``point`` (a ``SharedReadEnds`` value)."""
        runner = self.runner_name(step, i)
        owner = self.owner(runner)
        if self.s.runners[runner].fresh_events:
            event = fresh_event(owner, self.fresh_next[owner])
            self.fresh_next[owner] += 1
            self.events.append(EventDecl(event))
        else:
            event = ring_event(owner, self.ring_next[owner])
            self.ring_next[owner] = (self.ring_next[owner] + 1) % self.s.runners[owner].ring_depth
        self.ops.append(Record(stream_id(Stream.F), event, runner))
        self.mailbox[owner] = event
        self.ops.append(MailboxSet(step, owner, event, SharedReadEnds(point), runner))

    def publish_marker(self, step: int, i: int) -> None:
        runner = self.runner_name(step, i)
        owner = self.owner(runner)
        self.mailbox[owner] = self.markers[runner]
        self.ops.append(MailboxSet(step, owner, self.markers[runner], SharedReadEnds.IN_REPLAY, runner))

    def replays(self, step: int, i: int) -> None:
        ph = self.phase_spec(step, i)
        segments = ph.segments if ph.execution is Execution.BREAKABLE_GRAPH else 1
        for seg in range(segments):
            gid = self.graphs[(ph.runner, ph.name, ph.mode.value, ph.backend, seg)].id
            self.ops.append(Replay(stream_id(Stream.F), gid, step, ph.name, ph.runner))

    def consume_wait(self, step: int, i: int) -> None:
        event = self.mailbox[self.owner(self.runner_name(step, i))]
        self.ops.append(WaitEvent(stream_id(Stream.F), event, BY_WORKER))

    def consume_clear(self, step: int, i: int) -> None:
        ph = self.phase_spec(step, i)
        self._clear_mailbox(self.owner(ph.runner), step, ClearReason.CONSUMED_BEFORE, ph.name)

    def clear_before_resolve(self, step: int, i: int) -> None:
        ph = self.phase_spec(step, i)
        self._clear_mailbox(self.owner(ph.runner), step, ClearReason.CLEARED_BEFORE_RESOLVE, ph.name, ph.runner)

    def forward_done(self, step: int) -> None:
        """The pipeline-parallel loop: record the forward-done event on F, then the host synchronizes on it."""
        event = forward_done_event()
        self.ops.append(Record(stream_id(Stream.F), event, BY_HOST_SYNC))
        self.ops.append(HostSync(event, BY_HOST_SYNC))

    def clear_mailbox(self, step: int, i: int) -> None:
        ph = self.phase_spec(step, i)
        self._clear_mailbox(self.owner(ph.runner), step, ClearReason.CLEARED_AFTER, ph.name)

    def barrier_disabled(self, step: int) -> None:
        self.ops.append(BarrierDisabled(step, BY_SCHEDULER))

    def barrier_reset(self, owner_term, step: int) -> None:
        owner = self.lay.runners[self.i(owner_term)]
        self._pending = self.mailbox[owner]
        self._clear_mailbox(owner, step, ClearReason.BARRIER_RESET, by=BY_SCHEDULER)

    def barrier_fine(self, step: int) -> None:
        event = self._pending
        self.ops.append(BarrierFine(step, event, BY_SCHEDULER))
        self.ops.append(WaitEvent(stream_id(Stream.S), event, BY_SCHEDULER))
        self._pending = None

    def barrier_coarse(self, step: int) -> None:
        why = CoarseReason.FORCED if self._pending is not None else CoarseReason.EMPTY_MAILBOX
        self.ops.append(BarrierCoarse(step, why, BY_SCHEDULER))
        self.ops.append(WaitStream(stream_id(Stream.S), stream_id(Stream.F), BY_SCHEDULER))
        self._pending = None


def emit(prog: Program, model: z3.ModelRef | None, s: Scenario, lay: Layout) -> Trace:
    """The trace of the issued slots of ``prog`` under ``model`` (None: a concretely run program), named after
    scenario ``s``."""
    env = _Env(prog, model, s, lay)
    for slot in prog.ops:
        if env.b(slot.guard):
            slot.emit(env)
    plan = any(p.prep_stream is PrepStream.PLAN for phases in s.algorithm.steps.values() for p in phases)
    streams = tuple(stream_id(x) for x in (Stream.S, Stream.F) + ((Stream.P,) if plan else ()))
    return Trace(
        scenario=s.name,
        steps=lay.steps,
        streams=streams,
        events=tuple(sorted(env.events, key=lambda e: e.id)),
        graphs=tuple(sorted(env.graphs.values(), key=lambda g: g.id)),
        ops=tuple(env.ops),
        meta={"resolution": s.resolution.value},
    )


def kernel_clocks(prog: Program, model: z3.ModelRef | None) -> list[tuple[object, dict[str, int]]]:
    """Issued kernel slots in host order with their concrete vector clocks (reads: only their own component)."""
    out = []
    for slot in prog.ops:
        k = slot.kernel
        if k is None or not truth(model, slot.guard):
            continue
        if isinstance(k, WriteSlot):
            out.append((k, {y: value(model, v) for y, v in k.vc.items()}))
        elif isinstance(k, ReadSlot):
            out.append((k, {k.stream: value(model, k.pos)}))
    return out


def witness_schedule(prog: Program, model: z3.ModelRef | None, race: ReadSlot) -> list[int]:
    """Kernel indices (trace order) with the racing write and every kernel ordered before it first, then the rest
    in host order. Writes are all on S, so the ones issued up to the racing write precede it; a read precedes it
    when the write's clock covers the read's position."""
    kernels = kernel_clocks(prog, model)
    w = prog.first_write(race, lambda g: truth(model, g))
    wvc = {y: value(model, v) for y, v in w.vc.items()}
    first, rest = [], []
    for index, (k, vc) in enumerate(kernels):
        before = k.slot <= w.slot if isinstance(k, WriteSlot) else vc[k.stream] <= wvc[k.stream]
        (first if before else rest).append(index)
    return first + rest
