"""Drift: fingerprints of the SGLang functions the extracted facts come from, and the comparison of a tree with a
release's recorded fingerprints.

A fingerprint is the SHA-256 (first 16 hex digits) of a function's normalized syntax tree: ``ast.dump`` without
line numbers, with its docstring dropped, so a comment, a blank line, a docstring or a move within the file does not
change it; any change to the code does. A function is named by its qualified name (``module.Class.method``), which
does not move with line numbers. The facts a function supports: each backend's declaration (``shared_read_ends`` in
force and the prefill snapshot), the functions on each read's call chain, each worker's ``last_shared_read_runner``,
the barrier and the event loops that call it, each publishing runner's entry method, the functions that construct a
composite passing it children, and ``capture_decode_graph`` (the decode graph runner per device).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from pathlib import Path

from .tree import ClassInfo, Tree

#: Recorded releases (facts, fingerprints, configurations), by name: ``sglang-<version>.json``.
RELEASES = Path(__file__).resolve().parent / "releases"


def fingerprint(node: ast.FunctionDef) -> str:
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    clone = ast.FunctionDef(name=node.name, args=node.args, body=body, decorator_list=node.decorator_list,
                            returns=node.returns, type_comment=None, type_params=[])
    text = ast.dump(clone, annotate_fields=True, include_attributes=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class Fingerprints:
    """qualified name -> {hash, file, line, facts}."""

    def __init__(self):
        self.entries: dict[str, dict] = {}

    def add(self, key: str, node: ast.FunctionDef, file: str, fact: str) -> None:
        e = self.entries.get(key)
        if e is None:
            e = self.entries[key] = {"hash": fingerprint(node), "file": file, "line": node.lineno, "facts": set()}
        e["facts"].add(fact)

    def add_method(self, owner: ClassInfo, node: ast.FunctionDef, fact: str) -> None:
        self.add(f"{owner.key}.{node.name}", node, owner.file, fact)

    def to_dict(self, version: str | None) -> dict:
        return {"sglang_version": version,
                "functions": {k: {"hash": e["hash"], "file": e["file"], "line": e["line"], "facts": sorted(e["facts"])}
                              for k, e in sorted(self.entries.items())}}


def load_release(name_or_path: str) -> tuple[str, dict]:
    """The record of a release name (``sglang-<version>``, in ``RELEASES``) or a fingerprint file (``.json``)."""
    from .tree import NotSGLang

    path = Path(name_or_path)
    if not name_or_path.endswith(".json"):
        path = RELEASES / f"{name_or_path}.json"
        if not path.is_file():
            known = ", ".join(sorted(p.stem for p in RELEASES.glob("*.json")))
            raise NotSGLang("<flags>", "--against", f"expected a recorded release ({known}), a record or fingerprint "
                                                    f"file (.json) or an SGLang tree folder, got {name_or_path!r}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        functions = data["functions"]
        if not isinstance(functions, dict) or not all(isinstance(v, dict) and "hash" in v for v in functions.values()):
            raise ValueError
    except OSError as e:
        raise NotSGLang(str(path), "", f"cannot read: {e.strerror or e}") from None
    except (ValueError, KeyError, TypeError):
        raise NotSGLang(str(path), "functions",
                        "expected a fingerprint file: {\"functions\": {NAME: {\"hash\": ...}}}") from None
    return str(path), data


def compare(recorded: dict, current: dict) -> list[dict]:
    """Each recorded function whose fingerprint changed or that is gone, and each function the current facts come
    from that the release did not record; sorted by name."""
    old, new = recorded["functions"], current["functions"]
    out = []
    for key in sorted(set(old) | set(new)):
        o, n = old.get(key), new.get(key)
        if o is not None and n is not None and o["hash"] == n["hash"]:
            continue
        status = "changed" if o and n else ("removed" if o else "added")
        src = n or o
        out.append({"function": key, "status": status, "file": src["file"], "line": src["line"],
                    "facts": sorted(set((o or {}).get("facts", ())) | set((n or {}).get("facts", ())))})
    return out


def collect(tree: Tree, reader, ex) -> Fingerprints:
    """The fingerprints of the functions ``ex`` (an Extraction read by ``reader``) was derived from."""
    fp = Fingerprints()
    for ci in reader.backends:
        for method in ("shared_read_ends", "_snapshot_prefill_shared_reads"):
            hit = tree.lookup(ci, method)
            if hit is not None:
                fp.add_method(hit[0], hit[1], f"declaration of {ci.name}")
    walked = reader.walker.functions
    for b in ex.backends:
        for key in sorted(b.chain_keys):
            node, file = walked[key]
            fp.add(key, node, file, f"reads of {b.cls}")
    for ci in reader.backends:
        for key, fn, mod in reader.passed.calling_functions(ci):
            fp.add(key, fn, mod.rel, f"children passed to {ci.name}")
    from .device import decode_graph_runner_map

    hit = decode_graph_runner_map(tree)
    if hit is not None:
        fp.add(f"{hit[1].name}.{hit[0].name}", hit[0], hit[1].rel, "decode graph runner per device")
    for w in ex.workers:
        mod = tree.module(_module_of(tree, w.defined_in.file))
        owner = mod.classes[w.defined_in.cls]
        fp.add_method(owner, owner.methods["last_shared_read_runner"], f"worker {w.cls}")
    for entry, name in [(d, "_apply_war_barrier") for d in ex.barrier.defined] + \
            [(c, c.event_loop) for c in ex.barrier.calls]:
        mod = tree.module(_module_of(tree, entry.file))
        cls = mod.classes.get(entry.cls) if entry.cls else None
        node = cls.methods.get(name) if cls else mod.functions[name].node
        if cls is not None:
            fp.add_method(cls, node, "barrier")
        else:
            fp.add(f"{mod.name}.{name}", node, mod.rel, "barrier")
    collect_protocol(ex.protocol, fp)
    return fp


def collect_protocol(proto, fp: Fingerprints | None = None) -> Fingerprints:
    """The fingerprints of the functions the protocol facts come from (``protocol.Protocol``): the barrier, the
    function assigning its gate, every function a runner's events were read from (for each runner that resolves,
    publishes or clears), the functions creating the in-graph marker."""
    fp = Fingerprints() if fp is None else fp
    if proto is None:
        return fp
    for r in proto.runners:
        if not any(e.kind in ("resolve", "publish", "clear") for e in r.events):
            continue
        for key, node, file in r.functions:
            fp.add(key, node, file, f"runner {r.ci.name}")
    g = getattr(proto, "gate_node", None)
    if g is not None and g.node is not None:
        fp.add(g.function, g.node, g.file, "barrier")
    for b in proto.barriers:
        mod_name = _module_of_rel(b.file)
        if b.node is not None:
            fp.add(".".join(x for x in (mod_name, b.cls, b.node.name) if x), b.node, b.file, "barrier")
    for key, node, file in proto.marker_nodes:
        fp.add(key, node, file, "marker")
    return fp


def _module_of_rel(rel: str) -> str:
    parts = list(Path(rel).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _module_of(tree: Tree, rel: str) -> str:
    parts = list(Path(rel).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# -- the catalog's entries ----------------------------------------------------------------------------------------

#: A release cite's source: ``path:qualified.name:`` with the path relative to the ``sglang`` package.
_CITE = re.compile(r"^((?:srt|kernels)/[\w/]+\.py):([\w.]+):")


def _node_fingerprint(node: ast.AST) -> str:
    """A function's fingerprint (``fingerprint``); a class's, by the same normalisation of its whole statement."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return fingerprint(node)
    text = ast.dump(node, annotate_fields=True, include_attributes=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _find(module: ast.Module, qualname: str) -> ast.AST | None:
    scope: list[ast.stmt] = module.body
    node = None
    for part in qualname.split("."):
        node = next((n for n in scope if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == part), None)
        if node is None:
            return None
        scope = node.body
    return node


def catalog_fingerprints(package: Path, version: str, parsed: dict | None = None) -> dict:
    """Per entry of the catalog ``version``, the fingerprint of every SGLang function or class its citations name,
    read in the ``sglang`` package folder ``package`` (``"missing"`` where the file or the name is not there).
    ``parsed`` (cited path -> syntax tree or None), when given, holds files already read and receives those read."""
    from fencecheck.files.catalog import load_catalog

    parsed = {} if parsed is None else parsed
    entries: dict[str, dict[str, str]] = {}
    for s in load_catalog(version):
        names: dict[str, str] = {}
        for cite in s.cites:
            m = _CITE.match(cite)
            if m is None:
                continue
            path, qual = m.groups()
            if path not in parsed:
                parsed[path] = _parse_cited(package / path, path)
            module = parsed[path]
            node = _find(module, qual) if module is not None else None
            names[f"{path}:{qual}"] = _node_fingerprint(node) if node is not None else "missing"
        entries[s.name] = dict(sorted(names.items()))
    return {"version": version, "entries": entries}


def _parse_cited(file: Path, rel: str):
    """The syntax tree of a cited file, or None when it is not there or not read within the reader's limits (not a
    regular file, too large, not valid Python, nested too deeply): its names are then ``missing``."""
    from .tree_files import Skipped, read_module, too_deep

    try:
        text = read_module(file, rel)
        tree = ast.parse(text)
    except (OSError, Skipped, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tree if too_deep(tree, text) is None else None


def compare_catalog(recorded: dict, current: dict) -> list[dict]:
    """The catalog entries whose cited sources differ: each with the names that changed (or went missing)."""
    out = []
    for entry, old in sorted(recorded.get("entries", {}).items()):
        new = current.get("entries", {}).get(entry, {})
        changed = sorted(k for k, h in old.items() if new.get(k) != h)
        if changed:
            out.append({"entry": entry, "changed": changed})
    return out
