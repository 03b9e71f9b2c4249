"""A finding's identity across trees: its root causes, read from the ``fencecheck sglang --json`` document.

A ``read_outside_declaration`` finding (one backend, mode and declaration row) lists each uncovered read in its
evidence; each read is one root cause: the finding's kind, the backend class, the mode, the read's site and
location, the function that reads (the last function of its call chain), and the declaration row (its end, the
declaring method, its condition). An ``unresolved_read_path`` finding has one per cut read path the same way (its
site, the call not followed and the limit, the last function of its chain, the declaration row); its "read" is the
call not followed. A ``worker_read_after_publish`` finding is one root cause (the worker, the mode, the location,
the function that reads, the publisher); an ``unresolved_declaration`` one (the backend, the mode, the reason). No
line number is part of an identity (``file.py:N`` in a condition or a reason loses its ``:N``), so a change that
moves code keeps every identity, and one that adds a read outside a declaration adds one. The id is the SHA-256 of
the identity (SARIF's ``partialFingerprints``).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

#: The finding kinds, each a SARIF rule: (kind, short description, help).
KINDS = (
    ("read_outside_declaration", "a read of scheduler-shared state outside what the backend's declaration covers",
     "The backend's shared_read_ends declaration for the mode does not cover the site of this read: the runner "
     "publishes the read-done event before the read, so the overlap scheduler's next write may overwrite the data "
     "the GPU still reads. Declare an end that covers the site, or move the read before the publish point; "
     "`fencecheck verify --sglang TREE CLASS` proposes the change, verified in every context."),
    ("worker_read_after_publish", "a worker's read of scheduler-shared state after the publisher's runner",
     "The speculative worker reads scheduler-shared state on the device after the runner named by "
     "last_shared_read_runner published its read-done event: the scheduler's next write waits only for that event."),
    ("unresolved_declaration", "a shared_read_ends declaration fencecheck cannot evaluate",
     "fencecheck's reader cannot evaluate the backend's shared_read_ends for this mode (the reason names the "
     "construct); nothing is said about its reads until it can."),
    ("unresolved_read_path", "a read path fencecheck's reader cut at a site the declaration does not cover",
     "A limit of fencecheck's reader (the call depth, the read paths per function, the walks per tree) cut a read "
     "path of the backend at a site its shared_read_ends declaration for the mode does not cover: what the path "
     "reads is not known; nothing is said about it until the reader follows it."),
    ("no_marker_fallback", "an IN_REPLAY declaration resolved by a no-marker fallback that publishes too early",
     "On a platform whose decode graph runner has no in-graph marker while the barrier is on, the runner resolves "
     "IN_REPLAY by its fallback rule; a fallback to PRE_REPLAY publishes the read-done event before the replay, so "
     "a backend's reads in the graph before the marker race with the scheduler's next write. Fall back to "
     "POST_REPLAY, create the marker on that platform, or keep the barrier off (coarse) there."),
)
KIND_NAMES = tuple(k for k, _, _ in KINDS)

_LINE = re.compile(r"(\.py):\d+")
_READ = re.compile(r"^reads (?P<loc>\S+) at (?P<site>\S+) via (?P<via>.*)$")
_WORKER_READ = re.compile(r"^reads (?P<loc>\S+) on the device after it via (?P<via>.*)$")
_CUT = re.compile(r"^a read path at (?P<site>\S+) cut: (?P<call>.*?); via (?P<via>.*)$")


def without_lines(text: str | None) -> str | None:
    """``text`` with the line of every ``file.py:N`` removed."""
    return None if text is None else _LINE.sub(r"\1", text)


@dataclass(frozen=True)
class Where:
    file: str
    line: int
    what: str

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "what": self.what}


@dataclass(frozen=True)
class RootCause:
    """One root cause of a finding of a document (``finding``: its index in the document's ``findings``)."""

    id: str
    identity: tuple
    kind: str
    subject: str
    subject_at: str
    mode: str | None
    site: str | None
    location: str | None
    function: str | None
    declared: str | None
    declared_by: str | None
    condition: str | None
    status: str
    read: Where
    declaration: Where | None
    finding: int
    #: pull-request mode's: the baseline's root cause this one is matched with (``pull_request.compare``) when their
    #: ids differ (the read moved to another function or file, its condition or declaration was respelled)
    was: "RootCause | None" = None
    #: pull-request mode's: why an added root cause whose read the baseline has, not as a finding, races now
    because: str | None = None

    def to_json(self) -> dict:
        return {"id": self.id, "kind": self.kind, "subject": self.subject, "subject_at": self.subject_at,
                "mode": self.mode, "site": self.site, "location": self.location, "function": self.function,
                "declared": self.declared, "declared_by": self.declared_by, "condition": self.condition,
                "status": self.status, "read": self.read.to_json(),
                "declaration": None if self.declaration is None else self.declaration.to_json()}

    def text(self) -> str:
        """One line: what reads what, where, against which declaration."""
        if self.kind == "read_outside_declaration":
            cond = f" when {self.condition}" if self.condition else ""
            return (f"{self.subject} {self.mode}: {self.function} reads {self.location} at {self.site} "
                    f"({self.read.file}:{self.read.line}), outside {self.declared} ({self.declared_by}{cond}, "
                    f"{self.declaration.file}:{self.declaration.line})")
        if self.kind == "worker_read_after_publish":
            return (f"{self.subject} {self.mode}: {self.function} reads {self.location} after the publisher's runner "
                    f"({self.read.file}:{self.read.line}; the runner call at {self.declaration.file}:"
                    f"{self.declaration.line})")
        return f"{self.subject} {self.mode}: {self.read.what} ({self.read.file}:{self.read.line})"


def _last_function(via: str) -> str:
    """The function that reads: the last of ``A -> B (file:line) -> C`` (the call's place dropped)."""
    chain = via.split(" (when ", 1)[0]
    last = chain.split(" -> ")[-1].strip()
    return re.sub(r" \([^()]*\)$", "", last)


def _subject_keys(doc: dict) -> dict[str, str]:
    """``subject_at`` -> the subject's name in identities: the class name, with its file when two classes of the
    tree share the name."""
    rows = [(b["class"], b["file"], b["line"]) for b in doc["backends"]] + \
        [(w["class"], w["file"], w["line"]) for w in doc["workers"]] + \
        [(a["worker"]["class"], a["worker"]["file"], a["worker"]["line"]) for a in doc.get("algorithms", ())
         if a.get("worker")]
    files: dict[str, set] = {}
    for name, file, _ in rows:
        files.setdefault(name, set()).add(file)
    return {f"{file}:{line}": (name if len(files[name]) == 1 else f"{name} ({file})") for name, file, line in rows}


def _make(identity: tuple, **fields) -> RootCause:
    digest = hashlib.sha256(json.dumps(identity, separators=(",", ":")).encode()).hexdigest()
    return RootCause(id=digest, identity=identity, **fields)


def root_causes(doc: dict) -> list[RootCause]:
    """Every root cause of ``doc``'s findings, in the findings' order, each identity once."""
    keys = _subject_keys(doc)
    out, seen = [], set()
    for i, f in enumerate(doc["findings"]):
        subject = keys.get(f["subject_at"], f["subject"])
        ev = [Where(e["file"], e["line"], e["what"]) for e in f["evidence"]]
        common = dict(kind=f["kind"], subject=f["subject"], subject_at=f["subject_at"], mode=f.get("mode"),
                      status=f["status"], finding=i)
        found = []
        if f["kind"] == "read_outside_declaration":
            decl = ev[0]
            cond = without_lines(f.get("condition"))
            for e in ev[1:]:
                m = _READ.match(e.what)
                if m is None:
                    continue  # the constructing call that passes a child: context, not a read
                fn = _last_function(m["via"])
                identity = (f["kind"], subject, f["mode"], m["site"], m["loc"], fn, f.get("declared"),
                            f.get("declared_by"), cond)
                found.append(_make(identity, site=m["site"], location=m["loc"], function=fn,
                                   declared=f.get("declared"), declared_by=f.get("declared_by"),
                                   condition=f.get("condition"), read=e, declaration=decl, **common))
        elif f["kind"] == "unresolved_read_path":
            decl = ev[0]
            cond = without_lines(f.get("condition"))
            for e in ev[1:]:
                m = _CUT.match(e.what)
                site, fn = (m["site"], _last_function(m["via"])) if m else (None, None)
                identity = (f["kind"], subject, f["mode"], site, without_lines(m["call"] if m else e.what), fn,
                            f.get("declared"), f.get("declared_by"), cond)
                found.append(_make(identity, site=site, location=None, function=fn, declared=f.get("declared"),
                                   declared_by=f.get("declared_by"), condition=f.get("condition"), read=e,
                                   declaration=decl, **common))
        elif f["kind"] == "worker_read_after_publish":
            call, read = ev[0], ev[-1]
            m = _WORKER_READ.match(read.what)
            fn = _last_function(m["via"]) if m else None
            publisher = without_lines(call.what)
            identity = (f["kind"], subject, f.get("mode"), "worker_after", f.get("location"), fn, publisher)
            found.append(_make(identity, site="worker_after", location=f.get("location"), function=fn,
                               declared=None, declared_by=None, condition=f.get("condition"), read=read,
                               declaration=call, **common))
        else:
            e = ev[0]
            identity = (f["kind"], subject, f.get("mode"), without_lines(e.what))
            found.append(_make(identity, site=None, location=None, function=None, declared=None, declared_by=None,
                               condition=None, read=e, declaration=e, **common))
        for rc in found:
            if rc.id not in seen:
                seen.add(rc.id)
                out.append(rc)
    return out


def match_key(rc: RootCause) -> tuple | None:
    """What two root causes of two trees share when they are one finding whose code moved or was respelled: the
    same read (kind, subject, mode, site, location; a cut path's call not followed) under the same publish point
    (the runners' publish behaviour for the mode; for a worker's read, the publisher's runner call), the function
    that reads, its file, the condition and the declaration row aside. None for the kinds matched by id alone (an
    unresolved declaration, a no-marker fallback: their identity is what they say)."""
    if rc.kind in ("read_outside_declaration", "unresolved_read_path"):
        return (rc.kind, rc.identity[1], rc.mode, rc.site, rc.identity[4], _publish_kinds(rc))
    if rc.kind == "worker_read_after_publish":
        return (rc.kind, rc.identity[1], rc.mode, rc.location, rc.identity[6])
    return None


#: The runners' publish behaviour that publishes for a finding's mode (the scenario's decode runner resolves).
def _publish_kinds(rc: RootCause) -> tuple[str, ...]:
    if rc.declared_by == "_snapshot_prefill_shared_reads" or rc.mode in ("EXTEND", "MIXED", "SPLIT_PREFILL"):
        return ("prefill_publish",)
    if rc.mode and rc.mode.startswith("DRAFT_EXTEND"):
        return ("clear_then_resolve", "resolve")
    return ("resolve", "clear_then_resolve")


def publish_points(doc: dict, rc: RootCause) -> list[Where]:
    """Where the read-done event of ``rc``'s step is published: for a worker read, the publisher's runner call; for
    a backend, the publishes of the graph runners (``graph_runners[].publishes``) whose publish behaviour serves its
    mode (a decode graph runner that resolves the declaration; the prefill publish for a prefill mode) and that
    publish for the end it declares; else the publish calls of those runners (``runners[].events``), each once."""
    if rc.kind == "worker_read_after_publish":
        return [rc.declaration]
    if rc.kind != "read_outside_declaration":
        return []
    wanted = _publish_kinds(rc)
    event = "prefill_publish" if wanted == ("prefill_publish",) else "publish"
    out: dict[tuple, Where] = {}
    for kind in wanted:  # the protocol facts' publishes of that end, where the tree's runners say which end each serves
        for r in doc.get("graph_runners", ()):
            if r["policy"] != kind:
                continue
            for p in r["publishes"]:
                if p["ends"] is not None and rc.declared in p["ends"]:
                    out.setdefault((p["file"], p["line"]), Where(
                        p["file"], p["line"], f"{r['entry']['class']}.{r['entry']['name']} publishes the read-done "
                                              f"event {p['at'].replace('_', ' ')} for {rc.declared} ({kind})"))
        if out:
            return [out[k] for k in sorted(out)]
    for kind in wanted:
        for r in doc["runners"]:
            if r["publish"] != kind:
                continue
            m = r["method"]
            for e in r["events"]:
                if e["event"] == event:
                    out.setdefault((e["file"], e["line"]), Where(
                        e["file"], e["line"], f"{m['class']}.{m['name']} publishes the read-done event ({kind})"))
        if out:
            break
    return [out[k] for k in sorted(out)]


_HOP = re.compile(r"^(?P<func>.+) \((?P<file>[^()]+):(?P<line>\d+)\)$")


def _hops(texts) -> list[Where]:
    """The hops ``Func (file:line)`` of a chain's texts as places (a text without a place left out)."""
    out = []
    for t in texts:
        m = _HOP.match(t.strip())
        if m is not None:
            out.append(Where(m["file"], int(m["line"]), m["func"]))
    return out


def _funcs(via: str) -> str:
    """The functions of an evidence chain ``A -> B (source) (when ...)``, each without its parentheses."""
    chain = via.split(" (when ", 1)[0]
    return " -> ".join(re.sub(r" \([^()]*\)$", "", x.strip()) for x in chain.split(" -> "))


def call_chain(doc: dict, rc: RootCause) -> tuple[Where, ...]:
    """The calls from the entry method to ``rc``'s read, then the read: each hop a place with the function it enters
    (``what``), the first at the entry method's definition, each next at its call in the function before; the last
    the read's place with its source text (a cut path's: the call not followed; a worker's read: ""). () when the
    document has no chain for it. A backend's read or cut path from its ``reads`` / ``cut_paths`` (the one at the
    read's place, mode and site with the evidence's functions), a worker's read from its evidence (whose hops name
    their places)."""
    if rc.kind == "worker_read_after_publish":
        via = rc.read.what.split(" via ", 1)[1] if " via " in rc.read.what else ""  # after it, or in its graph
        hops = _hops(via.split(" (when ", 1)[0].split(" -> "))
        return (*hops, Where(rc.read.file, rc.read.line, "")) if hops else ()
    if rc.kind == "read_outside_declaration":
        m, rows, key = _READ.match(rc.read.what), "reads", "location"
    elif rc.kind == "unresolved_read_path":
        m, rows, key = _CUT.match(rc.read.what), "cut_paths", None
    else:
        return ()
    if m is None:
        return ()
    want = _funcs(m["via"])
    what = None
    for b in doc.get("backends", ()):
        if f"{b['file']}:{b['line']}" != rc.subject_at:
            continue
        for r in b.get(rows, ()):
            if (r["mode"], r["site"], r["file"], r["line"]) != (rc.mode, rc.site, rc.read.file, rc.read.line) or \
                    (key is not None and r[key] != rc.location):
                continue
            what = r["what"]
            hops = _hops(r["via"])
            if hops and " -> ".join(h.what for h in hops) == want:
                return (*hops, Where(r["file"], r["line"], r["what"]))
    hops = _placed(doc, want.split(" -> "))
    return (*hops, Where(rc.read.file, rc.read.line, what or "")) if hops else ()


def _placed(doc: dict, funcs: list[str]) -> list[Where]:
    """The chain ``funcs`` placed by the calls the document's other chains make (the backends' reads and cut
    paths, the not findings'): the entry method where a chain starts at it, each call where a chain makes that call
    from the function before (the document keeps one chain per read, which may be another path to it); [] when a
    hop is in none of them."""
    starts: dict[str, Where] = {}
    calls: dict[tuple[str, str], Where] = {}
    chains = [r["via"] for b in doc.get("backends", ()) for k in ("reads", "cut_paths") for r in b.get(k, ())]
    chains += [n["via"] for n in doc.get("not_findings", ()) if n.get("via")]
    for via in chains:
        hops = _hops(via)
        if hops:
            starts.setdefault(hops[0].what, hops[0])
        for before, hop in zip(hops, hops[1:]):
            calls.setdefault((before.what, hop.what), hop)
    if not funcs or funcs[0] not in starts:
        return []
    out = [starts[funcs[0]]]
    for before, func in zip(funcs, funcs[1:]):
        hop = calls.get((before, func))
        if hop is None:
            return []
        out.append(hop)
    return out


def helper_call(doc: dict, rc: RootCause, chain: tuple[Where, ...]) -> Where | None:
    """Where the backend calls the helper its read is in: the first call on ``chain`` (``call_chain``'s) into a
    function of no class of the backend's MRO (a module's function, another object's method), when the function
    that reads is such a one; else None (the read is in the backend's own code)."""
    chain = chain[:-1]  # the hops, without the read
    if rc.kind not in ("read_outside_declaration", "unresolved_read_path") or len(chain) < 2:
        return None
    classes = {rc.subject}
    for b in doc.get("backends", ()):
        if f"{b['file']}:{b['line']}" == rc.subject_at:
            classes |= {b["class"], *b.get("mro", ())}
    if chain[-1].what.split(".")[0] in classes:
        return None
    for before, hop in zip(chain, chain[1:]):
        if hop.what.split(".")[0] not in classes:
            return Where(hop.file, hop.line, f"{before.what} calls {hop.what}: the backend's call of the helper "
                                                  "that reads")
    return None
