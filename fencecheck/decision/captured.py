"""Whether the graph a runner captures runs a read: the captured path interpreted (``absint``) from the backend's
start-up to the read.

A CUDA graph records the one path its capture takes. For a backend of class ``C`` and a graph-replayed forward mode,
the interpretation runs what SGLang runs on one abstract backend object, in its order:

1. start-up: ``C.__init__`` and ``init_cuda_graph_state`` (``backend_reader.STARTUP_ENTRIES``), their parameters
   unknown (where one ends on every path, a ``raise NotImplementedError`` the base class has, the runner never
   makes its graph state: no graph is captured with the class, and no in-graph read runs); then every field a method
   of ``C`` outside start-up stores is forgotten (captures of other sizes and other modes may have run before this
   one);
2. the capture call, ``init_forward_metadata_out_graph(forward_batch, ..., in_capture=True)``
   (``capture_state.CAPTURE_ENTRY``), with a new forward batch of the tree's ``ForwardBatch``: where the runner that
   makes the capture call builds it (``ForwardBatch(...)`` in the method holding the call or a runner method it
   calls, ``_runner_batch``), the fields it passes or stores are unknown, those code the interpretation does not run
   may store there unknown (``Interpreter.stored_on_batch``: receiver-aware), the others their dataclass defaults;
   else every field unknown (a field that class does not have, which nothing outside the backend's methods stores,
   is absent: ``getattr(batch, "x", None)`` is None);
3. the warm-up runs, each the in-graph prep (``capture_state.IN_GRAPH_PREP``), the forward
   (``forward(q, k, v, layer, forward_batch)``, the mode deciding its dispatch) and the warm-up hook
   (``capture_state.WARMUP_HOOK``), repeated until the state no longer changes (at most ``ROUNDS`` times, then what
   still changes is forgotten);
4. the captured run: the in-graph prep, the forward of the layers before the read's (repeated in the same way) and
   the read's own call chain (``Read.via``), each function from its start to the call of the next (its arguments
   evaluated and bound), the last to the read's line.

Where a step of this mode's own capture (steps 2-3, the prep or the layers) ends on every path, the capture raises:
the runner fails with it (SGLang does not fall back from a failed capture), so no graph of the mode holds the read.

Steps 1 and 2-3 for the other captures are the same for every mode: they are interpreted once per class, each mode's
own capture on a copy of their state. The work of one class's start-up and captures is bounded (``MAX_TOTAL``, in
statements weighted by their heaps' sizes): where the other captures need more, the state they may leave is taken as
start-up left it with every field a method outside start-up stores unknown (what step 1 forgets already: less known,
nothing assumed); where this mode's own capture needs more, the answer stays open.

Before each step, a field the runner's own code may store (its name stored in the tree through another receiver than
the backend's methods run, ``Interpreter.stored_outside``; on the capture batch, ``stored_on_batch``) is forgotten.
The read is **not captured** when no path of the interpretation reaches its line with conditions z3 can satisfy; the
reason names how the paths ended (a test false on the state, a ``raise``, a failed ``assert``, an attribute of None
or one its object's class lacks). What the interpretation cannot follow (a line it cannot find, a call it cannot
bind) leaves the answer open: every limit only keeps a read. On a platform (``captured(..., platform=P)``), each of
the tree's platform predicates is a constant (``is_P()`` true, the others false): an in-graph read after the marker
matters only where the marker exists (CUDA: elsewhere ``IN_REPLAY`` falls back), so the question is asked there.

Assumptions, besides ``absint``'s: the runner calls the backend's capture call, prep, forward and hook in this order
during a capture and nothing else of the backend; graphs are captured before any batch is served.
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass, replace

import z3

from fencecheck.decision.absint import (NONE, ON_BATCH, Died, Fn, Interpreter, Obj, Path, Ref, Sym, _atoms,
                                        _dataclass_fields, attribute_stores)
from fencecheck.sglang_source.backend_reader import STARTUP_ENTRIES
from fencecheck.sglang_source.capture_state import (CAPTURE_ENTRY, IN_GRAPH_PREP, WARMUP_HOOK, capture_call, graph_modes,
                                                    read_hops)
from fencecheck.sglang_source.tree import ClassInfo, Tree

#: The parameter name of the forward batch in the backend's methods.
BATCH = "forward_batch"
#: Repetitions of a step (warm-up runs, layers) interpreted before what still changes is forgotten.
ROUNDS = 3
#: Work (statements interpreted, weighted by the size of their heaps: ``absint.Budget.total``) for one class's
#: start-up and captures, every step together, past which its captured paths are not followed (the answer stays
#: open): a deterministic bound on the whole interpretation.
MAX_TOTAL = 600_000


@dataclass(frozen=True)
class Captured:
    """The answer for one read: ``captured`` False when no captured path reaches it (``why``: how the paths ended),
    True when one may, None when the interpretation could not follow the chain (``why`` says where)."""

    captured: bool | None
    why: str = ""


def captured(tree: Tree, ci: ClassInfo, modes, mode: str, read, platform: str | None = None) -> Captured:
    """Whether the graph the runner captures for ``mode`` with a backend of class ``ci`` runs ``read`` (a
    ``reads.Read`` of ``ci`` at an in-graph site), on ``platform`` (its predicates constants) or any (None)."""
    got = read_hops(tree, ci, read)
    if got is None or not read.via:
        return Captured(None, "a function of its call chain is not found")
    hops, lines = got
    memo = tree.__dict__.setdefault("_captured_state", {})
    key = (ci.key, mode, platform)
    if key not in memo:
        it, start = _before_forward(tree, ci, modes, mode, platform)
        memo[key] = it, start, it.budget.mark()
    it, start, mark = memo[key]
    if isinstance(start, _Never):
        return Captured(False, start.why)
    if isinstance(start, str):
        return Captured(None, start)
    it.mode = mode  # one interpreter serves every mode of the class, and each read starts from the same numbering
    it.budget.resume(mark)
    paths = [_copy(start)]
    it.budget.steps = 0  # each read's chain gets the whole budget
    reached, died, lost = _chain(it, hops, lines, Ref("backend"), Ref("batch"), paths)
    if lost:
        return Captured(None, lost)
    live = [q for q in reached if it.feasible(q) is not False]
    if live:
        return Captured(True)
    return Captured(False, _reasons(died, reached))


def _copy(p: Path) -> Path:
    return Path(dict(p.heap), dict(p.local), p.cond)


def _before_forward(tree: Tree, ci: ClassInfo, modes, mode: str, platform: str | None = None):
    """(the interpreter, the one joined state at the entry of the forward that holds the read), or (it, why) when the
    capture is not followed. The start-up and the captures before this one are the same for every mode: interpreted
    once per class (``_startup_and_captures``), then this mode's capture on a copy."""
    outer = tree.__dict__.setdefault("_captured_outer", {})
    if (ci.key, platform) not in outer:
        it, p = _startup_and_captures(tree, ci, modes, platform)
        outer[ci.key, platform] = it, p, it.budget.mark()
    it, p, mark = outer[ci.key, platform]
    if isinstance(p, (str, _Never)):
        return it, p
    it.mode = mode
    # each mode's capture starts where the shared part ended (budget left, symbols and objects numbered), whatever
    # was asked before it
    it.budget.resume(mark)
    try:
        p = _capture(it, ci, _copy(p))
    except _Spent as e:
        return it, str(e)
    except _NoPath as e:  # the capture raises: the runner never holds a graph of this mode with this backend
        return it, _Never(f"{e}: the capture of {mode} raises, so no graph of it is ever captured with "
                          f"{ci.name}")
    p.local = {}
    return it, p


def _startup_and_captures(tree: Tree, ci: ClassInfo, modes, platform: str | None = None):
    """(the interpreter, the joined state after start-up and the captures of every size and graph mode, which may
    have run before any one capture), (it, ``_Never``) when start-up ends on every path, or (it, why) when they are
    not followed. Start-up runs with no forward mode."""
    it = Interpreter(tree, modes, None, in_capture=True, own=tree.mro(ci), platform=platform)
    me = Ref("backend")
    p = Path({"backend": Obj(ci, (), True, f"{ci.file}:{ci.line}")}, {})
    if it.tree.lookup(ci, CAPTURE_ENTRY) is None:
        return it, f"{ci.name} has no {CAPTURE_ENTRY}"
    try:
        for name in STARTUP_ENTRIES:
            try:
                p = _step(it, ci, name, me, p, {})
            except _NoPath:  # the runner cannot make its graph state: no graph is ever captured with this backend
                return it, _Never(f"every path of {ci.name}.{name} ends ({_reasons(it.last_died, [])}): no graph "
                                  "is ever captured with it")
        _forget_fields(it, p, _stored_after_startup(tree, ci))
        it.forget_outside(p, ("backend",))
        p.heap["batch"] = _new_batch(it)

        def every_capture(q: Path) -> Path:
            for m in graph_modes(modes):
                it.mode = m
                try:
                    q = _capture(it, ci, q)
                except _NoPath:  # a mode this backend cannot capture: no such capture runs before this one
                    pass
            return q

        base, spent = _copy(p), it.budget.total
        try:
            p = _fixpoint(it, p, every_capture)
        except _Spent:  # too much to interpret: the state they may leave is the one where what they store is unknown
            it.budget.total = spent
            p = base
    except _NoPath as e:
        return it, f"{e}: the capture is not followed"
    except _Spent as e:
        return it, str(e)
    finally:
        it.mode = None
    return it, p


def _capture(it: Interpreter, ci: ClassInfo, q: Path) -> Path:
    """One capture in the interpreter's mode: the capture call, the warm-ups, the prep and the layers, on a new
    batch."""
    me, batch = Ref("backend"), Ref("batch")

    def warm_up(r: Path) -> Path:
        for name in (IN_GRAPH_PREP, "forward", WARMUP_HOOK):
            _forget_outside(it, r)
            r = _step(it, ci, name, me, r, {BATCH: batch})
        return r

    _retire_batch(it, q)
    q.heap["batch"] = _new_batch(it)
    q = _step(it, ci, CAPTURE_ENTRY, me, q, {BATCH: batch, "in_capture": ("const", True)})
    q = _fixpoint(it, q, warm_up)
    _forget_outside(it, q)
    q = _step(it, ci, IN_GRAPH_PREP, me, q, {BATCH: batch})
    return _fixpoint(it, q, lambda r: _step(it, ci, "forward", me, r, {BATCH: batch}))


class _NoPath(Exception):
    """A step of the sequence none of whose paths ends normally: the interpretation does not follow the capture."""


@dataclass(frozen=True)
class _Never:
    """Start-up ends on every path (``why``): the class's graphs are never captured, so no in-graph read runs."""

    why: str


class _Spent(Exception):
    """The class's statement budget (``MAX_TOTAL``) is spent: the interpretation does not follow the capture."""


def _step(it: Interpreter, ci: ClassInfo, name: str, me: Ref, p: Path, named: dict) -> Path:
    """``p`` after ``ci``'s method ``name`` (``p`` itself where the class has none), its paths joined; ``_NoPath``
    where every path of it raises. A step already run on a state of the same shape (``_Canon``: the same objects,
    fields and values up to the numbering of unknowns and objects) is not run again: its result is renamed onto
    this state, with the work, the unknowns and the objects it made counted as a run would count them (the same
    answer, numbering and bound whatever ran before)."""
    if it.budget.total > MAX_TOTAL:
        raise _Spent(f"its start-up and captures need more than {MAX_TOTAL:,} units of interpretation "
                     "(captured.MAX_TOTAL): the capture is not followed")
    canon = _Canon.of(p, named) if not p.cond else None
    key = (ci.key, name, it.mode, canon.key) if canon is not None else None
    memo = it.__dict__.setdefault("_steps", {})
    if key is not None and key in memo:
        out = _replayed(it, memo[key], canon, p)
    else:
        total = it.budget.total
        sym0, obj0 = _counters(it)
        got = _run_method(it, ci, name, me, [p], named)
        out = p if got is None else _one(it, got) if got else None
        sym1, obj1 = _counters(it)
        if key is not None and (out is None or not out.cond):  # a single path's conditions are not renamed
            memo[key] = _Entry(canon, out, list(it.last_died), it.budget.total - total, sym0, sym1, obj0, obj1,
                               got is None)
    if out is None:
        raise _NoPath(f"every path of {ci.name}.{name} ends ({_reasons(it.last_died, [])})")
    return out


def _counters(it: Interpreter) -> tuple[int, int]:
    """The next unknown's and object's numbers, the counters left where they were."""
    s, o = next(it.budget.syms), next(it.budget.objs)
    it.budget.syms, it.budget.objs = itertools.count(s), itertools.count(o)
    return s, o


@dataclass(frozen=True)
class _Entry:
    """A step's run: the canonical state it ran on, its joined result (None: every path ended), why paths ended, its
    work, the unknowns and objects it numbered (``sym0`` to ``sym1``, ``obj0`` to ``obj1``), and whether the class
    has no such method (``absent``: the state goes on as it was)."""

    canon: "_Canon"
    out: Path | None
    died: list
    cost: int
    sym0: int
    sym1: int
    obj0: int
    obj1: int
    absent: bool = False


#: An atom's number in a z3 term's text (``truthy#12``).
_ATOM = re.compile(r"#(\d+)")


class _NoCanon(Exception):
    """A value the canonical form does not cover (a z3 truth value): the step is run, not replayed."""


class _Canon:
    """A state's reachable part up to renaming: the objects reached from the roots (``backend``, ``batch``) and the
    step's arguments, breadth first in the order found (fields by name), each unknown numbered by first appearance
    in that order."""

    def __init__(self):
        self.syms: dict[int, int] = {}
        self.order: list[str] = []
        self.index: dict[str, int] = {}
        self.key = None

    @classmethod
    def of(cls, p: Path, named: dict) -> "_Canon | None":
        c = cls()
        todo = ["backend", "batch"] + [v.oid for _, v in sorted(named.items()) if isinstance(v, Ref)]
        while todo:
            oid = todo.pop(0)
            if oid in c.index or oid not in p.heap:
                continue
            c.index[oid] = len(c.order)
            c.order.append(oid)
            o = p.heap[oid]
            todo += [r for v in [*(v for _, v in o.fields), *o.alts] for r in _refs(v)]
        try:
            objs = []
            for oid in c.order:
                o = p.heap[oid]
                objs.append((o.cls.key if o.cls else None, tuple((k, c._val(v)) for k, v in o.fields), o.made, o.at,
                             tuple(sorted(o.maybe)), o.box, tuple(c._val(v) for v in o.alts), o.opened))
            c.key = (tuple(objs), tuple((k, c._val(v)) for k, v in sorted(named.items())))
        except _NoCanon:
            return None
        return c

    def _val(self, v):
        if isinstance(v, Sym):
            return ("s", self.syms.setdefault(v.n, len(self.syms)))
        if isinstance(v, Ref):
            return ("r", self.index.get(v.oid, v.oid))
        if isinstance(v, tuple) and v and v[0] == "alts":
            return ("alts", tuple(self._val(m) for m in v[1]))
        if isinstance(v, tuple) and v and v[0] in ("class", "func", "closure"):
            return (v[0], id(v[1]))
        if v == NONE or isinstance(v, tuple) and v and v[0] == "const":
            return v
        if isinstance(v, tuple) and len(v) == 2 and v[0] == "bool" and z3.is_expr(v[1]):
            # a truth value over atoms named ``kind#N`` (N an unknown's number, or a fresh atom's from the same count)
            return ("bool", _ATOM.sub(lambda m: "#" + str(self.syms.setdefault(int(m.group(1)), len(self.syms))),
                                      v[1].sexpr()))
        raise _NoCanon


def _refs(v) -> list[str]:
    if isinstance(v, Ref):
        return [v.oid]
    if isinstance(v, tuple) and v and v[0] == "alts":
        return [r for m in v[1] for r in _refs(m)]
    return []


def _replayed(it: Interpreter, e: _Entry, canon: _Canon, p: Path) -> Path | None:
    """The memoised step ``e`` renamed onto ``p`` (whose canonical form ``canon`` is the entry's), its work and
    numbering counted; None where every path of it ended."""
    it.budget.total += e.cost
    it.last_died[:] = e.died
    now_sym, now_obj = _counters(it)
    it.budget.syms = itertools.count(now_sym + e.sym1 - e.sym0)
    it.budget.objs = itertools.count(now_obj + e.obj1 - e.obj0)
    if e.absent:
        return p
    if e.out is None:
        return None
    back = {i: n for n, i in canon.syms.items()}
    syms = {n: back[i] for n, i in e.canon.syms.items()}
    oids = dict(zip(e.canon.order, canon.order))

    def made(o: str) -> bool:
        return o.startswith("o") and o[1:].isdigit() and e.obj0 <= int(o[1:]) < e.obj1

    def oid(o: str) -> str:
        return oids[o] if o in oids else f"o{int(o[1:]) - e.obj0 + now_obj}" if made(o) else o

    def val(v):
        if isinstance(v, Sym):
            n = v.n
            return Sym(syms[n]) if n in syms else Sym(n - e.sym0 + now_sym) if e.sym0 <= n < e.sym1 else v
        if isinstance(v, Ref):
            return Ref(oid(v.oid))
        if isinstance(v, tuple) and v and v[0] == "alts":
            return ("alts", tuple(val(m) for m in v[1]))
        if isinstance(v, tuple) and len(v) == 2 and v[0] == "bool" and z3.is_expr(v[1]):
            pairs = []
            for a in _atoms(v[1]):
                kind, _, n = a.decl().name().rpartition("#")
                new = val(Sym(int(n))).n
                if new != int(n):
                    pairs.append((a, it.atom(f"{kind}#{new}")))
            return ("bool", z3.substitute(v[1], *pairs) if pairs else v[1])
        return v

    heap = {k: o for k, o in p.heap.items() if k not in canon.index}  # what the step cannot reach: as it was
    for k, o in e.out.heap.items():
        if k in oids or made(k):
            heap[oid(k)] = replace(o, fields=tuple((f, val(v)) for f, v in o.fields), alts=tuple(val(v) for v in o.alts))
    return Path(heap, {k: val(v) for k, v in e.out.local.items()}, (), e.out.ret)


def _fixpoint(it: Interpreter, p: Path, step) -> Path:
    """``p`` joined with what repeating ``step`` on it gives, until the join no longer changes (``ROUNDS``), then
    with what still changes forgotten. Objects are matched across the states by the fields that reach them from the
    backend and the batch (``_aligned``): an object a step makes anew stands where the one it replaces stood."""
    for _ in range(ROUNDS):
        nxt = it.join([p, _aligned(p, step(_copy(p)), it)])
        if _shape(nxt) == _shape(p):
            return nxt
        p = nxt
    return it.join([p, _aligned(p, step(_copy(p)), it), _forgotten(it, p)])


def _paths_to(p: Path) -> dict[str, str]:
    """oid -> the first field path reaching it from the roots (``backend``, ``batch``), fields in name order."""
    out, todo = {}, [("backend", "backend"), ("batch", "batch")]
    while todo:
        oid, path = todo.pop(0)
        if oid in out or oid not in p.heap:
            continue
        out[oid] = path
        o = p.heap[oid]
        todo += [(v.oid, f"{path}.{k}") for k, v in o.fields if isinstance(v, Ref)]
        todo += [(m.oid, f"{path}.{k}<{p.heap[m.oid].at if m.oid in p.heap else '?'}>") for k, v in o.fields
                 if isinstance(v, tuple) and v[0] == "alts" for m in v[1] if isinstance(m, Ref)]
        todo += [(v.oid, f"{path}[{p.heap[v.oid].at if v.oid in p.heap else '?'}]") for v in o.alts
                 if isinstance(v, Ref)]
    return out


def _aligned(p: Path, q: Path, it: Interpreter | None = None) -> Path:
    """``q`` with each object reached by the same field path as one of ``p``'s renamed to that object's id (objects
    a dict holds are named by where they were made: those of one site are one object, their fields joined), and the
    objects no root reaches dropped."""
    mine = {path: oid for oid, path in _paths_to(p).items()}
    theirs = _paths_to(q)
    names = {}
    for oid, path in theirs.items():
        names.setdefault(path, []).append(oid)
    rename = {}
    for path, oids in names.items():
        target = mine.get(path, f"{oids[0]}'")
        for oid in oids:
            rename[oid] = target

    def ren(v):
        if isinstance(v, tuple) and v[0] == "alts":
            return ("alts", tuple(sorted(dict.fromkeys(map(ren, v[1])), key=str)))
        return Ref(rename[v.oid]) if isinstance(v, Ref) and v.oid in rename else v

    heap: dict = {}
    for oid, o in q.heap.items():
        if oid not in rename:
            continue
        o = replace(o, fields=tuple((k, ren(v)) for k, v in o.fields), alts=tuple(dict.fromkeys(map(ren, o.alts))))
        new = rename[oid]
        if new in heap and heap[new] != o and it is not None:  # several objects of one site: one, joined
            heap[new] = it.join([Path({new: heap[new]}, {}), Path({new: o}, {})]).heap[new]
        else:
            heap[new] = o
    return Path(heap, {k: ren(v) for k, v in q.local.items()}, q.cond, q.ret)


def _forgotten(it: Interpreter, p: Path) -> Path:
    q = _copy(p)
    it._forget_values(q, [Ref(oid) for oid in q.heap])
    return q


def _shape(p: Path):
    """A state's fields with each unknown as one value, its objects named by the field paths reaching them: two states
    of one shape know the same things."""
    names = _paths_to(p)

    def val(v):
        if isinstance(v, tuple) and v[0] == "alts":
            return ("alts", tuple(sorted(str(val(m)) for m in v[1])))
        return "?" if isinstance(v, Sym) else ("ref", names.get(v.oid)) if isinstance(v, Ref) else v

    return {names[oid]: (tuple((k, val(v)) for k, v in o.fields), o.cls.key if o.cls else None, o.made, o.maybe,
                         o.box, tuple(sorted({str(val(v)) for v in o.alts})), o.opened)
            for oid, o in p.heap.items() if oid in names}


def _one(it: Interpreter, paths: list[Path]) -> Path:
    return paths[0] if len(paths) == 1 else it.join(paths)


def _retire_batch(it: Interpreter, p: Path) -> None:
    """An earlier capture's batch moved to an object id of its own before this capture makes its new one at
    ``batch``: what the earlier capture stored of it (a cache keyed by the batch) refers to that old object, never to
    the new batch."""
    if "batch" not in p.heap:
        return
    old = p.heap.pop("batch")
    oid = f"o{next(it.budget.objs)}"
    p.heap[oid] = old

    def ren(v):
        if isinstance(v, tuple) and v and v[0] == "alts":
            return ("alts", tuple(ren(m) for m in v[1]))
        return Ref(oid) if isinstance(v, Ref) and v.oid == "batch" else v

    for k, o in list(p.heap.items()):
        if any(ren(v) != v for _, v in o.fields) or any(ren(v) != v for v in o.alts):
            p.heap[k] = replace(o, fields=tuple((f, ren(v)) for f, v in o.fields),
                                alts=tuple(ren(v) for v in o.alts))
    p.local = {k: ren(v) for k, v in p.local.items()}


def _forget_outside(it: Interpreter, p: Path) -> None:
    """What the runner's own code may have stored, forgotten before a step: on the backend and the objects the
    interpretation did not make (``Interpreter.forget_outside``), and on the capture batch the fields code it does
    not run may store there (``Interpreter.stored_on_batch``)."""
    it.forget_outside(p, ("backend",))
    o = p.heap.get("batch")
    if o is not None and o.made:
        gone = [k for k, _ in o.fields if it.maybe_stored(o, k)]
        if gone:
            fields = {k: (it.fresh() if k in gone else v) for k, v in o.fields}
            p.heap["batch"] = replace(o, fields=tuple(sorted(fields.items(), key=lambda kv: kv[0])))


def _new_batch(it: Interpreter) -> Obj:
    """The runner's capture batch: where the tree's capture runner builds its ``ForwardBatch`` (``_runner_batch``),
    a made object with the fields it passes or stores unknown (a literal the same in every construction kept),
    every field code the interpretation does not run may store there unknown (``maybe``), and every other field its
    dataclass default; else one whose every field is unknown."""
    spec = _runner_batch(it.tree)
    cls = _batch_class(it.tree)
    if spec is None or cls is None:
        return Obj(cls, (), False, "the runner's capture batch")
    fields = {k: (it._literal(v) if v is not None else it.fresh()) for k, v in sorted(spec.items())}
    given = frozenset(f"!{k}" for k in fields)  # the construction's own: not among those code outside may store
    return Obj(cls, tuple(sorted(fields.items())), True, "the runner's capture batch", frozenset({ON_BATCH}) | given)


def _runner_batch(tree: Tree) -> dict | None:
    """field -> the literal every construction gives it (None: not one literal), over the ``ForwardBatch(...)``
    constructions in the method holding the runner's capture call and the runner's methods it calls (``self.m(...)``,
    transitively: ``_capture_methods``), a field stored on the constructed local later in the same method unknown;
    None when there is none, or one passes ``**`` or sets an attribute named by an expression. A batch the runner
    builds elsewhere (a warm-up's dummy run) is not the capture's."""
    memo = tree.__dict__.setdefault("_captured_runner_batch", {})
    if "spec" in memo:
        return memo["spec"]
    memo["spec"] = None
    at, cls = capture_call(tree), _batch_class(tree)
    if at is None or cls is None:
        return None
    mod = next((tree.module(m) for m in tree.paths if tree.rel(m) == at[0]), None)
    runner = next((c for c in (mod.classes.values() if mod else ())
                   if c.node.lineno <= at[1] <= (c.node.end_lineno or c.node.lineno)), None)
    if runner is None:
        return None
    names = _dataclass_fields(tree, cls)
    spec: dict = {}
    seen = 0
    for c, fn in _capture_methods(tree, runner, at[1]):
        calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)
                 and isinstance(n.func, (ast.Name, ast.Attribute)) and tree.resolve_expr(c.module, n.func) is cls]
        if not calls:
            continue
        local = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and n.value in calls
                 for t in n.targets if isinstance(t, ast.Name)}
        for call in calls:
            seen += 1
            given = dict(zip(names, call.args))
            for k in call.keywords:
                if k.arg is None:
                    return None
                given[k.arg] = k.value
            if any(isinstance(a, ast.Starred) for a in call.args):
                return None
            for k in [k for k in spec if k not in given]:
                spec[k] = None  # its default in this construction, something else in an earlier one
            for k, v in given.items():
                lit = v if isinstance(v, ast.Constant) else None
                if k in spec and (spec[k] is None or lit is None or ast.dump(spec[k]) != ast.dump(lit)):
                    spec[k] = None
                elif k not in spec:
                    spec[k] = lit if seen == 1 else None  # absent from an earlier construction: not one value
        for _, name, recv in attribute_stores(fn):
            if isinstance(recv, ast.Name) and recv.id in local:
                if name is None:
                    return None
                spec[name] = None
    if not seen:
        return None
    memo["spec"] = spec
    return spec


def _capture_methods(tree: Tree, runner: ClassInfo, line: int) -> list:
    """(class, method) of the runner's method holding ``line`` and of each of the runner's methods it calls through
    ``self`` (on its MRO, transitively), in the order found."""
    start = next(((c, f) for c in tree.mro(runner) for f in c.methods.values()
                  if c.module is runner.module and f.lineno <= line <= (f.end_lineno or f.lineno)), None)
    if start is None:
        return []
    out, todo, seen = [], [start], set()
    while todo:
        c, fn = todo.pop(0)
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        out.append((c, fn))
        for n in ast.walk(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                    and n.func.value.id == "self":
                hit = tree.lookup(runner, n.func.attr)
                if hit is not None:
                    todo.append(hit)
    return out


def _batch_class(tree: Tree):
    ks = tree.classes_named("ForwardBatch")
    return ks[0] if len(ks) == 1 else None


def _run_method(it: Interpreter, ci: ClassInfo, name: str, me: Ref, paths: list[Path], named: dict):
    """The paths after ``ci``'s method ``name`` ran (to its end or a return) on each of ``paths`` (parameters by name
    from ``named``, the rest unknown), or None when the class has no such method."""
    hit = it.tree.lookup(ci, name)
    if hit is None:
        return None
    fn = Fn(hit[1], hit[0].module, hit[0])
    out = []
    it.last_died.clear()
    it.budget.steps = 0  # each step of the sequence gets the whole statement budget
    for p in paths:
        local = it.bind(fn, p, me, ([], {}), defaults_apply=False)
        for k, v in named.items():
            if k in local:
                local[k] = v
        q = Path(p.heap, local, p.cond)
        res = it.block(fn, fn.node.body, [q])
        out += [Path(r.heap, {}, r.cond) for r in res.live + res.returned]
        it.last_died += res.died
    return out


def _forget_fields(it: Interpreter, p: Path, attrs: set[str]) -> None:
    """``attrs`` forgotten on every object of ``p``'s heap: a field stored is unknown again, and one not stored may
    have been."""
    for oid, o in list(p.heap.items()):
        fields = {k: (it.fresh() if k in attrs else v) for k, v in o.fields}
        p.heap[oid] = replace(o, fields=tuple(sorted(fields.items(), key=lambda kv: kv[0])),
                              maybe=o.maybe | frozenset(attrs))


def _stored_after_startup(tree: Tree, ci: ClassInfo) -> set[str]:
    """What a method of ``ci``'s MRO outside start-up stores (any receiver) or names to ``setattr``."""
    out = set()
    for c in tree.mro(ci):
        for name, node in c.methods.items():
            if name in STARTUP_ENTRIES:
                continue
            for n in ast.walk(node):
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)):
                    out.add(n.attr)
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" \
                        and len(n.args) >= 2 and isinstance(n.args[1], ast.Constant):
                    out.add(n.args[1].value)
    return out


def _chain(it: Interpreter, hops, lines: list[int], me: Ref, batch: Ref, paths: list[Path]):
    """(paths at the read's line, why the others ended, what could not be followed or "") along the call chain."""
    died: list = []
    for i, h in enumerate(hops):
        fn = Fn(h.node, h.module, h.owner)
        if i == 0:
            nxt = []
            for p in paths:
                local = it.bind(fn, p, me, ([], {}), defaults_apply=False)
                if BATCH in local:
                    local[BATCH] = batch
                nxt.append(Path(p.heap, local, p.cond))
            paths = nxt
        arrived, lost = _towards(it, fn, fn.node.body, lines[i], paths, died)
        if lost:
            return [], died, lost
        if i == len(hops) - 1:
            return arrived, died, ""
        callee = Fn(hops[i + 1].node, hops[i + 1].module, hops[i + 1].owner)
        paths, lost = _enter(it, fn, callee, lines[i], arrived, me, died)
        if lost:
            return [], died, lost
    return [], died, ""


def _enter(it: Interpreter, fn: Fn, callee: Fn, line: int, paths: list[Path], me: Ref, died: list):
    """The paths in ``callee`` called at ``line`` of ``fn`` from each of ``paths``: the call found there, its
    arguments evaluated in the caller and bound."""
    calls = []
    for n in ast.walk(fn.node):
        if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno):
            name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)
            if name == callee.node.name:
                calls.append(n)
    if len(calls) != 1:
        return [], f"{len(calls)} calls of {callee.node.name} at {fn.file}:{line}"
    c = calls[0]
    f = c.func
    receiver = None
    if callee.owner is not None:
        if isinstance(f, ast.Attribute) and (isinstance(f.value, ast.Name) and f.value.id == "self"
                                             or isinstance(f.value, ast.Call)):
            receiver = me
        else:
            return [], f"the receiver of {ast.unparse(f)} at {fn.file}:{line}"
    out = []
    for p in paths:
        for q, args in it._args(fn, p, c, died):
            local = it.bind(callee, q, receiver, args)
            if local is None:
                return [], f"the arguments of {ast.unparse(f)} at {fn.file}:{line}"
            out.append(Path(q.heap, local, q.cond))
    return it._capped(out), ""


def _towards(it: Interpreter, fn: Fn, stmts, line: int, paths: list[Path], died: list):
    """(the paths that reach the statement holding ``line``, "" or what could not be followed)."""
    for s in stmts:
        if not paths:
            return [], ""
        end = s.end_lineno or s.lineno
        if line > end:
            res = it.block(fn, [s], paths)
            paths = res.live
            died += res.died
            died += [(r, Died("return", fn.file, s.lineno, "returns before it")) for r in res.returned]
            continue
        if line < s.lineno:
            return [], f"line {line} is not in {fn.node.name} ({fn.file})"
        if isinstance(s, ast.If):
            if s.test.lineno <= line <= (s.test.end_lineno or s.test.lineno):
                return paths, ""
            in_body = bool(s.body) and s.body[0].lineno <= line <= (s.body[-1].end_lineno or line)
            nxt = []
            for p in paths:
                for q, t in it.test(fn, p, s.test, died):
                    for r, tv in it._split(q, t):
                        if tv == in_body:
                            nxt.append(r)
                        else:
                            died.append((r, Died("false", fn.file, s.lineno, f"`{ast.unparse(s.test)}` is "
                                                 f"{'false' if in_body else 'true'} ({fn.owner.name + '.' if fn.owner else ''}"
                                                 f"{fn.node.name})")))
            return _towards(it, fn, s.body if in_body else s.orelse, line, it._capped(nxt), died)
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            head_end = (s.iter if isinstance(s, (ast.For, ast.AsyncFor)) else s.test).end_lineno
            if line <= head_end:
                return paths, ""
            for p in paths:
                it._forget_stores(fn, p, s.body + s.orelse)
            return _towards(it, fn, s.body + s.orelse, line, paths, died)
        if isinstance(s, (ast.With, ast.AsyncWith)):
            if line < s.body[0].lineno:
                return paths, ""
            return _towards(it, fn, s.body, line, paths, died)
        if isinstance(s, ast.Try):
            blocks = [s.body, *(h.body for h in s.handlers), s.orelse, s.finalbody]
            for b in blocks:
                if b and b[0].lineno <= line <= (b[-1].end_lineno or line):
                    if b is not s.body:
                        for p in paths:
                            it._forget_stores(fn, p, s.body + [x for h in s.handlers for x in h.body])
                    return _towards(it, fn, b, line, paths, died)
            return paths, ""
        return paths, ""  # the statement holding the line (or a compound one the interpretation does not enter)
    return [], f"line {line} is not in {fn.node.name} ({fn.file})"


def _reasons(died: list, reached: list[Path]) -> str:
    """How the paths ended, each way once, at most three."""
    seen = []
    order = {"false": 0, "assert": 1, "none": 2, "raise": 3}
    for _, d in sorted(died, key=lambda x: order.get(x[1].kind, 5)):
        if d.kind == "return":
            continue
        text = f"{d.what} at {d.file}:{d.line}"
        if text not in seen:
            seen.append(text)
    if reached:
        seen.append("the conditions of the paths that reach it cannot hold together")
    if not seen:
        return "no path reaches it"
    more = f" (and {len(seen) - 3} more)" if len(seen) > 3 else ""
    return "; ".join(seen[:3]) + more


__all__ = ["Captured", "captured", "NONE"]
