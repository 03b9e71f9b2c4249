"""``fencecheck sglang --format sarif``: the findings as SARIF 2.1.0, for code scanning (GitHub's upload-sarif).

One rule per finding kind; one result per root cause (``sglang_identity``) at the read's file and line, with the
declaration and the publish point as related locations (and the backend's call of the helper the read is in), the
read's call chain from the entry method as a code flow, the scenario's verdict and the advice in the message, and
the root cause's id as a partial fingerprint (stable when lines move). The level is the status of the result's
finding as its document settled it, one per status in every mode. In pull-request mode each result has a
``baselineState``: ``new`` (the change adds it), ``unchanged``, or ``absent`` (the change fixes it; at its place in
the baseline). A suppressed root cause carries an ``inSource`` suppression with its reason. File names are relative
to the repository root (``uri_prefix`` + the document's ``sglang/...`` names), and every ``uri`` written (a result's
location, its related locations, a suppression's location) is percent-encoded as RFC 3986 asks (``artifact_uri``:
a space, ``#``, ``%``, ``?``, ``:`` and every non-ASCII character as ``%XX`` of its UTF-8 bytes; ``/`` kept).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote

from fencecheck import __version__
from fencecheck.decision.identity import (
    KINDS,
    RootCause,
    Where,
    call_chain,
    helper_call,
    publish_points,
)
from fencecheck.decision.status import PRECISION, is_question

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT = "fencecheckRootCause/v1"
_LEVEL = {"confirmed": "error", "reachable": "warning", "plausible": "warning", "unresolved": "note"}


@dataclass(frozen=True)
class Item:
    """One result to write: the root cause, where its step publishes, the finding it belongs to (for the verdict),
    its baseline state (None outside pull-request mode) and its suppression (None when active)."""

    cause: RootCause
    publish: tuple[Where, ...]
    finding: dict
    state: str | None = None
    suppression: object = None  # sglang_suppress.Suppression
    #: the calls from the entry method to the read (``identity.call_chain``) and the backend's call of the helper the
    #: read is in (``identity.helper_call``; None when the read is in the backend's own code)
    chain: tuple[Where, ...] = ()
    helper: Where | None = None


def item(doc: dict, rc: RootCause, state: str | None = None, suppression: object = None) -> Item:
    """The result to write for ``rc``, a root cause of ``doc``'s findings: its publish points, its finding (whose
    status is the settled one, the same in every mode), its call chain and the helper's call."""
    chain = call_chain(doc, rc)
    return Item(rc, tuple(publish_points(doc, rc)), doc["findings"][rc.finding], state, suppression, chain,
                helper_call(doc, rc, chain))


def uri_prefix(package: Path, repo_root: Path | None) -> str:
    """What goes before the document's ``sglang/...`` names to make them relative to the repository root: the
    package's parent relative to ``repo_root`` (the git work tree's top, else the current folder), or nothing when
    the package is outside it."""
    parent = package.resolve().parent
    root = (repo_root or Path.cwd()).resolve()
    try:
        rel = parent.relative_to(root).as_posix()
    except ValueError:
        return ""
    return "" if rel == "." else rel + "/"


def _camel(kind: str) -> str:
    return "".join(w.capitalize() for w in kind.split("_"))


def _rules() -> list[dict]:
    return [{"id": kind, "name": _camel(kind), "shortDescription": {"text": short},
             "fullDescription": {"text": full}, "help": {"text": full},
             "defaultConfiguration": {"level": "note" if kind.startswith("unresolved_") else "error"}}
            for kind, short, full in KINDS]


def artifact_uri(path: str) -> str:
    """``path`` (a relative POSIX path) as a relative URI reference: each byte of its UTF-8 encoding other than an
    ASCII letter, digit, ``-._~`` or ``/`` percent-encoded (RFC 3986), so a space, ``#``, ``%`` or ``?`` in a name
    stays part of the path and a ``:`` in its first segment is never read as a scheme."""
    return quote(path, safe="/", errors="surrogateescape")


def _location(w: Where, prefix: str, message: str | None = None, ident: int | None = None) -> dict:
    loc = {"physicalLocation": {"artifactLocation": {"uri": artifact_uri(prefix + w.file)}, "region": {"startLine": max(1, w.line)}}}
    if ident is not None:
        loc = {"id": ident, **loc}
    if message is not None:
        loc["message"] = {"text": message}
    return loc


def _status(item: Item) -> str:
    """The status of the item's finding as its document says: the status a decided finding settled on
    (``status.settle``), in a one-tree run and for a pull request's added finding alike (the root cause's may be
    the status read before the finding was decided)."""
    return item.finding.get("status") or item.cause.status


def _message(item: Item) -> str:
    rc, f = item.cause, item.finding
    if rc.kind == "read_outside_declaration":
        cond = f" when {rc.condition}" if rc.condition else ""
        text = (f"{rc.subject} reads {rc.location} at {rc.site} in {rc.mode} ({rc.function}), outside what "
                f"{rc.declared} covers ({rc.declared_by}{cond}): the read-done event is published before it.")
    elif rc.kind == "worker_read_after_publish":
        text = f"{rc.subject} reads {rc.location} in {rc.mode} ({rc.function}) after the publisher's runner."
    else:
        text = f"{rc.subject} {rc.mode}: {rc.read.what}."
    if f.get("verdict"):
        races = ", ".join(f.get("races") or ()) or "no race"
        text += f" Scenario {f.get('scenario')}: {f['verdict']} ({races})."
    contexts = f.get("contexts") or ()
    racing = [c["context"] for c in contexts if c.get("verdict") == "counterexample"]
    if contexts:
        text += f" Races in {len(racing)} of {len(contexts)} generated configurations."
    if f.get("why"):
        text += f" {f['why']}."
    fix = f.get("fix")
    if is_question(rc):  # a question: what it hangs on, and no fix to apply before it is answered
        text += f" Question, not a finding: {f.get('status_why') or 'a fact the reader could not settle'}."
    elif fix:
        text += (f" Fix: {fix['change']} (verified: simulator {fix['verdict']}, model {fix['model_verdict']} on its "
                 "scenario")
        if fix.get("declares") is None:  # a change to the worker: no backend to verify in the configurations
            text += ")."
        else:
            text += (f"; {fix['contexts_proved']} of the {fix['contexts']} configurations it races in proved); "
                     f"`fencecheck verify --sglang TREE {rc.subject}` checks the backend in every context.")
    elif rc.kind == "read_outside_declaration":
        text += (f" Fix: declare an end that covers {rc.site}, or move the read before the publish point; "
                 f"`fencecheck verify --sglang TREE {rc.subject}` gives verified advice.")
    return text


def _level(status: str) -> str:
    """SARIF's level, one per status in every mode: an error for a confirmed finding, a warning for a reachable one, a
    note for a question (unresolved: whether it races hangs on a value fencecheck could not settle)."""
    return _LEVEL.get(status, "warning")


def _flow(item: Item, prefix: str) -> list[dict]:
    """The read's call chain as one code flow (SARIF 2.1.0 §3.36): the entry method, each call, then the read (a cut
    path's: the call not followed), each step with the function it names."""
    rc, chain = item.cause, item.chain
    if len(chain) < 2:
        return []
    hops, read = chain[:-1], chain[-1]
    steps = [_location(hops[0], prefix, f"{hops[0].what}, the entry method")]
    steps += [_location(h, prefix, h.what if " " in h.what else f"calls {h.what}") for h in hops[1:]]  # a map's source
    source = f" ({read.what})" if read.what else ""
    if rc.kind == "unresolved_read_path":
        last = f"{hops[-1].what} calls {read.what}: not followed, so what it reads is not known"
    else:
        last = f"{hops[-1].what} reads {rc.location}{source}"
    steps.append(_location(read, prefix, last))
    calls, end = len(hops) - 1, "the call not followed" if rc.kind == "unresolved_read_path" else "the read"
    return [{"message": {"text": f"from {hops[0].what} to {end} through {calls} call{'' if calls == 1 else 's'}"},
             "threadFlows": [{"locations": [{"location": x} for x in steps]}]}]


def _result(item: Item, prefix: str, rule_index: dict) -> dict:
    item = replace(item, cause=replace(item.cause, status=_status(item)))
    rc = item.cause
    related, n = [], 1
    if rc.declaration is not None and rc.kind != "worker_read_after_publish":
        related.append(_location(rc.declaration, prefix, f"the declaration: {rc.declaration.what}", n))
        n += 1
    for p in item.publish:
        related.append(_location(p, prefix, f"the publish point: {p.what}", n))
        n += 1
    if item.helper is not None:
        related.append(_location(item.helper, prefix, item.helper.what, n))
        n += 1
    out = {"ruleId": rc.kind, "ruleIndex": rule_index[rc.kind], "level": _level(rc.status),
           "message": {"text": _message(item)}, "locations": [_location(rc.read, prefix)],
           "partialFingerprints": {FINGERPRINT: rc.id},
           "properties": {"precision": PRECISION.get(rc.status, "medium"), "status": rc.status}}
    flows = _flow(item, prefix)
    if flows:
        out["codeFlows"] = flows
    if related:
        out["relatedLocations"] = related
    if item.state is not None:
        out["baselineState"] = item.state
    if item.suppression is not None:
        s = item.suppression
        out["suppressions"] = [{"kind": "inSource", "justification": s.reason,
                                "location": _location(Where(s.file, s.line, ""), prefix)}]
    return out


def sarif(items: list[Item], prefix: str) -> dict:
    """The SARIF log of ``items``."""
    rules = _rules()
    index = {r["id"]: i for i, r in enumerate(rules)}
    return {"$schema": SCHEMA_URI, "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "fencecheck", "version": __version__,
                                          "semanticVersion": __version__, "rules": rules}},
                      "columnKind": "unicodeCodePoints",
                      "results": [_result(i, prefix, index) for i in items]}]}


def repo_root_of(path: str | None) -> Path | None:
    """The repository root the URIs are relative to: the git work tree holding ``path``, else None (the current
    folder)."""
    if path is None:
        return None
    from fencecheck.decision.baseline import repository_root

    return repository_root(Path(os.path.abspath(path)))
