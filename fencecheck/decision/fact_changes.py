"""The protocol facts of a ``fencecheck sglang --json`` document, keyed so that two trees compare, and their changes.

Five categories, each a map from a key to a value with no line number in it (``file.py:N`` loses its ``:N``):
``declarations`` (per backend class, its declaration per mode and its prefill snapshot's), ``runners`` (per runner
class, its publish behaviour), ``phases`` (per speculative algorithm and worker, the phases of one decode step and,
under a key of its own, of one prefill step: runner, mode, publish policy and execution, condition, loop),
``publishers`` (per worker class, what ``last_shared_read_runner`` returns under which condition) and ``barrier``
(per class and function, the number of ``_apply_war_barrier`` call sites, and where the barrier is defined). A key in one tree only is added or removed; a
key in both with different values is changed; the rest are counted as unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fencecheck.decision.identity import without_lines

CATEGORIES = ("declarations", "runners", "phases", "publishers", "barrier", "protocol")
#: The keys of the reader's fact table (``fact_drift.fact_table``) the other categories do not hold: the fence, the
#: barrier's gate per platform and its settings, the marker and the platforms' runners, each graph runner's fallback,
#: publish points, clears and binding, each algorithm's clears, the prefill publish's gates and the shared locations.
_PROTOCOL_KEYS = ("fence/", "barrier/", "setting/", "marker", "platform/", "prefill/", "location/")
_PROTOCOL_RUNNER = ("/fallback", "/publishes", "/clears", "/binds")


def _decl_text(v) -> str:
    if isinstance(v, str):
        return v
    return "; ".join(f"{r['end']} if {without_lines(r['condition'])}" if r.get("condition") else r["end"]
                     for r in v)


def _names(rows) -> dict[tuple, str]:
    """(class, file) -> the class name, with its file when two rows' classes share the name."""
    files: dict[str, set] = {}
    for name, file in rows:
        files.setdefault(name, set()).add(file)
    return {(n, f): (n if len(files[n]) == 1 else f"{n} ({f})") for n, f in rows}


def facts(doc: dict) -> dict[str, dict]:
    """The facts of ``doc`` by category."""
    names = _names([(b["class"], b["file"]) for b in doc["backends"]])
    declarations = {}
    for b in doc["backends"]:
        d = {m: _decl_text(v) for m, v in b["declares"].items()}
        if b.get("prefill_snapshot"):
            d["EXTEND (prefill snapshot)"] = _decl_text(b["prefill_snapshot"]["declares"])
        declarations[names[(b["class"], b["file"])]] = d
    rnames = _names([(r["class"], r["file"]) for r in doc["runners"]])
    runners = {rnames[(r["class"], r["file"])]: r["publish"] for r in doc["runners"]}
    phases = {}
    for a in doc.get("algorithms", ()):
        w = a["worker"]["class"] if a.get("worker") else "no worker class"
        key = f"{a['name']} ({w})" + (f" when {without_lines(a['condition'])}" if a.get("condition") else "")
        phases[key] = _phase_rows(a["phases"])
        if a.get("prefill_phases"):
            phases[f"{key}, prefill step"] = _phase_rows(a["prefill_phases"])
    publishers: dict[str, list] = {}
    wnames = _names([(w["class"], w["file"]) for w in doc["workers"]])
    for w in doc["workers"]:
        publishers.setdefault(wnames[(w["class"], w["file"])], []).append(
            w["publisher"] + (f" if {without_lines(w['condition'])}" if w.get("condition") else ""))
    barrier: dict[str, object] = {}
    for d in doc["barrier"]["defined"]:
        barrier[f"{d['class']}._apply_war_barrier"] = f"defined in {d['file']}"
    for loop in doc["barrier"]["event_loops"]:
        barrier[f"{loop['class']}.{loop['event_loop']}"] = 0
    for c in doc["barrier"]["calls"]:
        key = f"{c['class']}.{c['event_loop']}"
        barrier[key] = (barrier.get(key) or 0) + 1
    barrier = {k: (v if isinstance(v, str) else f"{v} barrier call site{'s' if v != 1 else ''}")
               for k, v in barrier.items()}
    return {"declarations": declarations, "runners": runners, "phases": phases, "publishers": publishers,
            "barrier": barrier, "protocol": _protocol(doc)}


def _phase_rows(phases: list[dict]) -> list[str]:
    """One line per phase of a step: the runner, the mode, its publish behaviour, its condition, whether in a loop."""
    rows = []
    for p in phases:
        pub = p.get("publish")
        rows.append(f"{p['runner']} {p['mode'] or 'publish'}"
                    + (f" [{pub['policy']}, {pub['execution']}]" if pub else "")
                    + (f" if {without_lines(p['condition'])}" if p.get("condition") else "")
                    + (" [loop]" if p.get("repeat") else ""))
    return rows


def _protocol(doc: dict) -> dict[str, str]:
    """The ``protocol`` category: the fact table's keys the other categories do not hold (``_PROTOCOL_KEYS``), each
    value as one line of text."""
    from fencecheck.sglang_source.fact_drift import fact_table

    out = {}
    for key, v in fact_table(doc).items():
        if key.startswith(_PROTOCOL_KEYS) or (key.startswith(("runner/", "algorithm/"))
                                              and key.endswith(_PROTOCOL_RUNNER)):
            out[key] = _plain(v["value"])
    return out


def _plain(v) -> str:
    """A fact table value as one line of text."""
    if v is None:
        return "none"
    if isinstance(v, dict):
        return ", ".join(f"{k} {_plain(x)}" for k, x in v.items()) or "none"
    if isinstance(v, list):
        return "; ".join(_plain(x) if not isinstance(x, list) else " ".join(_plain(y) for y in x) for x in v) or "none"
    return str(v)


@dataclass(frozen=True)
class FactChange:
    category: str
    key: str
    change: str  # added, removed, changed
    before: object
    after: object
    was: str | None = None  # a key only respelled (``respelled``): its baseline spelling

    def to_json(self) -> dict:
        return {"key": self.key, "change": self.change, "before": self.before, "after": self.after,
                **({"was": self.was} if self.was is not None else {})}

    def text(self) -> str:
        if self.was is not None:
            same = self.before == self.after or (respelled(_value_text(self.before)) ==
                                                 respelled(_value_text(self.after)))
            return (f"{self.key}: respelled (was {self.was})"
                    + ("" if self.before == self.after else
                       f"; {'respelled ' if same else ''}{_value_text(self.before)} -> {_value_text(self.after)}"))
        if self.change == "added":
            return f"{self.key}: added ({_value_text(self.after)})"
        if self.change == "removed":
            return f"{self.key}: removed (was {_value_text(self.before)})"
        if isinstance(self.before, dict) and isinstance(self.after, dict):
            parts = [f"{m}: {self.before.get(m, 'none')} -> {self.after.get(m, 'none')}"
                     for m in sorted(set(self.before) | set(self.after), key=str)
                     if self.before.get(m) != self.after.get(m)]
            return f"{self.key}: " + "; ".join(parts)
        return f"{self.key}: {_value_text(self.before)} -> {_value_text(self.after)}"


def _value_text(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k} {x}" for k, x in v.items())
    if isinstance(v, list):
        return "; ".join(v) or "none"
    return str(v)


_DOTTED = re.compile(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*)")
#: The categories whose keys hold a condition (so a respelled condition respells the key).
_CONDITIONED = ("phases",)


def respelled(text: str) -> str:
    """``text`` with each dotted name's receiver dropped (``server_args.x`` and ``cfg.x`` are both ``x``): what
    two spellings of one condition share."""
    return _DOTTED.sub("", text)


def _respellings(b: dict, a: dict) -> dict[str, str]:
    """HEAD key -> baseline key, for each key in one tree only whose respelling (``respelled``) is that of exactly
    one key in the other tree only: one fact whose condition was respelled, not one removed and one added."""
    gone = {}
    for k in sorted(set(b) - set(a)):
        gone.setdefault(respelled(k), []).append(k)
    new = {}
    for k in sorted(set(a) - set(b)):
        new.setdefault(respelled(k), []).append(k)
    return {new[r][0]: gone[r][0] for r in sorted(new) if len(new[r]) == 1 and len(gone.get(r, ())) == 1}


def diff(before: dict[str, dict], after: dict[str, dict]) -> tuple[list[FactChange], dict[str, int]]:
    """The changes from ``before`` to ``after`` (``facts`` of two documents), sorted by category and key, and the
    number of unchanged facts per category. In a category whose keys hold a condition (the phases), a key whose
    condition was only respelled (``_respellings``) is one changed fact (``was``: the baseline's key)."""
    changes, unchanged = [], {}
    for cat in CATEGORIES:
        b, a = before[cat], after[cat]
        unchanged[cat] = 0
        moved = _respellings(b, a) if cat in _CONDITIONED else {}
        olds = set(moved.values())
        for key in sorted((set(b) - olds) | set(a)):
            if key in moved:
                changes.append(FactChange(cat, key, "changed", b[moved[key]], a[key], was=moved[key]))
            elif key not in b:
                changes.append(FactChange(cat, key, "added", None, a[key]))
            elif key not in a:
                changes.append(FactChange(cat, key, "removed", b[key], None))
            elif a[key] != b[key]:
                changes.append(FactChange(cat, key, "changed", b[key], a[key]))
            else:
                unchanged[cat] += 1
    return changes, unchanged


@dataclass(frozen=True)
class Loss:
    """What HEAD lost of the baseline's fence (``what``: fence, declaration, barrier, publish or clear; ``key``: the
    class, function or backend that lost it; ``text``: it in one line)."""

    what: str
    key: str
    text: str

    def to_json(self) -> dict:
        return {"what": self.what, "key": self.key, "text": self.text}


_FENCES = {"declaration": "the declaration fence", "read_done_event": "the older fence"}
_STRENGTH = {"declaration": 2, "read_done_event": 1, "none": 0}


def fence_kind(doc: dict) -> str:
    """The fence a document's tree has (``protocol.read_protocol``'s kind): declaration, read_done_event or none."""
    return (doc.get("fence") or {}).get("kind")


def _count(v) -> int:
    """The number of barrier call sites of a ``barrier`` fact (0 for a definition or a missing one)."""
    head = str(v or "").split(" ", 1)[0]
    return int(head) if head.isdigit() else 0


def _events(doc: dict, kinds: tuple[str, ...]) -> dict[tuple[str, str], int]:
    """(runner, event kind) -> how many of the runner's events have that kind."""
    names = _names([(r["class"], r["file"]) for r in doc.get("runners", ())])
    out: dict[tuple[str, str], int] = {}
    for r in doc.get("runners", ()):
        for e in r.get("events", ()):
            if e["event"] in kinds:
                k = (names[(r["class"], r["file"])], e["event"])
                out[k] = out.get(k, 0) + 1
    return out


def _clears(doc: dict) -> dict[str, int]:
    """Function (class.name) -> how many writes clear the read-done mailbox there (the barrier's and runners')."""
    out: dict[str, int] = {}
    for w in (doc.get("fence") or {}).get("mailbox_writes", ()):
        if w.get("kind") == "clear":
            k = ".".join(w["function"].split(".")[-2:])
            out[k] = out.get(k, 0) + 1
    return out


def losses(base_doc: dict, head_doc: dict, changes: list[FactChange]) -> list[Loss]:
    """What HEAD lost of the baseline's fence: the fence itself (HEAD's is older or absent), then, from ``changes``
    (``diff`` of the two documents' facts) and the runners' and mailbox's rows, each declaration row (a mode's, of a
    backend HEAD keeps: a backend HEAD deletes takes its reads with it), barrier definition or call site, runner
    publish point and clear the baseline had and HEAD has not, a platform the barrier's gate no longer turns on by
    default, and what the prefill gates no longer keep off (``_prefill_losses``).
    A HEAD without any fence loses the fence alone (nothing of it is read); a HEAD without declarations loses the
    declaration fence, not each row."""
    out: list[Loss] = []
    before, after = fence_kind(base_doc), fence_kind(head_doc)
    if before in _FENCES and after in _STRENGTH and _STRENGTH[after] < _STRENGTH[before]:
        has = ("the older fence (a barrier waiting on a read-done event, no `SharedReadEnds` declarations)"
               if after == "read_done_event" else
               "no shared-read fence (no `SharedReadEnds` declarations, no barrier)")
        out.append(Loss("fence", after, f"{_FENCES[before]} is gone: HEAD has {has}"))
    if after == "none":
        return out
    for x in changes:
        if x.category == "declarations" and after == "declaration":
            # a backend gone from HEAD ("removed") takes its reads with it: only a row of a backend HEAD keeps is lost
            if x.change == "changed" and isinstance(x.before, dict) and isinstance(x.after, dict):
                gone = [m for m in x.before if m not in x.after]
                if gone:
                    out.append(Loss("declaration", x.key, f"a declaration row is gone: {x.key} declares nothing for "
                                    + ", ".join(f"{m} (was {x.before[m]})" for m in gone)))
        elif x.category == "barrier" and x.change in ("removed", "changed"):
            if x.key.endswith("._apply_war_barrier"):
                if x.change == "removed":
                    out.append(Loss("barrier", x.key, f"the barrier is gone: HEAD does not define {x.key} "
                                                      f"(was {x.before})"))
            elif _count(x.after) < _count(x.before):
                out.append(Loss("barrier", x.key, f"a barrier call site is gone: {x.key} has {_count(x.after)}, "
                                                  f"the baseline {_count(x.before)}"))
    kinds = ("publish", "prefill_publish")
    b_pub, h_pub = _events(base_doc, kinds), _events(head_doc, kinds)
    for (runner, kind), n in sorted(b_pub.items()):
        if h_pub.get((runner, kind), 0) < n:
            out.append(Loss("publish", runner, f"a runner's publish point is gone: {runner} has "
                                               f"{h_pub.get((runner, kind), 0)} {kind} point(s), the baseline {n}"))
    out += _prefill_losses(changes, _path_unless(head_doc))
    for x in changes:  # the barrier's gate: on by default on a platform in the baseline, not in HEAD
        if x.category == "protocol" and x.key.startswith("barrier/") and x.change == "changed" \
                and str(x.before).startswith("default True") and not str(x.after).startswith("default True"):
            platform = x.key.split("/", 1)[1]
            out.append(Loss("barrier", x.key, f"the barrier is no longer on by default on {platform}: "
                                              f"{x.before} -> {x.after}"))
    b_clr, h_clr = _clears(base_doc), _clears(head_doc)
    for fn, n in sorted(b_clr.items()):
        if h_clr.get(fn, 0) < n:
            out.append(Loss("clear", fn, f"a clear of the read-done event is gone: {fn} has {h_clr.get(fn, 0)}, "
                                         f"the baseline {n}"))
    return out


def _path_unless(doc: dict) -> list[str]:
    """The conditions a document's prefill runners test on the way to their publish (``prefill_gates``'s
    ``path_unless``): a gate's exit moved into the caller stands there."""
    return list(((doc.get("steps") or {}).get("prefill_gates") or {}).get("path_unless", ()))


def _prefill_losses(changes: list[FactChange], head_paths: list[str] = ()) -> list[Loss]:
    """What HEAD lost of the prefill publish's gates, by what they decide (their tests may move between functions
    and be respelled): a forward mode now let through (``prefill/modes``), the test of the backend's declaration
    (``prefill/declaration``), a server condition that kept the publish off (``prefill/unless``, compared
    respelled), a setting that turned it off (``prefill/setting/NAME``), and a speculative algorithm the gates kept
    off whatever the settings (``never``), or a new one, that may publish now: the worker's reads after its prefill
    step are notes no scenario decides (``algorithms.PREFILL_PENDING``), so nothing shows that they are covered, and
    the gate passes nothing it could not decide. A setting's default turning a publish on is a changed fact, not a
    loss."""
    out = []
    for x in changes:
        if x.category != "protocol" or not x.key.startswith("prefill/") or (
                x.change == "removed" and not x.key.startswith("prefill/setting/")):
            continue
        key = x.key.split("/", 1)[1]
        before, after = str(x.before or ""), str(x.after or "")
        if key == "modes" and x.before is not None:
            gained = [m for m in after.split("; ") if m and m not in before.split("; ")]
            if gained:
                out.append(Loss("prefill gate", "modes", "the prefill publish's gates no longer keep it off in "
                                                         + ", ".join(gained)))
        elif key == "declaration" and before == "must be PRE_REPLAY" and after != before:
            out.append(Loss("prefill gate", "declaration", "the prefill publish no longer tests that the backend "
                                                           "declares PRE_REPLAY"))
        elif key == "unless" and x.before is not None:
            kept = {respelled(t) for t in after.split("; ")} | {respelled(t) for t in head_paths}
            for t in before.split("; "):
                if t and t != "none" and respelled(t) not in kept:
                    out.append(Loss("prefill gate", "unless", f"the prefill publish is no longer kept off when {t}"))
        elif key.startswith("setting/") and before.startswith("publish off when") and after != before:
            name = key.split("/", 1)[1]
            out.append(Loss("prefill gate", name, f"{name} no longer turns the prefill publish off "
                                                  f"({before} -> {after or 'not tested'})"))
        elif key.startswith("algorithm/") and x.before in (None, "never") and x.after != "never":
            name = key.split("/", 1)[1]
            out.append(Loss("prefill publish", name, f"{name}'s target prefill may now publish its read-done "
                                                    f"event ({x.before or 'a new algorithm'} -> {x.after}): no "
                                                    "configuration decides the draft's reads after it"))
    return out
