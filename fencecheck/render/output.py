"""The output of ``fencecheck sglang PATH`` for one tree: the tree's suppressions applied to its findings, then the
report in the format asked (``text``, ``json``: the document, ``sarif``) and the exit status of what is left.

A finding all of whose root causes a ``# fencecheck: ignore[KIND] reason`` silences is listed as suppressed and
counts for nothing; each unused suppression is a warning line on stderr (and in the document's ``suppressions``).
``decision_lines``: the text lines on a finding's decision, the one-tree summary's and pull-request mode's.
``RepositoryPaths``: the text report with its ``sglang/...`` file names relative to the repository root instead
(``--paths repository``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from fencecheck.render.release_markdown import contexts_text

FORMATS = ("text", "json", "sarif")
#: How the text report names files (``--paths``): relative to the package's parent folder (``sglang/...``, as the
#: document does) or to the root of the git repository holding the tree (``python/sglang/...`` in a checkout).
PATHS = ("package", "repository")
#: A file name of the package as the text report shows it (``sglang/srt/x.py``), not part of a longer path.
_PACKAGE_FILE = re.compile(r"(?<![\w./-])(?=sglang/[\w./-]*\.py\b)")


def repository_prefix(package: Path, path: str | None) -> str:
    """What goes before the report's ``sglang/...`` names to make them relative to the root of the git work tree
    holding ``path`` (the current folder where there is none, or for the installed package): the package's parent
    relative to it (``python/``), or nothing when the package is outside it."""
    import os

    from fencecheck.decision.baseline import repository_root

    top = repository_root(Path(os.path.abspath(path))) if path is not None else None
    try:
        rel = package.resolve().parent.relative_to((top or Path.cwd()).resolve()).as_posix()
    except ValueError:
        return ""
    return "" if rel == "." else rel + "/"


class RepositoryPaths:
    """A text stream that writes the package's file names (``sglang/srt/x.py``) with ``prefix`` before them: each
    ``write`` is a whole line or report, so no name is cut between two."""

    def __init__(self, stream: TextIO, prefix: str):
        self.stream, self.prefix = stream, prefix

    def write(self, text: str) -> int:
        return self.stream.write(_PACKAGE_FILE.sub(self.prefix, text) if self.prefix else text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def resolve_format(args) -> str:
    """``--format``, with ``--json`` as ``--format json``; both naming different formats is bad input."""
    from fencecheck.errors import InputError

    fmt = args.format or ("json" if args.json else "text")
    if args.json and fmt != "json":
        raise InputError("<flags>", "--json", f"expected --json or --format {fmt}, not both")
    return fmt


def suppressed_text(doc: dict) -> list[str]:
    """The text lines listing the suppressed root causes and the unused suppressions."""
    s = doc.get("suppressions")
    if not s:
        return []
    lines = [f"suppressed: {len(s['suppressed'])} root causes (not counted)"]
    for x in s["suppressed"]:
        sup = x["suppression"]
        lines.append(f"  SUPPRESSED {x['kind']} {x['subject']} {x['mode']}: {x['read']['what']} "
                     f"({x['read']['file']}:{x['read']['line']}); {sup['reason']} ({sup['file']}:{sup['line']})")
    for u in s["unused"]:
        lines.append(f"unused suppression: {u['file']}:{u['line']}: ignore[{','.join(u['kinds'])}] {u['reason']}")
    return lines


def _model_text(model) -> str:
    if model is None:
        return "the model: not asked (--cross-check asks it)"
    if model.agree is None:
        return f"the model: {model.verdict}"
    return "the model agrees" if model.agree else f"the model DIFFERS: {model.differ or ''}"


def decision_lines(d, model: bool = True, fix: bool = True) -> list[str]:
    """The summary's lines on a finding's decision ``d``: its scenario's verdict and races (and the model's answer,
    when ``model``), its generated configurations, its verified fix (when ``fix``: a question shows none), each
    witness."""
    races = ", ".join(d.races) or "no race"
    lines = [f"    scenario {d.scenario}: {d.verdict} ({races})" + (f"; {_model_text(d.model)}" if model else "")]
    if d.contexts is not None:
        lines.append(f"    {contexts_text(d.contexts)}")
    if d.fix is not None and fix:
        from fencecheck.render.summary import fix_text

        lines.append(f"    {fix_text(d.fix)}")
    for wit in d.witness or ():
        o = wit.stale_read
        lines.append(f"    witness: {wit.race}: " + (
            f"the step {o.step} read of {o.location} at {o.site} saw step {o.seen}'s data (stale)"
            if o else "NOT REPRODUCED (simulator inconsistency)"))
    return lines


def finish(args, ex, doc: dict, out: TextIO, render: Callable[[object], str],
           exit_code: Callable[[object], int]) -> int:
    """Applies the tree's suppressions to the decided extraction ``ex`` (whose document is ``doc``), writes the report
    in ``args.format`` and returns the exit status: ``render`` and ``exit_code`` of ``ex`` without the suppressed
    findings."""
    from dataclasses import replace

    from fencecheck.decision.identity import root_causes
    from fencecheck.decision.suppress import (
        annotated,
        apply,
        scan,
        silenced,
        warn_unused,
    )

    causes = root_causes(doc)
    applied = apply(scan(Path(ex.root)), causes)
    shown = annotated(doc, causes, applied)
    warn_unused(applied, getattr(args, "err", None))
    gone = silenced(causes, applied)
    view = replace(ex, findings=tuple(f for i, f in enumerate(ex.findings) if i not in gone)) if gone else ex
    if args.format == "sarif":
        from fencecheck.render.sarif import (
            item,
            repo_root_of,
            sarif,
            uri_prefix,
        )

        prefix = uri_prefix(Path(ex.root), repo_root_of(None if args.installed else args.path))
        items = [item(doc, rc, suppression=applied.by_id.get(rc.id)) for rc in causes]
        json.dump(sarif(items, prefix), out, indent=1)
        out.write("\n")
    elif args.format == "json":
        json.dump(shown, out, indent=1, sort_keys=False)
        out.write("\n")
    else:
        out.write(render(view))
        extra = suppressed_text(shown)
        if extra:
            out.write("\n".join(extra) + "\n")
        out.write(verdict_line(view, exit_code(view)) + "\n")
    return exit_code(view)


def verdict_line(ex, code: int) -> str:
    """The last line of the one-tree summary: what the exit status says, with the findings that count."""
    from fencecheck.errors import EXIT_OK, EXIT_RACE

    from fencecheck.decision.status import STATUSES

    from fencecheck.decision.status import questions, shown

    kinds = [f.status for f in shown(ex.findings)]
    counted = ", ".join(f"{kinds.count(s)} {s}" for s in STATUSES if s in kinds)
    asked = len(questions(ex.findings))
    also = f"; {asked} question(s) listed after them" if asked else ""
    head = f"sglang {ex.version or '(version unknown)'}:"
    if code == EXIT_OK:
        return f"{head} no finding"
    if code == EXIT_RACE:
        return (f"{head} {len(kinds)} finding(s) to review ({counted or 'drift'}), listed above{also} (--details: "
                "each with its evidence)")
    return (f"{head} no finding, but {asked} question(s) and facts left unresolved: nothing is proved there until "
            "each is answered")
