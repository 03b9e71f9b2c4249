"""The short summary of a decided extraction (``fencecheck sglang`` without ``--details``): one line per root cause,
the findings that share their uncovered reads (the same read sites, file:line) folded under it with the backends and
modes they affect, ordered by severity (``confirmed``, then ``reachable``, then ``unresolved``, as
``commands.reader_status`` settles them; within one, the root causes racing in a configuration that needs less
first: ``reach``; an unresolved one names what is not settled), then a line each on
the not findings and the protocol facts. ``--details`` prints every finding with its evidence and every fact table;
``--json`` the whole document."""

from __future__ import annotations

import re

_SEVERITY = {"confirmed": 0, "reachable": 1, "plausible": 2, "unresolved": 3}
_READ = re.compile(r"^reads (?P<loc>\S+) at (?P<site>\S+) via ")


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


def _affected(findings) -> str:
    """``A, B (DECODE, TARGET_VERIFY); C (DECODE)``: the subjects grouped by the modes they are found in."""
    modes: dict[str, list[str]] = {}
    for f in findings:
        modes.setdefault(f.subject, [])
        if f.mode and f.mode not in modes[f.subject]:
            modes[f.subject].append(f.mode)
    by: dict[tuple, list[str]] = {}
    for subject, ms in modes.items():
        by.setdefault(tuple(ms), []).append(subject)
    return "; ".join(", ".join(s) + (f" ({', '.join(ms)})" if ms else "") for ms, s in by.items())


def _decided(findings) -> str:
    verdicts = sorted({f.decision.verdict for f in findings if f.decision is not None})
    text = "/".join(verdicts) if verdicts else "not decided"
    rows = [f.decision.contexts for f in findings if f.decision is not None and f.decision.contexts is not None]
    if rows:
        racing = sorted({sum(r.verdict == "counterexample" for r in c) for c in rows})
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


def _unsettled(status: str, findings) -> str:
    """``; not settled: ...`` for an unresolved root cause: what its first finding could not settle (shortened)."""
    if status != "unresolved":
        return ""
    why = next((f.status_why for f in findings if getattr(f, "status_why", None)), None)
    if not why:
        return ""
    return "; " + (why if len(why) <= 110 else why[:107] + "...")


def _fixes(findings) -> str:
    fixes = [f.decision.fix for f in findings if f.decision is not None and f.decision.fix is not None]
    if not fixes:
        return ""
    ok = all(x.verdict == x.model_verdict == "proved" for x in fixes)
    proved = f"{'proved' if ok else 'NOT proved'} in every finding's scenario"
    if any(x.declares is None for x in fixes):  # a change to the worker: one per worker class
        changes = sorted({x.change for x in fixes})
        more = f"; and {len(changes) - 1} more, one per worker: --details" if len(changes) > 1 else ""
        return f"; fix: {changes[0]} ({proved}{more})"
    changes = sorted({x.declares for x in fixes})
    return f"; fix: declare {'/'.join(changes)} ({proved})"


def root_causes(findings) -> list[tuple[str, tuple, list]]:
    """(worst status, reads, findings) per group of findings with the same kind and uncovered reads, by severity."""
    groups: dict[tuple, list] = {}
    for f in findings:
        groups.setdefault((f.kind, _reads(f)), []).append(f)
    out = [(min((f.status for f in fs), key=lambda s: _SEVERITY.get(s, 3)), key, fs) for key, fs in groups.items()]
    return sorted(out, key=lambda x: (_SEVERITY.get(x[0], 3), _needs(x[2])[0], -len(x[2]), x[2][0].subject, x[1]))


def summary_lines(ex) -> list[str]:
    """The findings' part of the short summary."""
    groups = root_causes(ex.findings)
    lines = []
    for status, (kind, reads), fs in groups:
        if reads:
            file, line, loc, site = reads[0]
            where = f"{loc} at {site}" if kind == "read_outside_declaration" else \
                (f"{loc}" if loc else kind.replace("_", " "))
            where += f" ({file}:{line}" + (f", and {len(reads) - 1} more read sites" if len(reads) > 1 else "") + ")"
        else:
            where = "no read"
        declared = {getattr(f, "declared", None) for f in fs} - {None}
        lines.append(f"  {status.upper()} {kind.replace('_', ' ')}: {where}: {_affected(fs)}"
                     + (f"; declares {', '.join(sorted(declared))}" if declared else "")
                     + f"; {_decided(fs)}{_needs(fs)[1]}{_unsettled(status, fs)}{_fixes(fs)}")
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
