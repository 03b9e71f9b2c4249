"""What the reader reports when one of its limits is reached: never a silent drop.

A read path a limit cut (``reads.Cut``: a call past ``reads.MAX_DEPTH`` below which a function may read shared
state, a function past ``reads.MAX_PATHS`` read paths, a call past the tree's ``reads.MAX_WALKS`` walks) is listed
in its backend's ``cut_paths``; at a site the declaration row does not cover it is an ``unresolved_read_path``
finding (status ``unresolved``), like a read there would be a ``read_outside_declaration`` one. A module the reader
did not read or parse (``tree.Note``: too large, too deeply nested, not a regular file) and a ``ForwardMode`` it
cannot read are ``notes`` of the document; those that may hide a fact are ``unresolved`` (exit 3 when nothing else
is wrong).
"""

from __future__ import annotations

from .reads import Cut


def via_text(c: Cut) -> str:
    return " -> ".join(h.func for h in c.via)


def cut_rows(rd, ci) -> list[dict]:
    """The ``cut_paths`` rows of backend ``ci``: every path a limit cut, in every mode, sorted."""
    out = set()
    for mode in rd.modes.members:
        for site, c in rd.cuts(ci, mode):
            out.add((mode, site.value, c.limit, c.file, c.line, c.what, tuple(h.text() for h in c.via),
                     tuple(c.conditions), _behind(c)))
    return [{"mode": m, "site": s, "limit": lim, "file": f, "line": ln, "what": w, "via": list(v),
             "conditions": list(cs), "behind": b} for m, s, lim, f, ln, w, v, cs, b in sorted(out, key=_key)]


def _key(row) -> tuple:
    return tuple("" if x is None else x for x in row)


def _behind(c: Cut) -> str | None:
    """The host sync or capture-mode test before the cut on its path (what is below it is no finding), or None."""
    if c.host_sync is None:
        return None
    kind = "a capture-mode test" if len(c.host_sync) == 3 else "a host sync"
    return f"{kind} at {c.host_sync[0]}:{c.host_sync[1]}"


def cut_finding(ci, mode: str, end: str, cond: str | None, decl, bad: list) -> dict:
    """The ``unresolved_read_path`` finding of ``ci`` in ``mode`` for a declaration row declaring ``end`` (under
    ``cond``) of ``decl`` (owner, def), whose covered sites miss the sites of the cut paths ``bad`` [(site, Cut)]."""
    owner, node = decl
    evidence = [{"file": owner.file, "line": node.lineno,
                 "what": f"{owner.name}.{node.name} declares {end} for {mode}" + (f" when {cond}" if cond else "")}]
    seen = set()
    for s, c in sorted(bad, key=lambda x: (x[1].file, x[1].line, x[0].value, x[1].what)):
        k = (c.file, c.line, s, c.what)
        if k in seen:
            continue
        seen.add(k)
        evidence.append({"file": c.file, "line": c.line,
                         "what": f"a read path at {s.value} cut: {c.text()}; via {via_text(c)}"
                                 + (f" (when {' and '.join(c.conditions)})" if c.conditions else "")})
    return {"kind": "unresolved_read_path", "subject": ci.name, "subject_at": f"{ci.file}:{ci.line}", "mode": mode,
            "declared": end, "declared_by": node.name, "condition": cond, "status": "unresolved",
            "evidence": evidence, "scenario": None}


def notes_json(tree) -> list[dict]:
    """The document's ``notes``: what the reader skipped or could not read, sorted."""
    return [n.to_json() for n in sorted(set(tree.notes), key=lambda n: (n.file, n.line or 0, n.what))]


def limits_text(doc: dict) -> list[str]:
    """The summary's lines on the reader's limits: the read paths a limit cut and the notes."""
    cut = [c for b in doc["backends"] for c in b.get("cut_paths", ())]
    lines = []
    if cut:
        found = sum(1 for f in doc["findings"] if f["kind"] == "unresolved_read_path")
        lines.append(f"read paths cut by a limit of the reader: {len(cut)} ({found} unresolved findings; --json lists "
                     "them under cut_paths)")
    notes = doc.get("notes", ())
    if notes:
        lines.append(f"notes ({sum(1 for n in notes if n['unresolved'])} unresolved):")
    for n in notes:
        at = f"{n['file']}:{n['line']}" if n["line"] else n["file"]
        lines.append(f"  {'UNRESOLVED ' if n['unresolved'] else ''}{at}: {n['what']}")
    return lines
