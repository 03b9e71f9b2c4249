"""Reads in the model's own layers: a scheduler-shared map read inside a model's forward, outside every attention
backend, reported as an unresolved note of the document (never silence, never a decided finding).

A model's forward runs inside the decode graph, after the in-graph marker (the marker is recorded at the end of the
in-graph prep, before the forward): a layer that reads ``req_to_token``, ``full_to_swa_index_mapping`` or
``req_index_to_mamba_index_mapping`` there reads outside an ``IN_REPLAY`` declaration (where the platform has the
marker) or a ``PRE_REPLAY`` one of whichever backend runs with the model, and is covered only by ``POST_REPLAY`` or
the coarse barrier. Which backend runs with a model is a server setting, so the reader names the read and does not
decide it.

Found in the models package (``MODELS``) by a name-based closure of bounded depth: the functions whose walk
(``reads.ReadWalker``, no mode decided) finds a read not behind a host sync, then those that call one of them by name
and whose own walk finds it through the call, up to ``MAX_UP`` levels (a ``forward`` or ``forward_*`` method of a
class is not searched for by name: a layer is called as the object); each such method among them is an entry, walked again in each mode a CUDA graph replays (``is_cuda_graph``). A read whose path
runs only on devices whose runners never publish (``device.PlatformPaths``) is left out; one on a platform subset is
noted with the platforms. A layer reached only through another object's call (``self.layers[i](...)``) is found from
its own ``forward``, not from the model's.
"""

from __future__ import annotations

from .capture_state import graph_modes
from .feasible import simplified
from .reads import ReadWalker, never_captured
from .tree import Tree

#: The package of SGLang's models.
MODELS = "sglang.srt.models"
#: Caller levels followed up from a reading function towards a ``forward`` method.
MAX_UP = 3


def _functions(mod):
    """(class info or None, name, def node) of each method and module-level function of ``mod``."""
    for ci in mod.classes.values():
        for name, node in ci.methods.items():
            yield ci, name, node
    for name, fi in mod.functions.items():
        yield None, name, fi.node


def _is_entry(ci, name: str) -> bool:
    return ci is not None and (name == "forward" or name.startswith("forward_"))


def model_reads(tree: Tree, walker: ReadWalker, bound=None) -> list[tuple[str, int, str]]:
    """(file, line, what) of each note on a read in the model's forward (see the module's docstring), sorted;
    ``bound``: the tree's ``device.PlatformPaths`` (None: platforms not named)."""
    from ..vocab import SHARED_LOCATIONS

    needles = sorted({*SHARED_LOCATIONS, *(f".{m}(" for m in walker.translators)})
    readers: dict[tuple, tuple] = {}  # (module, class or None, name) -> (class info, name, module)
    names: set[str] = set()
    for level in range(MAX_UP + 1):
        found = []
        mods = tree.modules_containing(*needles, under=MODELS) if level == 0 else \
            tree.modules_containing(*(f"{n}(" for n in sorted(names)), under=MODELS)
        for m in mods:
            mod = tree.module(m)
            if mod is None:
                continue
            for ci, name, node in _functions(mod):
                key = (m, ci.name if ci else None, name)
                if key in readers or name == "__init__":
                    continue
                reads = _walk(walker, mod, ci, name, node, None)
                if reads:
                    readers[key] = (ci, name, mod)
                    if not _is_entry(ci, name):  # a layer's forward is called as the object, not by its name
                        found.append(name)
        new = set(found) - names
        if not new:
            break
        names |= new
    notes: dict[tuple, dict] = {}
    for _, (ci, name, mod) in sorted(readers.items(), key=lambda x: tuple(str(p) for p in x[0])):
        if not _is_entry(ci, name):
            continue
        for mode in graph_modes(walker.modes):
            for r in _walk(walker, mod, ci, name, ci.methods[name], mode):
                hit = bound.platforms(r, walker.functions) if bound is not None else None
                if hit is not None and hit[0] and all(p in bound.silent for p in hit[0]):
                    continue  # only on devices whose runners never publish
                k = (r.file, r.line, r.location)
                n = notes.setdefault(k, {"entries": [], "modes": [], "read": r, "platforms": hit})
                if (len(r.via), len(r.conditions)) < (len(n["read"].via), len(n["read"].conditions)):
                    n["read"], n["platforms"] = r, hit  # the chain shown: the shortest, then the least conditioned
                if f"{ci.name}.{name}" not in n["entries"]:
                    n["entries"].append(f"{ci.name}.{name}")
                if mode not in n["modes"]:
                    n["modes"].append(mode)
    out = []
    for (file, line, loc), n in sorted(notes.items()):
        r = n["read"]
        cond = simplified(r.conditions)
        hit = n["platforms"]
        where = f"; only on {', '.join(hit[0])}" if hit is not None and hit[0] else ""
        entries = n["entries"]
        more = f" and {len(entries) - 1} more forward methods" if len(entries) > 1 else ""
        out.append((file, line, (
            f"{r.via[-1].func} reads {loc}{MARK} (from {r.via[0].func}{more}, via "
            + " -> ".join(h.func for h in r.via) + (f"; when {cond}" if cond else "") + ")" + where
            + f": in a {'/'.join(n['modes'])} graph it runs after the in-graph marker, outside an IN_REPLAY or "
              "PRE_REPLAY declaration of the backend that runs with the model; not decided (which backend runs with "
              "a model is a server setting)")))
    return out


#: The words that mark a note on a read in the model's own layers.
MARK = " in the model's forward"


def note_identity(what: str) -> str:
    """What identifies a note across trees: for a read in the model's own layers, the function that reads and the
    map (its entries, chain and conditions change with the callers); any other note whole."""
    return what.split(" (from ", 1)[0] if MARK + " (from " in what else what


def _walk(walker: ReadWalker, mod, ci, name: str, node, mode) -> list:
    reads = walker.method_reads(ci, name, mode) if ci is not None else walker.function_reads(mod, node, mode)
    # a breakable graph breaks around attention only: the model's own layers are captured, so no replay takes a path
    # of theirs that host-syncs first (a whole-forward eager replay aside); a syncing call's path is kept, as before
    return [r for r in reads if not never_captured(r.host_sync)]
