"""What the reader reports when one of its limits is reached: never a silent drop.

A read path a limit cut (``reads.Cut``: a call past ``reads.MAX_DEPTH`` below which a function may read shared
state, a function past ``reads.MAX_PATHS`` read paths, a call past the tree's ``reads.MAX_WALKS`` walks) is listed
in its backend's ``cut_paths``; at a site the declaration row does not cover it is an ``unresolved_read_path``
finding (status ``unresolved``), like a read there would be a ``read_outside_declaration`` one. A module the reader
did not read or parse (``tree.Note``: too large, too deeply nested, not a regular file) and a ``ForwardMode`` it
cannot read are ``notes`` of the document; those that may hide a fact are ``unresolved`` (exit 3 when nothing else
is wrong). A declaration row that goes through a child whose class is not known (its declaration neither) covers at
least what the known part of the row declares (``floor_end``); a read it sees outside that is an
``unresolved_declaration`` finding, never dropped.
"""

from __future__ import annotations

from ..errors import one_line
from ..vocab import COVERED_SITES, SharedReadEnds
from .declare import Child, End, MaxOf, max_end
from .findings import UnknownChildDeclaration, UnresolvedReadPath
from .reads import Cut, hard_sync
from .records import CutPath, Evidence, condition_text
from .tree_files import Note

_MIN = "PRE_REPLAY"  # every end covers the pre-replay site


def via_text(c: Cut) -> str:
    return " -> ".join(h.func for h in c.via)


def cut_rows(rd, ci) -> tuple[CutPath, ...]:
    """The ``cut_paths`` of backend ``ci``: every path a limit cut, in every mode, sorted."""
    out = set()
    for mode in rd.modes.members:
        for site, c in rd.cuts(ci, mode):
            out.add((mode, site.value, c.limit, c.file, c.line, c.what, tuple(h.text() for h in c.via),
                     tuple(c.conditions), _behind(c, rd.replayed_only(mode))))
    return tuple(CutPath(*row) for row in sorted(out, key=_key))


def _key(row) -> tuple:
    return tuple("" if x is None else x for x in row)


def _behind(c: Cut, graph: bool) -> str | None:
    """The capture-mode test before the cut on its path in a graph mode (``graph``: what is below it is no finding,
    ``reads.hard_sync``), or None."""
    if not hard_sync(c.host_sync, graph):
        return None
    return f"a capture-mode test at {c.host_sync[0]}:{c.host_sync[1]}"


def cut_finding(ci, mode: str, end: str, conds: tuple[str, ...], decl, bad: list) -> UnresolvedReadPath:
    """The ``unresolved_read_path`` finding of ``ci`` in ``mode`` for a declaration row declaring ``end`` (under
    ``conds``) of ``decl`` (owner, def), whose covered sites miss the sites of the cut paths ``bad`` [(site, Cut)]."""
    owner, node = decl
    cond = condition_text(conds)
    evidence = [Evidence(owner.file, node.lineno,
                         f"{owner.name}.{node.name} declares {end} for {mode}" + (f" when {cond}" if cond else ""))]
    seen = set()
    for s, c in sorted(bad, key=lambda x: (x[1].file, x[1].line, x[0].value, x[1].what)):
        k = (c.file, c.line, s, c.what)
        if k in seen:
            continue
        seen.add(k)
        evidence.append(Evidence(c.file, c.line, f"a read path at {s.value} cut: {c.text()}; via {via_text(c)}"
                                 + (f" (when {condition_text(c.conditions)})" if c.conditions else "")))
    return UnresolvedReadPath(ci.name, f"{ci.file}:{ci.line}", mode, node.name, tuple(conds), tuple(evidence),
                              declared=end)


def notes(tree) -> tuple[Note, ...]:
    """The document's ``notes``: what the reader skipped or could not read, each once, sorted."""
    return tuple(sorted(set(tree.notes), key=lambda n: (n.file, n.line or 0, n.what)))


def limits_text(ex, width: int | None = None) -> list[str]:
    """The summary's lines on the reader's limits in the extraction ``ex``: the read paths a limit cut and the
    notes; with ``width``, a note longer than that is cut there (``--details`` and ``--json`` give it whole)."""
    cut = [c for b in ex.backends for c in b.cut_paths]
    lines = []
    if cut:
        found = sum(1 for f in ex.findings if f.kind == "unresolved_read_path")
        lines.append(f"read paths cut by a limit of the reader: {len(cut)} ({found} unresolved findings; --json lists "
                     "them under cut_paths)")
    if ex.notes:
        cut_any = width is not None and any(len(_note_line(n)) > width for n in ex.notes)
        lines.append(f"notes ({sum(1 for n in ex.notes if n.unresolved)} unresolved"
                     + ("; --details or --json gives each whole" if cut_any else "") + "):")
    for n in ex.notes:  # a file name may hold any character: one line each
        text = _note_line(n)
        lines.append(text if width is None or len(text) <= width else text[:width - 3] + "...")
    return lines


def _note_line(n) -> str:
    at = f"{one_line(n.file)}:{n.line}" if n.line else one_line(n.file)
    return f"  {'UNRESOLVED ' if n.unresolved else ''}{at}: {one_line(n.what)}"


def floor_end(rd, value, mode: str, subject, depth: int = 0) -> str:
    """The earliest end a declaration value can have in ``mode``: a child of unknown class ends at least at
    ``PRE_REPLAY``, a child of known class at the earliest of its rows, ``max_of`` at the latest of its items'."""
    if isinstance(value, End):
        return value.name
    if isinstance(value, MaxOf):
        return max_end([floor_end(rd, i, mode, subject, depth + 1) for i in value.items])
    if not isinstance(value, Child) or value.many or depth > 6:
        return _MIN
    if value.cls is None:
        opts = rd.passed.of(subject).get(value.src[5:]) if subject is not None and value.src.startswith("self.") \
            and value.src.count(".") == 1 else None
        if not opts or any(o.cls is None for o in opts):
            return _MIN
        return min((floor_end(rd, Child(value.src, cls=o.cls), mode, subject, depth + 1) for o in opts),
                   key=SharedReadEnds.parse)
    rows, _ = rd.rows(value.cls, mode)
    if not rows:
        return _MIN
    return min((floor_end(rd, v, mode, value.cls, depth + 1) for _, v in rows), key=SharedReadEnds.parse)


def unknown_child_finding(rd, ci, mode: str, conds, value, decl, live, cuts,
                          snapshot: bool = False) -> UnknownChildDeclaration | None:
    """The ``unresolved_declaration`` finding of a row (``conds``, ``value``) that goes through a child of unknown
    class, when a read of ``live`` [(site, Read)] or a cut path of ``cuts`` [(site, Cut)] lies outside what the row
    covers at the least; else None."""
    from ..vocab import ReadSite

    floor = floor_end(rd, value, mode, ci)
    covered = COVERED_SITES[SharedReadEnds[floor]] | ({ReadSite.IN_GRAPH_BEFORE_MARKER} if snapshot else set())
    bad = sorted({(r.file, r.line, s.value, f"reads {r.location}", " -> ".join(h.func for h in r.via))
                  for s, r in live if s not in covered} |
                 {(c.file, c.line, s.value, f"a read path cut: {c.text()};", via_text(c))
                  for s, c in cuts if s not in covered})
    if not bad:
        return None
    owner, node = decl
    cond = condition_text(tuple(conds))
    evidence = [Evidence(owner.file, node.lineno,
                         f"{owner.name}.{node.name} declares {value.text()} for {mode}" + (f" when {cond}" if cond
                                                                                           else "")
                         + f": a child of unknown class (its declaration is not known); the row ends at {floor} at "
                           "the least")]
    seen = set()
    for file, line, site, what, via in bad:
        if (file, line, site, what) not in seen:
            seen.add((file, line, site, what))
            evidence.append(Evidence(file, line, f"{what} at {site} via {via}"))
    return UnknownChildDeclaration(ci.name, f"{ci.file}:{ci.line}", mode, node.name, tuple(conds), tuple(evidence))
