"""Each speculative algorithm of an SGLang tree, read statically: the worker class ``create_worker`` returns for it
(``dispatch``), the ordered phases of one decode step (``step_walk``: which runner runs, in which forward mode, under
which condition) with each runner phase's publish behaviour (``publish``), the worker's publisher (joined from the
``workers`` rows) and the worker's reads of scheduler-shared state after the publisher's runner has returned.

A worker read after the publisher is a read of a scheduler-shared map (``reads.SHARED_ATTRS``, the translator
methods and the tree's pool methods) found by ``reads.ReadWalker`` on the worker whose call chain comes after the call
chain of the publisher's runner call. The walk decides the forward-mode tests for the mode a step starts in
(``DECODE``), and a second walk decides none: a step changes the batch's mode as it goes (NGRAM sets ``TARGET_VERIFY``
before its verify and tests it after), so the paths the first walk drops are kept from the second, with their mode
tests as conditions. The ordering point is the last phase on the publisher's side (draft or target, from the names)
that can put an event into its mailbox, else the last phase on that side, of those on the read's own path. A read
whose data is copied to the host at once (``.tolist()``, ``.item()``, ``.cpu()``, ``.numpy()`` on it) completes before
the worker returns, before the scheduler issues its next write: not a finding; nor is one whose path cannot run
(``attributes.dead_path``), nor, once its scenario races, one whose path runs only on devices whose runners never
publish (``device.PlatformPaths``, kept on the read as ``bound``). Every other read keeps the runner phases before it
(what its scenario is built from) and stays ``unresolved``: the reader runs no oracle; ``fencecheck sglang`` decides it (``decision/workers.py``).
"""

from __future__ import annotations

import ast
from dataclasses import replace

from .algorithm_records import PENDING, After, Algorithm, Phase, Publisher, ReadOutcome, WorkerRead, host_copy_outcome
from .attributes import dead_path
from .capture_state import graph_modes
from .constructed import BLOCKS, ends_in_exit
from .declare import Modes
from .device import PlatformPaths
from .dispatch import dispatch, registry
from .phase_publish import PhasePublish, may_publish
from .publisher_link import linked
from .reads import HOST_SYNC_METHODS, ReadWalker, never_captured
from .records import At, ClassAt, Runner, WorkerPublisher
# MAX_DEPTH: the messages name it as algorithms.MAX_DEPTH
from .step_walk import ENTRY, MAX_DEPTH, PREFILL_MODE, STEP_MODE, StepWalk  # noqa: F401
from .tree import Tree
from .worker_types import AttrTypes


def read_algorithms(tree: Tree, modes: Modes, workers: tuple[WorkerPublisher, ...],
                    runners: tuple[Runner, ...] = (), worker_reads: bool = True) -> tuple[Algorithm, ...]:
    """The ``algorithms`` rows of the tree (empty when it has no ``SpeculativeAlgorithm``), sorted by name and
    condition. ``runners``: the ``runners`` rows (each phase's publish behaviour is read from them).
    ``worker_reads`` False: the workers' reads after the publisher are not walked (every row's are empty), for a
    caller that needs the phases and publishers alone (the configurations)."""
    algos = registry(tree)
    if algos is None:
        return ()
    types = AttrTypes(tree)
    walker = ReadWalker(tree, modes, types) if worker_reads else None
    publish = PhasePublish(tree, types, runners)
    bound = PlatformPaths(tree, runners, modes) if worker_reads else None
    out, per_worker = [], {}
    rows, notes = dispatch(tree, algos)
    for row in rows:
        ci = row.worker
        if ci not in per_worker:
            try:
                per_worker[ci] = _worker_step(tree, modes, types, walker, publish, ci, workers, len(per_worker),
                                               bound)
            except RecursionError:
                tree.note(ci.file, ci.line, f"{ci.name}: nested too deeply to walk its decode step (Python's "
                                            "recursion limit)")
                per_worker[ci] = ((), [f"{ci.name} ({ci.file}:{ci.line}): nested too deeply to walk its decode "
                                       "step (Python's recursion limit)"], (), (), (), ())
        phases, unresolved, publisher, reads, prefill, after_prefill = per_worker[ci]
        out.append(Algorithm(row.name, row.conditions, At(algos.cls.file, row.line), ClassAt(ci.name, ci.file, ci.line),
                             phases, publisher, reads, tuple(notes[row.name] + unresolved), prefill, after_prefill))
    for m, why in notes.items():
        if not any(r.name == m for r in rows):
            out.append(Algorithm(m, (), None, None, (), (), (),
                                 tuple(why or ["create_worker returns no worker class for it"]), ()))
    return tuple(sorted(out, key=lambda a: (a.name, a.condition or "")))


def _worker_step(tree, modes, types, walker, publish, ci, workers, index, bound=None):
    """(phases, unresolved, publisher, reads after the publisher, prefill phases, reads after the prefill) of the
    worker ``ci``'s decode step (and its prefill step's phases, ``prefill_step``, and the reads after that step's
    publishing phase, each ``PREFILL_PENDING``); ``index``: the
    worker's place among the classes ``create_worker`` returns; ``bound``: the ``device.PlatformPaths`` of the tree."""
    hit = tree.lookup(ci, ENTRY)
    if hit is None:
        return (), [f"{ci.name} ({ci.file}:{ci.line}) has no {ENTRY}"], (), ()
    owner, node = hit
    w = StepWalk(tree, modes, types)
    w.fn(ci, owner, node, owner.module, STEP_MODE, (), (), None, 0, ())
    unresolved = list(dict.fromkeys(w.unresolved))
    phases = _phases(w.calls, publish, unresolved)
    publisher = tuple(Publisher(r.publisher, r.conditions, _side(r.publisher), r.returns_at.file, r.returns_at.line)
                      for r in workers if r.cls == ci.name and r.file == ci.file)
    if not publisher:
        unresolved.append(f"{ci.name} has no last_shared_read_runner: no publisher to order its reads against")
    runs = [(c, ph) for c, ph in zip(w.calls, phases) if c.kind == "runner"]
    reads = _reads_after(walker, ci, runs, publisher, unresolved, index, bound) if walker is not None else ()
    if walker is not None:
        reads += _hook_reads(walker, types, ci, runs, publisher, unresolved, index, len(reads))
    prefill, more, prefill_runs = prefill_step(tree, modes, types, publish, ci)
    after_prefill, said = (), []
    if walker is not None:
        # a read the decode step orders after the same phase is decided there (a worker with no prefill branch walks
        # the same path with either batch)
        def ordered(r):
            return r.file, r.line, r.location, r.after.file, r.after.line

        decided = {ordered(r) for r in reads}
        after_prefill = tuple(
            replace(r, outcome=PREFILL_PENDING)
            for r in _reads_after(walker, ci, prefill_runs, publisher, said, index, bound, PREFILL_MODE)
            if r.outcome is PENDING and r.bound is None and ordered(r) not in decided)
    # of what ordering them says, the read paths cut (no phase on the publisher's side: the coarse barrier covers them)
    more += [u for u in said if u.startswith("a read path of ")]
    unresolved += [f"prefill step: {u}" for u in more if u not in unresolved]
    return tuple(phases), unresolved, publisher, reads, prefill, after_prefill


def _phases(calls, publish, unresolved: list[str]) -> list[Phase]:
    """The phases of a step walk's ``calls``, each runner call's publish behaviour read (``publish``); what the walk
    cannot settle about one appended to ``unresolved``."""
    phases = []
    for p in calls:
        side = None if p.kind == "publish" else _side(f"{p.subject.name if p.subject else ''} {p.runner}")
        pub = publish(p, side) if p.kind == "runner" else None
        if p.kind == "runner" and p.mode is None:
            unresolved.append(f"the mode of `{p.call}` ({p.file}:{p.line}) is not known statically "
                              f"(the paths before it set different modes)")
        if p.loop:
            unresolved.append(f"`{p.call}` ({p.file}:{p.line}) runs inside {p.loop}: a count known only at run time")
        if pub is not None and pub.policy is None:
            unresolved.append(f"{pub.why}: its publish behaviour is taken as `resolve`")
        phases.append(Phase(p.runner, p.call, p.mode, p.kind, side, p.conditions, p.loop, pub, p.file, p.line))
    return phases


#: The outcome of a worker read after a prefill step's publishing phase: no scenario models it.
PREFILL_PENDING = ReadOutcome("unresolved", "after the prefill step's publishing phase: not decided (no scenario "
                                            "models a worker's read in a prefill step)")


def prefill_step(tree, modes, types, publish, ci) -> tuple[tuple[Phase, ...], list[str], list]:
    """(phases, unresolved, (step call, phase) of each runner phase) of the worker ``ci``'s prefill step: its step
    entry walked with the batch in ``PREFILL_MODE`` (the scheduler hands a speculative worker a prefill batch through
    the same entry as a decode one: 0.5.23 ``speculative/eagle_worker_v2.py``
    ``EAGLEWorkerV2.forward_batch_generation``, the ``batch.forward_mode.is_extend()`` branch, lines 1423-1427)."""
    hit = tree.lookup(ci, ENTRY)
    if hit is None:
        return (), [], []
    owner, node = hit
    w = StepWalk(tree, modes, types)
    w.fn(ci, owner, node, owner.module, PREFILL_MODE, (), (), None, 0, ())
    unresolved = list(dict.fromkeys(w.unresolved))
    phases = _phases(w.calls, publish, unresolved)
    return tuple(phases), unresolved, [(c, ph) for c, ph in zip(w.calls, phases) if c.kind == "runner"]


#: The model runner's list of callables the decode graph runner calls inside each captured graph, after the model
#: forward (0.5.23 ``model_executor/runner/decode_cuda_graph_runner.py:1469-1470``).
TAIL_HOOKS = "capture_tail_hooks"


def _registrations(tree, types, ci):
    """(runner text, hook class, hook method, conditions, file, line) of each ``<runner>.capture_tail_hooks.append(H)``
    in the methods of ``ci``'s MRO, ``H`` a method of the worker or of a field of known class (``self.x.m``)."""
    out = []
    fields = types(ci)
    for c in tree.mro(ci):
        for node in c.methods.values():
            for call, conds in _calls_with_tests(node.body, ()):
                f = call.func
                if not (isinstance(f, ast.Attribute) and f.attr == "append" and isinstance(f.value, ast.Attribute)
                        and f.value.attr == TAIL_HOOKS and len(call.args) == 1):
                    continue
                h = call.args[0]
                owner = None
                if isinstance(h, ast.Attribute) and isinstance(h.value, ast.Name) and h.value.id == "self":
                    owner = ci
                elif isinstance(h, ast.Attribute) and isinstance(h.value, ast.Attribute) and \
                        isinstance(h.value.value, ast.Name) and h.value.value.id == "self":
                    owner = fields.get(h.value.attr)
                if owner is None or tree.lookup(owner, h.attr) is None:
                    tree.note(c.file, call.lineno, f"{c.name}: a capture tail hook of unknown class, "
                                                   f"`{ast.unparse(h)}`: its reads are not followed")
                    continue
                out.append((ast.unparse(f.value.value), owner, h.attr, conds, c.file, call.lineno))
    return out


def _calls_with_tests(stmts, conds):
    """Each call in ``stmts`` with the texts of the ``if`` tests on its path (``not (T)`` in an ``else``)."""
    for s in stmts:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(s, ast.If):
            t = ast.unparse(s.test)
            yield from _calls_with_tests(s.body, conds + (t,))
            yield from _calls_with_tests(s.orelse, conds + (f"not ({t})",))
            continue
        blocks = [b for b in (getattr(s, f, None) for f in ("body", "orelse", "finalbody")) if isinstance(b, list)]
        blocks += [h.body for h in getattr(s, "handlers", ())]
        heads = [x for x in ast.iter_child_nodes(s) if not isinstance(x, (ast.stmt, ast.excepthandler))] if blocks \
            else [s]
        for n in heads:
            for x in ast.walk(n):
                if isinstance(x, ast.Call):
                    yield x, conds
        for b in blocks:
            yield from _calls_with_tests(b, conds)


def _hook_reads(walker, types, ci, runs, publisher, unresolved, index, start) -> tuple[WorkerRead, ...]:
    """The reads of the capture tail hooks the worker registers on the publisher's model runner: a hook runs inside
    every graph that runner captures, after the model forward, so each read (walked in the mode of a captured phase
    on the publisher's side that can publish; per mode, the phase with the fewest conditions) is ordered after that
    phase's in-graph marker (``WorkerRead.in_graph``). A hook on another runner is noted, not ordered."""
    tree = walker.tree
    out = []
    captured = graph_modes(walker.modes)
    for runner, owner, method, conds, file, line in _registrations(tree, types, ci):
        side = _side(runner)
        mine = [(c, ph) for c, ph in runs if ph.side == side and ph.mode in captured
                and may_publish(ph.mode, ph.publish)]
        for pub in (p for p in publisher if p.side == side):
            if not mine:
                unresolved.append(f"{ci.name} registers a capture tail hook on `{runner}` ({file}:{line}), but no "
                                  f"captured phase on that side publishes")
                continue
            # the hook runs in every graph of that runner: the phase of each mode with the fewest conditions hosts it
            hosts = {}
            for i, (c, ph) in enumerate(mine):
                if ph.mode not in hosts or len(ph.conditions) < len(hosts[ph.mode][1][1].conditions):
                    hosts[ph.mode] = (i, (c, ph))
            for _, (call, last) in sorted(hosts.values(), key=lambda x: x[0]):
                _hosted(walker, owner, method, runner, conds, file, line, pub, call, last, runs, index, start, out)
        if not any(p.side == side for p in publisher):
            unresolved.append(f"{ci.name} registers a capture tail hook on `{runner}` ({file}:{line}), a runner "
                              "that is not its publisher: its reads are not ordered")
    return tuple(out)


def _hosted(walker, owner, method, runner, conds, file, line, pub, call, last, runs, index, start, out) -> None:
    """Appends to ``out`` the reads of the hook ``owner.method`` (registered at ``file:line`` under ``conds``) inside
    the graph of the phase ``last`` (the step call ``call``) not in it yet, ordered after that phase and the phases
    before it on its path; ``start``: how many reads of the worker come before the hooks' (their ``found`` order)."""
    after = After(last.call, last.file, last.line, last.conditions, last.mode, True)
    before = tuple(ph for c, ph in runs if c is call or _after(call.chain, c.chain, walker.functions))
    hop = f"{runner}.{TAIL_HOOKS} ({file}:{line})"
    for r in walker.method_reads(owner, method, last.mode):
        if never_captured(r.host_sync):  # the hook runs inside the captured graph only
            continue
        if any((x.file, x.line, x.location) == (r.file, r.line, r.location) for x in out):
            continue
        rc = tuple(conds) + tuple(r.conditions)
        dead = dead_path(walker.tree, rc)
        outcome = PENDING if dead is None else ReadOutcome(None, f"its path cannot run: {dead} (attributes.py)")
        out.append(WorkerRead(r.location, r.file, r.line, r.what, (hop,) + r.via_text(),
                              rc, pub, after, before, None, outcome, (index, start + len(out)), True))


def _reads_after(walker, ci, runs, publisher, unresolved, index, bound=None, mode=STEP_MODE) -> tuple[WorkerRead, ...]:
    """The worker's reads after the publisher's runner. The ordering point is the last phase on the publisher's side
    that can publish into its mailbox (the runner call that records the read-done event); when none can, the last
    phase on that side, and the reads are covered by the coarse barrier. ``runs``: (step call, phase) of each runner
    phase; ``mode``: the mode the step starts in."""
    all_reads, cuts = walker.method_walk(ci, ENTRY, mode)
    # and the paths a test of the mode the step starts in drops (the module's docstring), their mode tests kept
    paths = {_path_key(r) for r in all_reads}
    loose, loose_cuts = walker.method_walk(ci, ENTRY, None)
    all_reads += [r for r in loose if _path_key(r) not in paths]
    cuts += [c for c in loose_cuts if c not in cuts]
    for c in cuts:  # the step runs eagerly: no capture-mode test or host sync keeps a cut path out
        unresolved.append(f"a read path of {ci.name} cut: {c.text()}; via " + " -> ".join(h.func for h in c.via))
    out = {}
    for pub in publisher:
        mine = [(c, ph) for c, ph in runs if ph.side == pub.side]
        if not mine:
            unresolved.append(f"no phase runs on the publisher `{pub.publisher}`'s side ({pub.side})")
            continue
        publishing = [(c, ph) for c, ph in mine if may_publish(ph.mode, ph.publish)]
        candidates = publishing or mine
        for r in all_reads:
            pos = _position(r)
            # the last of those phases on the read's own path (a step's paths each publish last somewhere else)
            on_path = [(c, ph) for c, ph in candidates if _after(pos, c.chain, walker.functions) is not None]
            if not on_path:
                continue
            call, last = on_path[-1]
            if not _after(pos, call.chain, walker.functions):
                continue
            after = After(last.call, last.file, last.line, last.conditions, last.mode, bool(publishing))
            k = (r.file, r.line, r.location)
            if k in out:
                continue
            copy = _host_copy(walker, r)
            before = tuple(ph for c, ph in runs if _after(pos, c.chain, walker.functions))
            outcome = PENDING if copy is None else host_copy_outcome(copy)
            dead = dead_path(walker.tree, r.conditions) if copy is None else None
            if dead is not None:
                outcome = ReadOutcome(None, f"its path cannot run: {dead} (attributes.py)")
            elif copy is None and pub.conditions:
                why = linked(walker, ci, r, pub.conditions)
                if why is not None:
                    outcome = ReadOutcome(None, f"not with this publisher: {why} (publisher_link.py)")
            on = bound.why(r, pub, before, walker.functions) if outcome is PENDING and bound is not None else None
            out[k] = WorkerRead(r.location, r.file, r.line, r.what, r.via_text(), r.conditions,
                                pub, after, before, copy, outcome, (index, len(out)),
                                bound=None if on is None else f"{on} (device.py)",
                                settled=_settled(bound, r, pub, after, call.chain, walker.functions)
                                if bound is not None else ())
    return tuple(out[k] for k in sorted(out))


def _enclosing_both(pos, chain, functions: dict) -> set[str]:
    """The condition texts (as the read walk writes them: the test, or ``not (test)`` in an ``else`` and after an
    ``if`` whose branch ends in ``return`` or ``raise``) that hold at both the read at ``pos`` and the runner call
    ``chain`` (``_position`` pairs) because one test gave them both: the ``if`` statements holding both lines, and
    the early exits before both, in the calls both chains go through and at the function where they part. Each was
    tested once, before the phase ran: where the phase ran, it held."""
    out: set[str] = set()

    def exits_before(parent, field, upto) -> None:
        block = getattr(parent, field, None)
        for st in block if isinstance(block, list) else ():
            if st is upto:
                return
            if isinstance(st, ast.If):
                text = ast.unparse(st.test)
                if ends_in_exit(st.body) and not (st.orelse and ends_in_exit(st.orelse)):
                    out.add(f"not ({text})")
                elif st.orelse and ends_in_exit(st.orelse) and not ends_in_exit(st.body):
                    out.add(text)

    for (k1, l1), (k2, l2) in zip(pos, chain):
        if k1 != k2:
            break
        fn = functions.get(k1, (None,))[0]
        if fn is None:
            break
        a, b = _statements(fn, l1), _statements(fn, l2)
        i = 0
        while i < min(len(a), len(b)) and a[i][2] is b[i][2]:
            parent, field, stmt = a[i]
            exits_before(parent, field, stmt)
            nxt_a = a[i + 1] if i + 1 < len(a) else None
            nxt_b = b[i + 1] if i + 1 < len(b) else None
            if isinstance(stmt, ast.If) and nxt_a is not None and nxt_b is not None and nxt_a[1] == nxt_b[1] \
                    and nxt_a[1] in ("body", "orelse"):
                text = ast.unparse(stmt.test)
                out.add(text if nxt_a[1] == "body" else f"not ({text})")
            i += 1
        if i < len(a) and i < len(b) and a[i][0] is b[i][0] and a[i][1] == b[i][1]:
            first = a[i][2] if a[i][2].lineno <= b[i][2].lineno else b[i][2]
            exits_before(a[i][0], a[i][1], first)  # the block where they part: the early exits before both
        if l1 != l2:
            break
    return out


class _ModeTests(ast.NodeTransformer):
    """A test with each ``X.forward_mode.is_M()`` replaced by its value in ``mode``, where ``modes`` decides it."""

    def __init__(self, modes: Modes, mode: str):
        self.modes, self.mode = modes, mode

    def visit_Call(self, node):
        f = node.func
        if not node.args and not node.keywords and isinstance(f, ast.Attribute) \
                and isinstance(f.value, ast.Attribute) and f.value.attr == "forward_mode":
            v = self.modes.predicate(f.attr, self.mode)
            if v is not None:
                return ast.copy_location(ast.Constant(v), node)
        return self.generic_visit(node)


def _settled(bound: PlatformPaths, read, pub, after: After, chain, functions: dict) -> tuple:
    """Per platform, the conditions of a worker read after the publisher (the read's, the publisher's, the
    publishing phase's) not settled there, or None where one is false there. Settled are: the read's conditions
    that are the tests of ``if`` statements holding both the read and the publishing runner call (``chain``;
    ``_enclosing_both``: the race needs the phase to run, so they held); a forward-mode test among the phase's own
    conditions, by the mode the phase runs in; and what the platform decides (``PlatformPaths.values``: a
    module-level ``_is_cpu = is_cpu()`` replaced by its call)."""
    from fencecheck.vocab import Platform

    implied = _enclosing_both(_position(read), chain, functions)
    known = _ModeTests(bound.modes, after.mode).visit
    texts = list(dict.fromkeys(tuple(c for c in read.conditions if c not in implied) + tuple(pub.conditions)))
    phase = [c for c in dict.fromkeys(after.conditions) if c not in texts]
    got = bound.values(read, functions, texts) + bound.values(read, functions, phase, known)
    out = []
    for p in Platform:
        left: list[str] | None = []
        for text, vals, _ in got:
            v = vals.get(p.value)
            if v is False:
                left = None
                break
            if v is not True:
                left.append(text)
        out.append((p.value, None if left is None else tuple(left)))
    return tuple(out)


def _path_key(read) -> tuple:
    """A read's site and the call chain that reaches it."""
    return read.file, read.line, read.location, tuple((h.key, h.line) for h in read.via)


def _position(read) -> list[tuple[str, int]]:
    """(function, line) pairs from the entry down to the read: the line of the call (or the read) in each."""
    hops = read.via
    return [(hops[i].key, hops[i + 1].line) for i in range(len(hops) - 1)] + [(hops[-1].key, read.line)]


def _after(pos, chain, functions=None) -> bool | None:
    """Whether ``pos`` comes after the call chain ``chain`` in one step (None: on other paths: they part in another
    function, or at lines of one function no path runs both of, ``_exclusive``; ``functions``: qualified name ->
    (def node, file) of the functions walked)."""
    for (k1, l1), (k2, l2) in zip(pos, chain):
        if k1 != k2:
            return None
        if l1 != l2:
            fn = (functions or {}).get(k1, (None,))[0]
            if fn is not None and _exclusive(fn, l1, l2):
                return None
            return l1 > l2
    return False  # the same call, or inside the runner's call


def _statements(fn, line: int) -> list[tuple[ast.AST, str, ast.stmt]]:
    """(parent, block field, statement) of each statement holding ``line``, from ``fn``'s body inwards."""
    out, parent = [], fn
    while True:
        for field in BLOCKS:
            block = getattr(parent, field, None)
            hit = next((s for s in block or () if isinstance(s, ast.AST) and hasattr(s, "lineno")
                        and s.lineno <= line <= (s.end_lineno or s.lineno)), None) if isinstance(block, list) else None
            if hit is not None:
                out.append((parent, field, hit))
                parent = hit
                break
        else:
            return out


def _exclusive(fn, l1: int, l2: int) -> bool:
    """Whether no path through ``fn`` runs both line ``l1`` and line ``l2``: they lie in the two branches of one
    ``if``, or the earlier lies in a block that ends in ``return`` or ``raise`` and the later after that block
    (``if self.tree_mode: return self._forward_decode_tree(...)`` before the linear path)."""
    a, b = _statements(fn, l1), _statements(fn, l2)
    i = 0
    while i < min(len(a), len(b)) and a[i][2] is b[i][2]:
        i += 1
    if i >= len(a) or i >= len(b):
        return False  # one holds the other (a compound statement and a line inside it)
    (pa, fa, _), (pb, fb, _) = a[i], b[i]
    if pa is pb and fa != fb:
        return isinstance(pa, ast.If)  # a try's body, handlers and else can each run after another
    early = a if l1 < l2 else b
    return any(ends_in_exit(getattr(p, f)) for p, f, _ in early[i + 1:]) or ends_in_exit([early[i][2]])


def _side(text: str) -> str:
    return "draft" if "draft" in text.lower() else "target"


def _host_copy(walker: ReadWalker, read) -> str | None:
    """``file:line`` of a host copy taken straight from the read (``x[i].tolist()``), or None."""
    node = walker.functions.get(read.via[-1].key, (None,))[0]
    if node is None:
        return None
    for n in ast.walk(node):
        if getattr(n, "lineno", None) == read.line and ast.unparse(n)[:120] == read.what:
            p = getattr(n, "_fc_parent", None)
            while isinstance(p, (ast.Subscript, ast.Attribute, ast.Call)):
                if isinstance(p, ast.Call) and isinstance(p.func, ast.Attribute) and p.func.attr in HOST_SYNC_METHODS:
                    return f"{read.file}:{p.lineno}"
                p = getattr(p, "_fc_parent", None)
    return None


