"""The baseline's document, kept between pull-request runs: the same baseline read by the same fencecheck gives the
same document, so a second check against it (a pre-commit hook run again on the same commit, a merge gate on the
same merge base) reads HEAD alone.

The key is content-addressed: a revision's package folder by its git tree id (``git rev-parse COMMIT:python/sglang``,
no unpacking needed), a folder by the SHA-256 of its Python files' names and texts (as the reader reads them); with
the SHA-256 of fencecheck's own modules and of the Python running them (a changed reader, or another Python whose
``ast`` parses other sources, misses) and whether the model was asked (``--cross-check``). An entry holds the document
and the tree's suppressions. The folder is ``FENCECHECK_CACHE`` (``off`` turns it off), else
``$XDG_CACHE_HOME/fencecheck/baselines`` or ``~/.cache/fencecheck/baselines``; an entry that cannot be read is read
again from the tree, one that cannot be written is not kept; neither is an error.

The same folder keeps what ``verify --sglang`` reads of a tree (``facts_load``, ``facts_store``): an answer (the
backend files of one class, the tree's generated configurations) with the log of what its read asked of the files
(``sglang_source.tree_log``), keyed by what it is, the tree's module names (with the file behind each) and
fencecheck's own modules, data and Python. An entry is used only when every question of its log gets the same
answer from the tree given, so an edit to a module its read never looked at (a model's file) keeps it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ENV = "FENCECHECK_CACHE"
#: Files of fencecheck's packages besides its modules that the reader and the model read (part of ``code_digest``).
DATA_SUFFIXES = (".json", ".toml")
_CODE: str | None = None


def folder() -> Path | None:
    """Where entries live (None: off)."""
    v = os.environ.get(ENV)
    if v:
        return None if v.strip().lower() in ("off", "0", "false", "no") else Path(v)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fencecheck" / "baselines"


def _files_digest(roots: list[Path], h) -> None:
    """Hashes the names and texts of the Python files under each of ``roots`` as the reader takes them
    (``tree_files``: regular files, never a FIFO or a device; one skipped by its name and why)."""
    from fencecheck.sglang_source.tree_files import Skipped, read_module, scan

    for root in roots:
        for p in scan(root, root)[0]:
            rel = p.relative_to(root).as_posix()
            try:
                text = read_module(p, rel)
            except Skipped as s:
                text = f"\0skipped: {s.note.what}"
            h.update(rel.encode() + b"\0")
            h.update(text.encode() + b"\0")


def code_digest() -> str:
    """The SHA-256 of the modules the document depends on: the vocabulary, files, reader and commands
    (``fencecheck/``) and the simulator deciding the worker reads and the model (``reference/``, ``model/``), with
    the data files they ship (``DATA_SUFFIXES``: the catalogs, the recorded releases), and of the Python that runs
    them (its ``ast`` decides which sources parse)."""
    global _CODE
    if _CODE is None:
        import fencecheck
        import fencecheck.model
        import fencecheck.reference

        h = hashlib.sha256(f"{sys.implementation.cache_tag}\0{sys.version}\0".encode())  # what ast parses
        roots = [Path(p) for m in (fencecheck, fencecheck.reference, fencecheck.model) for p in m.__path__]
        _files_digest(roots, h)
        for root in roots:  # the data the code reads: the catalogs' scenarios, the recorded releases
            for p in sorted(x for x in root.rglob("*") if x.suffix in DATA_SUFFIXES and x.is_file()):
                h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
        _CODE = h.hexdigest()
    return _CODE


def key(base, cross_check: bool) -> str | None:
    """The entry's key for the baseline ``base`` (``sglang_baseline.Baseline``), or None when it has none."""
    h = hashlib.sha256()
    if base.revision is not None:
        r = subprocess.run(["git", "rev-parse", f"{base.revision}:{base.inside}"], cwd=base.top, capture_output=True,
                           text=True, check=False)
        if r.returncode != 0 or not r.stdout.strip():
            return None
        h.update(b"git-tree\0" + r.stdout.strip().encode())
    else:
        from fencecheck.sglang_source import find_package_root

        try:
            _files_digest([find_package_root(base.path)], h)
        except Exception:  # noqa: BLE001 - the read reports what is wrong with the tree
            return None
    h.update(b"\0" + code_digest().encode() + (b"\0model" if cross_check else b"\0sim"))
    return h.hexdigest()


def load(k: str | None):
    """(document, suppressions) of entry ``k``, or None."""
    d = folder()
    if k is None or d is None:
        return None
    try:
        data = json.loads((d / f"{k}.json").read_text(encoding="utf-8"))
        from fencecheck.decision.suppress import Suppression

        return data["document"], [Suppression(s["file"], s["line"], tuple(s["kinds"]), s["reason"])
                                  for s in data["suppressions"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(k: str | None, doc: dict, suppressions: list) -> None:
    """Keeps entry ``k`` (written whole: a temporary file renamed), when it can."""
    d = folder()
    if k is None or d is None:
        return
    _write_whole(d / f"{k}.json", {"document": doc, "suppressions": [s.to_json() for s in suppressions]})


def _write_whole(path: Path, data) -> None:
    """``data`` as JSON at ``path``, written whole (a temporary file renamed), or not at all."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def _facts_path(kind: str, name: str, tree) -> Path | None:
    from fencecheck.sglang_source.tree_log import names_digest

    d = folder()
    if d is None:
        return None
    h = hashlib.sha256(f"{kind}\0{name}\0{names_digest(tree)}\0{code_digest()}".encode())
    return d / f"facts-{h.hexdigest()}.json"


def facts_load(kind: str, name: str, tree):
    """The answer kept as ``kind`` of ``name`` for ``tree``, when its log still holds there; else None."""
    from fencecheck.sglang_source.tree_log import still_holds

    p = _facts_path(kind, name, tree)
    if p is None:
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or "answer" not in data or not still_holds(data.get("log"), tree):
        return None
    return data["answer"]


def facts_store(kind: str, name: str, tree, log, answer) -> None:
    """Keeps ``answer`` (JSON) as ``kind`` of ``name`` with ``log`` (``tree_log.Log``, asked of ``tree``), when it
    can (written whole: a temporary file renamed)."""
    p = _facts_path(kind, name, tree)
    if p is not None and log is not None:
        _write_whole(p, {"log": log.to_json(tree), "answer": answer})
