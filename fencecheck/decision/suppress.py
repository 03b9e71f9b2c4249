"""Suppressions in the SGLang sources: ``# fencecheck: ignore[KIND] reason`` on a read's line or on its
declaration's line (for a worker read: the read's line or the publisher's runner call) silences the root causes of
that kind there (``sglang_identity``). ``KIND`` is a finding kind, or several separated by commas; the reason is
required. A comment that starts ``# fencecheck:`` and is not such a suppression is bad input (one line naming
file:line, exit 2). A suppression that silences nothing is reported as unused.

Comments are found with ``tokenize`` (a ``# fencecheck:`` inside a string is no comment), in every module of the
package the reader reads that mentions ``fencecheck:``. Several suppressions on one line (one comment token holding
``# fencecheck: ignore[A] why # fencecheck: ignore[B] why``) are each parsed on their own: the comment is split
where each ``# fencecheck:`` starts (``_split``), and each is matched and reported as unused on its own.

A reason is kept and shown as ``shown_reason`` makes it, the one place of these rules (every output, text, JSON,
SARIF and the warnings, prints ``Suppression.reason``): control characters (ANSI escapes' ESC included) and the
Unicode bidi overrides and isolates (U+202A-U+202E, U+2066-U+2069) and other invisible format characters are
escaped (``\\x1b``, ``\\u202e``), the reason is one line of at most ``MAX_REASON`` characters, a longer one cut with
``...``. A reason made only of invisible characters (``is_blank``: whitespace, zero-width U+200B-U+200D, U+2060,
U+FEFF, bidi marks, overrides and isolates) is no reason: the suppression is malformed, like one without a reason.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from fencecheck.decision.identity import KIND_NAMES, RootCause
from fencecheck.errors import InputError

SYNTAX = "# fencecheck: ignore[KIND] REASON"
_HEAD = re.compile(r"^#\s*fencecheck\s*:(?P<rest>.*)$", re.S)
_HEADS = re.compile(r"#\s*fencecheck\s*:")
#: At most this many characters of a reason are shown (a longer one is cut, ending in ``...``).
MAX_REASON = 200
#: Characters that show nothing: a reason made only of these (and whitespace) is no reason.
_INVISIBLE = frozenset("\u200b\u200c\u200d\u2060\ufeff\u200e\u200f\u061c"
                       "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(ch: str) -> str:
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    if ch == " " or (ch.isprintable() and ch not in _INVISIBLE):
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def is_blank(reason: str) -> bool:
    """Whether ``reason`` shows nothing: only whitespace, zero-width characters and bidi marks or controls."""
    return all(ch.isspace() or ch in _INVISIBLE for ch in reason)


def shown_reason(reason: str) -> str:
    """``reason`` as it is kept and shown: stripped, each control, bidi or other invisible format character escaped,
    one line of at most ``MAX_REASON`` characters (a longer one cut, ending in ``...``)."""
    text = "".join(_escaped(ch) for ch in reason.strip()[: MAX_REASON + 1])  # bounded by MAX_REASON, not the input
    if len(text) > MAX_REASON or len(reason.strip()) > MAX_REASON:
        text = text[: MAX_REASON - 3] + "..."
    return text


def _split(comment: str) -> list[str]:
    """A comment starting ``# fencecheck:`` cut where each ``# fencecheck:`` in it starts (one part per
    suppression); any other comment whole."""
    if _HEAD.match(comment) is None:
        return [comment]
    starts = [m.start() for m in _HEADS.finditer(comment)]
    return [comment[a:b] for a, b in zip(starts, starts[1:] + [len(comment)])]


_IGNORE = re.compile(r"^\s*ignore\[(?P<kinds>[^\]]*)\](?P<reason>.*)$", re.S)


@dataclass(frozen=True)
class Suppression:
    file: str  # relative to the package's parent, as the document's files (sglang/srt/...)
    line: int
    kinds: tuple[str, ...]
    reason: str

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "kinds": list(self.kinds), "reason": self.reason}

    def text(self) -> str:
        return f"{self.file}:{self.line}: ignore[{','.join(self.kinds)}] {self.reason}"


def _parse(comment: str, where: str) -> Suppression | None | str:
    """The suppression a comment states; None for another comment; the error's text for a malformed one."""
    m = _HEAD.match(comment)
    if m is None:
        return None
    ig = _IGNORE.match(m["rest"])
    if ig is None:
        return f"expected a suppression {SYNTAX}, got {comment.strip()!r}"
    kinds = tuple(k.strip() for k in ig["kinds"].split(","))
    bad = [k for k in kinds if k not in KIND_NAMES]
    if bad:
        return f"expected finding kinds ({', '.join(KIND_NAMES)}) in ignore[...], got {bad[0]!r}"
    if is_blank(ig["reason"]):
        return f"a suppression needs a reason (one that shows: not only invisible characters): expected {SYNTAX}"
    return Suppression(where, 0, kinds, shown_reason(ig["reason"]))


def scan(package: Path, strict: bool = True) -> list[Suppression]:
    """Every suppression in the package folder ``package``, sorted by file and line: in the modules the reader reads
    (``tree_files``: regular files within the input size limit, never a FIFO or a device). A malformed one raises
    ``InputError`` (``strict``) or is skipped."""
    from fencecheck.sglang_source.tree_files import Skipped, read_module
    from fencecheck.sglang_source.tree_files import scan as module_files

    out = []
    parent = package.parent
    for path in module_files(package, parent)[0]:
        rel = path.relative_to(parent).as_posix()
        try:
            text = read_module(path, rel)
        except (Skipped, OSError):
            continue  # the reader notes or reports it
        if "fencecheck" not in text:
            continue
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        except (tokenize.TokenError, SyntaxError):
            continue  # the reader reports unparsable files
        for tok in tokens:
            if tok.type != tokenize.COMMENT:
                continue
            for part in _split(tok.string):
                got = _parse(part, rel)
                if isinstance(got, str):
                    if strict:
                        raise InputError(f"{path}:{tok.start[0]}", "", got)
                    continue
                if got is not None:
                    out.append(Suppression(rel, tok.start[0], got.kinds, got.reason))
    return out


@dataclass(frozen=True)
class Applied:
    """The suppressions of a tree matched to its root causes: ``by_id`` root cause id -> the suppression that
    silences it; ``unused`` the suppressions that silence nothing."""

    by_id: dict
    unused: tuple[Suppression, ...]


def apply(suppressions: list[Suppression], causes: list[RootCause]) -> Applied:
    """Matches each root cause to the first suppression of its kind on its read's or its declaration's line."""
    at: dict[tuple, list[Suppression]] = {}
    for s in suppressions:
        at.setdefault((s.file, s.line), []).append(s)
    by_id, used = {}, set()  # used: the suppressions' ids (several may share a line)
    for rc in causes:
        lines = [(rc.read.file, rc.read.line)]
        if rc.declaration is not None:
            lines.append((rc.declaration.file, rc.declaration.line))
        for key in lines:
            hit = next((s for s in at.get(key, ()) if rc.kind in s.kinds), None)
            if hit is not None:
                by_id[rc.id] = hit
                used.add(id(hit))
                break
    return Applied(by_id, tuple(s for s in suppressions if id(s) not in used))


def silenced(causes: list[RootCause], applied: Applied) -> set[int]:
    """The indexes of the findings all of whose root causes ``applied`` silences (they count for nothing)."""
    per: dict[int, list[RootCause]] = {}
    for rc in causes:
        per.setdefault(rc.finding, []).append(rc)
    return {i for i, rcs in per.items() if all(rc.id in applied.by_id for rc in rcs)}


def annotated(doc: dict, causes: list[RootCause], applied: Applied) -> dict:
    """``doc`` with its suppressions (a new document; ``doc`` itself when the tree has none): each finding all of
    whose root causes are silenced gets ``suppressed`` (the suppressions), and ``suppressions`` lists the silenced
    root causes and the unused suppressions."""
    if not applied.by_id and not applied.unused:
        return doc
    gone = silenced(causes, applied)

    def marked(i: int, f: dict) -> dict:
        if i not in gone:
            return f
        hits = {(s.file, s.line, s.kinds, s.reason): s
                for s in (applied.by_id[rc.id] for rc in causes if rc.finding == i)}
        return {**f, "suppressed": [hits[k].to_json() for k in sorted(hits)]}

    return {**doc, "findings": [marked(i, f) for i, f in enumerate(doc["findings"])],
            "suppressions": {
                "suppressed": [{**rc.to_json(), "suppression": applied.by_id[rc.id].to_json()}
                               for rc in causes if rc.id in applied.by_id],
                "unused": [s.to_json() for s in applied.unused]}}


def warn_unused(applied: Applied, err) -> None:
    """One warning line on stderr per unused suppression."""
    from fencecheck.errors import say

    for s in applied.unused:
        say(err, f"fencecheck: warning: {s.file}:{s.line}: unused suppression ignore[{','.join(s.kinds)}] "
                 f"(no finding of that kind reads or declares on this line)")
