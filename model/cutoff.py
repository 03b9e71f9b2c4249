"""The pieces of a step, each executed symbolically from an arbitrary state: the argument for any number of phases,
runners, steps and segments.

A step of the host program (``model.program``) is: ``run_batch`` begins (F waits on S), its phases run one after
another, ``run_batch`` returns, the scheduler applies the barrier and writes. The pieces are not written here: they
are ``program._Builder``'s own ``run`` (``Sliced``, a subclass that only observes), cut at its boundaries (``BATCH``:
run_batch's entry; ``PHASE``/``AFTER``: a phase's entry and exit; ``END``: the run's end). A piece starts at a
boundary where state (clocks, every mailbox, every marker's latest record) and summary are replaced by free
variables and stops at the next:

- ``before_first_step``: from the initial state to run_batch(1) (the first prepare writes, the loop-top barrier).
- ``step_begin``: the start of ``run_batch`` (F.wait_stream(S)).
- ``one_phase``: ONE phase with arbitrary knobs, runner and declaration, a breakable graph's second-segment read
  stretched over any number of later segments (``stretch_read``, ``stretch_closed``).
- ``step_end``: from ``run_batch``'s last phase to the next run_batch (or the end of the run): the event loop's
  ordering of S after F, the barrier (at once or deferred), the writes that can be the first after the step.

What a step's reads contribute to a race is summarised by ``maxread``: per stream (F, P) and location, the largest
stream position of a read issued so far in the step (0: none). A read on stream X races the first write iff the
write's clock knows less of X than the read's position, so some read of the step races iff the write knows less of
X than ``maxread[X]``: the race depends on the reads only through the summary (``race_of_summary``; ``fold_exact``
states the fold of one phase).

Runners are indices compared only for equality (``symconfig.select``), so the program is data-independent in them;
``touched`` states what one phase can change, ``renamed_*`` a renaming, ``projected_*`` dropping a runner that plays
no role, which ``proofs.cutoff`` checks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import z3

from .program import KEEP, MB_MARKER, MB_NONE, MB_RING, SNAP, Program, State, _Builder
from .symconfig import BREAKABLE, EAGER, Bounds, SymConfig, select

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
    reads: list  # the reads issued between its two boundaries, in host order

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


# -- the pieces: build's own run, observed at the boundaries between them ----------------------------------------------

#: Boundaries of a run: (BATCH, n) as run_batch(n) is entered, (PHASE, n, i) and (AFTER, n, i) as phase i of step n
#: is entered and left, (END,) once ``run`` has returned.
BATCH, PHASE, AFTER, END = "batch", "phase", "after", "end"


class _Stop(Exception):
    """Raised at the boundary a piece ends at: the rest of the run is not built."""


def _segment_guard(b: _Builder, p, seg: int, loc: str):
    """The guard ``_Builder.phase`` gives the read at the last site of segment ``seg`` >= 1 of a breakable graph."""
    d = b.d
    graph = d.And(p.active, p.execution != EAGER)
    return d.And(d.And(graph, p.execution == BREAKABLE, p.segments > seg), p.reads[(2, loc)])


def stretch_read(b: _Builder, tag: str, broken: bool = False):
    """Stretch the read ``b`` issued last (on F): when issued, it stands for one or more reads in a row, F's position
    and the read's position advancing by a free ``extra`` >= 0 more. Returns ``extra``. ``broken``: F advances but
    the read keeps its position (which is not a run of reads)."""
    r = b.prog.reads[-1]
    extra = z3.Int(f"{b.tag}{tag}.extra#{len(b.prog.reads)}", b.ctx)
    b.prog.constraints.append(extra >= 0)
    pos = b.fresh(r.pos + b.d.If(r.guard, extra, 0), f"{tag}.stretched")
    b.clock["F"] = {**b.clock["F"], "F": pos}
    if not broken:
        r.pos = pos
    return extra


class Sliced(_Builder):
    """``program._Builder`` itself (``build``'s ``run``, ``run_batch`` and ``phase`` issue every operation),
    observed at the boundaries between a step's pieces. At each boundary it records the state and the step's read
    summary (empty as run_batch begins, raised by each phase's reads with ``fold_reads``); at the boundaries in
    ``free`` it first replaces both by free variables (the piece after it starts from an arbitrary state); at
    ``stop`` the run stops. With ``stretch``, the read at the last site of a breakable graph's second segment stands
    for the reads of every later segment too (``stretch_read``): the bounded loop over 2 segments then covers any
    number."""

    def __init__(self, cfg: SymConfig, tag: str, free=(), stop=None, stretch: str | None = None):
        super().__init__(cfg, tag, havoc=False)
        self.free, self.stop, self.stretch = set(free), stop, stretch
        self.summary = {(x, loc): self.d.IntVal(0) for x in READ_STREAMS for loc in self.locs}
        self.at: dict = {}  # boundary -> (State, summary, number of reads issued before it)
        self.folded = 0  # reads folded into a summary
        self.extras: list = []  # the stretches' free amounts, in issue order
        self._phase = None

    def boundary(self, key) -> None:
        if key in self.free:
            name = "".join(map(str, key))
            fresh = _Builder(self.cfg, f"{self.tag}{name}", havoc=True)
            for f in dataclasses.fields(State):
                setattr(self, f.name, getattr(fresh, f.name))
            self.summary = summary_vars(self.cfg, f"{self.tag}{name}.")
        self.at[key] = (self.state(), dict(self.summary), len(self.prog.reads))
        if key == self.stop:
            raise _Stop

    def run_batch(self, step: int) -> None:
        self.boundary((BATCH, step))
        self.summary = {k: self.d.IntVal(0) for k in self.summary}
        super().run_batch(step)

    def phase(self, step: int, i: int, p) -> None:
        self.boundary((PHASE, step, i))
        n = len(self.prog.reads)
        self._phase = p
        super().phase(step, i, p)
        self._phase = None
        self.folded += len(self.prog.reads) - n
        self.summary = fold_reads(self.summary, self.prog.reads[n:], self.d)
        self.boundary((AFTER, step, i))

    def kernel_read(self, guard, stream, step, phase, site, loc, emit) -> None:
        super().kernel_read(guard, stream, step, phase, site, loc, emit)
        if self.stretch and self._phase is not None and stream == "F" \
                and guard.eq(_segment_guard(self, self._phase, 1, loc)):
            self.extras.append(stretch_read(self, f"s{step}p{phase}.seg", broken=self.stretch == "broken"))


def sliced(cfg: SymConfig, tag: str, free=(), stop=None, stretch: str | None = None) -> Sliced:
    """Run ``_Builder.run`` over ``cfg`` as ``Sliced``; up to ``stop``, or to its end (boundary (END,)). Raises if
    ``stop`` or a boundary in ``free`` is never reached, or (a whole run) if a read was issued outside every phase
    (the summaries would not stand for it), or a stretched run stretched no read of some phase: the builder is not
    shaped as this module reads it."""
    b = Sliced(cfg, tag, free, stop, stretch)
    try:
        b.run()
        b.boundary((END,))
    except _Stop:
        pass
    missing = [k for k in (*sorted(free), stop) if k is not None and k not in b.at]
    if missing:
        raise RuntimeError(f"the run never reached {missing[0]}")
    if stop is None and b.folded != len(b.prog.reads):
        raise RuntimeError("a read was issued outside every phase")
    phases_run = sum(1 for k in b.at if k[0] == AFTER)
    if stretch and len(b.extras) != phases_run * len(cfg.bounds.locations):
        raise RuntimeError("a phase's second-segment read was not found")
    return b


def _piece(b: Sliced, start, stop) -> Piece:
    s_in, m_in, n_in = b.at[start]
    s_out, m_out, n_out = b.at[stop]
    return Piece(b.cfg, b.prog, s_in, s_out, m_in, m_out, b, b.prog.reads[n_in:n_out])


def step_begin(cfg: SymConfig, tag: str = "begin") -> Piece:
    """``run_batch`` begins: from run_batch's entry (a free state) to its first phase's, the summary emptied."""
    return _piece(sliced(cfg, tag, free={(BATCH, 1)}, stop=(PHASE, 1, 0)), (BATCH, 1), (PHASE, 1, 0))


def one_phase(cfg: SymConfig, tag: str = "phase", stretch: str | None = "yes") -> Piece:
    """Phase 0 of step 1 of ``cfg`` (any knobs) from a free state and a free summary, its second segment's read
    stretched over any number of segments (``stretch=None``: as ``build`` issues it)."""
    return _piece(sliced(cfg, tag, free={(PHASE, 1, 0)}, stop=(AFTER, 1, 0), stretch=stretch),
                  (PHASE, 1, 0), (AFTER, 1, 0))


def end_bounds(bounds: Bounds, last: bool = False) -> Bounds:
    """The bounds ``step_end`` is run over: the step and, unless it is the last, the next one's entry."""
    return dataclasses.replace(bounds, steps=1 if last else 2)


def step_end(cfg: SymConfig, tag: str = "end", last: bool = False) -> tuple[Piece, dict]:
    """``run_batch`` has returned: from its last phase's exit (a free state and summary) to the next run_batch's
    entry (``last``: the end of the run), as ``_Builder.run`` issues it: the event loop's ordering and barrier for
    the step's publisher and the writes that can be the first of every location after the step (location -> the
    candidate ``WriteSlot``s in host order). ``cfg`` is over ``end_bounds(..., last)``."""
    if cfg.bounds.steps != (1 if last else 2):
        raise ValueError("step_end runs over end_bounds(bounds, last)")
    after = (AFTER, 1, cfg.bounds.phases - 1)
    stop = (END,) if last else (BATCH, 2)
    b = sliced(cfg, tag, free={after}, stop=None if last else stop)
    return _piece(b, after, stop), {loc: b.prog.first_writes[(1, loc)] for loc in cfg.bounds.locations}


def before_first_step(cfg: SymConfig, tag: str = "base") -> Piece:
    """From the initial state to run_batch(1)'s entry: the first step's prepare writes and, with the barrier at the
    loop top, the loop-top barrier with nothing published."""
    b = sliced(cfg, tag, stop=(BATCH, 1))
    return Piece(cfg, b.prog, b.prog.state_in, b.at[(BATCH, 1)][0], {}, {}, b, [])


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


def projected_config(a: SymConfig, z: SymConfig) -> list:
    """``z`` is ``a`` without ``a``'s last runner D, which plays none of the roles a piece reads of a configuration:
    not the runner of a phase of the step the pieces run (the first) or its owner, not that step's publisher or its
    owner. Every kept runner keeps its knobs; an owner that is D (nothing reads it) points at runner 0 instead.
    Phases, publishers and the other knobs are equal."""
    D = z.bounds.runners
    if a.bounds.runners != D + 1:
        raise ValueError("a projection drops one runner")
    owner = lambda i: select(i, [r.owner for r in a.runners])  # noqa: E731
    out = []
    for p, q in zip(a.runners, z.runners):
        out += [q.owner == z3.If(p.owner == D, 0, p.owner), *[q.knobs[k] == v for k, v in p.knobs.items()]]

    def rest(v):
        return [v.runner, v.active, v.mode, v.decl, *v.knobs.values(), *v.reads.values(), *v.worker.values()]

    for step_a, step_z in zip(a.phases, z.phases):
        for p, q in zip(step_a, step_z):
            out += [x == y for x, y in zip(rest(p), rest(q))]
    out += [p.runner != D for p in a.phases[0]] + [owner(p.runner) != D for p in a.phases[0]]
    out += [q == p for p, q in zip(a.publisher, z.publisher)] + [a.publisher[0] != D, owner(a.publisher[0]) != D]
    out += [x == y for x, y in zip([*a.knobs.values(), *a.written.values(), *a.is_last],
                                   [*z.knobs.values(), *z.written.values(), *z.is_last])]
    return out


def projected_state(a: SymConfig, s: State, t: State, marker_role: bool = True) -> list:
    """``t`` is ``s`` without its last runner D: clocks equal, every kept runner's mailbox and marker equal, a marker
    a mailbox holds that is D pointing at runner 0 instead. D is not the marker the (first step's) publisher's
    owner's mailbox holds (``marker_role=False`` leaves that role out, which is not enough)."""
    D = len(t.mb_kind)
    out = [s.clock[x][y] == t.clock[x][y] for x in KEEP for y in KEEP[x]]
    for o in range(D):
        out += [t.mb_kind[o] == s.mb_kind[o], t.mb_marker[o] == z3.If(s.mb_marker[o] == D, 0, s.mb_marker[o]),
                t.mk_valid[o] == s.mk_valid[o]]
        out += [t.mb_snap[o][y] == s.mb_snap[o][y] for y in SNAP] + [t.mk_snap[o][y] == s.mk_snap[o][y] for y in SNAP]
    if marker_role:
        owners = [r.owner for r in a.runners]
        out.append(select(select(a.publisher[0], owners), s.mb_marker) != D)
    return out


def untouched(s: State, z: State, o: int) -> z3.BoolRef:
    """Runner ``o``'s mailbox and marker are the same in ``s`` and ``z``, and F knows at least as much in ``z``."""
    return z3.And(s.mb_kind[o] == z.mb_kind[o], s.mb_marker[o] == z.mb_marker[o], s.mk_valid[o] == z.mk_valid[o],
                  *[s.mb_snap[o][y] == z.mb_snap[o][y] for y in SNAP],
                  *[s.mk_snap[o][y] == z.mk_snap[o][y] for y in SNAP],
                  *[s.clock["F"][y] <= z.clock["F"][y] for y in SNAP])


def same_state(a: State, z: State) -> z3.BoolRef:
    out = [a.clock[x][y] == z.clock[x][y] for x in KEEP for y in KEEP[x]]
    for o in range(len(a.mb_kind)):
        out += [a.mb_kind[o] == z.mb_kind[o], a.mb_marker[o] == z.mb_marker[o], a.mk_valid[o] == z.mk_valid[o]]
        out += [a.mb_snap[o][y] == z.mb_snap[o][y] for y in SNAP] + [a.mk_snap[o][y] == z.mk_snap[o][y] for y in SNAP]
    return z3.And(*out)


def composed(cfg: SymConfig, tag: str = "pieces") -> tuple[Piece, z3.BoolRef]:
    """``build``'s run of ``cfg`` (from the initial state), observed at every boundary: (the piece, some step's
    summary at its last phase's exit races the step's first write). Raises if a read was issued outside every phase."""
    b = sliced(cfg, tag)
    last = cfg.bounds.phases - 1
    races = [race_of_summary({loc: b.prog.first_writes[(n, loc)] for loc in cfg.bounds.locations},
                             b.at[(AFTER, n, last)][1], b.d) for n in range(1, cfg.bounds.steps + 1)]
    return _piece(b, (BATCH, 1), (END,)), b.d.Or(*races)


def fold_exact(piece: Piece, bound: dict, after: dict | None = None) -> z3.BoolRef:
    """The summary after ``piece`` is the largest position of its issued reads and the summary before: for each
    (stream, location) and any ``bound[key]``, the summary after exceeds it iff the summary before does or an issued
    read of the piece on that stream and location lies above it."""
    after = piece.max_out if after is None else after
    out = []
    for key, v in bound.items():
        reads = [r for r in piece.reads if (r.stream, r.location) == key]
        out.append((v < after[key]) == z3.Or(v < piece.max_in[key], *[z3.And(r.guard, v < r.pos) for r in reads]))
    return z3.And(*out)


def stretch_closed(cfg: SymConfig, tag: str = "seg", broken: bool = False) -> list:
    """One more segment's read after a stretched one is a stretch of the first: from a free state and summary, a
    stretched read (guard ``g1``) then one read issued by ``_Builder.kernel_read`` with a guard ``g2`` implying
    ``g1`` (a later segment is launched only if the earlier is) leave the state and summary a single stretched read
    with guard ``g1`` leaves, its extra amount the first's plus the second read. Returns the constraints of both
    runs and the claim, for a solver to refute its negation."""
    loc = cfg.bounds.locations[0]
    g1, g2 = z3.Bool(f"{tag}.g1", cfg.ctx), z3.Bool(f"{tag}.g2", cfg.ctx)
    site = "seg"
    out, ends = [z3.Implies(g2, g1)], []
    for name, more in (("two", True), ("one", False)):
        b = _Builder(cfg, f"{tag}.{name}", havoc=True)
        m = summary_vars(cfg, f"{tag}.{name}.")
        b.kernel_read(g1, "F", 1, 0, site, loc, lambda env: None)
        extra = stretch_read(b, "seg", broken)
        if more:
            b.kernel_read(g2, "F", 1, 0, site, loc, lambda env: None)
        ends.append((b, m, fold_reads(m, b.prog.reads, b.d), extra))
        out += b.prog.constraints
    (b2, m2, f2, e2), (b1, m1, f1, e1) = ends
    out += [same_state(b2.prog.state_in, b1.prog.state_in), *[m2[k] == m1[k] for k in m2],
            e1 == e2 + z3.If(g2, 1, 0)]
    claim = z3.And(same_state(b2.state(), b1.state()), *[f2[k] == f1[k] for k in f2])
    return out, claim


__all__ = ["AFTER", "BATCH", "END", "PHASE", "READ_STREAMS", "RUNNER_CUTOFF", "Piece", "Sliced", "after_last_reader",
           "before_first_step", "before_last_reader", "composed", "covers", "end_bounds", "fold_exact", "fold_reads",
           "no_reads", "one_phase", "piece_bounds", "projected_config", "projected_state", "published_for",
           "race_of_summary", "reads_in_past", "renamed_config", "renamed_state", "same_state", "sliced", "step_begin",
           "step_end", "stretch_closed", "stretch_read", "summary_vars", "touched", "untouched"]
