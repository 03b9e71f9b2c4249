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


def read_document(path: str | None, installed: bool, cross_check: bool, freeze: bool = False) -> tuple[object, list]:
    """The tree's extraction with its worker reads and its no-marker fallback decided (``pipeline.Plan.pull_request``),
    and the scenarios of those findings. ``freeze``: as ``read_path``'s (for a process that exits after this read)."""
    from fencecheck.decision.pipeline import Plan, read_decided

    decided = read_decided(path, installed, Plan.pull_request(cross_check), freeze)
    return decided.extraction, list(decided.scenarios)


def read_baseline(base, cross_check: bool, into: str | None = None, freeze: bool = False):
    """The baseline's document (its revision unpacked first) and its suppressions, read leniently (a malformed one
    in the baseline is the baseline's own business). ``freeze``: as ``read_path``'s."""
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
    doc = read_document(unpack(base, into), False, cross_check, freeze)[0].to_json()
    found = scan(Path(doc["root"]), strict=False)
    cache.store(k, doc, found)
    return doc, apply(found, root_causes(doc))


def _in_child(base, cross_check: bool, into: str | None):
    """In the baseline's process, which ends after this one read (what it made frozen): ``read_baseline``'s answer,
    or the failure's (message, exit code)."""
    from fencecheck.errors import EXIT_BUG

    try:
        return read_baseline(base, cross_check, into, freeze=True), None
    except FencecheckError as e:
        return None, (str(e), e.exit_code)
    except Exception as e:  # noqa: BLE001 - a bug, reported as one line by the parent
        return None, (f"internal error, a bug in fencecheck: {type(e).__name__}: {e}", EXIT_BUG)


def read_both(head: str | None, installed: bool, base, cross_check: bool, into: str | None = None,
              freeze: bool = False):
    """(HEAD's extraction, its worker scenarios, the baseline's document and suppressions): the baseline (from the
    cache, ``sglang_cache``, or unpacked into ``into`` and read) in a forked process while HEAD is read here, when
    this machine has a second core (``beside``: on Ctrl-C or a failure here it is not waited for). ``freeze``: as
    ``read_path``'s, for both reads (a command that exits once it has compared them: the forked process's answer is
    then made and sent, and HEAD's decided, without collections that scan the syntax trees again)."""
    from fencecheck.decision.beside import beside

    with beside(_in_child, base, cross_check, into) as baseline:
        ex, scen = read_document(head, installed, cross_check, freeze)
        if baseline is None:
            return ex, scen, *read_baseline(base, cross_check, into, freeze)
        got, failed = baseline()
    if failed is not None:
        raise _BaselineFailed(f"the baseline: {failed[0]}", failed[1])
    return ex, scen, *got


def _order(rc: RootCause) -> tuple:
    return (rc.subject, rc.mode or "", rc.kind, rc.site or "", rc.location or "", rc.function or "", rc.id)


def _pair_order(rc: RootCause) -> tuple:
    return (rc.function or "", rc.read.file, rc.condition or "", rc.declared or "", rc.declared_by or "", rc.id)


def match(head: list[RootCause], base: list[RootCause]) -> list[tuple[RootCause, RootCause]]:
    """(HEAD's, baseline's) pairs of root causes that are one finding though their ids differ: of the same
    ``identity.match_key`` (the same read under the same publish point), paired first those reading in the same
    function, then in the same file, then the rest, each tier in function-then-file order; each root cause in one
    pair at most."""
    from fencecheck.decision.identity import match_key

    groups: dict[tuple, tuple[list, list]] = {}
    for side, rcs in ((0, head), (1, base)):
        for rc in rcs:
            k = match_key(rc)
            if k is not None:
                groups.setdefault(k, ([], []))[side].append(rc)
    pairs = []
    for k in sorted(groups, key=repr):
        h, b = (sorted(x, key=_pair_order) for x in groups[k])
        for same in (lambda x, y: x.function == y.function, lambda x, y: x.read.file == y.read.file,
                     lambda x, y: True):
            for x in list(h):
                y = next((y for y in b if same(x, y)), None)
                if y is not None:
                    pairs.append((x, y))
                    h.remove(x)
                    b.remove(y)
    return pairs


def compare(head_doc: dict, base_doc: dict, head_supp, base_supp) -> dict[str, list[RootCause]]:
    """The root causes by state: ``added``, ``fixed`` (baseline's), ``unchanged``, ``suppressed`` (HEAD's).
    A HEAD root cause is unchanged when the baseline has its id, or when ``match`` pairs it with a baseline one the
    ids left over (it carries that one as ``was``: moved, respelled); an added one whose read the baseline's
    backend has, not as a finding, carries why it races now (``because``, ``races_now``)."""
    from dataclasses import replace

    head, base = root_causes(head_doc), root_causes(base_doc)
    base_active = {rc.id for rc in base if rc.id not in base_supp.by_id}
    head_ids = {rc.id for rc in head}
    out = {"added": [], "fixed": [], "unchanged": [], "suppressed": []}
    rest = []
    for rc in head:
        if rc.id in head_supp.by_id:
            out["suppressed"].append(rc)
        elif rc.id in base_active:
            out["unchanged"].append(rc)
        else:
            rest.append(rc)
    gone = [rc for rc in base if rc.id in base_active and rc.id not in head_ids]
    paired = match(rest, gone)
    was = {x.id: y for x, y in paired}
    matched = {y.id for _, y in paired}
    for rc in rest:
        if rc.id in was:
            out["unchanged"].append(replace(rc, was=was[rc.id]))
        else:
            out["added"].append(replace(rc, because=races_now(head_doc, base_doc, rc)))
    out["fixed"] = [rc for rc in gone if rc.id not in matched]
    return {k: sorted(v, key=_order) for k, v in out.items()}


def _backend(doc: dict, rc: RootCause) -> dict | None:
    """``rc``'s backend in ``doc`` (a document of either tree): the one of its class and file."""
    file = rc.subject_at.rsplit(":", 1)[0]
    rows = [b for b in doc.get("backends", ()) if b["class"] == rc.subject]
    return next((b for b in rows if b["file"] == file), rows[0] if len(rows) == 1 else None)


def _reads_it(backend: dict, rc: RootCause) -> bool:
    """Whether ``backend`` (a document's row) has ``rc``'s read among its reads: the mode, site, location and the
    function that reads (the last hop of its chain)."""
    import re

    for r in backend.get("reads", ()):
        if (r["mode"], r["site"], r["location"]) != (rc.mode, rc.site, rc.location) or not r.get("via"):
            continue
        if re.sub(r" \([^()]*\)$", "", r["via"][-1].strip()) == rc.function:
            return True
    return False


def _declaration_text(backend: dict, rc: RootCause) -> str:
    from fencecheck.decision.fact_changes import _decl_text
    from fencecheck.decision.identity import _publish_kinds

    d = backend["declares"].get(rc.mode)
    text = "none" if d is None else _decl_text(d)
    snap = backend.get("prefill_snapshot")
    if snap and _publish_kinds(rc) == ("prefill_publish",):
        text += f" (prefill snapshot {_decl_text(snap['declares'])})"
    return text


def _runner_facts(doc: dict) -> dict[str, str]:
    """What the document says of each graph runner's publish point and fallback and each platform's marker and
    fallback, lines aside: fact name -> its value, for ``races_now`` to name the one that changed."""
    import json

    from fencecheck.decision.identity import without_lines

    def text(v) -> str:
        return without_lines(json.dumps(v, sort_keys=True, default=str))

    out = {}
    for r in doc.get("graph_runners", ()):
        name = f"{r['entry']['class']}.{r['entry']['name']}"
        out[f"the publish policy of {name}"] = r["policy"]
        out[f"the fallback of {name}"] = text({k: v for k, v in (r.get("fallback") or {}).items()
                                                if k not in ("file", "line")} or None)
        out[f"the publish points of {name}"] = text(sorted(
            text({k: v for k, v in p.items() if k not in ("file", "line", "via")}) for p in r["publishes"]))
    for p in (doc.get("platforms") or {}).get("platforms", ()):
        for k in ("runner_policy", "marker", "fallback"):
            out[f"the {k.replace('_', ' ')} of platform {p['platform']}"] = text(p.get(k))
    return out


def races_now(head_doc: dict, base_doc: dict, rc: RootCause) -> str | None:
    """Why an added root cause races now when its read is the baseline's too, covered there (the same backend's
    read of the same location at the same site, in the same function and mode, in ``backends[].reads`` and no
    finding): the declaration for the mode changed (X -> Y), else the publish points, fallbacks or platform facts
    that changed (named), else the read is not the baseline's (None: added code)."""
    if rc.kind != "read_outside_declaration":
        return None
    b, h = _backend(base_doc, rc), _backend(head_doc, rc)
    if b is None or h is None or not _reads_it(b, rc):
        return None
    before, after = _declaration_text(b, rc), _declaration_text(h, rc)
    if before != after:
        return f"the declaration for {rc.mode} changed from {before} to {after}"
    fb, fh = _runner_facts(base_doc), _runner_facts(head_doc)
    changed = [k for k in sorted(set(fb) | set(fh)) if fb.get(k) != fh.get(k)]
    if changed:
        return "the declaration is the same and " + "; ".join(changed) + " changed"
    return "the declaration and the runners' publish points are the same (the read was covered there)"


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
            return {**rc.to_json(), "finding": head_doc["findings"][rc.finding],
                    **({"races_now": rc.because} if rc.because else {})}
        if state == "suppressed":
            return {**rc.to_json(), "suppression": head_supp.by_id[rc.id].to_json()}
        return _with_was(rc)

    def _with_was(rc) -> dict:
        from fencecheck.decision.identity import without_lines

        if rc.was is None:
            return rc.to_json()
        w = rc.was
        changed = [k for k, x, y in (("function", rc.function, w.function), ("file", rc.read.file, w.read.file),
                                     ("condition", without_lines(rc.condition), without_lines(w.condition)),
                                     ("declaration", (rc.declared, rc.declared_by), (w.declared, w.declared_by)))
                   if x != y]
        return {**rc.to_json(), "was": {"id": w.id, "function": w.function, "file": w.read.file,
                                        "line": w.read.line, "declared": w.declared, "declared_by": w.declared_by,
                                        "condition": w.condition, "changed": changed}}

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


