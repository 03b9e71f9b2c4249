"""Pool methods that read a scheduler-shared map, read from the tree: a call of one is a read of that map wherever it
is made (a backend's forward, a worker's step after the verify), as a call of a translator method is.

A method is a pool read of a location when, in the tree given:
- a class of the memory-cache package (``sglang.srt.mem_cache``: SGLang's pools, allocators and index translators)
  that is not an attention backend (``AttentionBackend`` is not on its MRO) defines it and reads
  ``self.<location>`` in its body as data (indexed, passed to a call, the receiver of a method call other than a
  shape query) and stores into no shared location there (a method that writes a map, ``alloc`` or ``free``, is the
  scheduler's own bookkeeping, not a read of the forward);
- it reads exactly one location;
- no attention backend defines a method of that name (a backend's own methods are walked through ``self``), and the
  name is not a method of Python's containers (``clear``, ``get``, ``copy``: a call of one names no pool).

A definition of that name elsewhere that reads nothing (a pool of another platform) does not remove it: the call's
receiver is not typed, so the reader takes the method for the pool that reads (the judged read cites the definition
it comes from). ``pool_reads`` is computed once per tree.
"""

from __future__ import annotations

import ast
import weakref

from ..vocab import SHARED_LOCATIONS
from .tree import ClassInfo, Tree

#: The package of SGLang's pools, allocators and index translators.
POOL_PACKAGE = "sglang.srt.mem_cache"
#: Shape queries of a tensor: reading one does not read the tensor's data.
_META = frozenset({"shape", "size", "dtype", "device", "dim", "numel", "stride", "is_contiguous", "data_ptr"})
#: Method names of Python's containers and ``object``: a call of one is not taken for a pool's method.
_CONTAINER = frozenset(n for ty in (dict, list, set, str, bytes, object) for n in dir(ty))

_MEMO: "weakref.WeakKeyDictionary[Tree, dict[str, tuple[str, str, int]]]" = weakref.WeakKeyDictionary()


def _is_backend(tree: Tree, ci: ClassInfo) -> bool:
    return any(c.name == "AttentionBackend" for c in tree.mro(ci))


def _backends(tree: Tree) -> list[ClassInfo]:
    """Every attention backend class of the tree (the subclasses of each ``AttentionBackend`` class)."""
    roots = tree.classes_named("AttentionBackend", tree.modules_containing("class AttentionBackend"))
    return tree.subclasses(roots) if roots else []


def method_use(tree: Tree, fn: ast.AST) -> tuple[frozenset[str], bool]:
    """The shared locations ``fn`` reads as ``self.<location>`` data, and whether it stores into one (an assignment
    of it or of an element, an in-place method such as ``copy_`` or ``fill_``)."""
    nodes = tree.walk(fn)
    hits = [n for n in nodes if isinstance(n, ast.Attribute) and n.attr in SHARED_LOCATIONS
            and isinstance(n.value, ast.Name) and n.value.id == "self"]
    if not hits:
        return frozenset(), False
    wanted = {id(h) for h in hits}
    parents = {id(k): n for n in nodes for k in ast.iter_child_nodes(n) if id(k) in wanted}
    reads, stores = set(), False
    for n in hits:
        p = parents.get(id(n))
        if isinstance(n.ctx, ast.Store) or (isinstance(p, ast.Subscript) and p.value is n
                                            and not isinstance(p.ctx, ast.Load)):
            stores = True
        elif isinstance(p, ast.Attribute) and p.value is n and p.attr.endswith("_") and not p.attr.startswith("_"):
            stores = True
        elif isinstance(p, ast.Subscript) and p.value is n:
            reads.add(n.attr)
        elif isinstance(p, ast.Call) and n in p.args:
            reads.add(n.attr)
        elif isinstance(p, ast.keyword):
            reads.add(n.attr)
        elif isinstance(p, ast.Attribute) and p.value is n and p.attr not in _META:
            reads.add(n.attr)
    return frozenset(reads), stores


def pool_reads(tree: Tree) -> dict[str, tuple[str, str, int]]:
    """Method name -> (the location it reads, the file and line of the definition that reads it), for the tree's pool
    methods that read a shared map (see the module's docstring), sorted by name."""
    hit = _MEMO.get(tree)
    if hit is not None:
        return hit
    found: dict[str, tuple[str, str, int]] = {}
    bad: set[str] = set()
    for mod_name in tree.modules_containing(*(f"self.{loc}" for loc in sorted(SHARED_LOCATIONS)), under=POOL_PACKAGE):
        mod = tree.module(mod_name)
        if mod is None:
            continue
        for ci in mod.classes.values():
            backend = None
            for name, fn in ci.methods.items():
                if name.startswith("__") or name in _CONTAINER or name in bad:
                    continue
                reads, stores = method_use(tree, fn)
                if not reads or stores:
                    continue
                if backend is None:
                    backend = _is_backend(tree, ci)
                if backend:
                    continue
                if len(reads) != 1 or (name in found and found[name][0] != next(iter(reads))):
                    bad.add(name)
                    found.pop(name, None)
                    continue
                found.setdefault(name, (next(iter(reads)), ci.file, fn.lineno))
    # a name an attention backend defines is walked through ``self``, never taken here
    for ci in _backends(tree) if found else ():
        for name in [n for n in ci.methods if n in found]:
            found.pop(name)
    out = dict(sorted(found.items()))
    _MEMO[tree] = out
    return out
