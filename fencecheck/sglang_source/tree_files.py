"""The files of an SGLang tree as the reader takes them, within the limits every input of fencecheck has.

``scan`` lists the ``*.py`` modules under the package folder without recursion (a folder nested any depth is
fine) and without following links to folders; ``read_module`` reads one within ``atomic.MAX_INPUT_BYTES`` (the
limit of an input file), opening it without blocking, so a FIFO or a device named ``*.py`` is never read, and
decodes it as Python does (a leading UTF-8 BOM dropped, every line break a newline);
``too_deep`` tells a parsed module nested deeper than ``MAX_NESTING`` syntax-tree levels (the reader's evaluators
recurse over expressions). What is skipped is a ``Note``: shown in the document, ``unresolved`` when the skipped
file is one Python would import (its facts are unknown), not when it is no module at all (a FIFO, a broken link).
"""

from __future__ import annotations

import ast
import itertools
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from fencecheck.files.inputs import MAX_INPUT_BYTES

#: A parsed module nests at most this many syntax-tree levels (SGLang's releases nest under 50).
MAX_NESTING = 100

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")  # Python's own line breaks (line numbers of the syntax tree)


@dataclass(frozen=True)
class Note:
    """Something the reader skipped or could not read: ``file`` relative to the package's parent (``sglang/...``),
    ``line`` when known, ``what`` happened, and whether facts may be missing for it (``unresolved``)."""

    file: str
    line: int | None
    what: str
    unresolved: bool

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "what": self.what, "unresolved": self.unresolved}


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def _kind(mode: int) -> str:
    return next((text for test, text in _KINDS if test(mode)), "not a regular file")


def scan(root: Path, base: Path) -> tuple[list[Path], list[Note]]:
    """The regular ``*.py`` files under ``root`` (links to regular files included), sorted as paths; and a note for
    each ``*.py`` entry that is no regular file, each link to a folder (not followed) and each folder that cannot
    be listed."""
    files, notes, todo = [], [], [root]

    def rel(p: Path) -> str:
        return p.relative_to(base).as_posix()

    while todo:
        folder = todo.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as e:
            notes.append(Note(rel(folder), None, f"folder not listed ({e.strerror or e}): its modules are not read",
                              True))
            continue
        for e in entries:
            p = Path(e.path)
            try:
                link = e.is_symlink()
                is_dir = e.is_dir(follow_symlinks=False)
            except OSError:
                link, is_dir = False, False
            if is_dir:
                todo.append(p)
                if e.name.endswith(".py"):
                    notes.append(Note(rel(p), None, "a folder named *.py: not a module", False))
                continue
            if not e.name.endswith(".py") and not link:
                continue
            try:
                st = os.stat(p)
            except OSError as err:
                if e.name.endswith(".py"):
                    notes.append(Note(rel(p), None, f"a link to nothing readable ({err.strerror or err}): skipped",
                                      False))
                continue
            if stat.S_ISDIR(st.st_mode):  # a link to a folder: Python would import through it, the reader does not
                notes.append(Note(rel(p), None, "a link to a folder: not followed, its modules are not read", True))
                continue
            if not e.name.endswith(".py"):
                continue
            if not stat.S_ISREG(st.st_mode):
                notes.append(Note(rel(p), None, f"{_kind(st.st_mode)}{' (through a link)' if link else ''}, not a "
                                                "regular file: skipped", False))
                continue
            files.append(p)
    return sorted(files), notes


class Skipped(Exception):
    """A module the reader does not read: ``note`` says why."""

    def __init__(self, note: Note):
        super().__init__(note.what)
        self.note = note


def read_module(path: Path, rel: str, limit: int = MAX_INPUT_BYTES) -> str:
    """The text of the module at ``path`` (a leading UTF-8 BOM dropped, as Python drops it; undecodable bytes
    replaced, every line break a newline), at most ``limit`` bytes. Raises ``Skipped`` for what is no regular file
    when opened or larger than ``limit``, ``OSError`` when the system refuses the read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Skipped(Note(rel, None, f"{_kind(st.st_mode)}, not a regular file: skipped", False))
        if st.st_size > limit:
            raise Skipped(_too_large(rel, limit))
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # grew while read
            raise Skipped(_too_large(rel, limit))
    finally:
        os.close(fd)
    # as Python decodes a module's source: a leading UTF-8 BOM dropped ("utf-8-sig"), universal newlines (the line
    # numbers and columns stay those Python counts); every reader of the text (the parse, the searches, the digests,
    # the suppressions) takes it from here
    return b"".join(chunks).decode("utf-8-sig", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def _too_large(rel: str, limit: int) -> Note:
    size = f"{limit // (1 << 20)} MiB" if limit % (1 << 20) == 0 else f"{limit} bytes"
    return Note(rel, None, f"larger than {size} (the limit of an input file, atomic.MAX_INPUT_BYTES): not read",
                True)


def nul_error(text: str) -> tuple[int, str] | None:
    """(line, what) of the first NUL byte in ``text`` (Python refuses source holding one), or None."""
    i = text.find("\0")
    if i < 0:
        return None
    line = text.count("\n", 0, i) + 1
    return line, f"a NUL byte at offset {i} (column {i - text.rfind(chr(10), 0, i)})"


def line_starts(data: bytes) -> list[int]:
    """``[0, 0, s2, s3, ...]``: ``starts[n]`` is the first byte of line ``n`` (1-based), a line beginning after each
    of Python's line breaks (``_LINE_BREAK``: ``bytes.splitlines`` breaks at the same three)."""
    pieces = data.splitlines(keepends=True)
    ends = list(itertools.accumulate(map(len, pieces)))
    if pieces and not pieces[-1].endswith((b"\n", b"\r")):
        ends.pop()  # the last line has no break after it: no line begins there
    return [0, 0, *ends]


def too_deep(tree: ast.Module, text: str, limit: int = MAX_NESTING) -> int | None:
    """The line of a node of ``tree`` nested deeper than ``limit`` levels, or None. A statement or expression spanning
    ``n`` bytes nests at most about ``n`` levels, so one shorter than what is left of the limit is not entered:
    the walk enters the compound statements and the long expressions only."""
    data = text.encode("utf-8", errors="replace")
    starts = line_starts(data)
    lines = len(starts) - 1
    todo = [(tree, 1, 1)]
    pop, push, AST = todo.pop, todo.append, ast.AST
    while todo:
        node, depth, line = pop()
        line = getattr(node, "lineno", None) or line  # operators and contexts have no line: their parent's
        if depth > limit:
            return line
        end = getattr(node, "end_lineno", None)
        if end is not None and node.end_col_offset is not None and 0 < node.lineno <= end <= lines \
                and depth + 8 + starts[end] + node.end_col_offset - starts[node.lineno] - node.col_offset <= limit:
            continue  # too short to nest past the limit (f-strings, operators and contexts add a few levels)
        depth += 1
        for f in node._fields:  # ast.iter_child_nodes, in its order, without its generators
            v = getattr(node, f, None)
            if isinstance(v, AST):
                push((v, depth, line))
            elif isinstance(v, list):
                for x in v:
                    if isinstance(x, AST):
                        push((x, depth, line))
    return None
