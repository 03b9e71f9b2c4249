"""Calls the reader cannot follow by type that host-sync on every path: a pool method handed a device tensor copies
it to the host before it returns, so the path that makes the call cannot be captured into a CUDA graph.

SGLang's FlashInfer backend reads the KV cache of a quantized pool through a dequantized workspace: its decode
forward hands ``req_to_token`` and ``forward_batch.req_pool_indices`` to the pool's
``get_flashinfer_decode_dequant_workspace_kv_buffer``, which lists the request indices on the host
(``_to_cpu_int_list``: ``values.cpu().tolist()`` for a tensor) before it gathers the rows (0.5.23
``mem_cache/memory_pool.py:3168-3200,3262-3290``). The receiver (``self.token_to_kv_pool``) has no type the reader
knows, so the walk of reads does not enter the call, and a host sync is seen only when it is an explicit call at the
read. A call is taken to host-sync (``call_sync``) when all of the following hold:

- it is ``R.m(...)`` with ``R`` an object the read walk cannot type, and some class of the memory-cache package
  (``pool_reads.POOL_PACKAGE``), in a module whose text holds a host sync's call, defines ``m``;
- every definition of ``m`` anywhere in the package is a method of a top-level class or a module function, a plain
  one (not ``async``, no ``yield``, no decorator but ``staticmethod``), and nothing binds ``m`` otherwise: its text is
  never followed by ``=``, ``:`` or ``,``, nor quoted, anywhere in the package; the receiver is taken to be a pool (an
  object of a class of the memory-cache package; a torch tensor's method of the same name is the premise's limit),
  and every ``__getattr__`` of that package's classes only forwards the name to another object;
- each definition, its parameters bound to the call's arguments, host-syncs on every path that returns; a path that
  raises counts too (either way the capture cannot finish), and so does a path that calls a method of the same name
  with the arguments it was given (``self.full_kv_pool.m(layer, *args, **kwargs)``: that call enters one of the same
  definitions; a delegation that never ends raises);
- a host sync is ``X.cpu()``, ``X.tolist()``, ``X.item()`` or ``X.numpy()`` with ``X`` a parameter bound to a tensor
  and never re-bound in the function, or ``torch.cuda.synchronize()``, in code that runs whenever the statement does
  (not under a conditional expression, the right of ``and``/``or``, a comprehension's element, a lambda, an
  ``assert``'s message or a comparison chain after its first link; not in a loop, ``try`` or ``match`` body; a
  ``with`` body's end does not end the function, since its manager may swallow an exception); a statement whose call
  of ``self.h(...)`` (every definition of ``h`` on the MRO of the defining class or of any of its subclasses, none
  replaced in a class body, ``h`` never stored), of a module function not re-bound locally, or of another pool method
  (as above, not through a class ``K.m(self, ...)``) host-syncs on every path host-syncs too;
- an argument is a tensor when it is a field of a parameter annotated ``ForwardBatch`` that the tree's
  ``ForwardBatch`` annotates ``torch.Tensor``, or a parameter annotated ``torch.Tensor``; ``isinstance(X, T)`` on a
  tensor is decided: true for ``torch.Tensor``, false for Python's ``list``, ``tuple``, ``dict``, ``set``, ``int``,
  ``float``, ``str``, ``bool`` and ``bytes``; any other test leaves both branches to be walked.

The premise, as for every host sync the reader sees, is that the tensor lives on the device: SGLang's graph runners
capture with the batch's index tensors in device buffers. A read made as an argument of such a call, or after it on
the path, is then behind a host sync: not in a graph (the capture fails at the sync, so an argument read before the
call is not in a graph either). The read walk takes such a sync only outside ``try`` and ``with`` bodies of the
calling functions (a raise standing for the sync could be caught there: no sync crosses one upward either), only
where the call runs whenever its statement does, and not as a function's exit sync when the function can return
before it (``reads._BodyWalker``). An independent review found 20 ways the first version claimed a sync on every
path where a call could return without one; each is a test (``tests/host_syncs_holes.json``).
"""

from __future__ import annotations

import ast

from .pool_reads import _CONTAINER, POOL_PACKAGE
from .tree import ClassInfo, FuncInfo, Tree, body_nodes

#: Methods that copy a device tensor to the host and wait for it.
SYNC_METHODS = ("cpu", "tolist", "item", "numpy")
#: A tensor's type, as the tree's annotations spell it.
TENSOR = "torch.Tensor"
#: Python's types no tensor is an instance of.
NOT_TENSOR = frozenset({"list", "tuple", "dict", "set", "int", "float", "str", "bool", "bytes"})
#: Calls followed below the pool method before giving up.
MAX_DEPTH = 6
#: ``try ... except*`` (Python 3.11)
_TRY_STAR = (ast.TryStar,) if hasattr(ast, "TryStar") else ()
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def host_syncs(tree: Tree) -> "HostSyncs":
    """The tree's ``HostSyncs``, made once and kept on the tree (it holds the tree: a weak-keyed memo would keep the
    tree alive)."""
    hit = tree.__dict__.get("_host_syncs")
    if hit is None:
        hit = tree.__dict__["_host_syncs"] = HostSyncs(tree)
    return hit


class _Def:
    """One definition a call may enter: its node, module and class (None for a module function)."""

    def __init__(self, node, module, owner: ClassInfo | None):
        self.node, self.module, self.owner = node, module, owner

    @property
    def label(self) -> str:
        return f"{self.owner.name}.{self.node.name}" if self.owner else f"{self.module.name}.{self.node.name}"


def _forwards(fn: ast.FunctionDef) -> bool:
    """``def __getattr__(self, name): [docstring] return getattr(X, name)`` with ``X`` free of calls but
    ``object.__getattribute__(self, "attr")``."""
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    args = fn.args.args
    if len(body) != 1 or not isinstance(body[0], ast.Return) or len(args) != 2:
        return False
    v = body[0].value
    return isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "getattr" and len(v.args) == 2 \
        and not v.keywords and isinstance(v.args[1], ast.Name) and v.args[1].id == args[1].arg


def _rebound(fn: ast.AST) -> set[str]:
    """The names ``fn``'s own code binds other than as parameters: assigned, loop or ``with`` targets, walrus,
    ``except ... as``, deleted, declared ``global``/``nonlocal``, imported, or defined by a nested ``def``/``class``."""
    nodes = body_nodes(fn)
    out = {k.name for n in (fn, *nodes) for k in ast.iter_child_nodes(n) if isinstance(k, _DEFS)}
    for n in nodes:
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
    return out


def _plain(fn: ast.AST) -> bool:
    """A plain function: not ``async``, no ``yield`` in its own code, no decorator but ``staticmethod``."""
    return isinstance(fn, ast.FunctionDef) \
        and all(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list) \
        and not any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for n in body_nodes(fn))


def _through_class(f: ast.Attribute) -> bool:
    """``K.m``: a method called through its class (``K.m(obj, ...)`` binds ``self`` explicitly); not followed."""
    return isinstance(f.value, ast.Name) and f.value.id[:1].isupper()


def _uncond(e: ast.AST) -> list[ast.AST]:
    """The nodes of ``e`` evaluated whenever ``e`` is, in source order."""
    out, stack = [], [e]
    while stack:
        n = stack.pop()
        out.append(n)
        if isinstance(n, ast.IfExp):
            kids = [n.test]
        elif isinstance(n, ast.BoolOp):
            kids = n.values[:1]
        elif isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            kids = [n.generators[0].iter]
        elif isinstance(n, ast.Assert):
            kids = [n.test]  # the message only when the test fails
        elif isinstance(n, ast.Compare) and len(n.comparators) > 1:
            kids = [n.left, n.comparators[0]]  # a chain stops at the first false comparison
        elif isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kids = []
        else:
            kids = list(ast.iter_child_nodes(n))
        stack.extend(reversed(kids))
    return sorted(out, key=lambda x: (getattr(x, "lineno", 0), getattr(x, "col_offset", 0)))


class HostSyncs:
    """The tree's pool methods that host-sync on every path, per argument types (see the module's docstring)."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self._pool_names: set[str] | None = None
        self._defs: dict[str, list[_Def] | None] = {}
        self._top: dict = {}
        self._fb_fields: dict[str, str] | None = None
        self._ann: dict[int, tuple] = {}
        self._stored: dict[str, bool] = {}
        self._proxies: bool | None = None

    # what a call may enter ------------------------------------------------------------------------------------------
    def pool_names(self) -> set[str]:
        """Method names a class of the memory-cache package defines, in a module whose text holds a host sync."""
        if self._pool_names is None:
            self._pool_defs: dict[str, list[_Def]] = {}
            for m in self.tree.modules_containing(*(f".{x}(" for x in SYNC_METHODS + ("synchronize",)),
                                                  under=POOL_PACKAGE):
                mod = self.tree.module(m)
                for ci in (mod.classes.values() if mod else ()):
                    for name, node in ci.methods.items():
                        self._pool_defs.setdefault(name, []).append(_Def(node, mod, ci))
            self._pool_names = set(self._pool_defs)
        return self._pool_names

    def pool_defs(self, name: str) -> list[_Def]:
        """The definitions of ``name`` ``pool_names`` found (a first look, before every definition is searched)."""
        self.pool_names()
        return self._pool_defs.get(name, [])

    def stored(self, name: str) -> bool:
        """Whether ``name`` may be bound other than by a ``def``: its text followed by ``=``, ``:`` or ``,`` (an
        assignment, an annotated or tuple target), or quoted (``getattr``/``setattr``), anywhere in the package."""
        if name not in self._stored:
            self._stored[name] = bool(self.tree.modules_containing(
                f"{name} =", f"{name}=", f"{name}:", f"{name} :", f"{name},", f"{name} ,", f"'{name}'", f'"{name}"'))
        return self._stored[name]

    def proxies_ok(self) -> bool:
        """Whether every class ``__getattr__``/``__getattribute__`` of the memory-cache package only forwards the name
        to another object (``return getattr(X, name)``), so a call through one enters a definition of the same name
        (the receiver is taken to be a pool: an object of a class of that package)."""
        if self._proxies is None:
            ok = True
            for m in self.tree.modules_containing("def __getattr__", "def __getattribute__", under=POOL_PACKAGE):
                mod = self.tree.module(m)
                ok = ok and mod is not None
                for ci in (mod.classes.values() if mod else ()):
                    for name in ("__getattr__", "__getattribute__"):
                        if name in ci.methods:
                            ok = ok and _forwards(ci.methods[name])
            self._proxies = ok
        return self._proxies

    def defs(self, name: str) -> list[_Def] | None:
        """Every definition of ``name`` in the package, or None when a call of ``name`` may enter something else."""
        if name in self._defs:
            return self._defs[name]
        tree, out = self.tree, []
        if name.startswith("__") or name in _CONTAINER or self.stored(name) or not self.proxies_ok():
            self._defs[name] = None  # a container's method, stored as an attribute, named in a string, or a proxy
            return None
        for m in tree.modules_containing(f"def {name}("):
            mod = tree.module(m)
            if mod is None:
                self._defs[name] = None
                return None
            top = {id(ci.methods.get(name)): ci for ci in mod.classes.values()}
            for n in tree.walk(mod.tree):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name:
                    if id(n) in top:
                        out.append(_Def(n, mod, top[id(n)]))
                    elif name in mod.functions and mod.functions[name].node is n:
                        out.append(_Def(n, mod, None))
                    else:
                        self._defs[name] = None  # a nested or shadowed definition: not followed
                        return None
        self._defs[name] = out or None
        return self._defs[name]

    def _self_defs(self, owner: ClassInfo, name: str) -> list[_Def] | None:
        """Each definition ``self.name(...)`` may enter in a method of ``owner``: the lookup on ``owner``'s MRO and on
        the MRO of each of its subclasses."""
        tree, out, seen = self.tree, [], set()
        if self.stored(name) or not self.proxies_ok():
            return None  # an instance attribute or a class-body assignment may shadow the method
        for k in tree.subclasses([owner]):
            if any(name in c.assigned for c in tree.mro(k)):
                return None
            hit = tree.lookup(k, name)
            if hit is None:
                if k is owner:
                    return None
                continue
            if id(hit[1]) not in seen:
                seen.add(id(hit[1]))
                out.append(_Def(hit[1], hit[0].module, hit[0]))
        return out or None

    # argument types --------------------------------------------------------------------------------------------------
    def _forward_batch_fields(self) -> dict[str, str]:
        if self._fb_fields is None:
            self._fb_fields = {}
            for ci in self.tree.classes_named("ForwardBatch"):
                for s in ci.node.body:
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                        self._fb_fields[s.target.id] = ast.unparse(s.annotation)
        return self._fb_fields

    def arg_type(self, fnode: ast.AST, e: ast.expr) -> str | None:
        """``TENSOR`` when ``e`` in ``fnode`` is a tensor by the annotations (the module's docstring), else None."""
        ann = self._ann.get(id(fnode))
        if ann is None or ann[0] is not fnode:
            again = _rebound(fnode)
            ann = self._ann[id(fnode)] = (fnode, {a.arg: ast.unparse(a.annotation) for a in fnode.args.posonlyargs
                                                  + fnode.args.args + fnode.args.kwonlyargs
                                                  if a.annotation is not None and a.arg not in again})
        ann = ann[1]
        if isinstance(e, ast.Name) and ann.get(e.id) == TENSOR:
            return TENSOR
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) \
                and ann.get(e.value.id, "").split(".")[-1] == "ForwardBatch" \
                and self._forward_batch_fields().get(e.attr) == TENSOR:
            return TENSOR
        return None

    # the analysis ----------------------------------------------------------------------------------------------------
    def call_sync(self, fnode: ast.AST, call: ast.Call) -> tuple[str, int, str] | None:
        """(file, line, chain) of the host sync every path of ``call`` (made in ``fnode``, a call the read walk does
        not follow) reaches, or None (the module's docstring)."""
        f = call.func
        if not isinstance(f, ast.Attribute) or not (call.args or call.keywords) or f.attr not in self.pool_names():
            return None
        pos = [self.arg_type(fnode, a) if not isinstance(a, ast.Starred) else "*" for a in call.args]
        kw = {k.arg: self.arg_type(fnode, k.value) for k in call.keywords if k.arg is not None}
        if TENSOR not in pos and TENSOR not in kw.values():
            return None
        if _through_class(f):
            return None
        key = (f.attr, tuple(pos), tuple(sorted(kw.items())))
        if key not in self._top:
            # the memory-cache package's own definitions first: only where they all sync is the package searched for
            # every definition of the name (a text search of every module)
            first = _Walk(self, local=True).by_name(f.attr, pos, kw, 0)
            self._top[key] = _Walk(self).by_name(f.attr, pos, kw, 0) if isinstance(first, tuple) else None
        hit = self._top[key]
        return hit if isinstance(hit, tuple) else None  # else no sync, or only delegations among the names walked


class _Ctx:
    """One definition being walked: the definition, its parameters' types (``env``), its ``*args`` name and the types
    it holds (``rest``), its ``**kwargs`` name and the keyword types it was given (``kw``); ``first``: the first sync
    seen on a path that counts, ``assumed``: whether a delegation to a name being walked was."""

    def __init__(self, d: _Def, env: dict, star, rest: list, kwname, kw: dict):
        self.d, self.env, self.star, self.rest, self.kwname, self.kw = d, env, star, rest, kwname, kw
        self.first, self.assumed = None, False

    def aside(self) -> "_Ctx":
        """This walk with a record of its own: the syncs of code that may not run are neither cited nor counted."""
        return _Ctx(self.d, self.env, self.star, self.rest, self.kwname, self.kw)

    def note(self, got):
        if isinstance(got, tuple) and self.first is None:
            self.first = got
        elif got == "assumed":
            self.assumed = True
        return got


class _Walk:
    """One question of ``HostSyncs.call_sync``: the names entered assumed to sync while they are walked."""

    def __init__(self, hs: HostSyncs, local: bool = False):
        self.hs, self.local = hs, local
        self.open: set = set()

    def by_name(self, name: str, pos: list, kw: dict, depth: int, defs: list[_Def] | None = None):
        """The sync of a call of ``name`` (every definition of it, or ``defs``) with these argument types."""
        if depth > MAX_DEPTH:
            return None
        if defs is None:
            defs = self.hs.pool_defs(name) if self.local else self.hs.defs(name)
        if not defs:
            return None
        key = (name, tuple(pos), tuple(sorted(kw.items())), tuple(id(d.node) for d in defs))
        if key in self.open:
            return "assumed"
        self.open.add(key)
        try:
            found = None
            for d in defs:
                got = self.definition(d, pos, kw, depth)
                if got is None:
                    return None
                if got != "assumed" and found is None:
                    found = got
            return found or "assumed"
        finally:
            self.open.discard(key)

    def definition(self, d: _Def, pos: list, kw: dict, depth: int):
        if not _plain(d.node):
            return None  # a generator, coroutine or decorated function: its body is not what the call runs
        a = d.node.args
        params = [x.arg for x in a.posonlyargs + a.args]
        static = any(isinstance(x, ast.Name) and x.id == "staticmethod" for x in d.node.decorator_list)
        if d.owner is not None and not static:
            params = params[1:]
        env: dict[str, str | None] = {}
        rest: list = []
        for i, t in enumerate(pos):
            if t == "*":
                break  # positions after an unknown unpacking: not bound
            if i < len(params):
                env[params[i]] = t
            elif a.vararg is not None:
                rest.append(t)
            else:
                return None  # more arguments than parameters: a TypeError, not this question
        for k, t in kw.items():
            env[k] = t
        again = _rebound(d.node)
        env = {k: (None if k in again else t) for k, t in env.items()}
        if a.vararg is not None and a.vararg.arg in again:
            rest = ["*"]
        if TENSOR not in env.values() and TENSOR not in rest:
            return None
        ctx = _Ctx(d, env, a.vararg.arg if a.vararg is not None else None, rest, a.kwarg.arg if a.kwarg else None,
                   kw)
        fall, ok = self.block(ctx, d.node.body, None, depth)
        if not ok or fall is None:
            return None  # a path returns, or falls off the end, without a sync
        if ctx.first is not None:
            file, line, chain = ctx.first
            return file, line, f"{d.label} -> {chain}" if chain else d.label
        return "assumed" if ctx.assumed else None  # every path raises: not a claim of a sync

    def block(self, ctx, stmts, cur, depth):
        """(the sync on every path falling through, ``"dead"`` when no path does, or None; whether every path that
        returns passed a sync)."""
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Pass)):
                continue
            if isinstance(s, ast.Raise):
                return "dead", True
            if isinstance(s, ast.Return):
                got = cur or (ctx.note(self.expr(ctx, s.value, depth)) if s.value is not None else None)
                return "dead", got is not None
            if isinstance(s, ast.If):
                cur = cur or ctx.note(self.expr(ctx, s.test, depth))
                t = self.decide(ctx, s.test)
                branches = [s.body] if t is True else [s.orelse] if t is False else [s.body, s.orelse]
                falls = []
                for b in branches:
                    f2, ok = self.block(ctx, b, cur, depth)
                    if not ok:
                        return None, False
                    if f2 != "dead":
                        falls.append(f2)
                if not falls:
                    return "dead", True
                cur = falls[0] if all(x is not None for x in falls) else None
                continue
            if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
                cur = cur or ctx.note(self.expr(ctx, s.iter if not isinstance(s, ast.While) else s.test,
                                                       depth))
                for b in (s.body, s.orelse):  # either may run no statement: what it syncs is not cited
                    if not self.block(ctx.aside(), b, cur, depth)[1]:
                        return None, False
                continue
            if isinstance(s, (ast.With, ast.AsyncWith)):
                for i in s.items:
                    cur = cur or ctx.note(self.expr(ctx, i.context_expr, depth))
                f2, ok = self.block(ctx, s.body, cur, depth)
                if not ok:
                    return None, False
                if f2 not in ("dead", None):
                    cur = f2
                continue  # the context manager may swallow what ends the body: the statements after it run
            if isinstance(s, (ast.Try, ast.Match, *_TRY_STAR)):
                if isinstance(s, ast.Match):
                    cur = cur or ctx.note(self.expr(ctx, s.subject, depth))
                parts = [c.body for c in s.cases] if isinstance(s, ast.Match) \
                    else [s.body, *(h.body for h in s.handlers), s.orelse, s.finalbody]
                for b in parts:
                    if not self.block(ctx.aside(), b, cur, depth)[1]:
                        return None, False
                continue  # a sync inside is not on every path
            cur = cur or ctx.note(self.expr(ctx, s, depth))
        return cur, True

    def decide(self, ctx, test) -> bool | None:
        """``isinstance(p, T)`` on a parameter bound to a tensor, decided (the module's docstring); else None."""
        env = ctx.env
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            v = self.decide(ctx, test.operand)
            return None if v is None else not v
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"
                and len(test.args) == 2 and isinstance(test.args[0], ast.Name)
                and env.get(test.args[0].id) == TENSOR):
            return None
        kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
        texts = [ast.unparse(k) for k in kinds]
        if any(t == TENSOR for t in texts):
            return True
        if all(t in NOT_TENSOR for t in texts):
            return False
        return None

    def expr(self, ctx, e, depth):
        """The sync ``e`` reaches whenever it is evaluated: a (file, line, chain), ``"assumed"`` (a delegation to a
        name being walked), or None."""
        d, env = ctx.d, ctx.env
        for n in _uncond(e):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr == "synchronize" and ast.unparse(f.value) == "torch.cuda":
                return d.module.rel, n.lineno, ""
            if isinstance(f, ast.Attribute) and f.attr in SYNC_METHODS and isinstance(f.value, ast.Name) \
                    and env.get(f.value.id) == TENSOR:
                return d.module.rel, n.lineno, ""
            got = self.call(ctx, n, depth)
            if got is not None:
                return got
        return None

    def call(self, ctx, c: ast.Call, depth):
        d, env = ctx.d, ctx.env
        pos: list = []
        for a in c.args:
            if isinstance(a, ast.Starred):
                if isinstance(a.value, ast.Name) and a.value.id == ctx.star:
                    pos.extend(ctx.rest)
                    continue
                pos.append("*")
                break
            pos.append(env.get(a.id) if isinstance(a, ast.Name) else None)
        kw = {}
        for k in c.keywords:
            if k.arg is None:
                if isinstance(k.value, ast.Name) and k.value.id == ctx.kwname:
                    kw.update({x: t for x, t in ctx.kw.items() if x not in env})
                continue
            kw[k.arg] = env.get(k.value.id) if isinstance(k.value, ast.Name) else None
        if TENSOR not in pos and TENSOR not in kw.values():
            return None
        f = c.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" \
                and d.owner is not None:
            defs = self.hs._self_defs(d.owner, f.attr)
            got = self.by_name(f.attr, pos, kw, depth + 1, defs) if defs else None
        elif isinstance(f, ast.Attribute) and f.attr in self.hs.pool_names() and not _through_class(f):
            got = self.by_name(f.attr, pos, kw, depth + 1)
        elif isinstance(f, ast.Name) and f.id not in _rebound(d.node) and not self.hs.stored(f.id):
            r = self.hs.tree.resolve(d.module, f.id)
            got = self.by_name(f.id, pos, kw, depth + 1, [_Def(r.node, r.module, None)]) \
                if isinstance(r, FuncInfo) else None
        else:
            got = None
        return got
