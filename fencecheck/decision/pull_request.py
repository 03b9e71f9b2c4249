"""Pull-request mode's decisions, ``fencecheck sglang HEAD --baseline BASE``: what a change does to the fence.

Both trees are read (the baseline in a second process while HEAD is read here, where a second core exists), with
the worker reads after the publisher decided in each (they are findings only once decided). The root causes of
the two documents' findings (``identity``) are compared by identity: **added** (in HEAD, not in the baseline, not
suppressed; a root cause whose baseline suppression HEAD removed counts as added), **fixed** (in the baseline, gone
from HEAD), **unchanged**, and **suppressed** (silenced in HEAD by a ``# fencecheck: ignore`` comment, ``suppress``).
Only the added findings are decided (their scenarios by the simulator and the model, and in the generated
configurations), so the check costs two reads and the change. The protocol facts are compared too
(``fact_changes``), and what HEAD lost of the baseline's fence (``fact_changes.losses``: the declaration fence, a
declaration, a barrier call site, a publish point, a clear). The exit status is that of the added root causes and
the losses: a loss exits 1.
"""

from __future__ import annotations

from fencecheck.decision.identity import RootCause, root_causes
from fencecheck.decision.status import is_question
from fencecheck.errors import EXIT_OK, EXIT_RACE, EXIT_UNKNOWN, FencecheckError


class _BaselineFailed(FencecheckError):
    """The baseline's read failed in its process: its one line and exit code, carried back."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.exit_code = code


def read_document(path: str | None, installed: bool, cross_check: bool) -> tuple[object, list]:
    """The tree's extraction with its worker reads and its no-marker fallback decided (``pipeline.Plan.pull_request``),
    and the scenarios of those findings."""
    from fencecheck.decision.pipeline import Plan, read_decided

    decided = read_decided(path, installed, Plan.pull_request(cross_check))
    return decided.extraction, list(decided.scenarios)


def read_baseline(base, cross_check: bool, into: str | None = None):
    """The baseline's document (its revision unpacked first) and its suppressions, read leniently (a malformed one
    in the baseline is the baseline's own business)."""
    from pathlib import Path

    from fencecheck.decision import cache as cache
    from fencecheck.decision.baseline import unpack
    from fencecheck.decision.suppress import apply, scan

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
    this machine has a second core (``beside``: on Ctrl-C or a failure here it is not waited for)."""
    from fencecheck.decision.beside import beside

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
    """``ex`` (whose document is ``doc``) with the findings of the added root causes decided (``pipeline.decide_added``),
    and their scenarios."""
    from dataclasses import replace

    from fencecheck.decision import pipeline

    wanted = {rc.finding for rc in added if rc.kind == "read_outside_declaration"}
    got = pipeline.decide_added(ex, doc, wanted, replace(pipeline.Plan.pull_request(cross_check), witness=witness))
    return got.extraction, list(got.scenarios)


def exit_code(states: dict[str, list[RootCause]], doc: dict, notes: list | tuple = (), losses: list | tuple = ()) -> int:
    """1 when the change weakens the fence (``losses``: HEAD lost the baseline's fence or a part of it), or adds a
    finding (a read outside a declaration, a worker read after the publisher) or a race;
    3 when it adds only unresolved ones, or an unresolved note (``added_notes``: a module the reader could not read,
    a limit it reached); 0 otherwise (it fixes some, or changes no finding)."""
    added = states["added"]
    if losses:
        return EXIT_RACE
    if any(rc.status in ("confirmed", "reachable", "plausible")
           or (not is_question(rc) and doc["findings"][rc.finding].get("verdict") == "counterexample")
           for rc in added):
        return EXIT_RACE
    return EXIT_UNKNOWN if added or notes else EXIT_OK


def added_notes(head_notes, base_doc: dict) -> list:
    """HEAD's unresolved notes (``tree_files.Note``) the baseline has not (the same file and what, lines aside; a
    read in the model's own layers by the function that reads and the map, ``model_reads.note_identity``)."""
    from fencecheck.decision.identity import without_lines
    from fencecheck.sglang_source.model_reads import note_identity

    def key(file, what):
        return file, without_lines(note_identity(what))

    seen = {key(n["file"], n["what"]) for n in base_doc.get("notes", ()) if n.get("unresolved")}
    return [n for n in head_notes if n.unresolved and key(n.file, n.what) not in seen]


def document(head_doc, base_doc, baseline, states, changes, unchanged, head_supp, notes=(), losses=()) -> dict:
    """The pull-request document (docs/sglang-pr.schema.json)."""
    def row(state, rc) -> dict:
        if state == "added":
            return {**rc.to_json(), "finding": head_doc["findings"][rc.finding]}
        if state == "suppressed":
            return {**rc.to_json(), "suppression": head_supp.by_id[rc.id].to_json()}
        return rc.to_json()

    def rows(state):
        return [row(state, rc) for rc in states[state]]

    from fencecheck.decision.fact_changes import CATEGORIES, fence_kind

    return {
        "head": {"root": head_doc["root"], "sglang_version": head_doc["sglang_version"]},
        "baseline": {"given": baseline.given, "revision": baseline.revision,
                     "root": None if baseline.revision else base_doc["root"],
                     "sglang_version": base_doc["sglang_version"]},
        "counts": {k: len(v) for k, v in states.items()},
        "findings": {k: rows(k) for k in ("added", "fixed", "unchanged", "suppressed")},
        "facts": {"changed": {c: [x.to_json() for x in changes if x.category == c] for c in CATEGORIES},
                  "unchanged": unchanged},
        "fence": {"baseline": fence_kind(base_doc), "head": fence_kind(head_doc),
                  "lost": [x.to_json() for x in losses]},
        "suppressions": {"unused": [s.to_json() for s in head_supp.unused]},
        "notes": {"added": [n.to_json() for n in notes]},
    }


