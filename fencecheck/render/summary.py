"""The short summary of a decided extraction (``fencecheck sglang`` without ``--details``), made to fit one screen
(``WIDTH`` columns; on 0.5.23 about 40 lines): per root cause (the findings that share their uncovered reads, the same
read sites, folded under it with the backends and modes they affect) a line with its read sites, what it reads and
who, and a line with what its status rests on (where it races and its least demanding configuration, or what is not
settled) and its verified fix; ordered by severity (``confirmed``, then ``reachable``, then ``unresolved``, as
``commands.reader_status`` settles them; within one, the root causes racing in a configuration that needs less
first: ``reach``). Root causes that differ only in their read lines, or one worker's reads with one fix, are one
entry. Then a line each on the not findings and the protocol facts. ``--details`` prints every finding with its
evidence and every fact table (and every text the summary cuts); ``--json`` the whole document."""

from __future__ import annotations

import re

_SEVERITY = {"confirmed": 0, "reachable": 1, "plausible": 2, "unresolved": 3}
_READ = re.compile(r"^reads (?P<loc>\S+) at (?P<site>\S+) via ")
#: A ``(path/to/file.py:12)`` in a fix's text, shown by the file's name.
_FIX_PATH = re.compile(r"\((?:[\w.\-]+/)+([\w.\-]+\.py:\d+)\)")


def _reads(f) -> tuple:
    """The uncovered reads of a finding as (file, line, location, site), in its evidence's order."""
    if f.kind != "read_outside_declaration":
        e = f.evidence[-1] if f.evidence else None
        return ((e.file, e.line, getattr(f, "location", None) or "", f.kind),) if e else ()
    out = []
    for e in f.evidence[1:]:
        m = _READ.match(e.what)
        if m:
            out.append((e.file, e.line, m["loc"], m["site"]))
    return tuple(out)


def _decided(findings) -> str:
    verdicts = sorted({f.decision.verdict for f in findings if f.decision is not None})
    text = "/".join(verdicts) if verdicts else "not decided"
    rows = [f.decision.contexts for f in findings if f.decision is not None and f.decision.contexts is not None]
    if rows:
        racing = sorted({sum(r.verdict == "counterexample" and not r.own for r in c) for c in rows})
        total = sorted({len(c) for c in rows})
        span = (lambda v: str(v[0]) if v[0] == v[-1] else f"{v[0]}-{v[-1]}")  # noqa: E731
        text += f"; races in {span(racing)} of {span(total)} configurations"
    return text


def fix_text(fix) -> str:
    """A verified fix as the summary says it."""
    verdict = fix.verdict if fix.verdict == fix.model_verdict else f"simulator {fix.verdict}, model {fix.model_verdict}"
    text = f"fix: {fix.change} ({verdict}"
    if fix.contexts:
        text += f"; {fix.contexts_proved} of the {fix.contexts} configurations it races in proved"
        if fix.still_racing:
            text += (f", {len(fix.still_racing)} still race with it (not this declaration's to fix: "
                     f"{', '.join(fix.still_racing[:3])}" + (", ..." if len(fix.still_racing) > 3 else "") + ")")
    return text + ")"


def _needs(findings) -> tuple[int, str]:
    """(how much the least demanding configuration needs, its text) over the findings' ``reach``."""
    reached = [f.decision.reach for f in findings if f.decision is not None and f.decision.reach is not None]
    if not reached:
        return 99, ""
    best = min(reached, key=lambda r: (len(r.needs), r.configuration))
    short = [n.split(" (when ")[0] for n in best.needs]
    return len(best.needs), (f"; least demanding: {best.configuration} (" + (", ".join(short) if short else
                                                                             "needs nothing more") + ")")


def root_causes(findings) -> list[tuple[str, tuple, list]]:
    """(worst status, reads, findings) per group of findings with the same kind and uncovered reads, by severity."""
    groups: dict[tuple, list] = {}
    for f in findings:
        groups.setdefault((f.kind, _reads(f)), []).append(f)
    out = [(min((f.status for f in fs), key=lambda s: _SEVERITY.get(s, 3)), key, fs) for key, fs in groups.items()]
    return sorted(out, key=lambda x: (_SEVERITY.get(x[0], 3), _needs(x[2])[0], -len(x[2]), x[2][0].subject, x[1]))


#: The summary's width: each of its lines fits in this many columns (the rest is in ``--details`` and ``--json``).
WIDTH = 160
#: The indent of a root cause's second line.
_INDENT = "      "


def fit(text: str, width: int = WIDTH) -> str:
    """``text`` cut to ``width`` columns, ending in ``...`` where cut."""
    return text if len(text) <= width else text[:width - 3].rstrip() + "..."


def _short_path(file: str) -> str:
    """A read's file by its name alone (``--details`` and ``--json`` give the path; the class names the backend)."""
    return file.rsplit("/", 1)[-1]


def _affected(findings) -> str:
    """``A, B (DECODE); C (TARGET_VERIFY)``: the subjects grouped by the modes they are found in, a group of more than
    two as ``A +N`` (``--details`` names each)."""
    modes: dict[str, list[str]] = {}
    for f in findings:
        modes.setdefault(f.subject, [])
        if f.mode and f.mode not in modes[f.subject]:
            modes[f.subject].append(f.mode)
    by: dict[tuple, list[str]] = {}
    for subject, ms in modes.items():
        by.setdefault(tuple(ms), []).append(subject)
    parts = []
    for ms, subjects in by.items():
        names = ", ".join(subjects) if len(subjects) <= 2 else f"{subjects[0]} +{len(subjects) - 1}"
        parts.append(names + (f" ({', '.join(ms)})" if ms else ""))
    return "; ".join(parts)


def _what(kind: str, reads: tuple) -> str:
    if not reads:
        return kind.replace("_", " ") + ", no read"
    file, line, loc, site = reads[0]
    lines = sorted({ln for f, ln, _, _ in reads if f == file} - {line})
    others = len({(f, ln) for f, ln, _, _ in reads if f != file})
    where = f"{_short_path(file)}:{line}" + "".join(f",{ln}" for ln in lines) + (f" (+{others} more)" if others else "")
    locs = ", ".join(dict.fromkeys(r[2] for r in reads if r[2]))
    if kind == "read_outside_declaration":
        return f"{where}: reads {locs} {site}"
    if kind == "worker_read_after_publish":
        return f"{where}: reads {locs} after the publisher's runner"
    return f"{where}: {kind.replace('_', ' ')}"


def _state(status: str, findings) -> str:
    """What the root cause's status rests on, short: where it races (the least demanding configuration), or what is
    not settled."""
    if status == "unresolved":
        why = next((f.status_why for f in findings if getattr(f, "status_why", None)), None)
        if why:
            return why
    text = _decided(findings).replace("counterexample; ", "")
    return text + _needs(findings)[1].replace("; least demanding: ", ", least demanding ")


def _locations() -> re.Pattern:
    """The shared maps' names, as a pattern (the longest first)."""
    from fencecheck.vocab import SHARED_LOCATIONS

    return re.compile(r"\b(" + "|".join(sorted(map(re.escape, SHARED_LOCATIONS), key=len, reverse=True)) + r")\b")


def _joined_changes(changes: list[str]) -> list[str]:
    """Changes that differ only in the shared map they name, as one naming each (``take the A and B rows ...``)."""
    pattern = _locations()
    by: dict[str, list[str]] = {}
    for c in changes:
        found = pattern.findall(c)
        key = pattern.sub("\0", c) if len(found) == 1 else c
        by.setdefault(key, []).extend(found if len(found) == 1 else [])
    return [key.replace("\0", " and ".join(dict.fromkeys(locs))) if locs else key for key, locs in by.items()]


def _short_fix(findings) -> str:
    """The verified fix, short: ``fix: declare POST_REPLAY (proved)``, or a change to the worker without its
    explanation (``--details`` has it); where the findings have several, the first and how many."""
    fixes = [f.decision.fix for f in findings if f.decision is not None and f.decision.fix is not None]
    if not fixes:
        return ""
    ok = all(x.verdict == x.model_verdict == "proved" for x in fixes)
    proved = "proved" if ok else "NOT proved"
    if any(x.declares is None for x in fixes):
        changes = _joined_changes(sorted({_FIX_PATH.sub(r"(\1)", x.change.split(" (the ")[0]) for x in fixes}))
        more = f"; {len(changes) - 1} more: --details" if len(changes) > 1 else ""
        return f"fix ({proved}{more}): {changes[0]}"
    return f"fix ({proved}): declare {'/'.join(sorted({x.declares for x in fixes}))}"


def _entries(groups) -> list[tuple[str, str, tuple, list]]:
    """The root causes as the summary shows them: those of one status, kind, file, site and findings' subjects and
    modes whose fixes make the same change are one entry (their read lines listed, the first one's state shown: the
    others' are in ``--details``), in the order of the first."""
    out: list[tuple[str, str, tuple, list]] = []
    index: dict[tuple, int] = {}
    for status, (kind, reads), fs in groups:
        key = (status, kind, reads[0][0] if reads else None, _affected(fs),
               tuple(sorted({r[3] for r in reads})), _locations().sub("", _short_fix(fs)))
        if reads and key in index:
            s, k, rs, gs = out[index[key]]
            out[index[key]] = (s, k, rs + reads, gs + fs)
            continue
        index[key] = len(out)
        out.append((status, kind, reads, list(fs)))
    return out


#: The least room kept for what a root cause's status rests on beside its fix.
_MIN_STATE = 50


def ordered(findings) -> list:
    """The findings in the summary's order (root causes by severity, then by how little their least demanding
    configuration needs), the questions (``unresolved``) after the findings: what ``--details`` follows too."""
    return [f for _, _, fs in root_causes(findings) for f in fs]


def summary_lines(ex) -> list[str]:
    """The findings' part of the short summary: two lines of at most ``WIDTH`` columns per root cause (those that
    differ only in their read lines, and the root causes of one worker's reads with one fix, shown as one): where and
    what with the backends and modes (and the declared end where it fits); then what the status rests on and the
    verified fix (the status's text cut first, to leave the fix whole). The questions (``unresolved`` root causes)
    come after the findings under a line of their own, each with what it hangs on and no fix: a fix is proved on a
    scenario, and whether the tree ever runs that scenario is the question."""
    from fencecheck.decision.status import is_question

    lines = []
    entries = _entries(root_causes(ex.findings))
    asked = sum(is_question(f) for f in ex.findings)
    for status, kind, reads, fs in entries:
        # a root cause is a question when all its findings are (one that folds a shown finding is shown with them)
        question = all(is_question(f) for f in fs)
        if question and asked:
            lines.append(f"questions: {asked} (not findings: each hangs on a fact the reader could not settle, named "
                         "on its second line; --details gives each with its evidence)")
            asked = 0  # the line once, before the first question
        declared = [] if question else sorted({getattr(f, "declared", None) for f in fs} - {None})
        head = f"  {status.upper()} {_what(kind, reads)}; {_affected(fs)}"
        decl = f"declares {', '.join(declared)}" if declared else ""
        parts = []
        if decl and len(head) + 2 + len(decl) <= WIDTH:
            head += f", {decl}"
        elif decl:
            parts.append(decl)
        fix = "" if question else _short_fix(fs)
        state = _state(status, fs)
        if not fix and not parts and len(head) + 2 + len(state) <= WIDTH:
            lines.append(f"{head}; {state}")  # nothing more to say: one line
            continue
        lines.append(fit(head))
        if fix:
            room = WIDTH - len(_INDENT) - sum(len(p) + 2 for p in parts) - len(fix) - 2
            state = fit(state, max(room, _MIN_STATE))
        lines.append(fit(_INDENT + "; ".join(parts + [state] + ([fix] if fix else []))))
    return lines


def facts_line(ex) -> str:
    """One line on the tree's protocol facts."""
    facts = ex.facts or {}
    conf = facts.get("configurations") or {}
    plats = (facts.get("platforms") or {}).get("platforms", ())
    marker = [p["platform"] for p in plats if p.get("marker") == "present"]
    return (f"protocol: {(facts.get('fence') or {}).get('kind', 'not read')} fence; no-marker rule "
            f"{conf.get('rule') or 'unresolved'}; marker on {', '.join(marker) or 'no platform'}; "
            f"{len(conf.get('configurations', ()))} configurations generated from the facts "
            f"(--details lists the facts, --json everything)")
