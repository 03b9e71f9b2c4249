"""The model's own trace: the program's issued slots under a concrete solution, in the shared trace format.

Which operations exist, in which order and with which stamps comes from the symbolic program; names (runners,
phases, graphs, ring events) come from the scenario the solution is read as. The result is meant to equal, op for
op, what the reference implementation emits for that scenario: that equality is the conformance check.
"""

from __future__ import annotations

import z3

from fencecheck.scenario import Scenario
from fencecheck.trace import (
    EventDecl,
    EventId,
    Graph,
    GraphId,
    Mark,
    Read,
    ReadNode,
    Record,
    RecordNode,
    Replay,
    StreamId,
    Trace,
    WaitEvent,
    WaitStream,
    Write,
)
from fencecheck.vocab import Execution, SharedReadEnds

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
        self.loop_top = self.b(prog.cfg.loop_top())
        owners = []
        for spec in s.runners.values():
            if spec.mailbox_owner not in owners:
                owners.append(spec.mailbox_owner)
        self.events: list[EventDecl] = [
            EventDecl(EventId(f"{o}.ring{i}")) for o in owners for i in range(s.runners[o].ring_depth)
        ]
        self.ring_next = {o: 0 for o in owners}
        self.mailbox: dict[str, str | None] = {o: None for o in owners}
        self.markers: dict[str, str] = {}
        self.graphs: dict[tuple, Graph] = {}
        self._pending: str | None = None  # the event the barrier took from the mailbox it just reset
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

    def kind_name(self, step: int) -> str:
        return self.s.step_kind(step).value

    # -- graphs, captured at start-up like the worker does ------------------------------------------------------

    def _capture_all(self) -> None:
        for phases in self.s.algorithm.steps.values():
            for ph in phases:
                if ph.execution is Execution.EAGER:
                    continue
                sites = read_sites(self.s, ph.backend, ph.mode)
                segments = ph.segments if ph.execution is Execution.BREAKABLE_GRAPH else 1
                for seg in range(segments):
                    key = (ph.runner, ph.name, ph.mode.value, ph.backend, seg)
                    if key in self.graphs:
                        continue
                    spec = self.s.runners[ph.runner]
                    if spec.marker and ph.runner not in self.markers:
                        self.markers[ph.runner] = f"{ph.runner}.marker"
                        self.events.append(EventDecl(EventId(self.markers[ph.runner]), True))
                    nodes = []
                    if seg == 0:
                        nodes += [ReadNode(loc, SITES[1].value) for loc in sorted(sites[1])]
                        if ph.runner in self.markers:
                            nodes.append(RecordNode(EventId(self.markers[ph.runner])))
                    nodes += [ReadNode(loc, SITES[2].value) for loc in sorted(sites[2])]
                    gid = GraphId(f"{ph.runner}/{ph.name}/{ph.mode.value}/{ph.backend}#{seg}")
                    self.graphs[key] = Graph(gid, ph.runner, tuple(nodes))

    # -- operations the program's slots emit ---------------------------------------------------------------------

    def mark(self, what: str, step: int, detail: str, by: str) -> None:
        self.ops.append(Mark(what, step, detail, by))

    def read(self, stream: str, loc: str, step: int, i: int, site: str, by: str | None = None) -> None:
        ph = self.phase_spec(step, i)
        self.ops.append(Read(StreamId(stream), loc, step, ph.name, site, by or ph.runner))

    def write(self, loc: str, stamp: int, by: str) -> None:
        self.ops.append(Write(StreamId("S"), loc, stamp, by))

    def wait_stream(self, stream: str, other: str, by: str) -> None:
        self.ops.append(WaitStream(StreamId(stream), StreamId(other), by))

    def _set_mailbox(self, owner: str, event: str | None, step: int, by: str, how: str) -> None:
        self.mailbox[owner] = event
        self.mark("mailbox", step, f"{owner} <- {event or 'None'} ({how})", by)

    def mark_resolve(self, step: int, i: int) -> None:
        ph = self.phase_spec(step, i)
        resolved = SharedReadEnds(self.i(self.prog.resolved[(step, i)]))
        self.mark("resolve", step, f"{ph.name}: {ph.mode.value} -> {resolved.name}", ph.runner)

    def publish_ring(self, step: int, i: int, how: str) -> None:
        runner = self.runner_name(step, i)
        owner = self.owner(runner)
        event = f"{owner}.ring{self.ring_next[owner]}"
        self.ring_next[owner] = (self.ring_next[owner] + 1) % self.s.runners[owner].ring_depth
        self.ops.append(Record(StreamId("F"), EventId(event), runner))
        self._set_mailbox(owner, event, step, runner, how)

    def publish_marker(self, step: int, i: int) -> None:
        runner = self.runner_name(step, i)
        self._set_mailbox(self.owner(runner), self.markers[runner], step, runner, "in-graph marker")

    def replays(self, step: int, i: int) -> None:
        ph = self.phase_spec(step, i)
        segments = ph.segments if ph.execution is Execution.BREAKABLE_GRAPH else 1
        for seg in range(segments):
            gid = self.graphs[(ph.runner, ph.name, ph.mode.value, ph.backend, seg)].id
            self.ops.append(Replay(StreamId("F"), gid, step, ph.name, ph.runner))

    def consume_wait(self, step: int, i: int) -> None:
        event = self.mailbox[self.owner(self.runner_name(step, i))]
        self.ops.append(WaitEvent(StreamId("F"), EventId(event), "worker"))

    def consume_clear(self, step: int, i: int) -> None:
        ph = self.phase_spec(step, i)
        self._set_mailbox(self.owner(ph.runner), None, step, "worker", f"consumed before {ph.name}")

    def clear_mailbox(self, step: int, i: int) -> None:
        ph = self.phase_spec(step, i)
        self._set_mailbox(self.owner(ph.runner), None, step, "worker", f"cleared after {ph.name}")

    def barrier_reset(self, owner_term, step: int) -> None:
        owner = self.lay.runners[self.i(owner_term)]
        self._pending = self.mailbox[owner]
        self._set_mailbox(owner, None, step, "scheduler", "barrier reset")

    def barrier_fine(self, step: int) -> None:
        event = self._pending
        self.mark("barrier", step, f"fine: S waits on {event}", "scheduler")
        self.ops.append(WaitEvent(StreamId("S"), EventId(event), "scheduler"))
        self._pending = None

    def barrier_coarse(self, step: int) -> None:
        why = "forced" if self._pending is not None else "empty mailbox"
        self.mark("barrier", step, f"coarse ({why}): S waits on F", "scheduler")
        self.ops.append(WaitStream(StreamId("S"), StreamId("F"), "scheduler"))
        self._pending = None


def emit(prog: Program, model: z3.ModelRef | None, s: Scenario, lay: Layout) -> Trace:
    """The trace of the issued slots of ``prog`` under ``model`` (None: a concretely run program), named after
    scenario ``s``."""
    env = _Env(prog, model, s, lay)
    for slot in prog.ops:
        if env.b(slot.guard):
            slot.emit(env)
    plan = any(p.prep_stream.value == "plan" for phases in s.algorithm.steps.values() for p in phases)
    streams = (StreamId("S"), StreamId("F")) + ((StreamId("P"),) if plan else ())
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
    w = prog.first_writes[(race.step, race.location)]
    wvc = {y: value(model, v) for y, v in w.vc.items()}
    first, rest = [], []
    for index, (k, vc) in enumerate(kernels):
        before = k.slot <= w.slot if isinstance(k, WriteSlot) else vc[k.stream] <= wvc[k.stream]
        (first if before else rest).append(index)
    return first + rest
