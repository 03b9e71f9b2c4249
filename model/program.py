"""The host program of SGLang's fence, executed symbolically over a ``SymConfig``.

Every operation the scheduler, worker and runners may issue gets a slot in host order, guarded by the condition
under which it is issued. Happens-before is computed as symbolic vector clocks (streams S, F, P): a kernel adds
its guard to its stream's own component; waits join clocks. Because the host order of slots is fixed, which record
a wait binds to is decided by that order (R2), so this is exact: read ``r`` happens before write ``w`` iff
``w.vc[r.stream] >= r.pos``. The solver chooses only the configuration.

Two encodings of that comparison, equal in meaning:

- Integer clocks (a program built from a free state, ``havoc``, for induction and the cutoff arguments): each clock
  is a fresh integer defined by an equation, integer arithmetic with if-then-else (no bit-vectors); the race compares
  ``w.vc[r.stream] < r.pos``.
- Knowledge (a program built from the initial state): for each read ``r`` and each clock, one Boolean "this clock
  covers ``r``" (``clock[r.stream] >= r.pos``), computed forward. A read makes its own stream cover it; a join is an
  Or (``max(a, b) >= p`` iff ``a >= p`` or ``b >= p``); a snapshot copies. A race is an issued first write whose
  clock does not cover the read. Every value (knowledge, mailbox, owner, resolution) is a term over the
  configuration, with no defining equations (``Program.constraints`` is empty) and no arithmetic over clocks; the
  integer clocks are still built, as terms nobody asserts, for the witness schedule (``emit.kernel_clocks``). A
  read's knowledge is dropped when the next ``run_batch`` begins: its candidate first writes
  (``Program.first_writes``) are all issued before that.
  ``tests/test_model.py`` proves the two race conditions equal on every configuration within small bounds.

This module does not use ``fencecheck.reference``; the SGLang behaviour each part encodes is cited by its anchor in
docs/sglang-mechanism.md (``#anchor``), the CUDA rule by its number in docs/cuda-rules.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import z3

from fencecheck.verdict import RaceId
from fencecheck.trace import BY_FORWARD_ON_S, BY_WORKER, WritePurpose, write_by
from fencecheck.vocab import WORKER_SITE

from .domain import SYMBOLIC, domain_of

if TYPE_CHECKING:
    from fencecheck.scenario import Scenario
from .symconfig import (
    ALWAYS_PRE,
    BREAKABLE,
    CLEAR_THEN_RESOLVE,
    EAGER,
    EXTEND,
    GATED,
    IN,
    JOIN_AFTER,
    JOIN_BEFORE,
    LOOP_DISAGG_PREFILL,
    LOOP_NORMAL,
    LOOP_OVERLAP,
    LOOP_PP,
    OTHER,
    POST,
    POST_FALLBACK,
    PRE,
    PREFILL,
    RESOLVE,
    SITES,
    UNKNOWN,
    VERIFY,
    PhaseVars,
    SymConfig,
    select,
)

STREAMS = ("S", "F", "P")
#: The clock components kept per stream. A race compares a write's knowledge of F and P with a read's position, and
#: that knowledge only ever comes from F (events recorded on F, S.wait_stream(F)), which learns of P by joining P.
#: So S and F keep their knowledge of F and P, P only its own position; S's own position and P's knowledge of F
#: never decide a race and are dropped (the simulator keeps full clocks; the differential test holds them equal).
KEEP = {"S": ("F", "P"), "F": ("F", "P"), "P": ("P",)}
SNAP = KEEP["F"]
# Mailbox contents.
MB_NONE, MB_RING, MB_MARKER = 0, 1, 2


@dataclass
class ReadSlot:
    guard: z3.BoolRef
    step: int  # 1-based
    phase: int  # index within the step
    site: str
    location: str
    stream: str
    pos: z3.ArithRef
    slot: int  # index into Program.ops
    index: int = -1  # index into Program.reads: the key of this read in a clock's knowledge

    def race_id(self, s: "Scenario") -> RaceId:
        """This read's identity in scenario ``s`` (its phase by name)."""
        return RaceId(self.location, s.algorithm.steps[s.step_kind(self.step)][self.phase].name, self.site, self.step)

    def witness_race(self, s: "Scenario") -> dict:
        """The race a witness is for: its identity and the stream of the read."""
        return {**self.race_id(s).to_dict(), "stream": self.stream}


@dataclass
class WriteSlot:
    guard: z3.BoolRef
    stamp: int
    location: str
    vc: dict[str, z3.ArithRef]
    slot: int
    #: stream -> read index -> "S's clock at this write covers the read" (knowledge encoding; None: integer clocks)
    know: dict[str, dict[int, z3.BoolRef]] | None = None


@dataclass
class OpSlot:
    """One host operation: issued when ``guard`` holds; ``emit`` builds it for a concrete run (see ``emit``)."""

    guard: z3.BoolRef
    emit: Callable
    kernel: object = None  # ReadSlot / WriteSlot for kernels


@dataclass
class Program:
    cfg: SymConfig
    constraints: list[z3.BoolRef] = field(default_factory=list)
    ops: list[OpSlot] = field(default_factory=list)
    reads: list[ReadSlot] = field(default_factory=list)
    #: (step, location) -> the write slots that can be the first write of the location after run_batch(step)
    #: returns, in host order (which one is issued depends on the loop and the mailbox).
    first_writes: dict[tuple[int, str], list[WriteSlot]] = field(default_factory=dict)
    resolved: dict[tuple[int, int], z3.ArithRef] = field(default_factory=dict)
    #: (step, phase) -> the phase's runner puts an event in the mailbox (before, in or after its replay)
    publishes: dict[tuple[int, int], z3.BoolRef] = field(default_factory=dict)
    #: (step, phase) -> the phase's runner sets the mailbox to None before resolving (``clear_then_resolve``)
    clears_before_resolve: dict[tuple[int, int], z3.BoolRef] = field(default_factory=dict)
    d: object = SYMBOLIC
    state_in: "State | None" = None
    state_out: "State | None" = None
    _fresh: int = 0

    # -- races -------------------------------------------------------------------------------------------------

    def race_of(self, r: ReadSlot) -> z3.BoolRef:
        """``r`` is issued, its location is written after ``run_batch(r.step)`` returns, and not ordered before.

        Of the candidate first writes, any issued one not ordered after ``r`` is a race; S's clock only grows, so
        that is exactly the first issued one not being ordered after it. This is the encoding of
        ``race_in_host_order`` (the race rule of docs/simulator.md, "The race check"), equal to it on every
        configuration (``tests/test_marks.py`` proves it within small bounds)."""
        ws = self.first_writes.get((r.step, r.location), [])
        return self.d.And(r.guard, self.d.Or(*[self.d.And(w.guard, self._after(w, r)) for w in ws]))

    def race_by_clock(self, r: ReadSlot) -> z3.BoolRef:
        """``race_of`` by the integer clocks alone, whichever encoding the program uses (for comparing the two)."""
        ws = self.first_writes.get((r.step, r.location), [])
        return self.d.And(r.guard, self.d.Or(*[self.d.And(w.guard, w.vc[r.stream] < r.pos) for w in ws]))

    def writes_after(self, r: ReadSlot) -> list[WriteSlot]:
        """Every write slot of ``r``'s location after ``r`` in host order (issued or not)."""
        return [op.kernel for op in self.ops[r.slot + 1:]
                if isinstance(op.kernel, WriteSlot) and op.kernel.location == r.location]

    def race_in_host_order(self, r: ReadSlot) -> z3.BoolRef:
        """The race rule on device operations alone: ``r`` is issued and some issued write of its location enqueued
        after it in host order is not ordered after it (integer clocks: the knowledge of a read is dropped once its
        step's candidates are issued, so later writes know nothing of it). No step, no run_batch boundary: the
        simulator's rule (``reference/sim/races.py``), stated over the program's slots."""
        ws = self.writes_after(r)
        return self.d.And(r.guard, self.d.Or(*[self.d.And(w.guard, w.vc[r.stream] < r.pos) for w in ws]))

    def _after(self, w: WriteSlot, r: ReadSlot):
        """``w``'s clock does not cover ``r``."""
        if w.know is None:
            return w.vc[r.stream] < r.pos
        k = w.know[r.stream].get(r.index, False)
        return self.d.BoolVal(not k) if isinstance(k, bool) else self.d.Not(k)

    def first_write(self, r: ReadSlot, issued: Callable) -> WriteSlot | None:
        """The first write of ``r``'s location after ``run_batch(r.step)`` that ``issued`` (a guard -> bool) says
        is issued."""
        return next((w for w in self.first_writes.get((r.step, r.location), []) if issued(w.guard)), None)

    def any_race(self, steps: list[int] | None = None) -> z3.BoolRef:
        return self.d.Or(*[self.race_of(r) for r in self.reads if steps is None or r.step in steps])


def build(cfg: SymConfig, tag: str = "", havoc: bool = False, knowledge: bool = True) -> Program:
    """Execute the host program of ``cfg.bounds.steps`` steps symbolically.

    ``havoc``: start from an arbitrary state (clocks, mailboxes, markers as free variables) instead of the initial
    one; ``Program.state_in`` and ``Program.state_out`` then give the states before and after, for induction.
    ``knowledge``: from the initial state, decide races by knowledge (the default) or, when False, by the integer
    clocks as a free state's program does (for comparing the two)."""
    return _Builder(cfg, tag, havoc, knowledge).run()


@dataclass
class State:
    """What carries over between steps: clocks, every mailbox, every marker's latest record."""

    clock: dict
    mb_kind: list
    mb_marker: list
    mb_snap: list
    mk_snap: list
    mk_valid: list

    def invariant(self, runners: int) -> z3.BoolRef:
        """Everything recorded lies in the past of F, and no stream knows more of another than it has done."""
        c = self.clock
        out = [z3.And(c[x][y] >= 0, c[x][y] <= c[y][y]) for x in STREAMS for y in KEEP[x]]
        for o in range(runners):
            out += [self.mb_kind[o] >= MB_NONE, self.mb_kind[o] <= MB_MARKER, self.mb_marker[o] >= 0,
                    self.mb_marker[o] < runners]
            out += [z3.And(self.mb_snap[o][y] >= 0, self.mb_snap[o][y] <= c["F"][y]) for y in SNAP]
            out += [z3.And(self.mk_snap[o][y] >= 0, self.mk_snap[o][y] <= c["F"][y]) for y in SNAP]
        return z3.And(*out)

    def is_initial(self, runners: int) -> z3.BoolRef:
        out = [self.clock[x][y] == 0 for x in STREAMS for y in KEEP[x]]
        for o in range(runners):
            out += [self.mb_kind[o] == MB_NONE, self.mb_marker[o] == 0, z3.Not(self.mk_valid[o])]
            out += [self.mb_snap[o][y] == 0 for y in SNAP] + [self.mk_snap[o][y] == 0 for y in SNAP]
        return z3.And(*out)


class _Builder:
    def __init__(self, cfg: SymConfig, tag: str, havoc: bool = False, knowledge: bool = True):
        self.cfg = cfg
        self.d = domain_of(cfg.resolution)
        self.tag = f"{tag}." if tag else ""
        self.prog = Program(cfg, d=self.d)
        self.R = cfg.bounds.runners
        self.locs = cfg.bounds.locations
        self.ctx = getattr(self.d, "ctx", None)  # the configuration's z3 context: every term stays in it
        if havoc:
            iv = lambda name: z3.Int(f"{self.tag}init.{name}", self.ctx)  # noqa: E731
            bv = lambda name: z3.Bool(f"{self.tag}init.{name}", self.ctx)  # noqa: E731
        else:
            iv = lambda name: self.d.IntVal(0)  # noqa: E731
            bv = lambda name: self.d.BoolVal(False)  # noqa: E731
        self.clock = {x: {y: iv(f"vc.{x}.{y}") for y in KEEP[x]} for x in STREAMS}
        # Mailbox per model runner (indexed by owner runner): what it holds, which marker, the ring snapshot.
        self.mb_kind = [iv(f"mb{o}.kind") for o in range(self.R)]
        self.mb_marker = [iv(f"mb{o}.marker") for o in range(self.R)]
        self.mb_snap = [{y: iv(f"mb{o}.snap.{y}") for y in SNAP} for o in range(self.R)]
        # Marker of each CUDA-graph runner: its latest record node's snapshot, and whether it was ever recorded.
        self.mk_snap = [{y: iv(f"mk{g}.{y}") for y in SNAP} for g in range(self.R)]
        self.mk_valid = [bv(f"mk{g}.valid") for g in range(self.R)]
        # Knowledge (see the module's docstring): per clock component, read index -> Boolean; a read absent is not
        # covered. None: the integer clocks decide races (a free state, or the concrete domain).
        self.knowing = self.d.symbolic and not havoc and knowledge
        if self.knowing:
            self.know = {x: {y: {} for y in KEEP[x]} for x in STREAMS}
            self.mb_know = [{y: {} for y in SNAP} for _ in range(self.R)]
            self.mk_know = [{y: {} for y in SNAP} for _ in range(self.R)]
        self.prog.state_in = self.state()

    def state(self) -> State:
        return State({x: dict(v) for x, v in self.clock.items()}, list(self.mb_kind), list(self.mb_marker),
                     [dict(s) for s in self.mb_snap], [dict(s) for s in self.mk_snap], list(self.mk_valid))

    # -- helpers ------------------------------------------------------------------------------------------------

    def fresh(self, term, name: str):
        """A fresh variable defined equal to ``term`` (a free state's program); the term itself in the concrete
        domain and in the knowledge encoding, where every value is a term over the configuration."""
        if not self.d.symbolic or self.knowing:
            return term
        self.prog._fresh += 1
        v = (z3.Int if z3.is_int(term) else z3.Bool)(f"{self.tag}{name}#{self.prog._fresh}", self.ctx)
        self.prog.constraints.append(v == term)
        return v

    # Knowledge values are z3 Booleans or Python bools (known outright); these fold the Python ones away.

    def _lit(self, x):
        return self.d.BoolVal(x) if isinstance(x, bool) else x

    def _k_or(self, a, b):
        if a is True or b is True:
            return True
        if a is False:
            return b
        if b is False or a.eq(b):
            return a
        return self.d.Or(a, b)

    def _k_and(self, g, b):
        if b is False or z3.is_false(g):
            return False
        if z3.is_true(g):
            return b
        return g if b is True else self.d.And(g, b)

    def _k_ite(self, c, a, b):
        if isinstance(a, bool) and isinstance(b, bool):
            return a if a == b else (c if a else self.d.Not(c))
        if not isinstance(a, bool) and not isinstance(b, bool) and a.eq(b):
            return a
        return self.d.If(c, self._lit(a), self._lit(b))

    def _k_select(self, index, values: list[dict]) -> dict:
        """``select`` on knowledge: read index -> ``values[index]``'s Boolean."""
        out = {}
        for r in sorted(set().union(*values)):
            vs = [v.get(r, False) for v in values]
            if all(v is vs[0] for v in vs):
                out[r] = vs[0]
            else:
                out[r] = select(index, [self._lit(v) for v in vs])
        return out

    def _k_join(self, mine: dict, theirs: dict, guard) -> dict:
        out = dict(mine)
        for r, k in theirs.items():
            out[r] = self._k_or(mine.get(r, False), self._k_and(guard, k))
        return out

    def _k_update(self, hit, new: dict, old: dict) -> dict:
        """Per read: ``new`` where ``hit``, else ``old``."""
        out = {}
        for r in sorted(set(new) | set(old)):
            x = self._k_ite(hit, new.get(r, False), old.get(r, False))
            if x is not False:
                out[r] = x
        return out

    def forget(self, before_step: int) -> None:
        """Drop the knowledge of reads of steps before ``before_step``: every candidate first write of theirs has
        been issued."""
        if not self.knowing:
            return
        keep = {r.index for r in self.prog.reads if r.step >= before_step}
        for dicts in ([*self.know.values()] + self.mb_know + self.mk_know):
            for y, k in dicts.items():
                dicts[y] = {r: v for r, v in k.items() if r in keep}

    def op(self, guard, emit, kernel=None) -> int:
        self.prog.ops.append(OpSlot(guard, emit, kernel))
        return len(self.prog.ops) - 1

    def join(self, stream: str, vc: dict, guard, name: str, know: dict | None = None) -> None:
        """``stream`` waits on clock ``vc`` when ``guard`` holds; ``know`` is ``vc``'s knowledge (knowledge
        encoding: required, ``vc`` is a stream's clock or a recorded snapshot)."""
        mine = self.clock[stream]
        self.clock[stream] = {
            y: self.fresh(self.d.If(self.d.And(guard, vc[y] > mine[y]), vc[y], mine[y]), f"vc.{stream}.{y}.{name}")
            if y in vc else mine[y]
            for y in KEEP[stream]
        }
        if self.knowing:
            assert know is not None, "the knowledge encoding joins a clock together with its knowledge"
            self.know[stream] = {y: self._k_join(self.know[stream][y], know[y], guard)
                                 if y in know else self.know[stream][y] for y in KEEP[stream]}

    def join_stream(self, stream: str, other: str, guard, name: str) -> None:
        """``stream.wait_stream(other)`` when ``guard`` holds."""
        self.join(stream, dict(self.clock[other]), guard, name,
                  dict(self.know[other]) if self.knowing else None)

    def kernel_read(self, guard, stream: str, step: int, phase: int, site: str, loc: str, emit) -> None:
        c = dict(self.clock[stream])
        c[stream] = self.fresh(c[stream] + self.d.If(guard, 1, 0), f"pos.{stream}")
        self.clock[stream] = c
        slot = ReadSlot(guard, step, phase, site, loc, stream, c[stream], len(self.prog.ops), len(self.prog.reads))
        if self.knowing:  # its own stream covers it from now on (when it is not issued, no race asks)
            self.know[stream][stream] = {**self.know[stream][stream], slot.index: True}
        self.op(guard, emit, slot)
        self.prog.reads.append(slot)

    def kernel_write(self, guard, stamp: int, loc: str, emit) -> WriteSlot:
        know = {y: dict(k) for y, k in self.know["S"].items()} if self.knowing else None
        slot = WriteSlot(guard, stamp, loc, dict(self.clock["S"]), len(self.prog.ops), know)
        self.op(guard, emit, slot)
        return slot

    def owner_of(self, runner) -> z3.ArithRef:
        return select(runner, [r.owner for r in self.cfg.runners])

    def set_mailbox(self, owner, guard, kind, marker=None, snap=None, snap_know=None) -> None:
        for o in range(self.R):
            hit = self.d.And(guard, owner == o)
            self.mb_kind[o] = self.fresh(self.d.If(hit, kind, self.mb_kind[o]), f"mb{o}.kind")
            if marker is not None:
                self.mb_marker[o] = self.fresh(self.d.If(hit, marker, self.mb_marker[o]), f"mb{o}.marker")
            if snap is not None:
                self.mb_snap[o] = {y: self.fresh(self.d.If(hit, snap[y], self.mb_snap[o][y]), f"mb{o}.snap.{y}") for y in SNAP}
                if self.knowing:
                    self.mb_know[o] = {y: self._k_update(hit, snap_know[y], self.mb_know[o][y])
                                       for y in SNAP}

    # -- the scheduler's writes and barrier (#the-war-barrier) ------------------------------------------------

    def writes(self, guard, stamp: int, why) -> dict[str, WriteSlot]:
        out = {}
        for loc in self.locs:
            g = self.d.And(guard, self.cfg.written[loc])
            out[loc] = self.kernel_write(g, stamp, loc, lambda env, loc=loc, stamp=stamp: env.write(loc, stamp, why(env)))
        return out

    def barrier(self, guard, step: int, publisher) -> None:
        """``_apply_war_barrier``: take the publisher's mailbox, reset it, wait on its event or coarsely on F."""
        cfg = self.cfg
        on = self.d.And(guard, cfg.barrier)
        self.op(self.d.And(guard, self.d.Not(cfg.barrier)), lambda env: env.barrier_disabled(step))
        if publisher is None:  # loop-top barrier before the first step: nothing published yet
            has_event, bound, bound_valid, owner = self.d.BoolVal(False), None, self.d.BoolVal(False), None
        else:
            owner = self.fresh(self.owner_of(publisher), "barrier.owner")
            kind = select(owner, self.mb_kind)
            has_event = self.fresh(kind != MB_NONE, "barrier.has_event")
            marker = select(owner, self.mb_marker)
            is_ring = kind == MB_RING
            bound = {
                y: self.fresh(
                    self.d.If(is_ring, select(owner, [s[y] for s in self.mb_snap]), select(marker, [s[y] for s in self.mk_snap])),
                    f"barrier.bound.{y}",
                )
                for y in SNAP
            }
            if self.knowing:
                ring_k = {y: self._k_select(owner, [k[y] for k in self.mb_know]) for y in SNAP}
                mark_k = {y: self._k_select(marker, [k[y] for k in self.mk_know]) for y in SNAP}
                bound_know = {y: self._k_update(is_ring, ring_k[y], mark_k[y]) for y in SNAP}
            # R2: a wait on an event never recorded is a no-op (a ring event is recorded when published).
            bound_valid = self.d.Or(is_ring, select(marker, self.mk_valid))
            self.op(on, lambda env, owner=owner: env.barrier_reset(owner, step))
            self.set_mailbox(owner, on, MB_NONE)
        fine = self.d.And(on, has_event, self.d.Not(cfg.force_coarse))
        coarse = self.d.And(on, self.d.Not(fine))
        self.op(fine, lambda env: env.barrier_fine(step))
        if bound is not None:
            self.join("S", bound, self.d.And(fine, bound_valid), f"barrier{step}",
                      bound_know if self.knowing else None)  # R2, R3
        self.op(coarse, lambda env: env.barrier_coarse(step))
        self.join_stream("S", "F", coarse, f"coarse{step}")  # R7

    # -- one step of the worker (#resolution-and-publish, #one-decode-step-per-algorithm) -------------------------

    def resolve(self, p: PhaseVars):
        """``_resolve_shared_read_ends`` (#resolution) for a graph phase of a resolving runner."""
        cfg = self.cfg
        marker = select(p.runner, [r.marker for r in cfg.runners])
        fallback = self.d.If(cfg.resolution == POST_FALLBACK, POST, PRE)
        declared = self.d.If(self.d.And(p.decl == IN, self.d.Not(marker)), fallback, p.decl)
        gated_unknown = self.d.Or(p.mode == OTHER, p.mode == EXTEND, self.d.And(p.mode == VERIFY, self.d.Not(select(p.mode, cfg.is_last))))
        return self.d.If(self.d.And(cfg.resolution == GATED, gated_unknown), UNKNOWN, declared)

    def prefill_rule(self, p: PhaseVars):
        """``resolve_prefill_shared_read_ends`` (docs/sglang-0.5.23.md#22-the-base-rule-and-the-prefill-resolution):
        UNKNOWN when coarse is forced, prefill read-done is off, or the mode is not EXTEND; else the declaration (no
        marker fallback)."""
        cfg = self.cfg
        ok = self.d.And(p.mode == EXTEND, self.d.Not(cfg.force_coarse), cfg.prefill_read_done)
        return self.d.If(ok, p.decl, UNKNOWN)

    def phase(self, step: int, i: int, p: PhaseVars) -> None:
        cfg = self.cfg
        act = p.active
        graph = self.d.And(act, p.execution != EAGER)
        policy = select(p.runner, [r.publish for r in cfg.runners])
        resolving = self.d.And(graph, policy == RESOLVE)
        # clear_then_resolve (docs/sglang-0.5.23.md#47-the-eagle-draft-extend-runner): graphs only; clears after
        # the prep, then resolves as resolve does.
        ctr = self.d.And(graph, policy == CLEAR_THEN_RESOLVE)
        # prefill (docs/sglang-0.5.23.md#45-prefill-extend-publishes): any execution; resolves with the prefill
        # rule after the prep.
        prefilling = self.d.And(act, policy == PREFILL)
        by_rule = self.d.Or(resolving, ctr)
        resolved = self.fresh(self.d.If(by_rule, self.resolve(p), self.d.If(prefilling, self.prefill_rule(p), 0)),
                              f"s{step}p{i}.resolved")
        self.prog.resolved[(step, i)] = resolved
        owner = self.fresh(self.owner_of(p.runner), f"s{step}p{i}.owner")
        # DSpark (#one-decode-step-per-algorithm): before the phase, F waits on the mailbox's event, if any, and the mailbox is cleared.
        # Every mailbox event was recorded on F, so the wait orders nothing F did not already know: no join.
        consume = self.d.And(act, p.consume_mailbox_before)
        holds = select(owner, self.mb_kind) != MB_NONE
        self.op(self.d.And(consume, holds), lambda env: env.consume_wait(step, i))
        self.op(consume, lambda env: env.consume_clear(step, i))
        self.set_mailbox(owner, consume, MB_NONE)
        self.op(resolving, lambda env: env.mark_resolve(step, i))

        # Metadata prep, on F or on P after P.wait_stream(S) (#streams).
        on_plan = self.d.And(act, p.on_plan())
        self.op(on_plan, lambda env: env.wait_stream("P", "S", env.runner_name(step, i)))
        # P.wait_stream(S) is issued (and emitted) but adds nothing kept: S knows no more of P than P itself.
        for loc in self.locs:
            g = self.d.And(act, p.reads[(0, loc)])
            for stream, sg in (("P", self.d.And(g, p.on_plan())), ("F", self.d.And(g, self.d.Not(p.on_plan())))):
                self.kernel_read(sg, stream, step, i, SITES[0].value, loc,
                                 lambda env, loc=loc, stream=stream: env.read(stream, loc, step, i, SITES[0].value))
        join_before = self.d.And(on_plan, p.plan_join == JOIN_BEFORE)
        self.op(join_before, lambda env: env.wait_stream("F", "P", env.runner_name(step, i)))
        self.join_stream("F", "P", join_before, f"s{step}p{i}.join_before")  # R7

        self.prog.clears_before_resolve[(step, i)] = ctr
        self.op(ctr, lambda env: env.clear_before_resolve(step, i))
        self.set_mailbox(owner, ctr, MB_NONE)
        self.op(self.d.Or(ctr, prefilling), lambda env: env.mark_resolve(step, i))

        # Out-of-graph publish right after the prep: PRE_REPLAY of a resolving runner, the draft-extend runner's
        # unconditional one, or prefill's (eager or graph, behind its gates).
        pre_pub = self.d.Or(
            self.d.And(graph, self.d.Or(policy == ALWAYS_PRE, self.d.And(by_rule, resolved == PRE))),
            self.d.And(prefilling, resolved == PRE, cfg.prefill_publish_allowed, self.d.Not(cfg.hierarchical_cache)),
        )
        self.ring_publish(pre_pub, owner, step, i, PRE)

        eager = self.d.And(act, p.execution == EAGER)
        for s in (1, 2):  # eager: no graph, no marker
            for loc in self.locs:
                self.kernel_read(self.d.And(eager, p.reads[(s, loc)]), "F", step, i, SITES[s].value, loc,
                                 lambda env, loc=loc, s=s: env.read("F", loc, step, i, SITES[s].value))

        # The launch (R5, R6): in-graph prep reads, the marker's record node, the kernels after it; a breakable
        # graph launches one graph per segment, the marker in the first, later segments re-reading after it.
        self.op(graph, lambda env: env.replays(step, i))
        for loc in self.locs:
            self.kernel_read(self.d.And(graph, p.reads[(1, loc)]), "F", step, i, SITES[1].value, loc, lambda env: None)
        marker_on = self.d.And(graph, select(p.runner, [r.marker for r in cfg.runners]))
        for g in range(self.R):
            hit = self.d.And(marker_on, p.runner == g)
            self.mk_snap[g] = {y: self.fresh(self.d.If(hit, self.clock["F"][y], self.mk_snap[g][y]), f"mk{g}.{y}") for y in SNAP}
            if self.knowing:
                self.mk_know[g] = {y: self._k_update(hit, self.know["F"][y], self.mk_know[g][y]) for y in SNAP}
            self.mk_valid[g] = self.fresh(self.d.Or(self.mk_valid[g], hit), f"mk{g}.valid")
        for seg in range(self.cfg.bounds.segments):
            launched = graph if seg == 0 else self.d.And(graph, p.execution == BREAKABLE, p.segments > seg)
            for loc in self.locs:
                self.kernel_read(self.d.And(launched, p.reads[(2, loc)]), "F", step, i, SITES[2].value, loc, lambda env: None)
        in_pub = self.d.And(by_rule, resolved == IN)
        self.op(in_pub, lambda env: env.publish_marker(step, i))
        self.set_mailbox(owner, in_pub, MB_MARKER, marker=p.runner)

        join_after = self.d.And(on_plan, p.plan_join == JOIN_AFTER)
        self.op(join_after, lambda env: env.wait_stream("F", "P", env.runner_name(step, i)))
        self.join_stream("F", "P", join_after, f"s{step}p{i}.join_after")
        for loc in self.locs:
            self.kernel_read(self.d.And(act, p.reads[(3, loc)]), "F", step, i, SITES[3].value, loc,
                             lambda env, loc=loc: env.read("F", loc, step, i, SITES[3].value))
        post_pub = self.d.And(by_rule, resolved == POST)
        self.ring_publish(post_pub, owner, step, i, POST)
        self.prog.publishes[(step, i)] = self.d.Or(pre_pub, in_pub, post_pub)
        # UNKNOWN publishes nothing: the mailbox keeps what it held (#unknown-publishes-nothing).

        for loc in self.locs:  # the worker's reads after the runner returns (#ngram-clears-the-mailbox)
            self.kernel_read(self.d.And(act, p.worker[loc]), "F", step, i, WORKER_SITE, loc,
                             lambda env, loc=loc: env.read("F", loc, step, i, WORKER_SITE, by=BY_WORKER))
        clear = self.d.And(act, p.clear_mailbox_after)
        self.op(clear, lambda env: env.clear_mailbox(step, i))
        self.set_mailbox(owner, clear, MB_NONE)

    def ring_publish(self, guard, owner, step: int, i: int, how: int) -> None:
        """Record the next ring event on F (R1) and put it in the mailbox; last write wins (#publishing)."""
        self.op(guard, lambda env: env.publish_ring(step, i, how))
        self.set_mailbox(owner, guard, MB_RING, snap=dict(self.clock["F"]),
                         snap_know=dict(self.know["F"]) if self.knowing else None)

    def run_batch(self, step: int) -> None:
        self.op(self.d.BoolVal(True), lambda env: env.run_batch_begin(step))
        self.op(self.d.BoolVal(True), lambda env: env.wait_stream("F", "S", BY_WORKER))
        self.forget(step)
        self.join_stream("F", "S", self.d.BoolVal(True), f"rb{step}")  # each run_batch begins F.wait_stream(S)
        for i, p in enumerate(self.cfg.phases[step - 1]):
            self.phase(step, i, p)
        self.op(self.d.BoolVal(True), lambda env: env.run_batch_return(step))

    def run(self) -> Program:
        """The event loops as ``reference.scheduler.Scheduler.run`` states them (docs/sglang-0.5.23.md#13-every-event-loop,
        docs/sglang-0.5.23.md#72-disaggregated-prefill-overlap-loop-the-deferred-barrier)."""
        cfg, d = self.cfg, self.d
        overlap, normal = cfg.loop == LOOP_OVERLAP, cfg.loop == LOOP_NORMAL
        pp, disagg = cfg.loop == LOOP_PP, cfg.loop == LOOP_DISAGG_PREFILL
        lt = d.And(overlap, cfg.loop_top())
        k = cfg.bounds.steps
        self.writes(d.Not(lt), 1, lambda env: write_by(WritePurpose.PREPARE))
        for n in range(1, k + 1):
            pub = cfg.publisher[n - 1]
            if n == 1:
                self.barrier(lt, 0, None)
                self.writes(lt, 1, lambda env: write_by(WritePurpose.PREPARE))
            self.run_batch(n)
            # The non-overlap loop: the forward ran on S, so S is ordered after all of F (R7).
            self.op(normal, lambda env: env.wait_stream("S", "F", BY_FORWARD_ON_S))
            self.join_stream("S", "F", normal, f"normal{n}")
            # Pipeline parallel: an event recorded on F now (R1), the host synchronizes on it (R8).
            self.op(pp, lambda env, n=n: env.forward_done(n))
            self.join_stream("S", "F", pp, f"hostsync{n}")
            # Disaggregated prefill: the fine barrier at once when the publisher's mailbox holds an event (read
            # without clearing it); otherwise result processing first, then the coarse barrier.
            holds = select(self.fresh(self.owner_of(pub), f"peek{n}.owner"), self.mb_kind) != MB_NONE
            deferred = self.fresh(d.And(disagg, cfg.barrier, d.Not(d.And(holds, d.Not(cfg.force_coarse)))),
                                  f"deferred{n}")
            self.barrier(d.Or(d.And(overlap, d.Not(lt)), d.And(disagg, d.Not(deferred))), n, pub)
            unfenced = d.And(d.Or(lt, deferred), cfg.results_touch_inflight)

            def why(env, lt=lt, deferred=deferred):
                if env.b(lt):
                    return write_by(WritePurpose.PROCESS_RESULTS)
                if env.b(deferred):
                    return write_by(WritePurpose.PROCESS_RESULTS_UNFENCED)
                return write_by(WritePurpose.PROCESS_AND_PREPARE)

            first = self.writes(d.Or(unfenced, d.And(d.Not(lt), d.Not(deferred))), n + 1, why)
            later = d.Or(deferred, lt) if n < k else deferred
            self.barrier(later, n, pub)
            second = self.writes(later, n + 1, lambda env: write_by(WritePurpose.PREPARE))
            for loc in self.locs:
                self.prog.first_writes[(n, loc)] = [first[loc], second[loc]]
        self.prog.state_out = self.state()
        return self.prog
