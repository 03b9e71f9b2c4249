"""The pieces of a step, each executed symbolically from an arbitrary state: the argument for any number of phases
and runners.

A step of the host program (``model.program``) is: ``run_batch`` begins (F waits on S), its phases run one after
another, ``run_batch`` returns, the scheduler applies the barrier and writes. This module executes each piece on its
own, from a state whose clocks, mailboxes and markers are free variables (``program.build(..., havoc=True)``'s
state), with the same builder code ``build`` uses, so the pieces are the program's own steps, not a second encoding:

- ``step_begin``: the start of ``run_batch`` (F.wait_stream(S)).
- ``one_phase``: ONE phase with arbitrary knobs, runner and declaration.
- ``step_end``: what the event loop does after ``run_batch`` returns (the non-overlap loop's and pipeline parallel's
  ordering of S after F, the barrier, at once or deferred past result processing), the scheduler's writes that can be
  the first after the step (the ones a race is against) and, when the barrier sits at the loop top, the loop-top
  barrier and the next step's write.

What a step's reads contribute to a race is summarised by ``maxread``: per stream (F, P) and location, the largest
stream position of a read issued so far in the step (0: none). A read on stream X races the first write iff the
write's clock knows less of X than the read's position, so some read of the step races iff the write knows less of
X than ``maxread[X]``: the race depends on the reads only through the summary (``race_of_summary``; the
``composition`` check holds the summary and the pieces equal to ``build`` on a bounded step).

Runners are indices compared only for equality (``symconfig.select``), so the program is data-independent in them;
``touched`` states what one phase can change (its runner's marker, its runner's owner's mailbox), which
``proofs.cutoff`` checks.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

from fencecheck.trace import WritePurpose, write_by

from .program import KEEP, MB_MARKER, MB_NONE, MB_RING, SNAP, Program, State, _Builder
from .symconfig import LOOP_DISAGG_PREFILL, LOOP_NORMAL, LOOP_OVERLAP, LOOP_PP, Bounds, SymConfig, select

#: The streams reads are issued on.
READ_STREAMS = ("F", "P")
#: Runners every per-piece query is checked with: the most distinct runners one conjunct of a piece's claim mentions
#: (the publisher, its owner, the marker in its mailbox, the phase's runner, that runner's owner, and the runner whose
#: own mailbox or marker the conjunct speaks of). See ``proofs.cutoff`` and docs/proofs.md.
RUNNER_CUTOFF = 6


@dataclass
class Piece:
    """One piece executed from a free state: its configuration, program (constraints defining the fresh terms),
    the states before and after, and the read summary before and after."""

    cfg: SymConfig
    prog: Program
    state_in: State
    state_out: State
    max_in: dict
    max_out: dict
    builder: _Builder

    @property
    def constraints(self) -> list:
        return [*self.cfg.domain, *self.prog.constraints]


def piece_bounds(runners: int = RUNNER_CUTOFF, locations: tuple[str, ...] = ("req_to_token",)) -> Bounds:
    """One step of one phase: the configuration a piece is executed over."""
    return Bounds(steps=1, phases=1, runners=runners, locations=locations)


def summary_vars(cfg: SymConfig, tag: str) -> dict:
    """Free read summary: (stream, location) -> an integer."""
    return {(x, loc): z3.Int(f"{tag}maxread.{x}.{loc}", cfg.ctx) for x in READ_STREAMS for loc in cfg.bounds.locations}


def fold_reads(max_in: dict, reads, d) -> dict:
    """The summary after ``reads`` (``ReadSlot``s in host order): each issued read raises its stream's maximum."""
    out = dict(max_in)
    for r in reads:
        key = (r.stream, r.location)
        out[key] = d.If(d.And(r.guard, r.pos > out[key]), r.pos, out[key])
    return out


def _start(cfg: SymConfig, tag: str) -> tuple[_Builder, dict]:
    b = _Builder(cfg, tag, havoc=True)
    return b, summary_vars(cfg, tag + ".")


def _piece(cfg, b: _Builder, max_in, max_out) -> Piece:
    return Piece(cfg, b.prog, b.prog.state_in, b.state(), max_in, max_out, b)


# What the host program issues between the phases, as ``program._Builder.run`` and ``run_batch`` issue it; ``composed``
# strings these together with the phases, and the composition check holds that equal to ``build``.


def _loops(b: _Builder):
    """The event loop as ``_Builder.run`` reads it: (overlap, normal, pp, disagg_prefill, loop-top barrier)."""
    cfg, d = b.cfg, b.d
    overlap = cfg.loop == LOOP_OVERLAP
    return overlap, cfg.loop == LOOP_NORMAL, cfg.loop == LOOP_PP, cfg.loop == LOOP_DISAGG_PREFILL, \
        d.And(overlap, cfg.loop_top())


def _before_first_step(b: _Builder) -> None:
    """Before the loop: the first step's prepare writes, or with the barrier at the loop top, the loop-top barrier
    (nothing published yet) and then those writes."""
    lt = _loops(b)[4]
    b.writes(b.d.Not(lt), 1, lambda env: write_by(WritePurpose.PREPARE))
    b.barrier(lt, 0, None)
    b.writes(lt, 1, lambda env: write_by(WritePurpose.PREPARE))


def _begin(b: _Builder, step: int) -> None:
    b.join("F", dict(b.clock["S"]), b.d.BoolVal(True), f"rb{step}")  # run_batch begins: F.wait_stream(S)


def _phase(b: _Builder, step: int, i: int, summary: dict) -> dict:
    n = len(b.prog.reads)
    b.phase(step, i, b.cfg.phases[step - 1][i])
    return fold_reads(summary, b.prog.reads[n:], b.d)


def _end(b: _Builder, step: int, last: bool) -> dict:
    """run_batch has returned, in each event loop: the non-overlap loop's S.wait_stream(F), pipeline parallel's host
    synchronisation, the barrier (at once, or deferred past result processing in the disaggregated-prefill loop when
    the publisher's mailbox holds no event or coarse is forced), result processing's and the next step's writes,
    and unless ``last`` the loop-top barrier and the next step's write. Returns location -> the write slots that can
    be the first write of the location (``Program.first_writes``), in host order."""
    d = b.d
    overlap, normal, pp, disagg, lt = _loops(b)
    pub = b.cfg.publisher[step - 1]
    b.join("S", dict(b.clock["F"]), normal, f"normal{step}")  # R7
    b.join("S", dict(b.clock["F"]), pp, f"hostsync{step}")  # R1, R8
    holds = select(b.fresh(b.owner_of(pub), f"peek{step}.owner"), b.mb_kind) != MB_NONE
    deferred = b.fresh(d.And(disagg, b.cfg.barrier, d.Not(d.And(holds, d.Not(b.cfg.force_coarse)))),
                       f"deferred{step}")
    b.barrier(d.Or(d.And(overlap, d.Not(lt)), d.And(disagg, d.Not(deferred))), step, pub)
    unfenced = d.And(d.Or(lt, deferred), b.cfg.results_touch_inflight)

    def why(env):
        if env.b(lt):
            return write_by(WritePurpose.PROCESS_RESULTS)
        if env.b(deferred):
            return write_by(WritePurpose.PROCESS_RESULTS_UNFENCED)
        return write_by(WritePurpose.PROCESS_AND_PREPARE)

    first = b.writes(d.Or(unfenced, d.And(d.Not(lt), d.Not(deferred))), step + 1, why)
    later = deferred if last else d.Or(deferred, lt)
    b.barrier(later, step, pub)
    second = b.writes(later, step + 1, lambda env: write_by(WritePurpose.PREPARE))
    return {loc: [first[loc], second[loc]] for loc in first}


def step_begin(cfg: SymConfig, tag: str = "begin") -> Piece:
    """``run_batch`` begins: F waits on S, before the first phase."""
    b, m = _start(cfg, tag)
    _begin(b, 1)
    return _piece(cfg, b, m, {k: b.d.IntVal(0) for k in m})


def one_phase(cfg: SymConfig, tag: str = "phase") -> Piece:
    """Phase 0 of step 1 of ``cfg`` (one phase, any knobs) from a free state and a free summary."""
    b, m = _start(cfg, tag)
    return _piece(cfg, b, m, _phase(b, 1, 0, m))


def step_end(cfg: SymConfig, tag: str = "end") -> tuple[Piece, dict]:
    """``run_batch`` has returned (``_end`` of a step that is not the last): the event loop's ordering and barrier
    for the step's publisher, and the writes that can be the first of every location after the step (location ->
    the candidate ``WriteSlot``s in host order), up to the loop-top barrier and write of the next step."""
    b, m = _start(cfg, tag)
    first = _end(b, 1, last=False)
    return _piece(cfg, b, m, m), first


def race_of_summary(first: dict, summary: dict, d) -> z3.BoolRef:
    """Some read the summary stands for races the first write of its location: an issued candidate (``first``:
    location -> the candidates in host order, as ``Program.race_of`` takes them) not ordered after it."""
    return d.Or(*[d.And(w.guard, w.vc[x] < summary[(x, loc)])
                  for loc, ws in first.items() for w in ws for x in READ_STREAMS])


# -- the invariants --------------------------------------------------------------------------------------------------


def reads_in_past(state: State, summary: dict, streams=READ_STREAMS) -> z3.BoolRef:
    """Every summarised read lies in the past of F: its position is at most what F knows of its stream (reads on P
    are joined into F by the end of their phase). ``streams`` narrows the second half to some streams."""
    c = state.clock
    return z3.And(*[z3.And(v >= 0, *([v <= c["F"][x]] if x in streams else [])) for (x, _), v in summary.items()])


def covers(snap: dict, summary: dict) -> z3.BoolRef:
    return z3.And(*[snap[x] >= v for (x, _), v in summary.items()])


def published_for(cfg: SymConfig, state: State, summary: dict, publisher) -> z3.BoolRef:
    """The mailbox the barrier will take (the publisher's owner's) is empty (the barrier waits coarsely), or holds a
    ring event whose snapshot covers every summarised read, or a recorded marker whose latest record covers them."""
    owner = select(publisher, [r.owner for r in cfg.runners])
    kind = select(owner, state.mb_kind)
    ring = {y: select(owner, [s[y] for s in state.mb_snap]) for y in SNAP}
    marker = select(owner, state.mb_marker)
    mark = {y: select(marker, [s[y] for s in state.mk_snap]) for y in SNAP}
    return z3.Or(kind == MB_NONE,
                 z3.And(kind == MB_RING, covers(ring, summary)),
                 z3.And(kind == MB_MARKER, select(marker, state.mk_valid), covers(mark, summary)))


def before_last_reader(cfg: SymConfig, state: State, summary: dict, streams=READ_STREAMS) -> z3.BoolRef:
    """The invariant before (and through) the phases up to the step's last reading phase."""
    return z3.And(state.invariant(cfg.bounds.runners), reads_in_past(state, summary, streams))


def after_last_reader(cfg: SymConfig, state: State, summary: dict, streams=READ_STREAMS) -> z3.BoolRef:
    """The invariant after the step's last reading phase: the above, and the publisher's mailbox covers the reads."""
    return z3.And(before_last_reader(cfg, state, summary, streams),
                  published_for(cfg, state, summary, cfg.publisher[0]))


def no_reads(summary: dict) -> z3.BoolRef:
    return z3.And(*[v == 0 for v in summary.values()])


def touched(cfg: SymConfig, piece: Piece, owner_only: bool = True) -> z3.BoolRef:
    """Frame of one phase: every mailbox but its runner's owner's, and every marker but its runner's, is unchanged
    (``owner_only=False`` states the weaker-looking claim that only the mailbox indexed by the runner itself may
    change, which mailbox sharing breaks)."""
    p = cfg.phases[0][0]
    a, z = piece.state_in, piece.state_out
    owner = select(p.runner, [r.owner for r in cfg.runners]) if owner_only else p.runner
    out = []
    for o in range(cfg.bounds.runners):
        same_mb = z3.And(a.mb_kind[o] == z.mb_kind[o], a.mb_marker[o] == z.mb_marker[o],
                         *[a.mb_snap[o][y] == z.mb_snap[o][y] for y in SNAP])
        same_mk = z3.And(a.mk_valid[o] == z.mk_valid[o], *[a.mk_snap[o][y] == z.mk_snap[o][y] for y in SNAP])
        out += [z3.Implies(owner != o, same_mb), z3.Implies(p.runner != o, same_mk)]
    return z3.And(*out)


def _image(perm: tuple[int, ...]):
    """The renaming ``perm`` (runner i -> perm[i]) applied to a runner index, symbolic or concrete."""
    return lambda i: select(i, list(perm))


def renamed_config(perm: tuple[int, ...], a: SymConfig, z: SymConfig) -> list:
    """``z`` is ``a`` with its runners renamed by ``perm``: each runner's knobs and owner (renamed) move to its new
    index, each phase's runner and each step's publisher are renamed, everything else is equal."""
    pi = _image(perm)
    out = []
    for x, r in enumerate(a.runners):
        q = z.runners[perm[x]]
        out += [q.owner == pi(r.owner), *[q.knobs[k] == v for k, v in r.knobs.items()]]
    def rest(v):
        return [v.active, v.mode, v.decl, *v.knobs.values(), *v.reads.values(), *v.worker.values()]

    for step_a, step_z in zip(a.phases, z.phases):
        for p, q in zip(step_a, step_z):
            out.append(q.runner == pi(p.runner))
            out += [x == y for x, y in zip(rest(p), rest(q))]
    out += [q == pi(p) for p, q in zip(a.publisher, z.publisher)]
    out += [x == y for x, y in zip([*a.knobs.values(), *a.written.values(), *a.is_last],
                                   [*z.knobs.values(), *z.written.values(), *z.is_last])]
    return out


def renamed_state(perm: tuple[int, ...], a: State, z: State, markers: bool = True) -> z3.BoolRef:
    """``z`` is ``a`` with runners renamed by ``perm``: mailboxes and markers move to their new index, the marker a
    mailbox holds (a runner) is renamed (``markers=False``: left as it was, which is not a renaming), clocks equal."""
    pi = _image(perm)
    out = [a.clock[x][y] == z.clock[x][y] for x in KEEP for y in KEEP[x]]
    for x, y in enumerate(perm):
        out += [z.mb_kind[y] == a.mb_kind[x], z.mb_marker[y] == (pi(a.mb_marker[x]) if markers else a.mb_marker[x]),
                z.mk_valid[y] == a.mk_valid[x]]
        out += [z.mb_snap[y][k] == a.mb_snap[x][k] for k in SNAP] + [z.mk_snap[y][k] == a.mk_snap[x][k] for k in SNAP]
    return z3.And(*out)


def same_state(a: State, z: State) -> z3.BoolRef:
    out = [a.clock[x][y] == z.clock[x][y] for x in KEEP for y in KEEP[x]]
    for o in range(len(a.mb_kind)):
        out += [a.mb_kind[o] == z.mb_kind[o], a.mb_marker[o] == z.mb_marker[o], a.mk_valid[o] == z.mk_valid[o]]
        out += [a.mb_snap[o][y] == z.mb_snap[o][y] for y in SNAP] + [a.mk_snap[o][y] == z.mk_snap[o][y] for y in SNAP]
    return z3.And(*out)


def composed(cfg: SymConfig, tag: str = "pieces") -> tuple[Piece, z3.BoolRef]:
    """Every step of ``cfg`` executed piece by piece, as ``build(cfg, havoc=True)`` executes it, each step's reads
    folded into its summary phase by phase: (the piece, some step's summary races its first write)."""
    b, m = _start(cfg, tag)
    _before_first_step(b)
    races = []
    k = cfg.bounds.steps
    for n in range(1, k + 1):
        _begin(b, n)
        summary = {key: b.d.IntVal(0) for key in m}
        for i in range(cfg.bounds.phases):
            summary = _phase(b, n, i, summary)
        races.append(race_of_summary(_end(b, n, last=n == k), summary, b.d))
    return _piece(cfg, b, m, m), b.d.Or(*races)


__all__ = ["READ_STREAMS", "RUNNER_CUTOFF", "Piece", "after_last_reader", "before_last_reader", "composed", "covers",
           "one_phase", "fold_reads", "no_reads", "piece_bounds", "published_for", "renamed_config", "renamed_state",
           "race_of_summary", "reads_in_past", "same_state", "step_begin", "step_end", "summary_vars", "touched"]
