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

Every entry is checked when read, and one that fails is a miss (the tree is read again and the entry written over),
never an error: it is bound to the key it was stored under (``key``: the tree's identity with fencecheck's; a facts
entry's kind and name too) and to its content (the SHA-256 of its payload's JSON, ``_digest``), so another tree's
entry copied over a key, or an edited one, is not used; and its payload has the shape its reader needs (``_document``,
``_suppressions``, ``_ANSWERS``: the keys and their types), so valid JSON of another shape is not used either.
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


def _digest(payload) -> str:
    """The SHA-256 of ``payload``'s JSON, as written and as read back (a dict's keys in their order)."""
    return hashlib.sha256(json.dumps(payload, allow_nan=False).encode()).hexdigest()


def _sealed(k: str, payload: dict) -> dict:
    """The entry of ``payload`` stored under ``k``: the key, the payload's digest, the payload (as JSON reads it back,
    so the digest is that of what a load sees)."""
    payload = json.loads(json.dumps(payload, allow_nan=False))
    return {"key": k, "digest": _digest(payload), **payload}


def _unsealed(path: Path, k: str, fields: tuple[str, ...]) -> dict | None:
    """The payload (``fields``) of the entry at ``path`` when it is one stored under ``k`` and unchanged since; else
    None (no file, not JSON, another key, another digest)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("key") != k or set(data) != {"key", "digest", *fields}:
        return None
    payload = {f: data[f] for f in fields}
    try:
        return payload if data["digest"] == _digest(payload) else None
    except (ValueError, RecursionError):
        return None


def _is(v, *types) -> bool:
    return isinstance(v, types) and not (isinstance(v, bool) and bool not in types)


def _all(items, test) -> bool:
    return isinstance(items, list) and all(test(x) for x in items)


#: The top-level keys of a tree's document that pull-request mode reads (docs/sglang-reader.schema.json) and their types.
_DOCUMENT = {"root": (str,), "sglang_version": (str, type(None)), "forward_modes": (dict,), "backends": (list,),
             "workers": (list,), "barrier": (dict,), "runners": (list,), "algorithms": (list,), "findings": (list,),
             "not_findings": (list,), "notes": (list,)}


def _where(e) -> bool:
    return isinstance(e, dict) and _is(e.get("file"), str) and _is(e.get("line"), int, type(None)) \
        and _is(e.get("what"), str)


def _document(doc) -> bool:
    """Whether ``doc`` has the shape pull-request mode reads: the document's keys and types, each finding's and
    note's, and its root causes computed (``identity.root_causes``)."""
    if not isinstance(doc, dict) or not all(k in doc and _is(doc[k], *t) for k, t in _DOCUMENT.items()):
        return False
    if not _all(doc["findings"], lambda f: isinstance(f, dict) and _is(f.get("kind"), str)
                and _is(f.get("subject"), str) and _is(f.get("status"), str) and "mode" in f
                and _is(f["mode"], str, type(None)) and "subject_at" in f and _all(f.get("evidence"), _where)):
        return False
    if not _all(doc["notes"], lambda n: isinstance(n, dict) and _is(n.get("file"), str) and _is(n.get("what"), str)):
        return False
    from fencecheck.decision.identity import root_causes

    try:
        root_causes(doc)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return False
    return True


def _suppressions(items) -> bool:
    """Whether ``items`` are suppressions as ``Suppression.to_json`` writes them."""
    return _all(items, lambda s: isinstance(s, dict) and set(s) == {"file", "line", "kinds", "reason"}
                and _is(s["file"], str) and _is(s["line"], int) and _all(s["kinds"], lambda x: _is(x, str))
                and _is(s["reason"], str))


def load(k: str | None):
    """(document, suppressions) of entry ``k``, or None (none kept, or one that fails its checks: see the module)."""
    d = folder()
    if k is None or d is None:
        return None
    data = _unsealed(d / f"{k}.json", k, ("document", "suppressions"))
    if data is None or not _document(data["document"]) or not _suppressions(data["suppressions"]):
        return None
    from fencecheck.decision.suppress import Suppression

    return data["document"], [Suppression(s["file"], s["line"], tuple(s["kinds"]), s["reason"])
                              for s in data["suppressions"]]


def store(k: str | None, doc: dict, suppressions: list) -> None:
    """Keeps entry ``k`` (written whole: a temporary file renamed), when it can."""
    d = folder()
    if k is None or d is None:
        return
    try:
        entry = _sealed(k, {"document": doc, "suppressions": [s.to_json() for s in suppressions]})
    except (TypeError, ValueError, RecursionError):
        return
    _write_whole(d / f"{k}.json", entry)


def _write_whole(path: Path, data) -> None:
    """``data`` as JSON at ``path``, written whole (a temporary file renamed), or not at all."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def _facts_key(kind: str, name: str, tree) -> str | None:
    from fencecheck.sglang_source.tree_log import names_digest

    if folder() is None:
        return None
    return hashlib.sha256(f"{kind}\0{name}\0{names_digest(tree)}\0{code_digest()}".encode()).hexdigest()


def _backend_answer(a) -> bool:
    """``backend_source._read_backend``'s answer: the class, file and line, and per variant its rows (``Row``'s
    fields) and backend data."""
    row = {"backend": (str,), "mode": (str,), "end": (str,), "condition": (str, type(None)), "declared_by": (str,)}
    return isinstance(a, dict) and set(a) == {"cls", "file", "line", "variants"} and _is(a["cls"], str) \
        and _is(a["file"], str) and _is(a["line"], int) \
        and _all(a["variants"], lambda v: isinstance(v, dict) and set(v) == {"rows", "data"}
                 and isinstance(v["data"], dict)
                 and _all(v["rows"], lambda r: isinstance(r, dict) and set(r) == set(row)
                          and all(_is(r[f], *t) for f, t in row.items())))


def _configurations_answer(a) -> bool:
    """``backend_source._kept_configurations``'s answer: ``{"configurations": None or the generated ones}``."""
    if not isinstance(a, dict) or set(a) != {"configurations"}:
        return False
    c = a["configurations"]
    return c is None or (isinstance(c, dict) and _all(c.get("configurations", []), lambda x: isinstance(x, dict)
                                                       and _is(x.get("name"), str)))


#: The shape of each kind of facts answer, as its reader (``backend_source``) needs it; another kind is never kept.
_ANSWERS = {"backend": _backend_answer, "configurations": _configurations_answer}


def facts_load(kind: str, name: str, tree):
    """The answer kept as ``kind`` of ``name`` for ``tree``, when its entry passes its checks (see the module) and
    its log still holds there; else None."""
    from fencecheck.sglang_source.tree_log import still_holds

    k = _facts_key(kind, name, tree)
    if k is None:
        return None
    data = _unsealed(folder() / f"facts-{k}.json", k, ("kind", "name", "log", "answer"))
    if data is None or data["kind"] != kind or data["name"] != name or not _ANSWERS.get(kind, _no)(data["answer"]) \
            or not still_holds(data["log"], tree):
        return None
    return data["answer"]


def _no(_) -> bool:
    return False


def facts_store(kind: str, name: str, tree, log, answer) -> None:
    """Keeps ``answer`` (JSON) as ``kind`` of ``name`` with ``log`` (``tree_log.Log``, asked of ``tree``), when it
    can (written whole: a temporary file renamed)."""
    k = _facts_key(kind, name, tree)
    if k is None or log is None:
        return
    try:
        entry = _sealed(k, {"kind": kind, "name": name, "log": log.to_json(tree), "answer": answer})
    except (TypeError, ValueError, RecursionError):
        return
    _write_whole(folder() / f"facts-{k}.json", entry)
