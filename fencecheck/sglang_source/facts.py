"""The protocol facts as the document's top-level keys, for a tree with the declaration fence (``read_facts``) and
for one with an older fence or none (``older_fence``): ``fence``, ``graph_runners``, ``platforms``,
``shared_locations``, ``steps``, ``graph_replay``, ``backend_platforms``, ``publishers_without_barrier`` and
``configurations`` (docs/sglang-reader.md, "Protocol facts")."""

from __future__ import annotations

from .protocol import Protocol, platforms_json, runners_json
from .tree import Tree


def protocol_keys(proto: Protocol) -> dict:
    return {"fence": proto.fence_json(), "graph_runners": runners_json(proto), "platforms": platforms_json(proto)}


def algorithm_rows(ex) -> list[dict]:
    """The ``algorithms`` rows of ``ex`` as the document has them; algorithms sharing one worker share one list of
    phases."""
    out, phases = [], {}
    for a in ex.algorithms:
        row = a.to_json()
        row["phases"] = phases.setdefault(id(a.phases), row["phases"])
        row["prefill_phases"] = phases.setdefault(id(a.prefill_phases), row["prefill_phases"])
        out.append(row)
    return out


def read_facts(tree: Tree, rd, ex) -> dict:
    """The top-level keys of a tree with the declaration fence (``ex``: its extraction, read by ``rd``)."""
    from .contexts import configurations
    from .locations import shared_locations
    from .steps import step_facts

    proto = ex.protocol
    out = protocol_keys(proto)
    out["shared_locations"] = shared_locations(tree)
    algorithms = algorithm_rows(ex)
    out["steps"] = step_facts(tree, proto, algorithms, rd.modes)
    from .replay import graph_replay

    out["graph_replay"] = graph_replay(tree, proto, rd)
    from .device import platform_binding

    out["backend_platforms"] = []
    for ci in rd.backends:
        hit = platform_binding(tree, ci, rd.root) if ci is not rd.root else None
        if hit is not None:
            out["backend_platforms"].append({"class": ci.name, "file": ci.file, "line": ci.line, "platform": hit[0],
                                             "at": {"file": hit[1], "line": hit[2]}, "why": hit[3]})
    out["publishers_without_barrier"] = publishers_without_barrier(tree, ex)
    out["configurations"] = configurations(tree, proto, out["steps"], algorithms,
                                           [e.to_json() for e in ex.barrier.event_loops])
    prefill_read_notes(tree, algorithms, out["configurations"]["configurations"])
    from fencecheck.files.catalog import catalog_of

    from .catalog_compare import compare

    cat = catalog_of(ex.version)
    if cat is not None:
        out["catalog_comparison"] = compare(out["configurations"]["configurations"], cat)
    return out


def prefill_read_notes(tree: Tree, algorithms: list[dict], configs: list[dict]) -> None:
    """An unresolved note on each worker read after its prefill step's publishing phase (on the publisher's side:
    ``prefill_reads_after_publisher``) of an
    algorithm whose prefill step publishes its read-done in some generated configuration (a source ``NAME: prefill``
    of one with ``prefill_read_done``): the read races where that phase's backend declares ``PRE_REPLAY`` for
    ``EXTEND``, and nothing decides it. Each read once per worker, naming the algorithms."""
    early = {src.split(": ")[0] for c in configs if c["prefill_read_done"] for src in c["sources"]
             if src.endswith(": prefill")}
    reads: dict = {}
    for a in algorithms:
        if a["name"] not in early or a["worker"] is None:
            continue
        for r in a["prefill_reads_after_publisher"]:
            key = (a["worker"]["class"], r["file"], r["line"], r["location"])
            reads.setdefault(key, (r, []))[1].append(a["name"])
    for (worker, file, line, location), (r, names) in sorted(reads.items()):
        after = r["after"]
        tree.note(file, line, f"{worker} reads {location} after its prefill step's publishing phase "
                              f"(`{after['call']}`, {after['file']}:{after['line']}), whose read-done "
                              f"{' and '.join(sorted(set(names)))} may publish before that forward ends (where its "
                              "backend declares PRE_REPLAY for EXTEND): not decided, no scenario models a worker's "
                              "read in a prefill step"
                              + (f"; when {r['condition']}" if r["condition"] else ""))


def publishers_without_barrier(tree: Tree, ex) -> list[dict]:
    """The algorithms' publisher rows that never meet a loop applying the barrier (``pipeline.without_barrier``),
    each once: the worker, the publisher, its conditions and why."""
    from .pipeline import without_barrier

    loops = tuple(sorted(e.event_loop for e in ex.barrier.event_loops if e.barrier_lines))
    out, seen = [], set()
    for a in ex.algorithms if loops else ():
        if a.worker is None:
            continue
        ci = next((c for c in tree.classes_named(a.worker.cls) if c.file == a.worker.file), None)
        for p in a.publisher:
            key = (a.worker.cls, a.worker.file, p.publisher, p.conditions)
            if ci is None or not p.conditions or key in seen:
                continue
            seen.add(key)
            why = without_barrier(tree, ci, p.conditions, loops)
            if why is not None:
                out.append({"worker": a.worker.cls, "file": a.worker.file, "publisher": p.publisher,
                            "conditions": list(p.conditions), "why": why})
    return out
