"""Children passed to a composite backend's constructor, resolved from the calls that construct it.

A composite (``MiniMaxHybridAttnBackend(full_attn_backend, sparse_backend, ...)``) keeps a constructor parameter as
a child (``self.sparse = sparse``). For each such attribute the reader finds every call in the tree that constructs
the class (a call of the class itself, or of a local bound to it in the calling function) and resolves the argument
bound to that parameter:

- ``Cls(...)`` of a backend class: that class;
- a local of the calling function: each assignment to it, resolved the same way, under the ``if`` tests that lead to
  that assignment and not to the call (the settings the child depends on);
- anything else (a parameter of the calling function, the return of a factory or registry lookup, an unpacked
  argument): unresolved, with the reason and the line.

An attribute whose every option, at every call, is one class with no condition is a child of known class: the
reader follows its declaration and reads as for ``self.x = Cls(...)``. Otherwise its options are listed
(``passed_children``) and a declaration delegating to it expands into one row per option, naming the condition.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .declare import negate
from .reads import CHILD_ENTRY_METHODS
from .tree import ClassInfo, FuncInfo, Tree, walk_once

MAX_DEPTH = 4


@dataclass(frozen=True)
class Option:
    """One thing a constructor call passes as a child: ``cls`` (None: unresolved, see ``reason``), the conditions
    leading to it, and the call's file:line."""

    cls: ClassInfo | None
    conditions: tuple
    file: str
    line: int
    reason: str | None = None

    def to_json(self) -> dict:
        out = {"class": self.cls.name if self.cls else None, "condition": " and ".join(self.conditions) or None,
               "file": self.file, "line": self.line}
        if self.cls is None:
            out["reason"] = self.reason
        return out


def _params(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]


#: Methods whose call on ``self.attr`` makes ``attr`` a child backend.
CHILD_METHODS = frozenset(CHILD_ENTRY_METHODS) | {"shared_read_ends", "_snapshot_prefill_shared_reads"}


def _own_child_attrs(c: ClassInfo) -> set[str]:
    out = set()
    for name, fn in c.methods.items():
        for node in walk_once(fn):
            if isinstance(node, ast.Attribute) and node.attr in CHILD_METHODS and _self_attr(node.value):
                out.add(node.value.attr)
            elif name in ("shared_read_ends", "_snapshot_prefill_shared_reads") \
                    and isinstance(node, (ast.Tuple, ast.List)):
                out.update(e.attr for e in node.elts if _self_attr(e))
    return out


def child_attrs(tree: Tree, ci: ClassInfo, root: ClassInfo, memo: dict | None = None) -> set[str]:
    """The attributes ``ci``'s methods (below the root) use as child backends: ``self.attr.forward(...)`` and the
    other backend entry methods, or an item of a tuple or list in its declaration (``max_of`` over children).
    ``memo`` (id of a class -> its own methods' attributes) is shared across calls on one tree."""
    memo = {} if memo is None else memo
    out = set()
    for c in tree.mro(ci):
        if c is not root:
            if id(c) not in memo:
                memo[id(c)] = _own_child_attrs(c)
            out |= memo[id(c)]
    return out


def _self_attr(e) -> bool:
    return isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self"


def passed_params(tree: Tree, ci: ClassInfo, root: ClassInfo,
                  memo: dict | None = None) -> dict[str, tuple[str, int, ast.FunctionDef]]:
    """attr -> (parameter, its position after ``self``, the ``__init__``) for each child attribute (``child_attrs``, or
    a parameter annotated as the root backend class) that the ``__init__`` in force on ``ci`` (not the root's) sets
    from a parameter: ``self.attr = parameter``."""
    hit = tree.lookup(ci, "__init__")
    if hit is None or hit[0] is root:
        return {}
    fn = hit[1]
    params = _params(fn)[1:]
    positional = [a.arg for a in fn.args.posonlyargs + fn.args.args][1:]
    # a parameter annotated as the root backend class (``prefill_backend: AttentionBackend``) is a child too
    typed = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs if a.annotation is not None
             and (a.annotation.value if isinstance(a.annotation, ast.Constant) else ast.unparse(a.annotation))
             .strip("'\"") == root.name}
    out = {}
    wanted = None
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in params:
            for t in node.targets:
                if _self_attr(t):
                    wanted = child_attrs(tree, ci, root, memo) if wanted is None else wanted
                    if t.attr in wanted or node.value.id in typed:
                        p = node.value.id
                        out.setdefault(t.attr, (p, positional.index(p) if p in positional else -1, fn))
    return out


def _functions(mod) -> list[tuple[ast.FunctionDef, dict, str]]:
    """Every function of a module (nested ones included) with its parent map and its qualified name
    (``Class.method``)."""
    out = []

    def visit(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                parents = {}
                for p in ast.walk(node):
                    for c in ast.iter_child_nodes(p):
                        parents[c] = p
                out.append((node, parents, prefix + node.name))
                visit(node.body, prefix + node.name + ".")
            elif isinstance(node, ast.ClassDef):
                visit(node.body, prefix + node.name + ".")
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                visit([n for f in ("body", "orelse", "finalbody", "handlers") for n in getattr(node, f, [])], prefix)
            elif isinstance(node, ast.ExceptHandler):
                visit(node.body, prefix)

    visit(mod.tree.body, "")
    return out



def _branch(node, parents, fn) -> list[tuple[int, str]]:
    """(id of the If, condition text) for each ``if`` enclosing ``node`` inside ``fn``, outermost first."""
    out = []
    cur = node
    while cur is not fn and cur in parents:
        p = parents[cur]
        if isinstance(p, ast.If) and cur is not p.test:
            t = ast.unparse(p.test)
            out.append((id(p), t if cur in p.body else negate(t)))
        cur = p
    return out[::-1]


class PassedChildren:
    """Resolves, per backend class, the children its constructor's callers pass (memoized)."""

    def __init__(self, tree: Tree, root: ClassInfo, backends: list[ClassInfo]):
        self.tree, self.root, self.backends = tree, root, backends
        self._ids = {id(c) for c in backends}
        self._memo: dict[int, dict[str, list[Option]]] = {}
        self._fns: dict[int, list] = {}
        self._local: dict[int, dict] = {}  # id(function node) -> its function-local imports
        self._attrs: dict[int, set] = {}
        self._params: dict[int, dict] = {}
        self._sites: dict[int, list] = {}

    def params(self, ci: ClassInfo) -> dict:
        if id(ci) not in self._params:
            self._params[id(ci)] = passed_params(self.tree, ci, self.root, self._attrs)
        return self._params[id(ci)]

    def calls(self, ci: ClassInfo) -> list:
        if id(ci) not in self._sites:
            self._sites[id(ci)] = list(self._calls(ci))
        return self._sites[id(ci)]

    def of(self, ci: ClassInfo) -> dict[str, list[Option]]:
        """attr -> the options passed for it at every call constructing ``ci`` (sorted by file, line)."""
        if id(ci) in self._memo:
            return self._memo[id(ci)]
        self._memo[id(ci)] = {}
        params = self.params(ci)
        out: dict[str, list[Option]] = {}
        if params:
            for mod, fn, parents, call, _ in self.calls(ci):
                for attr, (p, pos, _init) in params.items():
                    arg = next((k.value for k in call.keywords if k.arg == p), None)
                    if arg is None and 0 <= pos < len(call.args) and \
                            not any(isinstance(a, ast.Starred) for a in call.args[:pos + 1]):
                        arg = call.args[pos]
                    if arg is None:
                        reason = ("passed by unpacking" if any(isinstance(a, ast.Starred) for a in call.args)
                                  or any(k.arg is None for k in call.keywords) else f"{p} not passed (its default)")
                        out.setdefault(attr, []).append(Option(None, (), mod.rel, call.lineno, reason))
                        continue
                    out.setdefault(attr, []).extend(self._resolve(mod, fn, parents, arg, call, 0))
            for attr in params:
                if attr not in out:
                    out[attr] = [Option(None, (), ci.file, ci.line, f"no call constructing {ci.name} found")]
        for attr in out:
            out[attr] = sorted(set(out[attr]), key=lambda o: (o.file, o.line, o.cls.name if o.cls else "",
                                                               o.conditions, o.reason or ""))
        self._memo[id(ci)] = out
        return out

    def calling_functions(self, ci: ClassInfo) -> list:
        """(qualified name, function node, module) of each function holding a call that constructs ``ci`` and
        passes it children (sorted by name)."""
        if not self.params(ci):
            return []
        seen = {}
        for mod, fn, _parents, _call, qual in self.calls(ci):
            seen.setdefault(f"{mod.name}.{qual}", (fn, mod))
        return [(k, *seen[k]) for k in sorted(seen)]

    def single(self, ci: ClassInfo) -> dict[str, ClassInfo]:
        """attr -> the one class every call passes for it, with no condition and nothing unresolved."""
        out = {}
        for attr, opts in self.of(ci).items():
            classes = {id(o.cls) for o in opts}
            if opts and all(o.cls is not None and not o.conditions for o in opts) and len(classes) == 1:
                out[attr] = opts[0].cls
        return out

    def _calls(self, ci: ClassInfo):
        """Each call constructing ``ci`` in the runtime's modules (``sglang.srt``; test kits are not callers)."""
        maker = re.compile(rf"\b{ci.name}\s*\(|=\s*{ci.name}\b")  # a call, or a local bound to the class
        own = {id(fn) for fn in ci.methods.values()
               if any(isinstance(d, ast.Name) and d.id == "classmethod" for d in fn.decorator_list)}
        for m in self.tree.modules_containing(ci.name):
            if not m.startswith("sglang.srt.") or not (maker.search(self.tree.text(m)) or m == ci.module.name):
                continue
            mod = self.tree.module(m)
            if mod is None:
                continue
            if id(mod) not in self._fns:
                self._fns[id(mod)] = _functions(mod)
            for fn, parents, qual in self._fns[id(mod)]:
                local = {"cls": True} if id(fn) in own else {}
                for node in self.tree.walk(fn):
                    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                            and isinstance(node.value, (ast.Name, ast.Attribute)):
                        if any(r is ci for r in self._names(mod, fn, node.value)):
                            local[node.targets[0].id] = True
                for node in self.tree.walk(fn):
                    if not isinstance(node, ast.Call):
                        continue
                    f = node.func
                    if (isinstance(f, ast.Name) and f.id in local) or \
                            (isinstance(f, (ast.Name, ast.Attribute)) and any(r is ci for r in self._names(mod, fn, f))):
                        if parents.get(node) is not None and _inner(fn, node, parents):
                            yield mod, fn, parents, node, qual

    def _names(self, mod, fn, expr) -> list:
        """What a name or dotted name means in ``fn``: each class a function-local ``from X import Y`` binds to it
        (several when branches import different classes under one name), else its module-level meaning."""
        if isinstance(expr, ast.Name):
            if id(fn) not in self._local:
                self._local[id(fn)] = self.tree.local_imports(mod, [fn])
            if self._local[id(fn)].get(expr.id):
                return self._local[id(fn)][expr.id]
        r = self.tree.resolve_expr(mod, expr)
        return [r] if r is not None else []

    def _returns(self, fi: FuncInfo, call, here, depth) -> list[Option]:
        """What a module-level factory returns: each ``return``, resolved in the factory, under the ``if`` tests
        leading to it; the option keeps the constructing call's file:line."""
        mod = fi.module
        if id(mod) not in self._fns:
            self._fns[id(mod)] = _functions(mod)
        entry = next((e for e in self._fns[id(mod)] if e[0] is fi.node), None)
        if entry is None:
            return [Option(None, (), *here, f"the value of {fi.name}(...)")]
        fn, parents, _ = entry
        out = []
        for ret in _returns_of(fn):
            conds = tuple(c for _, c in _branch(ret, parents, fn))
            for o in self._resolve(mod, fn, parents, ret.value, ret, depth + 1):
                out.append(Option(o.cls, conds + o.conditions, *here, o.reason))
        return out or [Option(None, (), *here, f"{fi.name} ({mod.rel}:{fn.lineno}) returns nothing")]

    def _resolve(self, mod, fn, parents, expr, call, depth) -> list[Option]:
        here = (mod.rel, call.lineno)
        if depth > MAX_DEPTH:
            return [Option(None, (), *here, "assignments nested too deep")]
        if isinstance(expr, ast.Call):
            rs = self._names(mod, fn, expr.func) if isinstance(expr.func, (ast.Name, ast.Attribute)) else []
            if rs and all(isinstance(r, ClassInfo) and id(r) in self._ids for r in rs):
                return [Option(r, (), *here) for r in rs]
            if len(rs) == 1 and isinstance(rs[0], FuncInfo):
                return self._returns(rs[0], call, here, depth)
            return [Option(None, (), *here, f"the value of {ast.unparse(expr.func)}(...) at {mod.rel}:{expr.lineno}")]
        if isinstance(expr, ast.Name):
            if expr.id in _params(fn):
                return [Option(None, (), *here, f"a parameter of {fn.name} ({mod.rel}:{fn.lineno}), chosen by its "
                                                f"callers")]
            assigns = [n for n in ast.walk(fn) if isinstance(n, ast.Assign) and n.lineno < call.lineno
                       and any(isinstance(t, ast.Name) and t.id == expr.id for t in n.targets)]
            if not assigns:
                return [Option(None, (), *here, f"{expr.id} is not assigned in {fn.name}")]
            at_call = set(_branch(call, parents, fn))
            out = []
            for a in assigns:
                conds = tuple(c for b, c in _branch(a, parents, fn) if (b, c) not in at_call)
                for o in self._resolve(mod, fn, parents, a.value, call, depth + 1):
                    out.append(Option(o.cls, conds + o.conditions, o.file, o.line, o.reason))
            return out
        return [Option(None, (), *here, f"cannot resolve {ast.unparse(expr)[:80]}")]


def _returns_of(fn) -> list[ast.Return]:
    """The ``return`` statements of ``fn`` itself (not of functions nested in it)."""
    out, todo = [], list(fn.body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Return) and n.value is not None:
            out.append(n)
        elif not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(n))
    return sorted(out, key=lambda r: r.lineno)


def _inner(fn, node, parents) -> bool:
    """Whether ``node``'s nearest enclosing function is ``fn`` (a nested function's calls are its own)."""
    cur = parents.get(node)
    while cur is not None and cur is not fn:
        if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
        cur = parents.get(cur)
    return cur is fn
