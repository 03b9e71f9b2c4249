"""The scheduler-shared locations as the code has them: the device tensors the scheduler writes after the barrier,
and the vocabulary's list (``vocab.SHARED_LOCATIONS``) checked against them.

From each event loop that applies the barrier, its calls (the loop goes round: those before the barrier's call run
after the previous one) are followed: ``self`` methods on the scheduler class's MRO, module-level helpers through
imports, and a
method called on anything else (``batch.prepare_for_decode()``, ``self.req_to_token_pool.write(...)``) by its name
among the classes of the memory-pool modules (``sglang/srt/mem_cache``) and the batch module
(``sglang/srt/managers/schedule_batch.py``), to ``MAX_DEPTH`` calls and ``MAX_FUNCTIONS`` functions, within the
scheduler's side of the tree (``SCHEDULER_SIDE``: managers, memory pools, disaggregation). A write is an
indexed store into an attribute (``self.req_to_token[indices] = values``) or an in-place tensor method on one
(``.copy_``, ``.fill_``, ``.index_copy_``, ``.scatter_``, ``.index_fill_``, ``.masked_fill_``) in a function so reached;
the attribute is a tensor when a class of those modules creates it with a ``torch`` factory (``zeros``, ``empty``,
``full``, ``cat``, ...; host lists and dicts are not), and a scheduler-shared location when a module of
``sglang/srt/layers/attention`` names it (an attention backend reads it); the tensors written that no backend names
are listed apart (``not_read_by_backends``). A location is such an attribute; each lists its
write sites and the chain of calls from the event loop.
"""

from __future__ import annotations

import ast
import heapq
import re

from fencecheck.vocab import LOCATION_ALIASES, SHARED_LOCATIONS

from .tree import ClassInfo, FuncInfo, Tree

MAX_DEPTH = 6
MAX_FUNCTIONS = 3000
#: The cost of a call resolved by its method name alone (an object of unknown class) against 1 for a call resolved
#: through ``self`` or an import: the chain shown for a write is the cheapest.
BY_NAME_COST = 4
POOL_FOLDERS = ("sglang/srt/mem_cache/",)
BATCH_MODULES = ("sglang/srt/managers/schedule_batch.py",)
ATTENTION = "sglang/srt/layers/attention/"
#: The calls followed stay in the scheduler's side of the tree: its managers, the memory pools, disaggregation.
SCHEDULER_SIDE = ("sglang/srt/managers/", "sglang/srt/mem_cache/", "sglang/srt/disaggregation/")
INPLACE = ("copy_", "fill_", "index_copy_", "scatter_", "index_fill_", "masked_fill_", "index_put_", "zero_")
FACTORIES = ("zeros", "empty", "full", "ones", "arange", "zeros_like", "empty_like", "full_like", "cat", "stack",
             "tensor")


_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(", re.MULTILINE)
_SELF_ASSIGN = re.compile(r"\bself\.(\w+)[ \t]*(?::[^=\n]*)?=[^=]")


def _in_pools(rel: str) -> bool:
    return rel.startswith(POOL_FOLDERS) or rel in BATCH_MODULES


class _Index:
    """Methods by name and tensor attributes of the classes of the pool and batch modules, found lazily: a module is
    parsed only when its text defines the method or assigns the attribute asked about."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self.mods = [m for m in sorted(tree.paths) if _in_pools(tree.rel(m))]
        self._methods: dict[str, list] = {}
        self._tensors: dict[str, tuple | None] = {}

    def _defs(self) -> dict[str, list[str]]:
        """method name -> the modules whose text defines it (one pass over the texts)."""
        if not hasattr(self, "_def_index"):
            self._def_index: dict[str, list[str]] = {}
            for m in self.mods:
                for name in set(_DEF.findall(self.tree.text(m))):
                    self._def_index.setdefault(name, []).append(m)
        return self._def_index

    def methods(self, name: str) -> list[tuple[ClassInfo, ast.FunctionDef]]:
        if name not in self._methods:
            out = []
            for m in self._defs().get(name, ()):
                mod = self.tree.module(m)
                out += [(ci, ci.methods[name]) for ci in (mod.classes.values() if mod else ()) if name in ci.methods]
            self._methods[name] = out
        return self._methods[name]

    def tensor(self, attr: str) -> tuple[str, int] | None:
        """(file, line) where a class of these modules creates ``self.<attr>`` with a torch factory, or None."""
        if not hasattr(self, "_assign_index"):
            self._assign_index: dict[str, list[str]] = {}
            for m in self.mods:
                for name in set(_SELF_ASSIGN.findall(self.tree.text(m))):
                    self._assign_index.setdefault(name, []).append(m)
        if attr not in self._tensors:
            self._tensors[attr] = next((hit for m in self._assign_index.get(attr, ())
                                        if (hit := self._created(m).get(attr)) is not None), None)
        return self._tensors[attr]

    def _created(self, m: str) -> dict[str, tuple[str, int]]:
        """attribute -> (file, line) of its first creation with a torch factory in module ``m``'s classes."""
        memo = self.__dict__.setdefault("_by_module", {})
        if m not in memo:
            out: dict[str, tuple[str, int]] = {}
            mod = self.tree.module(m)
            for ci in (mod.classes.values() if mod else ()):
                for fn in ci.methods.values():
                    for n in self.tree.walk(fn):
                        if isinstance(n, (ast.Assign, ast.AnnAssign)) and isinstance(n.value, ast.Call) \
                                and _is_factory(n.value.func):
                            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                                        and t.value.id == "self":
                                    out.setdefault(t.attr, (ci.file, n.lineno))
            memo[m] = out
        return memo[m]


def _is_factory(f) -> bool:
    return isinstance(f, ast.Attribute) and f.attr in FACTORIES and isinstance(f.value, ast.Name) \
        and f.value.id == "torch"


def _write_target(n) -> tuple[str, str] | None:
    """(attribute, what) of a write: ``X.attr[...] = v`` or ``X.attr[...].copy_(v)`` / ``X.attr.fill_(v)``."""
    if isinstance(n, (ast.Assign, ast.AugAssign)):
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute):
                return t.value.attr, ast.unparse(t)[:120]
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in INPLACE:
        recv = n.func.value
        if isinstance(recv, ast.Subscript):
            recv = recv.value
        if isinstance(recv, ast.Attribute):
            return recv.attr, ast.unparse(n)[:120]
    return None


def shared_locations(tree: Tree) -> dict:
    """``{"locations": [{name, created, writes}], "vocabulary": [...], "only_in_code": [...],
    "only_in_vocabulary": [...], "entries": [...], "unresolved": [...]}``."""
    index = _Index(tree)
    entries = _entries(tree)
    seen: dict[str, tuple] = {}
    writes: dict[str, dict] = {}
    unresolved: list[str] = []
    todo = [(0, i, fn, mod, ci, 0, (f"{ci.name}.{name}",)) for i, (ci, name, fn, mod) in enumerate(entries)]
    heapq.heapify(todo)
    n_pushed = len(todo)
    while todo:  # cheapest chain first: a call resolved by its name alone costs BY_NAME_COST, any other one 1
        cost, _, fn, mod, ci, depth, chain = heapq.heappop(todo)
        key = f"{mod.name}.{ci.name if ci else ''}.{fn.name}"
        if key in seen:
            continue
        if len(seen) >= MAX_FUNCTIONS:
            unresolved.append(f"more than {MAX_FUNCTIONS} functions below the event loops (locations.MAX_FUNCTIONS): "
                              "the rest not followed")
            break
        seen[key] = chain
        if _in_pools(mod.rel):
            for n in tree.walk(fn):
                w = _write_target(n)
                if w is not None and index.tensor(w[0]) is not None:
                    rows = writes.setdefault(w[0], {})
                    rows.setdefault((mod.rel, n.lineno), {"file": mod.rel, "line": n.lineno, "what": w[1],
                                                         "function": chain[-1], "via": list(chain)})
        if depth >= MAX_DEPTH:
            continue
        for c in tree.walk(fn):
            if not isinstance(c, ast.Call):
                continue
            targets, by_name = _targets(tree, index, c, mod, ci)
            for t_ci, t_fn, t_mod in targets:
                if not t_mod.rel.startswith(SCHEDULER_SIDE) or \
                        f"{t_mod.name}.{t_ci.name if t_ci else ''}.{t_fn.name}" in seen:
                    continue
                label = f"{t_ci.name}.{t_fn.name}" if t_ci else f"{t_mod.name.rsplit('.', 1)[-1]}.{t_fn.name}"
                n_pushed += 1
                heapq.heappush(todo, (cost + (BY_NAME_COST if by_name else 1), n_pushed, t_fn, t_mod, t_ci, depth + 1,
                                      chain + (label + (" (by name)" if by_name else ""),)))
    read = _named_by_backends(tree, set(writes))
    locs, other = [], []
    for name in sorted(writes):
        file, line = index.tensor(name)
        row = {"name": name, "created": {"file": file, "line": line},
               "writes": [writes[name][k] for k in sorted(writes[name])]}
        if name in read:
            locs.append({**row, "read_at": read[name]})
        else:
            other.append({"name": name, "created": row["created"], "writes": len(row["writes"]),
                          "first_write": row["writes"][0]})
    found = {x["name"] for x in locs}
    known = {LOCATION_ALIASES.get(n, n) for n in SHARED_LOCATIONS}
    return {"locations": locs, "not_read_by_backends": other, "vocabulary": sorted(known),
            "only_in_code": sorted(found - known), "only_in_vocabulary": sorted(known - found),
            "entries": [{"event_loop": f"{ci.name}.{name}", "file": ci.file, "line": fn.lineno}
                        for ci, name, fn, _ in entries],
            "functions": len(seen), "unresolved": unresolved}


def _named_by_backends(tree: Tree, names: set[str]) -> dict[str, dict]:
    """name -> the first place (file, line) a module of ``sglang/srt/layers/attention`` names ``.name``: a tensor an
    attention backend reads."""
    out: dict[str, dict] = {}
    pats = {n: re.compile(r"\." + re.escape(n) + r"\b") for n in names}
    for m in sorted(tree.paths):
        rel = tree.rel(m)
        if not rel.startswith(ATTENTION):
            continue
        text = tree.text(m)
        for n, pat in pats.items():
            if n not in out:
                hit = pat.search(text)
                if hit:
                    out[n] = {"file": rel, "line": text.count("\n", 0, hit.start()) + 1}
    return out


def _entries(tree: Tree):
    """(class, name, def, module) of every event loop method that calls the barrier."""
    from .barrier import BARRIER

    out = []
    for m in sorted(tree.modules_containing(f".{BARRIER}(")):
        mod = tree.module(m)
        for ci in (mod.classes.values() if mod else ()):
            for name, fn in ci.methods.items():
                if name.startswith("event_loop") and any(
                        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == BARRIER
                        for n in ast.walk(fn)):
                    out.append((ci, name, fn, mod))
    return out


def _targets(tree: Tree, index: _Index, c: ast.Call, mod, ci):
    """The functions ``c`` may enter, and whether they were found by the method's name alone."""
    f = c.func
    if isinstance(f, ast.Attribute):
        recv = f.value
        if isinstance(recv, ast.Name) and recv.id == "self" and ci is not None:
            hit = tree.lookup(ci, f.attr)
            if hit is not None:
                return [(hit[0], hit[1], hit[0].module)], False
        if isinstance(recv, ast.Name) and recv.id != "self":
            r = tree.resolve(mod, recv.id)
            if isinstance(r, tuple) and r[0] == "module":
                m = tree.module(r[1])
                fi = m.functions.get(f.attr) if m else None
                if fi is not None:
                    return [(None, fi.node, fi.module)], False
        return [(k, fn, k.module) for k, fn in index.methods(f.attr)], True
    if isinstance(f, ast.Name):
        r = tree.resolve(mod, f.id)
        if isinstance(r, FuncInfo):
            return [(None, r.node, r.module)], False
    return [], False
