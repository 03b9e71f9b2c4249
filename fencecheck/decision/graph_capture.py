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
start-up and captures, once per class and platform) is paid only where a claim hangs on it. The pipeline may ask
before the statuses are settled, in a forked process beside the decision (``may_be_asked``, ``answers_of``): for the
findings whose status may settle as shown, the answer being a function of the finding's class, mode and reads alone.
"""

from __future__ import annotations

from pathlib import Path

from fencecheck.decision.replay import not_findings_of, with_not_findings
from fencecheck.vocab import ReadSite

#: The statuses shown as findings.
SHOWN = ("confirmed", "reachable")
_IN_GRAPH = (ReadSite.IN_GRAPH_BEFORE_MARKER, ReadSite.IN_GRAPH_AFTER_MARKER)


def demote_not_captured(ex, only=None, answers: dict | None = None) -> tuple[object, set]:
    """``ex`` (settled) with each shown finding whose in-graph reads no captured graph runs moved to its not findings,
    and the names of the scenarios of the findings moved. ``only``: the indexes of the findings to ask about (None:
    every one); ``answers``: what ``answers_of`` gave for some of them (each other asked here)."""
    marker = _marker_platforms(ex)
    asked = [i for i, f in enumerate(ex.findings) if (only is None or i in only) and _candidate(f)]
    if not asked or not marker:
        return ex, set()
    known = dict(answers or {})
    known.update(answers_of(ex, [ex.findings[i] for i in asked if _key(ex.findings[i]) not in known]))
    return _demoted(ex, asked, marker, lambda f: known[_key(f)])


def may_be_asked(findings) -> list:
    """The ``findings`` (not yet decided) that ``demote_not_captured`` may ask about once decided: those whose status
    the decision may settle as shown (not ``unresolved`` already, and no condition left on their reads' paths on
    CUDA: ``status.status_of`` makes the others questions) with every uncovered read in the graph."""
    from fencecheck.decision.status import _read_conditions

    return [f for f in findings
            if f.kind == "read_outside_declaration" and f.status != "unresolved" and bool(f.uncovered)
            and all(site in _IN_GRAPH for site, _ in f.uncovered) and _read_conditions(f, "cuda")[0] == ()]


def answers_of(ex, findings) -> dict:
    """``_key(f)`` -> how every captured path of ``f``'s reads ended (None: one may be captured, or the
    interpretation cannot say), for ``findings`` of ``ex``: what ``demote_not_captured`` would find for each (``ex``
    need not be decided: the answer depends on the finding's class, mode and reads alone)."""
    marker = _marker_platforms(ex)
    if not findings or not marker:
        return {}
    from fencecheck.sglang_source import reading

    with reading(ex.root):
        tree, modes = _tree_of(ex)
        return _answers(tree, modes, findings, marker)


def answers_in(tree, modes, findings, marker: list[str]) -> dict:
    """``answers_of`` for ``findings`` of the reader's ``tree`` (its forward modes ``modes``), asked on the platforms
    ``marker`` (those with the marker: ``marker_platforms``)."""
    if not findings or not marker:
        return {}
    from fencecheck.sglang_source import reading

    with reading(tree.root):
        return _answers(tree, modes, findings, marker)


def _answers(tree, modes, findings, marker: list[str]) -> dict:
    return {_key(f): _why_not_captured(tree, modes, f, marker) for f in findings}


def marker_platforms(rows) -> list[str]:
    """The platforms of the tree's platform rows (``Protocol.platforms``) that have the marker."""
    return [p["platform"] for p in rows or () if p.get("marker") == "present"]


def _key(f) -> tuple:
    """What an answer depends on: the class (and where it is), the mode and the uncovered reads."""
    return (f.subject, f.subject_at, f.mode, tuple((site, r.file, r.line, r.location) for site, r in f.uncovered))


def _marker_platforms(ex) -> list[str]:
    return marker_platforms(((ex.facts or {}).get("platforms") or {}).get("platforms", ()))


def _tree_of(ex):
    from fencecheck.sglang_source.backend_reader import Reader
    from fencecheck.sglang_source.tree import Tree

    tree = ex.tree if ex.tree is not None else Tree(Path(ex.root))  # the reader's, its modules parsed
    return tree, Reader(tree).modes


def _demoted(ex, asked: list[int], marker: list[str], why_of) -> tuple[object, set]:
    keep, moved, dropped = [], [], set()
    for i, f in enumerate(ex.findings):
        why = why_of(f) if i in asked else None
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
