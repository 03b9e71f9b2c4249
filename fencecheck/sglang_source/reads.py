"""Read sites: where a backend's methods read scheduler-shared state, followed through ``self`` calls (the subject's
MRO), ``super()``, helper functions (resolved through imports), child backends whose class is known from
``self.x = Cls(...)``, and the kernels those maps are passed to.

A read is an access to one of ``SHARED_ATTRS`` (or a local alias of one, including one a conditional expression binds to
the map or None, or a parameter of that name) used as data:
indexed, passed to a call, or the receiver of a method call; or a call to a translator method that reads them
(``TRANSLATOR_READS``) or to a pool method of the tree that does (``pool_reads``). Taking the attribute into a local
or ``self`` field is not a read. Branches on the forward mode are decided for the mode at hand; other tests are kept as
conditions on the path. A host sync (``.item()``,
``.tolist()``, ``.cpu()``, ``synchronize()``) before a read on its path means the path cannot be captured into a CUDA
graph: such a read is shown as not a finding. The functions visited form a ``networkx`` call graph.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

import networkx as nx

from ..vocab import SHARED_LOCATIONS
from .declare import Modes, compare_mode
from .getters import getters
from .host_syncs import _uncond, host_syncs
from .pool_reads import pool_reads
from .tree import ClassInfo, FuncInfo, Tree, body_nodes, copy_node

#: Scheduler-shared maps read by attribute name (docs/sglang-0.5.23.md, "Read sites per backend family"): the
#: vocabulary's one list.
SHARED_ATTRS = SHARED_LOCATIONS
#: Translator methods that read a shared map, and the map they read (the tree's own pool methods are added to these
#: per tree: ``pool_reads.pool_reads``).
TRANSLATOR_READS = {
    "pack_read_stream": "req_to_token",
    "copy_page_table": "req_to_token",
    "read_source": "req_to_token",
    "read_table": "req_to_token",
    "translate_loc_from_full_to_swa": "full_to_swa_index_mapping",
}
#: Methods whose call is a host synchronisation (a CUDA graph cannot capture it).
HOST_SYNC_METHODS = ("item", "tolist", "cpu", "synchronize", "numpy")
#: Receiver methods that do not read a tensor's data.
_META = ("shape", "size", "dtype", "device", "dim", "numel", "stride", "is_contiguous", "data_ptr")

#: Calls followed below an entry method: a call from a function this many calls deep is not followed (a ``Cut``).
MAX_DEPTH = 8
#: Read paths one function's result keeps (each distinct call chain to a read is one path; so is each cut): the
#: paths past it are dropped, replaced by one ``Cut``.
MAX_PATHS = 5000
#: Function bodies walked for one tree (a walk reused from the memo is not counted): past it, calls are cut.
MAX_WALKS = 200_000
_ANY = "*"  # the memo's mode for a function whose walk no mode decided

#: The limits a ``Cut`` names.
LIMIT_DEPTH = "call depth"
LIMIT_PATHS = "read paths"
LIMIT_WALKS = "function walks"
LIMIT_NESTING = "nesting"


def hard_sync(s, graph: bool = True) -> bool:
    """Whether ``s`` (a ``host_sync``) keeps its path out of every run of its mode by itself: a capture-mode test
    (the path needs ``get_is_capture_mode()`` false, and it is true while a graph is captured or a breakable graph
    runs), in a mode a decode graph replays (``graph``). Nothing does in a mode that runs eagerly: there the test is
    false and the path runs. A host sync does not either: no graph captures a path that syncs (the capture fails), but
    a replay that runs the forward eagerly runs it, sync and all, so an explicit sync (a 2-tuple) and a call that
    host-syncs on every path (``host_syncs``, a 4-tuple) are judged with the capture's facts
    (``extract._whole_graph``)."""
    return graph and s is not None and len(s) == 3


def never_captured(s) -> bool:
    """Whether ``s`` (a ``host_sync``) keeps its path out of every captured graph: an explicit host sync or a
    capture-mode test. For reads no eager replay makes apart from the graph: a capture tail hook's, the model's own
    layers' (a breakable graph breaks around attention only)."""
    return s is not None and len(s) in (2, 3)


#: Tensor methods whose result lives where the tensor does (a host tensor's ``.max()`` is a host tensor).
_SAME_DEVICE = frozenset({"max", "min", "sum", "long", "int", "float", "clone", "contiguous", "view", "reshape",
                          "flatten", "squeeze", "unsqueeze", "cumsum"})


def _host_side(e: ast.expr) -> bool:
    """Whether ``e`` is a host tensor by SGLang's naming (``seq_lens_cpu``, ``forward_batch.seq_lens_cpu.max()``,
    ``extend_seq_lens_cpu_list[i]``): its ``.tolist()`` or ``.item()`` copies nothing from the device, so no graph
    capture fails on it. Taking fewer syncs only keeps more reads."""
    while True:
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _SAME_DEVICE:
            e = e.func.value
        elif isinstance(e, ast.Subscript):
            e = e.value
        else:
            break
    name = e.id if isinstance(e, ast.Name) else e.attr if isinstance(e, ast.Attribute) else None
    return name is not None and (name.endswith("_cpu") or "_cpu_" in name)


def then_sync(a, b):
    """The sync in force given two on a path: the first hard one (``hard_sync``), else the first of them."""
    if hard_sync(a):
        return a
    if hard_sync(b):
        return b
    return a or b


def limit_text(limit: str) -> str:
    """The limit a ``Cut`` names, with its value."""
    return {
        LIMIT_NESTING: "Python's recursion limit (the code below is nested too deeply to walk)",
        LIMIT_DEPTH: f"the call depth limit ({MAX_DEPTH} calls below the entry method, reads.MAX_DEPTH)",
        LIMIT_PATHS: f"the read path limit ({MAX_PATHS} paths per function, reads.MAX_PATHS)",
        LIMIT_WALKS: f"the function walk limit ({MAX_WALKS} walks per tree, reads.MAX_WALKS)",
    }[limit]


@dataclass(frozen=True)
class Hop:
    """One call on a read's path: the function entered and the line of the call that entered it."""

    func: str  # Class.method or module.func
    file: str
    line: int  # the def line of the function entered
    key: str = field(default="", compare=False)  # the function's qualified name (module.Class.method)

    def text(self) -> str:
        return f"{self.func} ({self.file}:{self.line})"


@dataclass(frozen=True)
class Read:
    location: str
    file: str
    line: int
    what: str  # the source text of the access
    via: tuple[Hop, ...]
    conditions: tuple[str, ...] = ()
    #: (file, line) of a host sync before the read on its path; (file, line, "capture") of a capture-mode test the
    #: path needs false (the read never runs while a graph is captured)
    host_sync: tuple | None = None
    #: where the map comes from when the read does not name it (a getter field's lambda, ``getters``), or None
    source: str | None = None

    def via_text(self) -> tuple[str, ...]:
        """The hops' texts, then the map's source when it has one."""
        return tuple(h.text() for h in self.via) + ((self.source,) if self.source else ())


@dataclass(frozen=True)
class Cut:
    """A call on a read path that a limit kept the walk from following (``limit``, one of ``limit_text``'s): what it
    reads is not known. ``file``/``line``/``what``: the call not followed (for ``LIMIT_PATHS``, the function whose
    paths were dropped); ``via``, ``conditions`` and ``host_sync`` as a ``Read``'s, up to that call."""

    limit: str
    file: str
    line: int
    what: str
    via: tuple[Hop, ...]
    conditions: tuple[str, ...] = ()
    host_sync: tuple | None = None

    def text(self) -> str:
        return f"{self.what} ({self.file}:{self.line}) not followed: {limit_text(self.limit)}"


@dataclass(frozen=True)
class _Entry:
    """One function's walk: its reads and cuts (each path starting with the function's hop), the host sync every
    path of it performs (or None), and what the result depends on besides the function and the mode: ``height``
    (the calls below it the walk followed, for a result no limit cut), ``deep`` (a call was cut by ``MAX_DEPTH``: the
    result holds for the depth it was walked at only), ``open`` (functions above it on the path whose recursive call
    was not followed: the result holds on that path only), ``spent`` (``MAX_WALKS`` cut a call: never reused)."""

    reads: tuple
    cuts: tuple
    sync: tuple | None
    height: int
    deep: bool
    open: frozenset
    spent: bool
    mode_free: bool


@dataclass
class _Fn:
    key: str
    label: str
    file: str
    node: ast.FunctionDef
    module: object
    subject: ClassInfo | None
    owner: ClassInfo | None


class ReadWalker:
    """Finds the reads under an entry method. A function's walk is memoized only when it is a function of the
    function and the mode alone: a result cut by ``MAX_DEPTH`` is kept for that depth only, one that depends on a
    recursive call cut above it (or on the exhausted walk budget) is not kept."""

    def __init__(self, tree: Tree, modes: Modes, attr_types):
        self.tree, self.modes, self.attr_types = tree, modes, attr_types
        self.graph = nx.DiGraph()
        self._memo: dict = {}  # (subject, function, mode or _ANY) -> _Entry valid at any depth its height allows
        self._deep: dict = {}  # (subject, function, mode, depth) -> _Entry cut by MAX_DEPTH at that depth
        self.unfollowed: dict[str, set[str]] = {}  # subject key -> texts of calls on children of unknown class
        self.functions: dict[str, tuple] = {}  # qualified name -> (def node, file) of every function walked
        self.walks = 0  # function bodies walked (MAX_WALKS)
        self._reach: dict = {}  # (subject, function) -> may_read
        #: method name -> the map a call of it reads: the translators above and the tree's pool methods
        self.translators = {**{m: loc for m, (loc, _, _) in pool_reads(tree).items()}, **TRANSLATOR_READS}
        #: getter field name -> (the map ``X.name()`` returns, the file and line of its lambda) (``getters.getters``):
        #: its use is a read of that map
        self.getters = getters(tree)

    # public --------------------------------------------------------------------------------------------------------
    def method_reads(self, subject: ClassInfo, name: str, mode: str | None) -> list[Read]:
        return self.method_walk(subject, name, mode)[0]

    def method_walk(self, subject: ClassInfo, name: str, mode: str | None) -> tuple[list[Read], list[Cut]]:
        """The reads under ``subject``'s method ``name`` in ``mode`` (None: no mode decides a test) and the calls
        on their paths a limit kept from being followed."""
        hit = self.tree.lookup(subject, name)
        if hit is None:
            return [], []
        owner, node = hit
        fn = self._fn(subject, owner, node)
        try:
            e = self._fn_reads(fn, mode, 0, ())
        except RecursionError:
            self.tree.note(fn.file, node.lineno, f"{fn.label}: nested too deeply to walk its reads (Python's "
                                                 "recursion limit)")
            return [], [Cut(LIMIT_NESTING, fn.file, node.lineno, fn.label, ())]
        if e is None:  # the walk budget was spent before this entry
            return [], [Cut(LIMIT_WALKS, fn.file, node.lineno, fn.label, ())]
        return list(e.reads), list(e.cuts)

    def function_reads(self, module, node: ast.FunctionDef, mode: str | None) -> list[Read]:
        """The reads under the module-level function ``node`` of ``module`` in ``mode`` (as ``method_walk``; a walk
        a limit cut gives the reads found)."""
        fn = self._fn(None, None, node, module)
        try:
            e = self._fn_reads(fn, mode, 0, ())
        except RecursionError:
            self.tree.note(fn.file, node.lineno, f"{fn.label}: nested too deeply to walk its reads (Python's "
                                                 "recursion limit)")
            return []
        return list(e.reads) if e is not None else []

    # internals -----------------------------------------------------------------------------------------------------
    def _fn(self, subject, owner, node, module=None) -> _Fn:
        if owner is not None:
            label = f"{owner.name}.{node.name}"
            return _Fn(f"{owner.key}.{node.name}", label, owner.file, node, owner.module, subject, owner)
        return _Fn(f"{module.name}.{node.name}", f"{module.name.rsplit('.', 1)[-1]}.{node.name}", module.rel, node,
                   module, None, None)

    def target(self, fn: _Fn, c: ast.Call, note: bool = True) -> _Fn | None:
        """The function the call ``c`` in ``fn`` enters, when the reader can tell (a ``self`` or ``super()`` call on
        the subject's MRO, a method of a child of known class, a helper function resolved through imports); a
        backend entry method called on a child of unknown class is noted under ``unfollowed``."""
        rw, tree = self, self.tree
        f = c.func
        target = None
        if isinstance(f, ast.Attribute):
            v = f.value
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super" and fn.subject:
                hit = tree.lookup(fn.subject, f.attr, fn.owner)
                if hit:
                    target = rw._fn(fn.subject, hit[0], hit[1])
            elif isinstance(v, ast.Name) and v.id == "self" and fn.subject is not None:
                hit = tree.lookup(fn.subject, f.attr)
                if hit:
                    target = rw._fn(fn.subject, hit[0], hit[1])
            elif isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == "self" \
                    and fn.subject is not None:
                cls = rw.attr_types(fn.subject).get(v.attr)
                if cls is not None:
                    hit = tree.lookup(cls, f.attr)
                    if hit:
                        target = rw._fn(cls, hit[0], hit[1])
                elif f.attr in CHILD_ENTRY_METHODS and note:
                    rw.unfollowed.setdefault(fn.subject.key, set()).add(
                        f"{ast.unparse(f)} ({fn.file}:{c.lineno})")
            elif isinstance(v, ast.Name):
                r = tree.resolve(fn.module, v.id)
                if isinstance(r, tuple) and r[0] == "module":
                    m = tree.module(r[1])
                    fi = m.functions.get(f.attr) if m else None
                    if fi is not None:
                        target = rw._fn(None, None, fi.node, fi.module)
        elif isinstance(f, ast.Name) and f.id == "self" and fn.subject is not None:  # the object called: __call__
            hit = tree.lookup(fn.subject, "__call__")
            if hit:
                target = rw._fn(fn.subject, hit[0], hit[1])
        elif isinstance(f, ast.Name):
            r = tree.resolve(fn.module, f.id)
            if isinstance(r, FuncInfo):
                target = rw._fn(None, None, r.node, r.module)
        return target

    def getter_of(self, node) -> tuple[str, str] | None:
        """``X.name()`` (no arguments) of a getter field: (the map it returns, the lambda that returns it); else
        None."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args \
                and not node.keywords and node.func.attr in self.getters:
            name = node.func.attr
            loc, file, line = self.getters[name]
            return loc, f"`{name}()` returns {loc}: the lambda passed as {name}= ({file}:{line})"
        return None

    def may_read(self, fn: _Fn) -> bool:
        """Whether a function reachable from ``fn`` through the calls a walk follows (every branch, any mode, no depth
        bound) names a shared map or calls a translator method: what a walk below ``fn`` could find, or more."""
        k = (fn.subject.key if fn.subject is not None else None, fn.key)
        if k in self._reach:
            return self._reach[k]
        seen, todo = {k}, [fn]
        while todo:
            f = todo.pop()
            for n in _walk_no_defs(f.node):
                if isinstance(n, ast.Call):
                    if isinstance(n.func, ast.Attribute) and (n.func.attr in self.translators
                                                              or n.func.attr in self.getters):
                        self._reach[k] = True
                        return True
                    t = self.target(f, n, note=False)
                    if t is None:
                        continue
                    tk = (t.subject.key if t.subject is not None else None, t.key)
                    if self._reach.get(tk) is True:
                        self._reach[k] = True
                        return True
                    if tk not in seen and tk not in self._reach:
                        seen.add(tk)
                        todo.append(t)
                elif (isinstance(n, ast.Attribute) and n.attr in SHARED_ATTRS) or \
                        (isinstance(n, ast.Name) and n.id in SHARED_ATTRS):
                    self._reach[k] = True
                    return True
        for x in seen:  # everything reachable from fn was seen, and none of it reads
            self._reach[x] = False
        return False

    def _fn_reads(self, fn: _Fn, mode, depth, stack) -> _Entry | None:
        """``fn``'s walk at ``depth`` calls below the entry, with ``stack`` the memo keys of the functions above it
        on the path; None when the walk budget is spent."""
        sk = fn.subject.key if fn.subject is not None else None
        key = (sk, fn.key, mode)
        for k in ((sk, fn.key, _ANY), key):
            e = self._memo.get(k)
            if e is not None and depth + e.height <= MAX_DEPTH:
                return e
        e = self._deep.get(key + (depth,))
        if e is not None:
            return e
        if key in stack:  # recursion: the reads below are those of the call above, on a shorter path
            return _Entry((), (), None, 0, False, frozenset((key,)), False, False)
        if self.walks >= MAX_WALKS:
            return None
        self.walks += 1
        self.graph.add_node(fn.key, label=fn.label, file=fn.file, line=fn.node.lineno)
        hop = Hop(fn.label, fn.file, fn.node.lineno, fn.key)
        self.functions[fn.key] = (fn.node, fn.file)
        w = _BodyWalker(self, fn, mode, depth, stack + (key,))
        synced, _ = w.block(fn.node.body, (), None)
        if synced is not None and len(synced) == 3:
            synced = None  # a capture-mode test holds inside this function's paths only, not after its call
        if synced is not None and not hard_sync(synced) and _returns_early(fn.node, synced, fn.file):
            synced = None  # a host sync on the path that falls through, not on one that returns before it
        reads = [Read(r.location, r.file, r.line, r.what, (hop,) + r.via, r.conditions, r.host_sync, r.source)
                 for r in w.reads]
        cuts = [Cut(c.limit, c.file, c.line, c.what, (hop,) + c.via, c.conditions, c.host_sync) for c in w.cuts]
        if len(reads) > MAX_PATHS or len(cuts) > MAX_PATHS:
            reads, cuts = reads[:MAX_PATHS], cuts[:MAX_PATHS - 1]
            cuts.append(Cut(LIMIT_PATHS, fn.file, fn.node.lineno, fn.label, (hop,)))
        opened = w.open - {key}
        mode_free = not w.used_mode and mode is not None and not w.deep and not opened and not w.spent
        e = _Entry(tuple(reads), tuple(cuts), synced, w.height, w.deep, frozenset(opened), w.spent, mode_free)
        if e.spent or e.open:
            return e
        if e.deep:
            self._deep[key + (depth,)] = e
        else:
            self._memo[key] = e
            if mode_free:  # nothing on its paths was decided by the mode: the same for every mode
                self._memo[(sk, fn.key, _ANY)] = e
        return e


class _BodyWalker:
    def __init__(self, rw: ReadWalker, fn: _Fn, mode, depth, stack):
        self.rw, self.fn, self.mode, self.depth, self.stack = rw, fn, mode, depth, stack
        self.reads: list[Read] = []
        self.cuts: list[Cut] = []
        self.height, self.deep, self.spent, self.open = 0, False, False, frozenset()
        self.aliases: dict[str, str] = {}
        self.param_names = {a.arg for a in fn.node.args.args + fn.node.args.kwonlyargs}
        self.used_mode = False  # a test on this function's paths (or a callee's) was decided by the mode
        #: id of a call the walk does not follow -> its host sync (``host_syncs.call_sync``), as a ``host_sync``
        self.synced_calls: dict[int, tuple] = {}
        #: ``try`` and ``with`` bodies the walk is inside: a call there that may raise instead of syncing can be
        #: caught, so no call-made sync (a 4-tuple) is taken there, nor brought up from a callee
        self.guarded = 0

    # statements ------------------------------------------------------------------------------------------------------
    def block(self, stmts, conds, sync):
        """Walk ``stmts``; returns (the host sync in force after them or None, whether every path ended in a
        ``return`` or ``raise``)."""
        for s in stmts:
            sync, conds, dead = self.stmt(s, conds, sync)
            if dead:
                return sync, True
        return sync, False

    def stmt(self, s, conds, sync):
        """(sync after ``s``, the conditions for the statements after it, whether no path continues)."""
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return sync, conds, False
        if isinstance(s, ast.Return):
            return self.exprs([s.value] if s.value is not None else [], conds, sync), conds, True
        if isinstance(s, ast.Raise):
            return sync, conds, True
        if isinstance(s, ast.If):
            t = self.test(s.test)
            sync = self.exprs([s.test], conds, sync)
            if t is True:
                after, dead = self.block(s.body, conds, sync)
                return after, conds, dead
            if t is False:
                after, dead = self.block(s.orelse, conds, sync)
                return after, conds, dead
            text = ast.unparse(s.test)
            neg = f"not ({text})"
            body_free, else_free = _capture_guard(s.test)
            mark = (self.fn.file, s.lineno, "capture")
            b_sync = then_sync(sync, mark) if body_free else sync
            e_sync = then_sync(sync, mark) if else_free else sync
            _, d1 = self.block(s.body, conds + (text,), b_sync)
            _, d2 = self.block(s.orelse, conds + (neg,), e_sync)
            if d1 and d2:
                return sync, conds, True
            if d1:
                return e_sync, conds + (neg,), False
            if d2:
                return b_sync, conds + (text,), False
            return sync, conds, False
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            sync = self.exprs([s.iter if not isinstance(s, ast.While) else s.test], conds, sync)
            self.block(s.body, conds, sync)
            self.block(s.orelse, conds, sync)
            return sync, conds, False
        if isinstance(s, (ast.With, ast.AsyncWith)):
            sync = self.exprs([i.context_expr for i in s.items], conds, sync)
            self.guarded += 1  # a context manager may swallow an exception: no call's raise stands for its sync
            after, dead = self.block(s.body, conds, sync)
            self.guarded -= 1
            return after, conds, dead
        if isinstance(s, ast.Try):
            self.guarded += 1
            after, _ = self.block(s.body, conds, sync)
            for h in s.handlers:
                self.block(h.body, conds, sync)
            self.block(s.orelse, conds, after)
            self.block(s.finalbody, conds, sync)
            self.guarded -= 1
            return sync, conds, False
        if isinstance(s, ast.Match):
            sync = self.exprs([s.subject], conds, sync)
            for c in s.cases:
                self.block(c.body, conds + (f"case {ast.unparse(c.pattern)}",), sync)
            return sync, conds, False
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            value = s.value
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            loc = _shared_of(value, self.aliases) if value is not None else None
            if loc is not None and len(targets) == 1 and isinstance(targets[0], (ast.Name, ast.Attribute)):
                if isinstance(targets[0], ast.Name):
                    self.aliases[targets[0].id] = loc
                return sync, conds, False  # taking a reference is not a read
        return self.exprs([s], conds, sync), conds, False

    def test(self, e):
        """True/False when the test is decided by the mode (or ``in_capture``, False on replay); None otherwise."""
        if self.mode is None:
            return None
        value, used = decided_test(self.rw.modes, self.mode, self._inlined(e))
        self.used_mode |= used
        return value

    def _inlined(self, e):
        """``e`` with each call ``self.m(args)`` to a one-expression predicate of the walk's class replaced by that
        expression, its parameters bound to the arguments, so a mode test inside it decides the test too
        (DeepSeek-V4's ``self._use_sparse_prefill(forward_batch, ...)`` returns ``... and
        forward_batch.forward_mode.is_extend_without_speculative() and ...``). ``m`` is taken where the class's MRO
        defines it as a plain method (no decorator, not async) whose body, past a docstring, is one ``return``, with
        every parameter given at the call, and the tree's only definition of the name (``_predicate_body``). Anything
        else is left as it is."""
        subject = self.fn.subject
        calls = [n for n in ast.walk(e) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"] if subject is not None else []
        if not calls:
            return e
        tree = self.rw.tree
        subs = {}
        for c in calls:
            body = _predicate_body(tree, subject, c)
            if body is not None:
                subs[id(c)] = body
        return copy_node(e, subs) if subs else e  # a copy: the walked tree itself is left as it is

    # expressions -----------------------------------------------------------------------------------------------------
    def exprs(self, nodes, conds, sync):
        """Record reads in ``nodes`` and follow the calls they make, in source order; returns the sync in force."""
        after = sync
        inside: dict[int, tuple] = {}  # node id -> the sync of the call whose arguments hold it
        for node in nodes:
            for sub in _walk_no_defs(node):
                here = inside.get(id(sub), sync) if inside else sync
                if isinstance(sub, ast.Call):
                    got = self.call(sub, conds, here)
                    if got is not None and not hard_sync(got) and got is not here and not _always(node, sub):
                        got = here  # a host sync under a condition of the expression is not on every path
                        self.synced_calls.pop(id(sub), None)
                    after = then_sync(got, after)
                    mark = self.synced_calls.get(id(sub))
                    if mark is not None:  # what its arguments read is in the same path a graph cannot capture
                        for a in [*sub.args, *(k.value for k in sub.keywords)]:
                            for n in ast.walk(a):
                                inside.setdefault(id(n), then_sync(here, mark))
                loc = self.read_of(sub)
                if loc is not None:
                    getter = self.rw.getter_of(sub)
                    self.reads.append(Read(loc, self.fn.file, sub.lineno, ast.unparse(sub)[:120], (), conds, here,
                                           getter[1] if getter else None))
        return after

    def read_of(self, node) -> str | None:
        parent = getattr(node, "_fc_parent", None)
        translators = self.rw.translators
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in translators:
            return translators[node.func.attr]
        loc = None
        getter = self.rw.getter_of(node)
        if getter is not None:
            loc = getter[0]  # the map it returns, read where it is used
        elif isinstance(node, ast.Attribute) and node.attr in SHARED_ATTRS and isinstance(node.ctx, ast.Load):
            loc = node.attr
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loc = self.aliases.get(node.id) or (node.id if node.id in SHARED_ATTRS else None)
        if loc is None or parent is None:
            return None
        if isinstance(parent, ast.Subscript) and parent.value is node:
            return loc
        if isinstance(parent, ast.Call) and (node in parent.args):
            return loc
        if isinstance(parent, ast.keyword):
            return loc
        if isinstance(parent, ast.Starred):
            return loc
        if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr not in _META:
            gp = getattr(parent, "_fc_parent", None)
            if isinstance(gp, ast.Call) and gp.func is parent:
                return loc
        return None

    def call(self, c: ast.Call, conds, sync):
        f = c.func
        if isinstance(f, ast.Attribute) and f.attr in HOST_SYNC_METHODS and not _host_side(f.value):
            # in a try or with body the statement may raise before the sync, and the path go on without it
            return sync if self.guarded else (self.fn.file, c.lineno)
        rw = self.rw
        target = rw.target(self.fn, c)
        if target is None:
            hs = None if self.guarded else host_syncs(rw.tree).call_sync(self.fn.node, c)  # kept on the tree
            if hs is None:
                return sync
            mark = self.synced_calls[id(c)] = (hs[0], hs[1], "call",
                                               f"`{ast.unparse(f)[:80]}` ({self.fn.file}:{c.lineno}) -> {hs[2]}")
            return then_sync(sync, mark)
        rw.graph.add_edge(self.fn.key, target.key)
        what = ast.unparse(f)[:120]
        if self.depth + 1 > MAX_DEPTH:
            self.deep = True
            if not rw.may_read(target):  # nothing below the call reads: the cut loses nothing
                return sync
            self.cuts.append(Cut(LIMIT_DEPTH, self.fn.file, c.lineno, what, (), conds, sync))
            return sync
        sub = rw._fn_reads(target, self.mode, self.depth + 1, self.stack)
        if sub is None:
            self.spent = True
            self.cuts.append(Cut(LIMIT_WALKS, self.fn.file, c.lineno, what, (), conds, sync))
            return sync
        if not sub.mode_free:
            self.used_mode = True
        self.height = max(self.height, sub.height + 1)
        self.deep |= sub.deep
        self.spent |= sub.spent
        self.open |= sub.open
        g = self.guarded

        def kept(h):  # a syncing call's sync from below does not cross a try or with body here (it may raise first)
            return None if g and h is not None and len(h) == 4 else h

        for r in sub.reads:
            via = r.via
            # the hop line is the call's line in this function, for the evidence chain
            first = Hop(via[0].func, self.fn.file, c.lineno, via[0].key) if via else None
            self.reads.append(Read(r.location, r.file, r.line, r.what, ((first,) + via[1:]) if first else via,
                                   conds + r.conditions, then_sync(kept(r.host_sync), sync), r.source))
        for x in sub.cuts:
            via = x.via
            first = Hop(via[0].func, self.fn.file, c.lineno, via[0].key) if via else None
            self.cuts.append(Cut(x.limit, x.file, x.line, x.what, ((first,) + via[1:]) if first else via,
                                 conds + x.conditions, then_sync(kept(x.host_sync), sync)))
        return then_sync(sync, kept(sub.sync))


#: Backend methods whose call on a child of unknown class leaves that child's reads unfollowed.
CHILD_ENTRY_METHODS = ("init_forward_metadata", "init_forward_metadata_out_graph", "init_forward_metadata_in_graph",
                       "forward", "forward_decode", "forward_extend")


#: SGLang's test for "a CUDA graph is being captured (or a breakable graph runs)": a path that needs it false is
#: never captured into a graph (sglang/srt/model_executor/runner_utils/capture_mode.py, ``get_is_capture_mode``).
CAPTURE_TESTS = ("get_is_capture_mode",)


def _is_capture_call(e) -> bool:
    if not isinstance(e, ast.Call) or e.args or e.keywords:
        return False
    f = e.func
    return (isinstance(f, ast.Name) and f.id in CAPTURE_TESTS) or (isinstance(f, ast.Attribute)
                                                                   and f.attr in CAPTURE_TESTS)


def _capture_guard(test) -> tuple[bool, bool]:
    """(the body runs only outside capture, the else branch does): ``if not get_is_capture_mode() [and ...]:``
    guards its body; ``if get_is_capture_mode():`` guards its else branch and what follows an early return."""
    if _is_capture_call(test):
        return False, True
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    return any(isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not) and _is_capture_call(v.operand)
               for v in parts), False


def _predicate_body(tree: Tree, subject: ClassInfo, c: ast.Call) -> ast.expr | None:
    """The returned expression of the one-``return`` method ``c`` calls on ``self`` (``_BodyWalker._inlined``), its
    parameters replaced by the call's arguments; None where it is not such a method: every parameter must be given
    at the call (a default is not taken), a bare ``forward_mode``/``fm``/``mode`` in it (which ``decided_test`` reads
    as the walked mode) must be a parameter, and the name must be the tree's only ``def`` of it, never stored or
    quoted anywhere (``x.m =``, ``m: T = ...`` in a class body, ``m=`` as a keyword, ``"m"``): a subclass's override
    in any form, an instance attribute or ``setattr`` could replace it."""
    name = c.func.attr
    hit = tree.lookup(subject, name)
    if hit is None or any(isinstance(a, ast.Starred) for a in c.args) or any(k.arg is None for k in c.keywords):
        return None
    fn = hit[1]
    if not isinstance(fn, ast.FunctionDef) or fn.decorator_list or fn.args.vararg or fn.args.kwarg:
        return None
    body = [x for x in fn.body if not (isinstance(x, ast.Expr) and isinstance(x.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    if not _sole_definition(tree, name):
        return None
    positional = [a.arg for a in fn.args.posonlyargs + fn.args.args][1:]
    params = positional + [a.arg for a in fn.args.kwonlyargs]
    if len(c.args) > len(positional):
        return None
    bound = dict(zip(positional, c.args))
    for k in c.keywords:
        if k.arg not in params or k.arg in bound:
            return None
        bound[k.arg] = k.value
    if set(bound) != set(params):
        return None  # a parameter left to its default
    if any(isinstance(n, ast.Name) and n.id in _MODE_NAMES and n.id not in bound for n in ast.walk(body[0].value)):
        return None

    class _Bind(ast.NodeTransformer):
        def visit_Name(self, node):
            return copy_node(bound[node.id]) if node.id in bound and isinstance(node.ctx, ast.Load) else node

    return _Bind().visit(copy_node(body[0].value))


def _sole_definition(tree: Tree, name: str) -> bool:
    """Whether the tree defines ``name`` by one ``def`` only and nothing stores or quotes it (``_predicate_body``)."""
    memo = tree.__dict__.setdefault("_predicate_names", {})
    if name not in memo:
        store = re.compile(rf"\b{re.escape(name)}\s*(?::[^\n=]*)?=(?!=)")
        defs = 0
        ok = True
        for m in tree.modules_containing(name):
            text = tree.raw_text(m)
            defs += len(re.findall(rf"\bdef\s+{re.escape(name)}\s*\(", text))
            if store.search(text) or f'"{name}"' in text or f"'{name}'" in text:
                ok = False
                break
        memo[name] = ok and defs == 1
    return memo[name]


def decided_test(modes: Modes, mode: str, e, in_capture: bool = False) -> tuple[bool | None, bool]:
    """(True/False when the test ``e`` is decided by the forward mode ``mode`` or by ``in_capture``, else None;
    whether a mode test decided a part of it)."""
    if isinstance(e, ast.Name) and e.id == "in_capture":
        return in_capture, False
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        t, used = decided_test(modes, mode, e.operand, in_capture)
        return (None if t is None else not t), used
    if isinstance(e, ast.BoolOp):
        parts = [decided_test(modes, mode, v, in_capture) for v in e.values]
        vals, used = [v for v, _ in parts], any(u for _, u in parts)
        if isinstance(e.op, ast.And):
            if False in vals:
                return False, used
            return (True if all(v is True for v in vals) else None), used
        if True in vals:
            return True, used
        return (False if all(v is False for v in vals) else None), used
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and _is_mode_expr(e.func.value):
        kw = {k.arg: k.value.value for k in e.keywords if isinstance(k.value, ast.Constant)}
        return modes.predicate(e.func.attr, mode, kw), True
    if isinstance(e, ast.Compare) and len(e.ops) == 1 and _is_mode_expr(e.left):
        return compare_mode(modes, mode, e.ops[0], e.comparators[0]), True
    return None, False


#: The bare names ``decided_test`` reads as the walked forward mode.
_MODE_NAMES = ("forward_mode", "fm", "mode")


def _is_mode_expr(e) -> bool:
    if isinstance(e, ast.Attribute) and e.attr == "forward_mode":
        return True
    return isinstance(e, ast.Name) and e.id in _MODE_NAMES


def _shared_of(value, aliases) -> str | None:
    """The shared map ``value`` names: the attribute, a local alias of one, or a conditional expression one of whose
    sides names it and the other names it too or is ``None`` (``m = pool.full_to_swa_index_mapping if swa else
    None``: where ``m`` is not None it is the map)."""
    if isinstance(value, ast.Attribute) and value.attr in SHARED_ATTRS:
        return value.attr
    if isinstance(value, ast.Name) and value.id in aliases:
        return aliases[value.id]
    if isinstance(value, ast.IfExp):
        sides = [None if isinstance(v, ast.Constant) and v.value is None else _shared_of(v, aliases) or "?"
                 for v in (value.body, value.orelse)]
        named = {x for x in sides if x is not None}
        if len(named) == 1 and "?" not in named:
            return named.pop()
    return None


def _always(stmt, call) -> bool:
    """Whether ``call`` is evaluated whenever ``stmt`` (a statement or an expression) is."""
    return any(n is call for n in _uncond(stmt))


def _returns_early(fn, sync=None, file: str | None = None) -> bool:
    """Whether ``fn``'s own code has a ``return`` other than its last statement that may run without the sync
    ``sync`` in force: for an explicit sync of ``fn`` itself (a 2-tuple at ``file``), a ``return`` on a line before
    it (the sync in force when its function falls through is on every path there, so a later return has it too);
    for any other, every such ``return``."""
    last = fn.body[-1] if fn.body else None
    own = sync is not None and len(sync) == 2 and sync[0] == file \
        and fn.lineno <= sync[1] <= (fn.end_lineno or fn.lineno)
    return any(isinstance(n, ast.Return) and n is not last and (not own or n.lineno < sync[1])
               for n in body_nodes(fn))


_INTERESTING: dict[int, list] = {}
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _walk_no_defs(node):
    """The calls and possible reads under ``node`` in source order (depth first), parents set, skipping nested
    function and class bodies. Cached per node (the tree is never changed)."""
    hit = _INTERESTING.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    stack = [node]
    out = []
    AST, defs, wanted = ast.AST, _DEFS, (ast.Call, ast.Attribute, ast.Name)
    while stack:
        n = stack.pop()
        if isinstance(n, wanted):
            if not (isinstance(n, ast.Attribute) and n.attr not in SHARED_ATTRS) and \
                    not (isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)):
                out.append(n)
        kids = []  # ast.iter_child_nodes(n), in its order, without its generator; nested bodies left out
        for f in n._fields:
            v = getattr(n, f, None)
            if isinstance(v, AST):
                if not isinstance(v, defs):
                    kids.append(v)
            elif isinstance(v, list):
                kids += [x for x in v if isinstance(x, AST) and not isinstance(x, defs)]
        for k in kids:
            k._fc_parent = n
        stack.extend(reversed(kids))
    _INTERESTING[id(node)] = (node, out)
    return out
