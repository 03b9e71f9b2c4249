"""One decode step of a speculative worker, walked statically: its runner calls and ``on_publish`` calls in order,
each with the forward mode in force, the conditions on its path and the call chain that reaches it.

A decode step enters the worker's ``forward_batch_generation`` with the batch in ``DECODE`` and no extend in the
batch (``is_extend_in_batch`` false). Its statements are followed in order through ``self`` methods (the MRO), the
worker's sub-workers (``self.x = Cls(...)``, and properties returning such a field), ``super()`` and helper functions
(resolved through the module's imports and the function's own imports). A runner call is ``<r>.execute/replay/forward``
on a receiver whose name says ``runner``, or ``<w>.forward_batch_generation`` on any receiver but ``self`` (the target
worker's model runner). The phase's mode is the last ``ForwardMode`` member assigned to a ``forward_mode`` (or passed
as ``forward_mode=``) on the path before the call; forward-mode tests are decided for that mode. A call of the
scheduler's ``on_publish`` callback is a step call of kind ``publish``.

A call more than ``MAX_DEPTH`` calls below the entry, or of a function the walk is inside, is not followed; when the
function it enters, or one that function reaches, may hold a phase (``StepWalk.may_phase``), the walk's
``unresolved`` says so.
"""

from __future__ import annotations

import ast
import weakref
from dataclasses import dataclass

from .declare import Modes, compare_mode
from .dispatch import negated
from .reads import _is_mode_expr
from .tree import ClassInfo, FuncInfo, Tree
from .worker_types import last_local_imports

ENTRY = "forward_batch_generation"
STEP_MODE = "DECODE"
#: The mode a prefill batch enters the worker in.
PREFILL_MODE = "EXTEND"
RUNNER_METHODS = ("execute", "replay", "forward")
MAX_DEPTH = 7


@dataclass(frozen=True)
class StepCall:
    """A runner call (``kind`` ``runner``) or an ``on_publish`` call (``kind`` ``publish``) of a decode step: the
    runner as shown (``Worker.attr``), the call's text, the mode in force (None for a publish call, or when the paths
    before it disagree), the conditions on its path, where it is, its call chain from the entry ((function, line of
    the call) pairs), the loop around it, the class walked (``subject``) and the ``self`` attribute called."""

    runner: str
    call: str
    mode: str | None
    kind: str
    conditions: tuple[str, ...]
    file: str
    line: int
    chain: tuple[tuple[str, int], ...]
    loop: str | None
    subject: ClassInfo | None
    attr: str | None


class StepWalk:
    """One decode step of one worker: its calls in order (``calls``), the calls it could not follow
    (``unresolved``)."""

    def __init__(self, tree: Tree, modes: Modes, types):
        self.tree, self.modes, self.types = tree, modes, types
        self.calls: list[StepCall] = []
        self.unresolved: list[str] = []
        self._may: dict[tuple, bool] = {}  # (subject key, function key) -> whether it may hold a phase

    def fn(self, subject, owner, node, module, mode, conds, chain, loop, depth, stack):
        """Walks one function; returns the mode in force after it (None: the paths disagree)."""
        key = f"{owner.key}.{node.name}" if owner is not None else f"{module.name}.{node.name}"
        if depth > MAX_DEPTH or key in stack:
            if self.may_phase(subject, owner, node, module):
                at = f"`{key}` ({(owner.module if owner else module).rel}:{node.lineno})"
                self.unresolved.append(
                    f"{at} is more than {MAX_DEPTH} calls below {ENTRY} (algorithms.MAX_DEPTH): its phases are not "
                    "followed" if depth > MAX_DEPTH else
                    f"{at} calls itself: its phases repeat a number of times known only at run time")
            return mode
        ctx = {"subject": subject, "module": module, "file": (owner.module if owner else module).rel,
               "key": key, "chain": chain, "stack": stack + (key,), "depth": depth,
               "imports": last_local_imports(self.tree, module, node.body), "aliases": {}, "loop": loop}
        mode, _ = self.block(node.body, mode, conds, ctx)
        return mode

    def block(self, stmts, mode, conds, ctx):
        for s in stmts:
            mode, conds, dead = self.stmt(s, mode, conds, ctx)
            if dead:
                return mode, True
        return mode, False

    def stmt(self, s, mode, conds, ctx):
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return mode, conds, False
        if isinstance(s, ast.Raise):
            return mode, conds, True
        if isinstance(s, ast.Return):
            if s.value is not None:
                mode = self.exprs(s.value, mode, conds, ctx)
            return mode, conds, True
        if isinstance(s, ast.If):
            mode = self.exprs(s.test, mode, conds, ctx)
            t = self.test(s.test, mode)
            if t is not None:
                m2, dead = self.block(s.body if t else s.orelse, mode, conds, ctx)
                return m2, conds, dead
            text = _src(s.test)
            m1, d1 = self.block(s.body, mode, conds + (text,), ctx)
            m2, d2 = self.block(s.orelse, mode, conds + (negated(text),), ctx)
            if d1 and d2:
                return mode, conds, True
            if d1:
                return m2, conds + (negated(text),), False
            if d2:
                return m1, conds + (text,), False
            return (m1 if m1 == m2 else None), conds, False
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            head = s.test if isinstance(s, ast.While) else s.iter
            mode = self.exprs(head, mode, conds, ctx)
            inner = dict(ctx, loop=f"{'while' if isinstance(s, ast.While) else 'for'} {_src(head)[:80]} "
                                   f"({ctx['file']}:{s.lineno})")
            m1, _ = self.block(s.body, mode, conds, inner)
            return (m1 if m1 == mode else None), conds, False
        if isinstance(s, (ast.With, ast.AsyncWith)):
            for it in s.items:
                mode = self.exprs(it.context_expr, mode, conds, ctx)
            m1, dead = self.block(s.body, mode, conds, ctx)
            return m1, conds, dead
        if isinstance(s, ast.Try):
            m1, dead = self.block(s.body, mode, conds, ctx)
            m1, _ = self.block(s.finalbody, m1, conds, ctx)
            return m1, conds, False
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            value = s.value
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            if value is not None:
                mode = self.exprs(value, mode, conds, ctx)
                for t in targets:
                    if isinstance(t, ast.Attribute) and t.attr == "forward_mode":
                        m = self.mode_of(value, mode)
                        if m is not None:
                            mode = m
                    elif isinstance(t, ast.Name):
                        text = _src(value)
                        if "runner" in text.rsplit(".", 1)[-1].lower() and not isinstance(value, ast.Call):
                            ctx["aliases"][t.id] = text
            return mode, conds, False
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.expr):
                mode = self.exprs(child, mode, conds, ctx)
        return mode, conds, False

    def mode_of(self, e, mode):
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == self.modes.cls.name \
                and e.attr in self.modes.members:
            return e.attr
        if isinstance(e, ast.IfExp):
            t = self.test(e.test, mode)
            if t is not None:
                return self.mode_of(e.body if t else e.orelse, mode)
        return None

    def test(self, e, mode):
        if mode is None:
            return None
        if isinstance(e, ast.Attribute) and e.attr == "is_extend_in_batch":
            return False
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            t = self.test(e.operand, mode)
            return None if t is None else not t
        if isinstance(e, ast.BoolOp):
            vals = [self.test(v, mode) for v in e.values]
            if isinstance(e.op, ast.And):
                return False if False in vals else (True if all(v is True for v in vals) else None)
            return True if True in vals else (False if all(v is False for v in vals) else None)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and _is_mode_expr(e.func.value):
            kw = {k.arg: k.value.value for k in e.keywords if isinstance(k.value, ast.Constant)}
            return self.modes.predicate(e.func.attr, mode, kw)
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and _is_mode_expr(e.left):
            return compare_mode(self.modes, mode, e.ops[0], e.comparators[0])
        return None

    def exprs(self, node, mode, conds, ctx):
        """Follows the calls under ``node`` (arguments before the call that takes them); returns the mode after."""
        for c in calls_postorder(node):
            for k in c.keywords:
                if k.arg == "forward_mode":
                    m = self.mode_of(k.value, mode)
                    if m is not None:
                        mode = m
            mode = self.call(c, mode, conds, ctx)
        return mode

    def _phase(self, c, runner, mode, conds, ctx, kind="runner", recv=None):
        attr = recv[len("self."):] if recv and recv.startswith("self.") and recv[5:].isidentifier() else None
        self.calls.append(StepCall(runner, _src(c.func), mode if kind == "runner" else None, kind,
                                   tuple(conds), ctx["file"], c.lineno, ctx["chain"] + ((ctx["key"], c.lineno),),
                                   ctx["loop"], ctx["subject"], attr))

    def call(self, c, mode, conds, ctx):
        f, subject = c.func, ctx["subject"]
        if isinstance(f, ast.Name) and f.id == "on_publish":
            self._phase(c, "on_publish", mode, conds, ctx, kind="publish")
            return mode
        if isinstance(f, ast.Attribute):
            recv = f.value
            rtext = ctx["aliases"].get(recv.id, _src(recv)) if isinstance(recv, ast.Name) else _src(recv)
            shown = rtext.replace("self.", f"{subject.name}.", 1) if subject and rtext.startswith("self.") else rtext
            is_self = isinstance(recv, ast.Name) and recv.id == "self"
            if f.attr in RUNNER_METHODS and "runner" in rtext.rsplit(".", 1)[-1].lower():
                self._phase(c, shown, mode, conds, ctx, recv=rtext)
                return mode
            if f.attr == ENTRY and not is_self:
                self._phase(c, shown, mode, conds, ctx, recv=rtext)
                return mode
            if isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and recv.value.id == "self" \
                    and subject is not None and self.types(subject).get(recv.attr) is None \
                    and "worker" in recv.attr.lower() and "target" not in recv.attr:
                self.unresolved.append(f"`{_src(f)}` ({ctx['file']}:{c.lineno}): the class of "
                                       f"`{rtext}` is not known statically; its phases are not followed")
        target = self.target(c, subject, ctx["key"], ctx["module"], ctx["imports"])
        if target is None:
            return mode
        cls, owner, node, module = target
        return self.fn(cls, owner, node, module, mode, conds, ctx["chain"] + ((ctx["key"], c.lineno),), ctx["loop"],
                       ctx["depth"] + 1, ctx["stack"])

    def target(self, c, subject, key, module, imports):
        """(subject, owner, def, module) of the function the call ``c`` enters (``owner`` None for a module-level
        function), or None: ``super()`` and ``self`` calls on the subject's MRO, a method of a sub-worker of known
        class, a helper function resolved through the module's or the function's own imports."""
        f, tree = c.func, self.tree
        if isinstance(f, ast.Attribute):
            recv = f.value
            hit, cls = None, subject
            if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and recv.func.id == "super" and subject:
                owner_key = key.rsplit(".", 1)[0]
                owner = next((k for k in tree.mro(subject) if k.key == owner_key), None)
                hit = tree.lookup(subject, f.attr, owner)
            elif isinstance(recv, ast.Name) and recv.id == "self" and subject is not None:
                hit = tree.lookup(subject, f.attr)
            elif isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and recv.value.id == "self" \
                    and subject is not None:
                cls = self.types(subject).get(recv.attr)
                hit = tree.lookup(cls, f.attr) if cls is not None else None
            elif isinstance(recv, ast.Name):
                r = imports.get(recv.id) or tree.resolve(module, recv.id)
                if isinstance(r, tuple) and r[0] == "module":
                    m = tree.module(r[1])
                    fi = m.functions.get(f.attr) if m else None
                    if fi is not None:
                        return None, None, fi.node, fi.module
            if hit is not None:
                return cls, hit[0], hit[1], hit[0].module
            return None
        if isinstance(f, ast.Name):
            r = imports.get(f.id) or tree.resolve(module, f.id)
            if isinstance(r, FuncInfo):
                return None, None, r.node, r.module
        return None

    def may_phase(self, subject, owner, node, module) -> bool:
        """Whether ``node`` or a function it reaches through the calls the walk follows (any depth) has a call that
        may be a phase (a runner method, ``forward_batch_generation``, ``on_publish``) or sets a forward mode."""
        start = (subject.key if subject else None,
                 f"{owner.key}.{node.name}" if owner else f"{module.name}.{node.name}")
        memo = self._may
        if start in memo:
            return memo[start]
        seen, todo = {start}, [(subject, start[1], node, module)]
        while todo:
            subj, key, fn, mod = todo.pop()
            imports = last_local_imports(self.tree, mod, fn.body)
            aliases = {t.id for n in self.tree.walk(fn) if isinstance(n, ast.Assign) and not isinstance(n.value, ast.Call)
                       and "runner" in _src(n.value).rsplit(".", 1)[-1].lower()
                       for t in n.targets if isinstance(t, ast.Name)}
            for n in self.tree.walk(fn):
                if _phase_like(n, aliases):
                    memo[start] = True
                    return True
                if not isinstance(n, ast.Call):
                    continue
                t = self.target(n, subj, key, mod, imports)
                if t is None:
                    continue
                cls, own, d, m = t
                k = (cls.key if cls else None, f"{own.key}.{d.name}" if own else f"{m.name}.{d.name}")
                if memo.get(k) is True:
                    memo[start] = True
                    return True
                if k not in seen and k not in memo:
                    seen.add(k)
                    todo.append((cls, k[1], d, m))
        for k in seen:  # everything reachable was seen, and none of it may be a phase
            memo[k] = False
        return False


def _phase_like(n, aliases) -> bool:
    """Whether ``n`` may be a phase of a decode step or set its mode (what ``StepWalk.call`` and ``stmt`` act on);
    ``aliases``: the function's locals bound to a runner."""
    if isinstance(n, ast.Call):
        f = n.func
        if isinstance(f, ast.Name) and f.id == "on_publish":
            return True
        if isinstance(f, ast.Attribute):
            recv = f.value
            if f.attr == ENTRY and not (isinstance(recv, ast.Name) and recv.id == "self"):
                return True
            if f.attr in RUNNER_METHODS and ((isinstance(recv, ast.Name) and recv.id in aliases)
                                             or "runner" in _src(recv).rsplit(".", 1)[-1].lower()):
                return True
        return any(k.arg == "forward_mode" for k in n.keywords)
    if isinstance(n, ast.Assign):
        return any(isinstance(t, ast.Attribute) and t.attr == "forward_mode" for t in n.targets)
    return False


#: Per syntax-tree node (weakly held: a node's entries go with its tree), its source text and its calls in post
#: order: a decode step's walk visits the same statements under many conditions.
_SRC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CALLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _src(node) -> str:
    out = _SRC.get(node)
    if out is None:
        out = _SRC[node] = ast.unparse(node)
    return out


def calls_postorder(node):
    """The calls in ``node`` in post order (arguments before the call), not entering nested functions, classes or
    lambdas; computed once per node."""
    hit = _CALLS.get(node)
    if hit is not None:
        return hit
    out = []

    def visit(n):
        for k in ast.iter_child_nodes(n):
            if not isinstance(k, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                visit(k)
        if isinstance(n, ast.Call):
            out.append(n)

    visit(node)
    _CALLS[node] = out
    return out


