"""The main theorem for any number of phases, runners, steps and segments: an induction over the phases of a step,
each query one piece of a step (``model.cutoff``: ``build``'s own run cut at its boundaries) executed from an
arbitrary state, with a fixed number of runners that every configuration reduces to.

A step's phases split at its last reading phase L: the phases before it (any number, each may read or not), L itself,
and the phases after it (any number, none reads). The obligation ``unbounded_phases`` checks, each from a free state:

1. base: the run up to the first run_batch ends in the step invariant (``State.invariant``);
2. begin: from the step invariant, ``run_batch``'s start gives the phase invariant with no reads summarised;
3. before: any phase, under the assumptions that concern every phase, keeps the phase invariant (the step invariant,
   and every read summarised lies in F's past);
4. last: the last reading phase, under every assumption, leaves the publisher's mailbox covering the summary;
5. after: any phase that reads nothing keeps that;
6. end, next, end (last step): what the event loop does after ``run_batch`` returns (the barrier at once or deferred,
   or S ordered after F) leaves no write that can be the first after the step racing a summarised read, and the next
   step starts from the step invariant; the same for the run's last step;
7. fold: a phase's summary after it is the largest position of its reads and the summary before (so the summary at
   the end of a step stands for every read of the step: its race is ``build``'s);
8. segments: one more segment's read after a stretched read is a stretched read (so the stretched phase every
   phase query runs covers any number of segments).

``unbounded_runners`` checks the frame of a phase, that the pieces commute with renaming the runners, and that a
runner more that plays no role changes no premise and no claim (docs/proofs.md states the argument). The variants
named by ``Obligation.extra`` break one part on purpose and must get a counterexample.
"""

from __future__ import annotations

import dataclasses

import z3

from fencecheck.model import assumptions as A
from fencecheck.model import cutoff as C
from fencecheck.model.program import _Builder
from fencecheck.model.symconfig import make_config
from fencecheck.verdict import Verdict

#: Assumptions that speak of the step's last reading phase; the others hold of every phase or of the configuration.
LAST_READER = ("named_runner_is_last_reader", "last_reader_resolves", "last_reader_publishes", "worker_reads_cleared")

PHASES = ("base: from the initial state the run reaches the first run_batch in the step invariant",
          "begin: run_batch's start gives the phase invariant, nothing read",
          "before: any phase keeps the phase invariant",
          "last: the last reading phase leaves the publisher's mailbox covering every read of the step",
          "after: a phase that reads nothing keeps the mailbox covering",
          "end: the end of the step (the event loop's barrier or ordering) orders every summarised read before the "
          "first write",
          "next: the next step starts from the step invariant",
          "end (last step): the end of the run's last step orders every summarised read before the first write",
          "fold: a phase's summary after it is the largest position of its issued reads and the summary before",
          "segments: a read of one more segment after a stretched read is a stretched read")
RUNNERS = ("frame: a phase changes only its runner's marker and its runner's owner's mailbox",
           "symmetry (phase, swap): with 7 runners, a phase commutes with swapping two runners",
           "symmetry (phase, rotate): a phase commutes with rotating the runners",
           "symmetry (end, swap): the barrier and the write commute with swapping two runners",
           "symmetry (end, rotate): the barrier and the write commute with rotating the runners",
           "symmetry (last end, swap): so does the end of the run's last step",
           "symmetry (last end, rotate): so does the end of the run's last step",
           "symmetry (begin, swap): so does run_batch's start",
           "symmetry (begin, rotate): so does run_batch's start",
           "symmetry (premises): every assumption holds iff it holds renamed",
           "symmetry (invariants): the step invariant, before and after hold iff they hold renamed",
           "projection (phase): with a 7th runner that plays no role, a phase leaves it alone and does to the other "
           "6 what it does without it",
           "projection (phase premises): before's, last's and after's premises hold with the 7th runner iff without",
           "projection (end): the same for the end of a step and of the run's last step, the candidate first writes "
           "equal",
           "projection (end premises): end's, next's and end (last step)'s premises hold with the 7th runner iff "
           "without",
           "projection (base, begin): so do the run up to the first run_batch and run_batch's start",
           "projection (invariants): the step invariant, before and after hold of a state with the 7th runner iff "
           "without")


def generators(runners: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A transposition and a rotation of ``runners`` indices: together they generate every renaming."""
    return (1, 0, *range(2, runners)), (*range(1, runners), 0)


def per_phase(names) -> tuple[str, ...]:
    """``names`` less those that speak of the last reading phase. An assumption this module does not classify is
    an error: the argument would not say where it applies."""
    unknown = [n for n in A.BY_NAME if n not in LAST_READER and n not in _PER_PHASE]
    if unknown:
        raise KeyError(f"assumption(s) not placed in the phase induction: {', '.join(unknown)}")
    return tuple(n for n in names if n not in LAST_READER)


_PER_PHASE = ("sound_fallback", "honest_declarations", "plan_stream_joined_before_replay", "barrier_on",
              "barrier_after_run_batch", "deferred_barrier_results_untouched")


def _assume(cfg, prog, names) -> list:
    return A.constraints(cfg, prog, names)


def _invariants(ob):
    """(before, after) as the obligation states them (``broken_invariant``: reads on P need not lie in F's past)."""
    streams = ("F",) if "broken_invariant" in ob.extra else C.READ_STREAMS
    return (lambda cfg, st, m: C.before_last_reader(cfg, st, m, streams),
            lambda cfg, st, m: C.after_last_reader(cfg, st, m, streams))


def phase_case(ob, case: str, cfg, p) -> tuple[list, z3.BoolRef]:
    """The premises and the claim of the phase query ``case`` (before, last, after) over the phase piece ``p``."""
    before, after = _invariants(ob)
    names = ob.assumptions
    if case == "before":
        return [*_assume(cfg, p.prog, per_phase(names)), before(cfg, p.state_in, p.max_in)], \
            before(cfg, p.state_out, p.max_out)
    if case == "last":
        return [*_assume(cfg, p.prog, names), cfg.phases[0][0].reads_any(), before(cfg, p.state_in, p.max_in)], \
            after(cfg, p.state_out, p.max_out)
    quiet = [] if "reads_after_publish" in ob.extra else [z3.Not(cfg.phases[0][0].reads_any())]
    return [*_assume(cfg, p.prog, per_phase(names)), *quiet, after(cfg, p.state_in, p.max_in)], \
        after(cfg, p.state_out, p.max_out)


def end_case(ob, case: str, cfg, p, first, names=None) -> tuple[list, z3.BoolRef]:
    """The premises and the claim of the end query ``case`` (end, next) over the end piece ``p`` and its candidate
    first writes ``first``, under ``names`` (the per-phase assumptions unless given)."""
    before, after = _invariants(ob)
    start = z3.Or(after(cfg, p.state_in, p.max_in), z3.And(before(cfg, p.state_in, p.max_in), C.no_reads(p.max_in)))
    given = [*_assume(cfg, p.prog, per_phase(ob.assumptions) if names is None else names), start]
    if case == "end":
        return given, z3.Not(C.race_of_summary(first, p.max_in, p.builder.d))
    return given, p.state_out.invariant(cfg.bounds.runners)


def phase_queries(ob, ctx, query) -> list:
    """The queries of ``unbounded_phases`` (and its broken variants), in ``PHASES`` order, plus the two
    non-vacuity queries. ``query(label, constraints, expect)`` makes and checks one."""
    names = ob.assumptions
    R = ob.bounds.runners
    pb = C.piece_bounds(R, ob.bounds.locations)
    before = _invariants(ob)[0]
    out = []
    if "stretch_broken" in ob.extra or "fold_forgets_plan" in ob.extra:  # checks only what it breaks
        return [_segments(pb, ctx, query, broken=True)] if "stretch_broken" in ob.extra else \
            [_fold(pb, ctx, query, broken=True)]

    cfg = make_config(C.end_bounds(pb, last=True), "base", ctx)
    p = C.before_first_step(cfg)
    out.append(query(PHASES[0], [*p.constraints, z3.Not(p.state_out.invariant(R))], Verdict.PROVED))

    cfg = make_config(pb, "begin", ctx)
    p = C.step_begin(cfg)
    out.append(query(PHASES[1], [*p.constraints, p.state_in.invariant(R), z3.Not(before(cfg, p.state_out, p.max_out))],
                     Verdict.PROVED))

    for case, label in zip(("before", "last", "after"), PHASES[2:5]):
        cfg = make_config(pb, case, ctx)
        p = C.one_phase(cfg)
        given, claim = phase_case(ob, case, cfg, p)
        out.append(query(label, [*p.constraints, *given, z3.Not(claim)], Verdict.PROVED))
        if case == "last":
            nonvacuous = query("premises satisfiable", [*p.constraints, *given], Verdict.COUNTEREXAMPLE)

    for last_step in (False, True):
        cfg = make_config(C.end_bounds(pb, last_step), "last_end" if last_step else "end", ctx)
        p, first = C.step_end(cfg, last=last_step)
        for case, label in ((("end", PHASES[7]),) if last_step else (("end", PHASES[5]), ("next", PHASES[6]))):
            given, claim = end_case(ob, case, cfg, p, first)
            out.append(query(label, [*p.constraints, *given, z3.Not(claim)], Verdict.PROVED))
        if not last_step:
            unfenced = [n for n in per_phase(names) if n != "barrier_on"]
            given, claim = end_case(ob, "end", cfg, p, first, unfenced)
            fenceless = query("race once the fence is taken away",
                              [*p.constraints, *given, z3.Not(cfg.barrier), z3.Not(claim)], Verdict.COUNTEREXAMPLE)
    if ob.extra:  # a broken variant: the summary, the segments and non-vacuity do not depend on what it breaks
        return out
    out += [_fold(pb, ctx, query), _segments(pb, ctx, query)]
    return out + [nonvacuous, fenceless]


def _fold(pb, ctx, query, broken: bool = False):
    """The query ``fold``: a phase's summary after is the largest issued position (``broken``: the summary folds
    only the reads on F)."""
    cfg = make_config(pb, "fold", ctx)
    p = C.one_phase(cfg)
    bound = {k: z3.Int(f"fold.bound.{k[0]}.{k[1]}", ctx) for k in p.max_in}
    folded = C.fold_reads(p.max_in, [r for r in p.reads if r.stream == "F"], p.builder.d) if broken else None
    return query(PHASES[8], [*p.constraints, z3.Not(C.fold_exact(p, bound, folded))], Verdict.PROVED)


def _segments(pb, ctx, query, broken: bool = False):
    """The query ``segments``: one more segment's read after a stretched read is a stretched read (``broken``: the
    stretch advances F but not the read's position)."""
    cfg = make_config(pb, "segments", ctx)
    constraints, claim = C.stretch_closed(cfg, "segments", broken)
    return query(PHASES[9], [*cfg.domain, *constraints, z3.Not(claim)], Verdict.PROVED)


def runner_queries(ob, ctx, query) -> list:
    """The queries of ``unbounded_runners``: the frame of one phase; with one runner more, that the pieces commute
    with every renaming of the runners (checked on two generators) and the assumptions and invariants are symmetric;
    then the projection queries. Broken variants: a frame that forgets that a runner may use another runner's
    mailbox; a renaming that leaves the marker a mailbox holds unrenamed; a projection that drops a role."""
    pb = C.piece_bounds(ob.bounds.runners, ob.bounds.locations)
    cfg = make_config(pb, "frame", ctx)
    p = C.one_phase(cfg)
    frame = C.touched(cfg, p, owner_only="mailbox_by_runner" not in ob.extra)
    skip_frame = set(ob.extra) & {"marker_unrenamed", "marker_role_dropped"}
    out = [] if skip_frame else [query(RUNNERS[0], [*p.constraints, z3.Not(frame)], Verdict.PROVED)]
    if "mailbox_by_runner" in ob.extra:  # a broken variant checks only what it breaks
        return out
    if "marker_role_dropped" in ob.extra:
        return projection_queries(ob, ctx, query)
    markers = "marker_unrenamed" not in ob.extra
    labels = iter(RUNNERS[1:])
    big = dataclasses.replace(pb, runners=pb.runners + 1)  # the renaming the projection needs is of one runner more

    def renamed(piece: str, perm, tag: str):
        """(the two runs related by ``perm``, what must then be renamed or equal) for one piece."""
        bounds = {"phase": big, "begin": big, "end": C.end_bounds(big), "last end": C.end_bounds(big, last=True)}[piece]
        a, z = make_config(bounds, tag + "a", ctx), make_config(bounds, tag + "z", ctx)
        same, then = [], []
        if piece == "phase":
            pa, pz = C.one_phase(a, tag + "a"), C.one_phase(z, tag + "z")
            same = [*[pa.max_in[k] == pz.max_in[k] for k in pa.max_in],
                    *[x == y for x, y in zip(pa.builder.extras, pz.builder.extras)]]
            then = [*[pa.max_out[k] == pz.max_out[k] for k in pa.max_out],
                    *[z3.And(x.guard == y.guard, x.pos == y.pos) for x, y in zip(pa.prog.reads, pz.prog.reads)],
                    *[x == y for x, y in zip([*pa.prog.publishes.values(), *pa.prog.clears_before_resolve.values()],
                                             [*pz.prog.publishes.values(), *pz.prog.clears_before_resolve.values()])]]
        elif piece in ("end", "last end"):
            last = piece == "last end"
            (pa, fa), (pz, fz) = C.step_end(a, tag + "a", last), C.step_end(z, tag + "z", last)
            then = [z3.And(wa.guard == wz.guard, *[wa.vc[x] == wz.vc[x] for x in wa.vc])
                    for loc in fa for wa, wz in zip(fa[loc], fz[loc])]
        else:
            pa, pz = C.step_begin(a, tag + "a"), C.step_begin(z, tag + "z")
        related = [*pa.constraints, *pz.constraints, pa.state_in.invariant(big.runners), *C.renamed_config(perm, a, z),
                   C.renamed_state(perm, pa.state_in, pz.state_in, markers), *same]
        return related, [C.renamed_state(perm, pa.state_out, pz.state_out, markers), *then]

    for piece in ("phase", "end", "last end", "begin"):
        for perm in generators(big.runners):
            related, then = renamed(piece, perm, f"{piece}{''.join(map(str, perm))}")
            out.append(query(next(labels), [*related, z3.Not(z3.And(*then))], Verdict.PROVED))
    out += _renamed_premises(ob, ctx, query, big, markers, labels)
    return out if ob.extra else out + projection_queries(ob, ctx, query)


class _Published:
    """What the assumptions read of a program (``Program.publishes``, ``clears_before_resolve``), as free variables
    a renamed program shares (the symmetry of a phase holds them equal)."""

    def __init__(self, cfg, tag):
        keys = [(n + 1, i) for n, step in enumerate(cfg.phases) for i in range(len(step))]
        self.publishes = {k: z3.Bool(f"{tag}.publishes.{k}", cfg.ctx) for k in keys}
        self.clears_before_resolve = {k: z3.Bool(f"{tag}.clears.{k}", cfg.ctx) for k in keys}


def _renamed_premises(ob, ctx, query, big, markers: bool, labels) -> list:
    """The queries ``symmetry (premises)`` and ``symmetry (invariants)``: under a renaming (each generator), every
    assumption holds of a configuration iff of the renamed one; the step invariant, *before* and *after* hold of a
    state whose mailboxes hold runners (as every state a piece starts from does) iff of the renamed state."""
    before, after = _invariants(ob)
    related, premises, invariants = [], [], []
    for perm in generators(big.runners):
        tag = f"renamed{''.join(map(str, perm))}"
        a, z = make_config(C.end_bounds(big), tag + "a", ctx), make_config(C.end_bounds(big), tag + "z", ctx)
        prog = _Published(a, tag)
        s, t = _free_state(a, tag + ".s"), _free_state(z, tag + ".t")
        m = C.summary_vars(a, tag + ".")
        related += [*a.domain, *z.domain, *C.renamed_config(perm, a, z), C.renamed_state(perm, s, t, markers),
                    *[z3.And(x >= 0, x < big.runners) for x in s.mb_marker]]  # a renaming renames runners only
        premises += [x != y for x, y in zip(_assume(a, prog, ob.assumptions), _assume(z, prog, ob.assumptions))]
        invariants += [s.invariant(big.runners) != t.invariant(big.runners), before(a, s, m) != before(z, t, m),
                       after(a, s, m) != after(z, t, m)]
    return [query(next(labels), [*related, z3.Or(*premises)], Verdict.PROVED),
            query(next(labels), [*related, z3.Or(*invariants)], Verdict.PROVED)]


def projection_queries(ob, ctx, query) -> list:
    """The projection queries of ``unbounded_runners``, with one runner D more than the pieces are checked with
    (``RUNNER_CUTOFF`` + 1), from a state satisfying the step invariant in which D plays no role a piece reads
    (``model.cutoff.projected_config``, ``projected_state``): each piece (a phase; the step's end) leaves D's mailbox
    and marker alone, leaves D playing no role, and does on the other runners what it does without D (the summary
    and the candidate first writes equal); the premises of every piece query hold with D iff they hold without it;
    the invariants (the step invariant, *before*, *after*) of a state hold with D iff they hold of the state without
    it. So a counterexample with one more runner is one without it. Broken variant ``marker_role_dropped``: the
    marker the publisher's owner's mailbox holds is not counted as a role."""
    marker_role = "marker_role_dropped" not in ob.extra
    pb = C.piece_bounds(ob.bounds.runners, ob.bounds.locations)
    big = dataclasses.replace(pb, runners=pb.runners + 1)
    D = pb.runners
    labels = iter(RUNNERS[11:])

    def projected(piece: str):
        """(the two runs related, what the piece leaves, [(premises with D, without D)] of its queries)."""
        tag = f"proj.{piece}"
        bounds = {"phase": lambda b: b, "begin": lambda b: b, "end": C.end_bounds,
                  "last end": lambda b: C.end_bounds(b, last=True), "base": lambda b: C.end_bounds(b, last=True)}
        a, z = make_config(bounds[piece](big), tag + "a", ctx), make_config(bounds[piece](pb), tag + "z", ctx)
        given, then = [], []
        if piece in ("end", "last end"):
            last = piece == "last end"
            (pa, fa), (pz, fz) = C.step_end(a, tag + "a", last), C.step_end(z, tag + "z", last)
            given = [(end_case(ob, c, a, pa, fa)[0], end_case(ob, c, z, pz, fz)[0]) for c in ("end", "next")]
            then = [z3.And(wa.guard == wz.guard, *[wa.vc[x] == wz.vc[x] for x in wa.vc])
                    for loc in fa for wa, wz in zip(fa[loc], fz[loc])]
        elif piece == "phase":
            pa, pz = C.one_phase(a, tag + "a"), C.one_phase(z, tag + "z")
            given = [(phase_case(ob, c, a, pa)[0], phase_case(ob, c, z, pz)[0]) for c in ("before", "last", "after")]
            then = [pa.max_out[k] == pz.max_out[k] for k in pa.max_out]
        else:
            make = C.before_first_step if piece == "base" else C.step_begin
            pa, pz = make(a, tag + "a"), make(z, tag + "z")
        related = [*pa.constraints, *pz.constraints, pa.state_in.invariant(big.runners), *C.projected_config(a, z),
                   *C.projected_state(a, pa.state_in, pz.state_in, marker_role),
                   *[pa.max_in[k] == pz.max_in[k] for k in pa.max_in],
                   *[x == y for x, y in zip(pa.builder.extras, pz.builder.extras)]]
        done = [*C.projected_state(a, pa.state_out, pz.state_out, marker_role),
                C.untouched(pa.state_in, pa.state_out, D), *then]
        return related, done, given

    out = []
    for pieces in (("phase",), ("end", "last end"), ("base", "begin")):
        runs = [projected(piece) for piece in pieces]
        related = [c for r, _, _ in runs for c in r]
        out.append(query(next(labels), [*related, z3.Not(z3.And(*[c for _, d, _ in runs for c in d]))], Verdict.PROVED))
        given = [g for _, _, gs in runs for g in gs]
        if given:
            out.append(query(next(labels), [*related, z3.Or(*[z3.And(*ga) != z3.And(*gz) for ga, gz in given])],
                             Verdict.PROVED))
        if pieces == ("phase",) and marker_role:
            nonvacuous = query("projection premises satisfiable", [*related, *given[1][0]], Verdict.COUNTEREXAMPLE)

    # The invariants, of free states: (s, t) a state with D and without, s0 the state D's conjuncts held in before.
    a, z = make_config(big, "proj.inv.a", ctx), make_config(pb, "proj.inv.z", ctx)
    s0, s = _free_state(a, "proj.inv.s0"), _free_state(a, "proj.inv.s")
    t = _free_state(z, "proj.inv.t")
    m = C.summary_vars(a, "proj.inv.")
    before, after = _invariants(ob)
    same = z3.And(s.invariant(big.runners) == t.invariant(pb.runners),
                  before(a, s, m) == before(z, t, m), after(a, s, m) == after(z, t, m))
    out.append(query(next(labels), [*a.domain, *z.domain, *C.projected_config(a, z), s0.invariant(big.runners),
                                    C.untouched(s0, s, D), *C.projected_state(a, s, t, marker_role), z3.Not(same)],
                     Verdict.PROVED))
    return out + ([nonvacuous] if marker_role else [])


def _free_state(cfg, tag):
    """A state of free variables over ``cfg``'s runners (the builder's arbitrary state)."""
    return _Builder(cfg, tag, havoc=True).state()


def evaluate_into(ob, res, ctx, make_query) -> None:
    """Evaluate a ``phases`` obligation into ``res`` (``proofs.runner.Result``) with ``make_query(label, constraints,
    ob, expect, ctx)`` (the runner's): proved iff every query of the argument is, unknown if one is unknown, else a
    counterexample naming the queries that fail."""

    def query(label, constraints, expect):
        return make_query(label, constraints, ob, expect, ctx)

    qs = runner_queries(ob, ctx, query) if ob.name.startswith("unbounded_runners") else phase_queries(ob, ctx, query)
    main = [q for q in qs if q.label in PHASES or q.label in RUNNERS]
    extra = [q for q in qs if q.label not in PHASES and q.label not in RUNNERS]
    res.queries += qs
    verdicts = {q.verdict for q in main}
    if verdicts == {Verdict.PROVED}:
        res.verdict = Verdict.PROVED
        res.nonvacuity += [(q.label, q.verdict is Verdict.COUNTEREXAMPLE) for q in extra]
    elif Verdict.UNKNOWN in verdicts:
        res.verdict = Verdict.UNKNOWN
        res.reason = "; ".join(f"{q.label.split(':')[0]}: {q.reason}" for q in main if q.verdict is Verdict.UNKNOWN)
    else:
        res.verdict = Verdict.COUNTEREXAMPLE
        res.notes.append("fails: " + ", ".join(q.label.split(":")[0] for q in main if q.verdict is not Verdict.PROVED))


#: docs/proofs.md's section on the argument (``proofs.report.markdown`` places it after the assumptions).
ARGUMENT = """## Any number of phases, runners and steps

The bounded obligations (`main_theorem`, `needs/*`, ...) search configurations of at most 4 phases per step, 3
runners and 2 segments of a breakable graph. The main theorem holds for any number of phases, runners, steps and
segments by the argument below; each step of it is a solver query of `unbounded_phases` or `unbounded_runners`,
listed under them with its verdict; what is read from the code rather than checked is said
at the end. The pieces are not a second encoding: `model/cutoff.py` runs `model/program.py`'s builder itself
(`_Builder.run`, `run_batch` and `phase` issue every operation) and only observes it at the boundaries between the
pieces (run_batch's entry, each phase's entry and exit, the end of the run). A piece starts at a boundary where the
state (vector clocks, every mailbox, every marker's latest record) and the read summary are replaced by free
variables, and stops at the next.

**The summary.** A read on stream X races the scheduler's first write after `run_batch` iff the write's clock knows less
of X than the read's position. Which write is first depends on the event loop (result processing's, or the next step's
prepare after a deferred or loop-top barrier), but each candidate's clock is one for the whole step, so some read of
the step races iff an issued candidate knows less of X than the largest position of a read on X in the step (0 if
none): the race depends on the step's reads only through that maximum per stream (F, P) and location, the summary.
It is emptied as run_batch begins and raised by each phase's reads; `fold` checks, from a free state and summary, that
after a phase it exceeds any bound iff it did before or an issued read of the phase lies above the bound. By induction
over the phases, the summary at a step's last phase's exit is the largest position of every read of the step, so the
race the `end` queries refute (`race_of_summary`) is `build`'s (`Program.race_of`). A run in which a read is issued
outside every observed phase is refused.

**Phases.** Split a step at its last reading phase L (a phase that issues a backend or worker read, after which no phase
does). Two invariants, over the state and the summary:

- *before*: the step invariant (no clock knows more of a stream than the stream itself; every mailbox snapshot and
  marker record lies in F's past) and every summarised read lies in F's past (its position is at most what F knows of
  its stream);
- *after*: *before*, and the mailbox the barrier will take (the publisher's owner's) is empty, or holds a ring event
  whose snapshot covers the summary, or a recorded marker whose latest record covers it.

The queries show, each from an arbitrary state satisfying its premise: from the initial state, the run up to the first
run_batch (the first prepare writes, with the barrier at the loop top the loop-top barrier with nothing published)
ends in the step invariant (`base`); run_batch's start gives *before* with an empty summary (`begin`); any phase, under
the assumptions that concern every phase or the configuration (sound fallback, honest declarations, plan stream
joined, barrier on, barrier after run_batch, deferred barrier's results untouched), keeps *before* (`before`); L,
under every assumption, turns *before* into *after* (`last`); a phase that reads nothing keeps *after* (`after`); from
*after*, or from *before* with an empty summary (a step without reads), the end of the step orders every summarised
read before the scheduler's first write and the next step starts from the step invariant (`end`, `next`), and the
end of the run's last step (no loop-top barrier of a next step) does the same (`end (last step)`). The end is the
event loop's: in the overlap loop the barrier right after `run_batch`, or at the loop top once result processing's
writes are done (which touch nothing in flight, by assumption); in the disaggregated-prefill loop the barrier at once
when the publisher's mailbox holds an event and coarse is not forced, else a coarse one after result processing's
writes (which touch nothing in flight, by assumption); in the non-overlap loop S.wait_stream(F); in the
pipeline-parallel loop the host synchronising on an event recorded on F. By induction over the phases before L, then
over the phases after it, every step of any length is race-free and ends in the step invariant; by induction over
steps, every run is.

**Segments.** `phase` launches a breakable graph as one graph per segment, the marker in the first; the reads at the
last site of segments 1, 2, ... follow one another on F with nothing between, segment k's issued only if segment 1's is
(it is launched iff the graph is breakable and has more than k segments). Every phase query runs the phase with its
second segment's read stretched: when issued, it stands for one or more reads in a row, F's position and the read's
advancing by a free extra amount (0 is the read as `build` issues it). `segments` checks, from a free state and summary,
that a stretched read followed by one more read (the builder's own `kernel_read`, its guard implying the first's) leaves
the state and summary a single stretched read leaves. By induction over segments, a phase of any number of segments is
an instance of the stretched phase, so every phase query covers it (tests/test_cutoff.py also checks a phase of 3
segments, as `build` issues it, against the stretched phase).

**Runners.** Runner indices are compared only for equality (`symconfig.select`: if-then-else chains over `index == i`;
domains are whole index ranges), so the program is data-independent in them. With 6 runners, one phase changes only its
runner's marker and the mailbox of its runner's owner (`frame`). With 7 runners, `symmetry` checks that a phase, the end
of a step, the end of the run's last step and run_batch's start commute with a transposition and with a rotation of the
runners (which together generate every renaming), that every assumption holds of a configuration iff of the renamed one,
and that the step invariant, *before* and *after* hold of a state iff of the renamed state. From a state satisfying the
step invariant in which the 7th runner plays no role a piece reads (the runner of a phase of the piece's step or its
owner, the step's publisher or its owner, the marker the publisher's owner's mailbox holds; another runner's owner or
another mailbox's marker that is the 7th points at runner 0 in the configuration without it), each piece leaves the 7th
runner's mailbox and marker alone, leaves it playing no role and does to the other 6 what it does without it, the same
summary and candidate first writes (`projection (phase)`, `projection (end)`, `projection (base, begin)`); the premises
of every piece query hold with the 7th runner iff they hold without it (`projection (phase premises)`, `projection (end
premises)`); and the step invariant, *before* and *after* hold of a state with it iff they hold of the state without it
(`projection (invariants)`). A piece's roles are at most 5 runners, so a counterexample with 7 runners has a runner
playing none; a renaming makes it the 7th (`symmetry`), and dropping it gives a counterexample with 6 (`projection`).
Every piece query is checked with 6 runners, so none has a counterexample with 7.

**Locations.** One location stands for any number, as in the main theorem (reads and writes of different locations
never order each other; the scheduler writes every location at the same point).

**What then holds for any size.** The main theorem, by the above. Each `needs/*` counterexample and each non-vacuity
witness is a configuration of the unbounded family, so the necessity of each assumption and non-vacuity hold there too.

**Read from the code, not checked.** That `_Builder.run` runs each step as `run_batch(n)` (its start, then `phase` for
each phase in order) followed by the end of the step, which the observed boundaries cut (a piece whose boundary is never
reached is refused); that `phase(n, i, p)` uses the step and phase index only to name terms and label operations (the
pieces are checked at step 1, phase 0; tests/test_cutoff.py checks phase 1 of step 2 against it); that the segment
loop's body is one `kernel_read` per segment and location with the guard above (the stretch finds the second segment's
read by that guard and refuses a phase where it finds none); that the run up to the first run_batch (`base`) reads no
runner index, so its claim needs no renaming; and that the reduction from N+1 > 7 runners to N is the same as from 7 to
6: the symmetry and projection queries are checked with 7 runners only, and with more the same queries differ only in
the length of the `select` chains over runner indices.

**Shown able to fail.** `unbounded_phases/broken_invariant` weakens *before* (reads on the plan stream need not lie in
F's past) and fails at `last`, `after`, `end` and `end (last step)`; `unbounded_phases/reads_after_publish` lets a phase
after L read and fails at `after`; `unbounded_phases/summary_forgets_plan_stream` folds only the reads on F and fails at
`fold`; `unbounded_phases/segment_reads_unstretched` advances F but not the stretched read and fails at `segments`;
`unbounded_runners/mailbox_by_runner` states a frame that ignores mailbox sharing and fails;
`unbounded_runners/marker_unrenamed` renames runners but not the marker a mailbox holds, and the symmetry of the pieces
and of the invariants fails; `unbounded_runners/marker_role_dropped` drops a runner whose marker the publisher's owner's
mailbox holds, and the projection fails.
"""
