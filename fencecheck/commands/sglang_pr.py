"""Pull-request mode, ``fencecheck sglang HEAD --baseline BASE``: what a change does to the fence.

Both trees are read (the baseline in a second process while HEAD is read here, where a second core exists), with
the worker reads after the publisher decided in each (they are findings only once decided). The root causes of
the two documents' findings (``sglang_identity``) are compared by identity: **added** (in HEAD, not in the
baseline, not suppressed; a root cause whose baseline suppression HEAD removed counts as added), **fixed** (in the
baseline, gone from HEAD), **unchanged**, and **suppressed** (silenced in HEAD by a ``# fencecheck: ignore``
comment, ``sglang_suppress``). Only the added findings are decided (their scenarios by the simulator and the
model, and in the generated configurations), so the check costs two reads and the change. The protocol facts are compared
too (``sglang_facts``). The exit status is that of the added root causes alone.
"""

from __future__ import annotations

import json
from typing import TextIO

from fencecheck.commands.sglang_identity import RootCause, publish_points, root_causes
from fencecheck.errors import EXIT_OK, EXIT_RACE, EXIT_UNKNOWN, FencecheckError


class _BaselineFailed(FencecheckError):
    """The baseline's read failed in its process: its one line and exit code, carried back."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.exit_code = code


def read_document(path: str | None, installed: bool, cross_check: bool) -> tuple[object, list]:
    """The tree's extraction with its worker reads and its no-marker fallback decided, and the scenarios of those
    findings."""
    from fencecheck.commands.reader_fallback import decide_fallback
    from fencecheck.commands.reader_workers import decide_worker_reads
    from fencecheck.sglang_source import read_path

    from fencecheck.commands.reader_replay import demote_never_replayed

    ex, _ = demote_never_replayed(read_path(path, installed=installed))
    from fencecheck.commands.reader_platform import demote_platform_bound

    ex, _ = demote_platform_bound(ex)
    ex, built = decide_worker_reads(ex, model=cross_check)
    ex, fallback = decide_fallback(ex, model=cross_check)
    from fencecheck.commands.reader_status import settle

    return settle(ex), fallback + built


def read_baseline(base, cross_check: bool, into: str | None = None):
    """The baseline's document (its revision unpacked first) and its suppressions, read leniently (a malformed one
    in the baseline is the baseline's own business)."""
    from pathlib import Path

    from fencecheck.commands import sglang_cache as cache
    from fencecheck.commands.sglang_baseline import unpack
    from fencecheck.commands.sglang_suppress import apply, scan

    k = cache.key(base, cross_check)
    hit = cache.load(k)
    if hit is not None:
        doc, found = hit
        if base.revision is None:  # the same files may lie elsewhere
            from fencecheck.sglang_source import find_package_root

            doc = {**doc, "root": str(find_package_root(base.path))}
        return doc, apply(found, root_causes(doc))
    doc = read_document(unpack(base, into), False, cross_check)[0].to_json()
    found = scan(Path(doc["root"]), strict=False)
    cache.store(k, doc, found)
    return doc, apply(found, root_causes(doc))


def _in_child(base, cross_check: bool, into: str | None):
    """In the baseline's process: ``read_baseline``'s answer, or the failure's (message, exit code)."""
    from fencecheck.errors import EXIT_BUG

    try:
        return read_baseline(base, cross_check, into), None
    except FencecheckError as e:
        return None, (str(e), e.exit_code)
    except Exception as e:  # noqa: BLE001 - a bug, reported as one line by the parent
        return None, (f"internal error, a bug in fencecheck: {type(e).__name__}: {e}", EXIT_BUG)


def read_both(head: str | None, installed: bool, base, cross_check: bool, into: str | None = None):
    """(HEAD's extraction, its worker scenarios, the baseline's document and suppressions): the baseline (from the
    cache, ``sglang_cache``, or unpacked into ``into`` and read) in a forked process while HEAD is read here, when
    this machine has a second core (``common.beside``: on Ctrl-C or a failure here it is not waited for)."""
    from fencecheck.commands.common import beside

    with beside(_in_child, base, cross_check, into) as baseline:
        ex, scen = read_document(head, installed, cross_check)
        if baseline is None:
            return ex, scen, *read_baseline(base, cross_check, into)
        got, failed = baseline()
    if failed is not None:
        raise _BaselineFailed(f"the baseline: {failed[0]}", failed[1])
    return ex, scen, *got


def _order(rc: RootCause) -> tuple:
    return (rc.subject, rc.mode or "", rc.kind, rc.site or "", rc.location or "", rc.function or "", rc.id)


def compare(head_doc: dict, base_doc: dict, head_supp, base_supp) -> dict[str, list[RootCause]]:
    """The root causes by state: ``added``, ``fixed`` (baseline's), ``unchanged``, ``suppressed`` (HEAD's)."""
    head, base = root_causes(head_doc), root_causes(base_doc)
    base_active = {rc.id for rc in base if rc.id not in base_supp.by_id}
    head_ids = {rc.id for rc in head}
    out = {"added": [], "fixed": [], "unchanged": [], "suppressed": []}
    for rc in head:
        if rc.id in head_supp.by_id:
            out["suppressed"].append(rc)
        else:
            out["unchanged" if rc.id in base_active else "added"].append(rc)
    out["fixed"] = [rc for rc in base if rc.id in base_active and rc.id not in head_ids]
    return {k: sorted(v, key=_order) for k, v in out.items()}


def decide_added(ex, doc: dict, added: list[RootCause], witness: bool, cross_check: bool) -> tuple[object, list]:
    """``ex`` (whose document is ``doc``) with the findings of the added root causes decided (as ``fencecheck
    sglang`` decides them: their scenarios, and the generated configurations), and their scenarios. The findings of the same
    backend and mode are decided with them, so that each scenario keeps the name it has in a full run."""
    from dataclasses import replace

    from fencecheck.commands.reader_findings import decide

    wanted = {rc.finding for rc in added if rc.kind == "read_outside_declaration"}
    keys = {(doc["findings"][i]["subject"], doc["findings"][i]["mode"]) for i in wanted}
    subset = [i for i, f in enumerate(ex.findings)
              if f.kind == "read_outside_declaration" and (f.subject, f.mode) in keys]
    sub, built = decide(replace(ex, findings=tuple(ex.findings[i] for i in subset)), witness=witness,
                        context_model="flagged" if cross_check else "none")
    decided = dict(zip(subset, sub.findings))
    names = {decided[i].decision.scenario for i in wanted if decided[i].decision is not None}
    from fencecheck.commands.reader_status import settle

    ex = settle(replace(ex, findings=tuple(decided.get(i, f) for i, f in enumerate(ex.findings))))
    return ex, [s for s in built if s.name in names]


def exit_code(states: dict[str, list[RootCause]], doc: dict, notes: list | tuple = ()) -> int:
    """1 when the change adds a finding (a read outside a declaration, a worker read after the publisher) or a race;
    3 when it adds only unresolved ones, or an unresolved note (``added_notes``: a module the reader could not read,
    a limit it reached); 0 otherwise (it fixes some, or changes no finding)."""
    added = states["added"]
    if any(rc.status in ("confirmed", "reachable", "plausible")
           or doc["findings"][rc.finding].get("verdict") == "counterexample"
           for rc in added):
        return EXIT_RACE
    return EXIT_UNKNOWN if added or notes else EXIT_OK


def added_notes(head_notes, base_doc: dict) -> list:
    """HEAD's unresolved notes (``tree_files.Note``) the baseline has not (the same file and what, lines aside; a
    read in the model's own layers by the function that reads and the map, ``model_reads.note_identity``)."""
    from fencecheck.commands.sglang_identity import without_lines
    from fencecheck.sglang_source.model_reads import note_identity

    def key(file, what):
        return file, without_lines(note_identity(what))

    seen = {key(n["file"], n["what"]) for n in base_doc.get("notes", ()) if n.get("unresolved")}
    return [n for n in head_notes if n.unresolved and key(n.file, n.what) not in seen]


def document(head_doc, base_doc, baseline, states, changes, unchanged, head_supp, notes=()) -> dict:
    """The pull-request document (docs/sglang-pr.schema.json)."""
    def row(state, rc) -> dict:
        if state == "added":
            return {**rc.to_json(), "finding": head_doc["findings"][rc.finding]}
        if state == "suppressed":
            return {**rc.to_json(), "suppression": head_supp.by_id[rc.id].to_json()}
        return rc.to_json()

    def rows(state):
        return [row(state, rc) for rc in states[state]]

    from fencecheck.commands.sglang_facts import CATEGORIES

    return {
        "head": {"root": head_doc["root"], "sglang_version": head_doc["sglang_version"]},
        "baseline": {"given": baseline.given, "revision": baseline.revision,
                     "root": None if baseline.revision else base_doc["root"],
                     "sglang_version": base_doc["sglang_version"]},
        "counts": {k: len(v) for k, v in states.items()},
        "findings": {k: rows(k) for k in ("added", "fixed", "unchanged", "suppressed")},
        "facts": {"changed": {c: [x.to_json() for x in changes if x.category == c] for c in CATEGORIES},
                  "unchanged": unchanged},
        "suppressions": {"unused": [s.to_json() for s in head_supp.unused]},
        "notes": {"added": [n.to_json() for n in notes]},
    }


def render(pr: dict, states, changes, head_ex) -> str:
    """The pull-request report as text (each added finding's verdict from ``head_ex``, the decided extraction)."""
    from fencecheck.commands.sglang_output import decision_lines

    h, b, c = pr["head"], pr["baseline"], pr["counts"]
    where = f"revision {b['revision'][:12]} ({b['given']})" if b["revision"] else b["root"]
    lines = [f"sglang {h['sglang_version'] or '(version unknown)'} at {h['root']} against the baseline "
             f"{b['sglang_version'] or '(version unknown)'} at {where}",
             f"findings: {c['added']} added, {c['fixed']} fixed, {c['unchanged']} unchanged, "
             f"{c['suppressed']} suppressed"]
    shown = set()
    for rc in states["added"]:
        d = head_ex.findings[rc.finding].decision
        lines.append(f"  ADDED {rc.status.upper()} {rc.kind}: {rc.text()}")
        if rc.finding in shown:
            continue  # its finding's verdict is shown with its first root cause
        shown.add(rc.finding)
        if d is not None:
            lines += decision_lines(d, model=False)
    for rc in states["fixed"]:
        lines.append(f"  FIXED {rc.kind}: {rc.text()}")
    for rc, row in zip(states["suppressed"], pr["findings"]["suppressed"]):
        sup = row["suppression"]
        lines.append(f"  SUPPRESSED {rc.kind}: {rc.text()}; {sup['reason']} ({sup['file']}:{sup['line']})")
    total = sum(pr["facts"]["unchanged"].values())
    lines.append(f"protocol facts: {len(changes)} changed, {total} unchanged ("
                 + ", ".join(f"{k} {v}" for k, v in pr["facts"]["unchanged"].items()) + ")")
    for x in changes:
        lines.append(f"  {x.category}: {x.text()}")
    notes = pr.get("notes", {}).get("added", [])
    if notes:
        lines.append(f"unresolved notes the change adds: {len(notes)} (what the reader could not read or follow)")
        lines += [f"  {n['file']}" + (f":{n['line']}" if n["line"] else "") + f": {n['what']}" for n in notes]
    for s in pr["suppressions"]["unused"]:
        lines.append(f"unused suppression: {s['file']}:{s['line']}: ignore[{','.join(s['kinds'])}] {s['reason']}")
    return "\n".join(lines) + "\n"


def run(args, out: TextIO) -> int:
    """``fencecheck sglang HEAD --baseline BASE``: read, compare, decide what is added, report."""
    from pathlib import Path

    from fencecheck.commands.sglang_baseline import resolve, scratch
    from fencecheck.commands.sglang_facts import diff, facts
    from fencecheck.commands.sglang_suppress import apply, scan, warn_unused
    from fencecheck.errors import InputError

    if args.against or args.fingerprints:
        raise InputError("<flags>", "--baseline", "expected no --against or --fingerprints with it (drift is "
                                                  "against a recorded release; --baseline compares two trees)")
    base = resolve(args.baseline, None if args.installed else args.path)
    with scratch(base) as into:
        head_ex, worker_scen, base_doc, base_supp = read_both(args.path, args.installed, base, args.cross_check,
                                                              into)
    read_doc = head_ex.to_json()
    head_supp = apply(scan(Path(head_ex.root)), root_causes(read_doc))
    states = compare(read_doc, base_doc, head_supp, base_supp)
    head_ex, built = decide_added(head_ex, read_doc, states["added"], args.witness, args.cross_check)
    head_doc = head_ex.to_json()  # the root causes' finding indexes are the same: deciding keeps the order
    added_workers = {head_doc["findings"][rc.finding].get("scenario") for rc in states["added"]}
    built += [s for s in worker_scen if s.name in added_workers]
    if args.scenarios:
        from fencecheck.files.outputs import write_tree
        from fencecheck.files.scenario_io import dumps

        write_tree(args.scenarios, {f"{sc.name}.toml": dumps(sc) for sc in built})
    changes, unchanged = diff(facts(base_doc), facts(head_doc))
    notes = added_notes(head_ex.notes, base_doc)
    pr = document(head_doc, base_doc, base, states, changes, unchanged, head_supp, notes)
    warn_unused(head_supp, getattr(args, "err", None))
    fmt = args.format
    if fmt == "sarif":
        from fencecheck.commands.sglang_sarif import (
            Item,
            repo_root_of,
            sarif,
            uri_prefix,
        )

        prefix = uri_prefix(Path(head_doc["root"]), repo_root_of(None if args.installed else args.path))
        items = [Item(rc, tuple(publish_points(head_doc, rc)), head_doc["findings"][rc.finding], state)
                 for state, key in (("new", "added"), ("unchanged", "unchanged")) for rc in states[key]]
        items += [Item(rc, tuple(publish_points(base_doc, rc)), base_doc["findings"][rc.finding], "absent")
                  for rc in states["fixed"]]
        base_ids = {rc.id for rc in root_causes(base_doc)}
        items += [Item(rc, tuple(publish_points(head_doc, rc)), head_doc["findings"][rc.finding],
                       "unchanged" if rc.id in base_ids else "new", head_supp.by_id[rc.id])
                  for rc in states["suppressed"]]
        json.dump(sarif(items, prefix), out, indent=1)
        out.write("\n")
    elif fmt == "json":
        json.dump(pr, out, indent=1)
        out.write("\n")
    else:
        out.write(render(pr, states, changes, head_ex))
    return exit_code(states, head_doc, notes)
