"""Where a backend is constructed, and the platform those places bind it to: a class every construction of which
runs on one platform only runs there.

A construction is a call of the class by its name (``MusaFlashAttentionBackend(runner)``) that resolves to it (or to
nothing the reader knows), or an import of it inside a function or under another name (``from m import
MusaFlashAttentionMultiStepBackend as FlashAttentionMultiStepBackend``): the name means the class where that import
ran, so the import's conditions are the construction's. Its conditions are the
tests on its path inside the enclosing function: an ``if`` it lies under (its test, or the test's negation in the
``else``; an ``elif`` is an ``else`` holding an ``if``), and each earlier ``if`` of the blocks on the path whose body
always ends in ``return`` or ``raise`` (``if not _is_musa: return A(...)`` before it: the negation). A module-level
name bound to a platform's predicate (``_is_musa = is_musa()``) is that predicate. The conditions are evaluated per
platform by ``platform.Evaluator`` (settings unknown: a test of one is neither true nor false): a construction can run
on the platforms where they are not false.

A construction inside a method of another class runs where that class is constructed (followed to ``MAX_DEPTH``
classes); a construction of the class inside its own methods is the class already constructed (not a site). The
class is bound to platform P when it has a construction and every construction can run on P alone. A class built in
any other way (a registry lookup, ``getattr``) has no site the reader sees: it is then never bound, so its findings
stay.
"""

from __future__ import annotations

import ast

from fencecheck.vocab import Platform

from .feasible import simplified
from .platform import Evaluator
from .tree import ClassInfo, Tree, _absolute, copy_node

#: Classes followed from a construction inside a method to that method's class.
MAX_DEPTH = 3


def parents_of(tree: Tree, mod) -> dict[int, ast.AST]:
    memo = tree.__dict__.setdefault("_construct_parents", {})
    hit = memo.get(mod.name)
    if hit is None:
        hit = memo[mod.name] = parent_map(tree.walk(mod.tree))
    return hit


def parent_map(nodes) -> dict[int, ast.AST]:
    """id(child) -> parent over ``nodes`` (``ast.walk``'s order, as ``Tree.walk`` gives it), each node's children
    in field order: what ``{id(k): n for n in nodes for k in ast.iter_child_nodes(n)}`` gives, without a generator
    per node."""
    out: dict[int, ast.AST] = {}
    AST = ast.AST
    for n in nodes:
        for f in n._fields:
            v = getattr(n, f, None)
            if isinstance(v, AST):
                out[id(v)] = n
            elif isinstance(v, list):
                for x in v:
                    if isinstance(x, AST):
                        out[id(x)] = n
    return out


#: The fields of a compound statement that hold a block of statements.
BLOCKS = ("body", "orelse", "finalbody", "handlers")


def ends_in_exit(stmts) -> bool:
    """Whether the block ``stmts`` ends in ``return`` or ``raise`` (every path through it leaves the function)."""
    return bool(stmts) and isinstance(stmts[-1], (ast.Return, ast.Raise))


def path_tests(node, parents) -> tuple[list[ast.expr], ast.AST | None]:
    """The tests on ``node``'s path (each a test or its negation) and the function or class body it is in (None:
    module level)."""
    conds: list[ast.expr] = []
    child, cur = node, parents.get(id(node))
    while cur is not None:
        for field in BLOCKS:
            block = getattr(cur, field, None)
            if isinstance(block, list) and child in block:
                if isinstance(cur, ast.If):
                    conds.append(cur.test if field == "body" else ast.UnaryOp(ast.Not(), cur.test))
                for s in block[:block.index(child)]:  # an earlier ``if T: return``: the path needs T false
                    if isinstance(s, ast.If) and ends_in_exit(s.body) and not s.orelse:
                        conds.append(ast.UnaryOp(ast.Not(), s.test))
                break
        if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            break
        child, cur = cur, parents.get(id(cur))
    return conds, cur


class _Aliases(ast.NodeTransformer):
    """Module-level names bound to a platform's predicate call, replaced by the call."""

    def __init__(self, names: dict[str, ast.expr]):
        self.names = names

    def visit_Name(self, node):
        return copy_node(self.names[node.id]) if node.id in self.names else node


def _predicate_names(mod) -> dict[str, ast.expr]:
    out = {}
    for s in mod.tree.body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                and isinstance(s.value, ast.Call) and not s.value.args:
            f = s.value.func
            last = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if last in {f"is_{p.value}" for p in Platform}:
                out[s.targets[0].id] = s.value
    return out


def _function_of(node, parents):
    cur = parents.get(id(node))
    while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
        cur = parents.get(id(cur))
    return cur


def _sites(tree: Tree, ci: ClassInfo):
    """(module, node) of each place that constructs ``ci`` or binds a name to it for a construction: an import of it
    inside a function (the name means ``ci`` where that import ran: its conditions are the construction's), an import
    of it under another name, and a call by its name that is not bound by an import of its function and resolves to
    ``ci`` at module level, or to nothing the reader knows (then it may be ``ci``)."""
    for m in tree.modules_containing(ci.name):
        mod = tree.module(m)
        if mod is None:
            continue
        parents = parents_of(tree, mod)
        for n in tree.walk(mod.tree):
            if isinstance(n, ast.ImportFrom) and any(a.name == ci.name for a in n.names):
                inside = _function_of(n, parents) is not None
                aliased = any(a.name == ci.name and a.asname and a.asname != ci.name for a in n.names)
                if inside or aliased:
                    target = tree.module(_absolute_of(tree, mod, n))
                    if target is None or tree.resolve(target, ci.name) in (ci, None):
                        yield mod, n
            elif isinstance(n, ast.Call) and ((isinstance(n.func, ast.Name) and n.func.id == ci.name)
                                              or (isinstance(n.func, ast.Attribute) and n.func.attr == ci.name)):
                fn = _function_of(n, parents)
                if isinstance(n.func, ast.Name) and fn is not None and tree.local_imports(mod, fn.body).get(ci.name):
                    continue  # the import binding the name is the site
                r = tree.resolve_expr(mod, n.func)
                if r is ci or not isinstance(r, ClassInfo):
                    yield mod, n


def _absolute_of(tree: Tree, mod, node: ast.ImportFrom) -> str:
    return _absolute(mod.name, mod.path.name == "__init__.py", node.module, node.level)


def _enclosing_class(fn, parents):
    cur = parents.get(id(fn)) if fn is not None else None
    while cur is not None and not isinstance(cur, ast.ClassDef):
        cur = parents.get(id(cur))
    return cur


def construction_platform(tree: Tree, ci: ClassInfo, _depth: int = 0) -> tuple[str, str, int, str] | None:
    """(platform, file, line, what) when every construction of ``ci`` can run on that one platform only (see the
    module's docstring), else None; file and line: the first construction, ``what`` names each (three at most)."""
    ev = Evaluator(tree)
    platforms: set[str] = set()
    sites: list[tuple[str, int, str]] = []
    for mod, node in _sites(tree, ci):
        parents = parents_of(tree, mod)
        conds, fn = path_tests(node, parents)
        owner = _enclosing_class(fn, parents)
        aliases = _Aliases(_predicate_names(mod))
        test = ast.BoolOp(ast.And(), [aliases.visit(copy_node(c)) for c in conds]) if conds else None
        here = {p.value for p in Platform if test is None or ev.value(mod, test, p.value, {}) is not False}
        how = f"when {simplified([ast.unparse(c) for c in conds])}" if conds else ""
        if owner is not None and here == {p.value for p in Platform}:
            if owner.name == ci.name:
                continue  # built inside its own methods: already constructed
            k = mod.classes.get(owner.name)
            up = construction_platform(tree, k, _depth + 1) if k is not None and _depth < MAX_DEPTH else None
            if up is None:
                return None
            here, how = {up[0]}, f"inside {owner.name}, itself constructed on {up[0]} only"
        platforms |= here
        if len(platforms) > 1:
            return None
        sites.append((mod.rel, node.lineno, how))
    if not sites or len(platforms) != 1:
        return None
    (p,) = platforms
    shown = "; ".join(f"{f}:{n}" + (f" ({h})" if h else "") for f, n, h in sites[:3])
    more = f"; and {len(sites) - 3} more" if len(sites) > 3 else ""
    return p, sites[0][0], sites[0][1], f"every construction of {ci.name} runs on {p} only: {shown}{more}"
