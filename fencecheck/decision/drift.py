"""``fencecheck sglang`` against another tree or a recorded release: what changed in the protocol first (a
declaration, a fallback, a publish point, a phase, a clear: ``fact_drift``), then the functions whose code changed
(drift when a fact they support changed, else review), then the catalog entries whose cited sources changed (review);
and the record of a release (``--record DIR`` writes ``DIR/sglang-<version>.json``: its facts, its functions'
fingerprints, the configurations generated from its facts and, where the catalog has the release, its entries'
fingerprints)."""

from __future__ import annotations

import json
from pathlib import Path

from fencecheck.sglang_source.fact_drift import (
    compare_facts,
    fact_table,
    function_drift,
)


def _compact(c: dict) -> dict:
    return {"name": c["name"], "sources": c["sources"], "publisher": c["publisher"],
            "platform_class": c["platform_class"], "loop": c["loop"], "settings": c["settings"],
            "barrier": c["barrier"], "marker": c["marker"], "force_coarse": c["force_coarse"],
            "phases": [[p["mode"], p["side"], p["policy"], p["execution"]] for p in c["phases"]]}


def record_document(ex, package: Path, parsed: dict | None = None) -> dict:
    """The record of a tree: facts, fingerprints, configurations and (with a catalog for its version) the catalog
    entries' fingerprints."""
    from fencecheck.files.catalog import catalog_of
    from fencecheck.sglang_source.drift import catalog_fingerprints

    doc = ex.to_json()
    out = ex.fingerprints.to_dict(ex.version)
    out["facts"] = fact_table(doc)
    out["configurations"] = [_compact(c) for c in (doc.get("configurations") or {}).get("configurations", ())]
    cat = catalog_of(ex.version)
    if cat is not None:
        out["catalog"] = catalog_fingerprints(package, cat, parsed)
    return out


def write_record(folder: str, record: dict) -> Path:
    from fencecheck.errors import InputError
    from fencecheck.files.outputs import write_text_atomic

    version = record.get("sglang_version")
    if not version:
        raise InputError("<flags>", "--record", "the tree has no version (sglang/_version.py): nothing to name the "
                                                "record by")
    path = Path(folder) / f"sglang-{version}.json"
    write_text_atomic(path, record_text(record))
    return path


def record_text(record: dict) -> str:
    """A record as JSON with one line per fact, function, configuration and catalog entry (a reviewed diff shows
    what changed, line by line); the same record gives the same bytes."""
    def one(v) -> str:
        return json.dumps(v, sort_keys=True, ensure_ascii=False)

    parts = []
    for key in sorted(record):
        v = record[key]
        if key in ("facts", "functions") and isinstance(v, dict):
            body = ",\n".join(f"  {one(k)}: {one(x)}" for k, x in sorted(v.items()))
            parts.append(f"{one(key)}: {{\n{body}\n }}" if v else f"{one(key)}: {{}}")
        elif key == "configurations" and isinstance(v, list):
            body = ",\n".join(f"  {one(x)}" for x in v)
            parts.append(f"{one(key)}: [\n{body}\n ]" if v else f"{one(key)}: []")
        elif key == "catalog" and isinstance(v, dict):
            entries = v.get("entries", {})
            body = ",\n".join(f"   {one(k)}: {one(x)}" for k, x in sorted(entries.items()))
            parts.append(f"{one(key)}: {{\n  \"entries\": {{\n{body}\n  }},\n  \"version\": {one(v.get('version'))}\n }}")
        else:
            parts.append(f"{one(key)}: {one(v)}")
    return "{\n " + ",\n ".join(parts) + "\n}\n"


def other_record(spec: str) -> tuple[str, dict]:
    """(what ``spec`` is, its record): a tree folder is read now; a recorded release or a fingerprint file loaded."""
    p = Path(spec)
    if p.is_dir():
        from fencecheck.sglang_source import read_path
        from fencecheck.sglang_source.tree import find_package_root

        ex = read_path(spec)
        return f"the tree {spec}", record_document(ex, find_package_root(spec))
    from fencecheck.sglang_source.drift import load_release

    where, data = load_release(spec)
    return where, data


def drift(spec: str, current: dict, package: Path) -> dict:
    """The ``drift`` section of the document against ``spec`` (``current``: this tree's record)."""
    from fencecheck.sglang_source.drift import (
        catalog_fingerprints,
        compare,
        compare_catalog,
    )

    where, old = other_record(spec)
    have_facts = "facts" in old
    facts = compare_facts(old.get("facts") or {}, current["facts"]) if have_facts else []
    functions = compare(old, current)
    if have_facts:
        functions = function_drift(functions, facts)
    else:  # a fingerprint file without facts: every changed function is drift
        functions = [{**f, "drift": True, "review": False} for f in functions]
    entries = []
    old_cat = old.get("catalog") or {}
    if old_cat.get("version"):
        cur_cat = current.get("catalog") if (current.get("catalog") or {}).get("version") == old_cat["version"] \
            else catalog_fingerprints(package, old_cat["version"])
        entries = compare_catalog(old_cat, cur_cat)
    return {"against": spec, "source": where, "recorded_version": old.get("sglang_version"),
            "compared": "facts" if have_facts else "functions", "facts": facts, "functions": functions,
            "catalog_entries": entries}


def _short(v, n: int = 300) -> str:
    text = json.dumps(v)
    return text if len(text) <= n else text[:n] + "..."


def _change(old, new) -> str:
    """``old -> new``; for two tables only the keys that differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        return "; ".join(f"{k}: {_short(old.get(k), 120)} -> {_short(new.get(k), 120)}" for k in keys)
    return f"{_short(old)} -> {_short(new)}"


def drift_text(d: dict) -> list[str]:
    lines = [f"against {d['against']} ({d['recorded_version']}): {len(d['facts'])} protocol facts differ"
             + ("" if d["compared"] == "facts" else " (the record has no facts: functions compared alone)")]
    for x in d["facts"]:
        lines.append(f"  {x['status'].upper()} {x['fact']}" + (f" ({x['at']})" if x["at"] else "")
                     + (": " + _change(x["old"], x["new"]) if x["status"] == "changed" else
                        f": {_short(x['new'] if x['status'] == 'added' else x['old'])}"))
    drifting = [x for x in d["functions"] if x["drift"]]
    lines.append(f"functions the facts come from that differ: {len(d['functions'])} ({len(drifting)} with a fact "
                 f"that changed, {len(d['functions']) - len(drifting)} to review: code changed, facts did not)")
    for x in d["functions"]:
        lines.append(f"  {'DRIFT' if x['drift'] else 'review'} {x['status']} {x['function']} ({x['file']}:{x['line']}): "
                     f"{'; '.join(x['facts'])}")
    entries = d.get("catalog_entries", [])
    lines.append(f"catalog entries whose cited sources changed (review): {len(entries)}")
    for x in entries:
        lines.append(f"  {x['entry']}: {', '.join(x['changed'])}")
    return lines
