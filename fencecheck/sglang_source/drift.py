"""Drift: fingerprints of the SGLang functions the extracted facts come from, and the comparison of a tree with a
release's recorded fingerprints.

A fingerprint is the SHA-256 (first 16 hex digits) of a function's normalized syntax tree: ``ast.dump`` without
line numbers, with its docstring dropped, so a comment, a blank line, a docstring or a move within the file does not
change it; any change to the code does. A function is named by its qualified name (``module.Class.method``), which
does not move with line numbers. The facts a function supports: each backend's declaration (``shared_read_ends`` in
force and the prefill snapshot), the functions on each read's call chain, each worker's ``last_shared_read_runner``,
the barrier and the event loops that call it, and each publishing runner's entry method.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

from .tree import ClassInfo, Tree

#: Recorded fingerprints of releases, by name (``sglang-0.5.23``).
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
    """The recorded fingerprints of a release name (``sglang-0.5.23``) or a fingerprint file (``.json``)."""
    from .tree import NotSGLang

    path = Path(name_or_path)
    if not name_or_path.endswith(".json"):
        path = RELEASES / f"{name_or_path}.json"
        if not path.is_file():
            known = ", ".join(sorted(p.stem for p in RELEASES.glob("*.json")))
            raise NotSGLang("<flags>", "--against", f"expected a recorded release ({known}) or a fingerprint file "
                                                    f"(.json), got {name_or_path!r}")
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
        for key in sorted(ex.via_keys.get(f"{b['file']}:{b['line']}", ())):
            node, file = walked[key]
            fp.add(key, node, file, f"reads of {b['class']}")
    for w in ex.workers:
        mod = tree.module(_module_of(tree, w["defined_in"]["file"]))
        owner = mod.classes[w["defined_in"]["class"]]
        fp.add_method(owner, owner.methods["last_shared_read_runner"], f"worker {w['class']}")
    for entry in ex.barrier["defined"] + [c for c in ex.barrier["calls"]]:
        mod = tree.module(_module_of(tree, entry["file"]))
        cls = mod.classes.get(entry["class"]) if entry["class"] else None
        name = entry.get("event_loop", "_apply_war_barrier")
        node = cls.methods.get(name) if cls else mod.functions[name].node
        if cls is not None:
            fp.add_method(cls, node, "barrier")
        else:
            fp.add(f"{mod.name}.{name}", node, mod.rel, "barrier")
    for r in ex.runners:
        if r["publish"] == "never":
            continue
        m = r["method"]
        mod = tree.module(_module_of(tree, m["file"]))
        owner = mod.classes[m["class"]]
        fp.add_method(owner, owner.methods[m["name"]], f"runner {r['class']}")
    return fp


def _module_of(tree: Tree, rel: str) -> str:
    parts = list(Path(rel).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)
