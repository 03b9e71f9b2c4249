"""Read sites: where a backend's methods read scheduler-shared state, followed through ``self`` calls (the subject's
MRO), ``super()``, helper functions (resolved through imports), child backends whose class is known from
``self.x = Cls(...)``, and the kernels those maps are passed to.

A read is an access to one of ``SHARED_ATTRS`` (or a local alias of one, or a parameter of that name) used as data:
indexed, passed to a call, or the receiver of a method call; or a call to a translator method that reads them
(``TRANSLATOR_READS``). Taking the attribute into a local or ``self`` field is not a read. Branches on the forward
mode are decided for the mode at hand; other tests are kept as conditions on the path. A host sync (``.item()``,
``.tolist()``, ``.cpu()``, ``synchronize()``) before a read on its path means the path cannot be captured into a CUDA
graph: such a read is shown as not a finding. The functions visited form a ``networkx`` call graph.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import networkx as nx

from ..vocab import SHARED_LOCATIONS
from .declare import Modes, compare_mode
from .tree import ClassInfo, FuncInfo, Tree

#: Scheduler-shared maps read by attribute name (docs/sglang-0.5.23.md, "Read sites per backend family"): the
#: vocabulary's one list.
SHARED_ATTRS = SHARED_LOCATIONS
#: Translator and pool methods that read a shared map, and the map they read.
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

MAX_DEPTH = 8
_ANY = "*"  # the memo's mode for a function whose walk no mode decided


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
    def __init__(self, tree: Tree, modes: Modes, attr_types):
        self.tree, self.modes, self.attr_types = tree, modes, attr_types
        self.graph = nx.DiGraph()
        self._memo: dict = {}
        self.unfollowed: dict[str, set[str]] = {}  # subject key -> texts of calls on children of unknown class
        self._syncs: dict = {}  # memo key -> the host sync a function always performs, or None
        self.functions: dict[str, tuple] = {}  # qualified name -> (def node, file) of every function walked
        self._mode_free: set = set()  # (subject, function) whose walk no mode decided

    # public --------------------------------------------------------------------------------------------------------
    def method_reads(self, subject: ClassInfo, name: str, mode: str | None) -> list[Read]:
        hit = self.tree.lookup(subject, name)
        if hit is None:
            return []
        owner, node = hit
        return list(self._fn_reads(self._fn(subject, owner, node), mode, 0, ()))

    # internals -----------------------------------------------------------------------------------------------------
    def _fn(self, subject, owner, node, module=None) -> _Fn:
        if owner is not None:
            label = f"{owner.name}.{node.name}"
            return _Fn(f"{owner.key}.{node.name}", label, owner.file, node, owner.module, subject, owner)
        return _Fn(f"{module.name}.{node.name}", f"{module.name.rsplit('.', 1)[-1]}.{node.name}", module.rel, node,
                   module, None, None)

    def _fn_reads(self, fn: _Fn, mode, depth, stack) -> tuple[Read, ...]:
        sk = fn.subject.key if fn.subject is not None else None
        if (sk, fn.key) in self._mode_free:
            return self._memo[(sk, fn.key, _ANY)]
        key = (sk, fn.key, mode)
        if key in self._memo:
            return self._memo[key]
        if depth > MAX_DEPTH or key in stack:
            return ()
        self.graph.add_node(fn.key, label=fn.label, file=fn.file, line=fn.node.lineno)
        hop = Hop(fn.label, fn.file, fn.node.lineno, fn.key)
        self.functions[fn.key] = (fn.node, fn.file)
        w = _BodyWalker(self, fn, mode, depth, stack + (key,))
        synced, _ = w.block(fn.node.body, (), None)
        if synced is not None and len(synced) == 3:
            synced = None  # a capture-mode test holds inside this function's paths only, not after its call
        out = tuple(Read(r.location, r.file, r.line, r.what, (hop,) + r.via, r.conditions, r.host_sync)
                    for r in w.reads)
        self._memo[key] = out
        self._syncs[key] = synced
        if not w.used_mode:  # nothing on its paths was decided by the mode: the same for every mode
            self._mode_free.add((sk, fn.key))
            self._memo[(sk, fn.key, _ANY)] = out
            self._syncs[(sk, fn.key, _ANY)] = synced
        return out


class _BodyWalker:
    def __init__(self, rw: ReadWalker, fn: _Fn, mode, depth, stack):
        self.rw, self.fn, self.mode, self.depth, self.stack = rw, fn, mode, depth, stack
        self.reads: list[Read] = []
        self.aliases: dict[str, str] = {}
        self.param_names = {a.arg for a in fn.node.args.args + fn.node.args.kwonlyargs}
        self.used_mode = False  # a test on this function's paths (or a callee's) was decided by the mode

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
            b_sync = (sync or mark) if body_free else sync
            e_sync = (sync or mark) if else_free else sync
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
            after, dead = self.block(s.body, conds, sync)
            return after, conds, dead
        if isinstance(s, ast.Try):
            after, _ = self.block(s.body, conds, sync)
            for h in s.handlers:
                self.block(h.body, conds, sync)
            self.block(s.orelse, conds, after)
            self.block(s.finalbody, conds, sync)
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
        if isinstance(e, ast.Name) and e.id == "in_capture":
            return False
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            t = self.test(e.operand)
            return None if t is None else not t
        if isinstance(e, ast.BoolOp):
            vals = [self.test(v) for v in e.values]
            if isinstance(e.op, ast.And):
                if False in vals:
                    return False
                return True if all(v is True for v in vals) else None
            if True in vals:
                return True
            return False if all(v is False for v in vals) else None
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and _is_mode_expr(e.func.value):
            kw = {k.arg: k.value.value for k in e.keywords if isinstance(k.value, ast.Constant)}
            self.used_mode = True
            return self.rw.modes.predicate(e.func.attr, self.mode, kw)
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and _is_mode_expr(e.left):
            self.used_mode = True
            return compare_mode(self.rw.modes, self.mode, e.ops[0], e.comparators[0])
        return None

    # expressions -----------------------------------------------------------------------------------------------------
    def exprs(self, nodes, conds, sync):
        """Record reads in ``nodes`` and follow the calls they make, in source order; returns the sync in force."""
        after = sync
        for node in nodes:
            for sub in _walk_no_defs(node):
                if isinstance(sub, ast.Call):
                    after = self.call(sub, conds, sync) or after
                loc = self.read_of(sub)
                if loc is not None:
                    self.reads.append(Read(loc, self.fn.file, sub.lineno, ast.unparse(sub)[:120], (), conds, sync))
        return after

    def read_of(self, node) -> str | None:
        parent = getattr(node, "_fc_parent", None)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TRANSLATOR_READS:
            return TRANSLATOR_READS[node.func.attr]
        loc = None
        if isinstance(node, ast.Attribute) and node.attr in SHARED_ATTRS and isinstance(node.ctx, ast.Load):
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
        if isinstance(f, ast.Attribute) and f.attr in HOST_SYNC_METHODS:
            return (self.fn.file, c.lineno)
        rw, tree = self.rw, self.rw.tree
        target = None
        if isinstance(f, ast.Attribute):
            v = f.value
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super" and self.fn.subject:
                hit = tree.lookup(self.fn.subject, f.attr, self.fn.owner)
                if hit:
                    target = rw._fn(self.fn.subject, hit[0], hit[1])
            elif isinstance(v, ast.Name) and v.id == "self" and self.fn.subject is not None:
                hit = tree.lookup(self.fn.subject, f.attr)
                if hit:
                    target = rw._fn(self.fn.subject, hit[0], hit[1])
            elif isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == "self" \
                    and self.fn.subject is not None:
                cls = rw.attr_types(self.fn.subject).get(v.attr)
                if cls is not None:
                    hit = tree.lookup(cls, f.attr)
                    if hit:
                        target = rw._fn(cls, hit[0], hit[1])
                elif f.attr in CHILD_ENTRY_METHODS:
                    rw.unfollowed.setdefault(self.fn.subject.key, set()).add(
                        f"{ast.unparse(f)} ({self.fn.file}:{c.lineno})")
            elif isinstance(v, ast.Name):
                r = tree.resolve(self.fn.module, v.id)
                if isinstance(r, tuple) and r[0] == "module":
                    m = tree.module(r[1])
                    fi = m.functions.get(f.attr) if m else None
                    if fi is not None:
                        target = rw._fn(None, None, fi.node, fi.module)
        elif isinstance(f, ast.Name):
            r = tree.resolve(self.fn.module, f.id)
            if isinstance(r, FuncInfo):
                target = rw._fn(None, None, r.node, r.module)
        if target is None:
            return sync
        tsk = target.subject.key if target.subject else None
        rw.graph.add_edge(self.fn.key, target.key)
        sub = rw._fn_reads(target, self.mode, self.depth + 1, self.stack)
        if (tsk, target.key) in rw._mode_free:
            child_key = (tsk, target.key, _ANY)
        else:
            child_key = (tsk, target.key, self.mode)
            self.used_mode = True
        for r in sub:
            via = r.via
            # the hop line is the call's line in this function, for the evidence chain
            first = Hop(via[0].func, self.fn.file, c.lineno, via[0].key) if via else None
            self.reads.append(Read(r.location, r.file, r.line, r.what, ((first,) + via[1:]) if first else via,
                                   conds + r.conditions, r.host_sync or sync))
        synced = rw._syncs.get(child_key)
        return sync or synced


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


def _is_mode_expr(e) -> bool:
    if isinstance(e, ast.Attribute) and e.attr == "forward_mode":
        return True
    return isinstance(e, ast.Name) and e.id in ("forward_mode", "fm", "mode")


def _shared_of(value, aliases) -> str | None:
    if isinstance(value, ast.Attribute) and value.attr in SHARED_ATTRS:
        return value.attr
    if isinstance(value, ast.Name) and value.id in aliases:
        return aliases[value.id]
    return None


_INTERESTING: dict[int, list] = {}


def _walk_no_defs(node):
    """The calls and possible reads under ``node`` in source order (depth first), parents set, skipping nested
    function and class bodies. Cached per node (the tree is never changed)."""
    hit = _INTERESTING.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    stack = [node]
    out = []
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Call, ast.Attribute, ast.Name)):
            if not (isinstance(n, ast.Attribute) and n.attr not in SHARED_ATTRS) and \
                    not (isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)):
                out.append(n)
        kids = [k for k in ast.iter_child_nodes(n)
                if not isinstance(k, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))]
        for k in kids:
            k._fc_parent = n
        stack.extend(reversed(kids))
    _INTERESTING[id(node)] = (node, out)
    return out
