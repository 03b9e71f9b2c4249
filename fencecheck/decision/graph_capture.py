"""Shown findings whose in-graph reads no captured graph runs: the captured path interpreted (``captured``) decides
them, after the statuses are settled.

A finding shown as ``confirmed`` or ``reachable`` is a claim an engineer acts on. Where its reads outside the
declaration are all in the graph (before or after the marker) and its mode is one a graph replays, each read is asked
of the interpretation on every platform whose marker the tree has (``platforms.marker == "present"``: elsewhere an
in-graph declaration falls back, ``platform.demote_platform_bound``); where no captured path reaches any of them on
any of those platforms, the reads become not findings, their ``why`` the interpretation's (how every path ended), and
the finding's scenarios are dropped. An open answer (the interpretation could not follow the capture) or one captured
read keeps the finding as it is.

Only shown findings are asked: a question (``unresolved``) stays a question, and the interpretation's cost (a class's
start-up and captures, once per class and platform) is paid only where a claim hangs on it.
"""

from __future__ import annotations

from pathlib import Path

from fencecheck.decision.replay import not_findings_of, with_not_findings
from fencecheck.vocab import ReadSite

#: The statuses shown as findings.
SHOWN = ("confirmed", "reachable")
_IN_GRAPH = (ReadSite.IN_GRAPH_BEFORE_MARKER, ReadSite.IN_GRAPH_AFTER_MARKER)


def demote_not_captured(ex, only=None) -> tuple[object, set]:
    """``ex`` (settled) with each shown finding whose in-graph reads no captured graph runs moved to its not findings,
    and the names of the scenarios of the findings moved. ``only``: the indexes of the findings to ask about (None:
    every one)."""
    marker = [p["platform"] for p in ((ex.facts or {}).get("platforms") or {}).get("platforms", ())
              if p.get("marker") == "present"]
    asked = [i for i, f in enumerate(ex.findings) if (only is None or i in only) and _candidate(f)]
    if not asked or not marker:
        return ex, set()
    from fencecheck.sglang_source import reading
    from fencecheck.sglang_source.backend_reader import Reader
    from fencecheck.sglang_source.tree import Tree

    with reading(ex.root):
        tree = ex.tree if ex.tree is not None else Tree(Path(ex.root))  # the reader's, its modules parsed
        modes = Reader(tree).modes
        keep, moved, dropped = [], [], set()
        for i, f in enumerate(ex.findings):
            why = _why_not_captured(tree, modes, f, marker) if i in asked else None
            if why is None:
                keep.append(f)
                continue
            moved += not_findings_of(f, f"no graph captures its path (the captured path interpreted on "
                                        f"{', '.join(marker)}): {why}")
            if f.decision is not None and f.decision.scenario:
                dropped.add(f.decision.scenario)
    return with_not_findings(ex, keep, moved), dropped


def _candidate(f) -> bool:
    return f.kind == "read_outside_declaration" and f.status in SHOWN and bool(f.uncovered) \
        and all(site in _IN_GRAPH for site, _ in f.uncovered)


def _why_not_captured(tree, modes, f, platforms) -> str | None:
    """How every captured path of ``f``'s reads ended, on each platform; None where one may be captured or the
    interpretation cannot say."""
    from fencecheck.decision.captured import captured
    from fencecheck.sglang_source.capture_state import graph_modes

    if f.mode not in graph_modes(modes):
        return None
    ci = next((c for c in tree.classes_named(f.subject) if f"{c.file}:{c.line}" == f.subject_at), None)
    if ci is None:
        return None
    whys = []
    for platform in platforms:
        for _, r in f.uncovered:
            a = captured(tree, ci, modes, f.mode, r, platform=platform)
            if a.captured is not False:
                return None
            if a.why not in whys:
                whys.append(a.why)
    return "; ".join(whys)
