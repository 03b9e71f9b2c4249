"""Reading an input file: the file-level limits (size, nesting, digits, encoding) checked before it is parsed,
and the one-line error that names the file and the line where a limit is passed."""

from __future__ import annotations

import os
import re
import stat

from fencecheck.errors import InputError, IOFailure, os_reason

#: An input file (scenario, trace, backend) is at most this many bytes.
MAX_INPUT_BYTES = 16 * 1024 * 1024


#: Arrays, tables, objects and dotted keys nest at most this deep in an input file.
MAX_DEPTH = 32


#: A number in an input file has at most this many digits (Python's own limit on converting text to an integer).
MAX_DIGITS = 4300


# Strings and comments of TOML or JSON text (one that does not close is left to the parser to reject).
_STRINGS = r'"""(?:[^\\]|\\[\s\S])*?"""|\'\'\'[\s\S]*?\'\'\'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"|\'[^\'\n]*\'|#[^\n]*'


_SKIP = re.compile(_STRINGS)


# One token that matters for the limits: a string or comment (skipped), a bracket, what ends a key, a dot, a number.
_TOKEN = re.compile(_STRINGS + r"|[\[{]|[\]}]|[\n=,]|\.|[0-9][0-9_]*")


_LONG_NUMBER = re.compile(r"[0-9_]{%d,}" % (MAX_DIGITS + 1))


_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


_PAIR = re.compile(r"\[\]|\{\}")


_NUMBER_DOT = re.compile(r"(?<=[0-9])\.(?=[0-9])")


def _size_text(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n % (1024 * 1024) == 0 else f"{n} bytes"


def scan_limits(text: str) -> tuple[int, str] | None:
    """The first place where ``text`` (TOML or JSON) nests deeper than ``MAX_DEPTH`` or holds a number longer than
    ``MAX_DIGITS`` digits, as (line, what), or ``None``. Depth counts open brackets and braces, the dots of a dotted
    key and the depth of the last TOML table header (``[a.b]`` is 2).

    A quick bound computed with regular expressions clears ordinary files; only a file it cannot clear is scanned
    token by token (for the line and to tell a deep file from one with unbalanced brackets)."""
    code = _SKIP.sub(" ", text)
    if _LONG_NUMBER.search(code) is None and _depth_bound(code) <= MAX_DEPTH:
        return None
    return _scan(text)


def _depth_bound(code: str) -> int:
    """An upper bound of ``_scan``'s depth for text without strings and comments (``MAX_DEPTH + 1`` if the brackets
    nest deeper than ``MAX_DEPTH`` or do not balance)."""
    brackets, nesting = _NOT_BRACKET.sub("", code), 0
    while brackets and nesting <= MAX_DEPTH:
        inner = _PAIR.sub("", brackets)  # one level of innermost pairs
        if inner == brackets:
            return MAX_DEPTH + 1
        brackets, nesting = inner, nesting + 1
    if brackets:
        return MAX_DEPTH + 1
    dots = max(line.count(".") for line in _NUMBER_DOT.sub("", code).split("\n"))
    return 2 * (nesting + dots)


def _scan(text: str) -> tuple[int, str] | None:
    depth = dots = header = group = 0
    in_header = after_eq = False
    line = 1
    for m in _TOKEN.finditer(text):
        tok = m.group()
        c = tok[0]
        if c in "\"'#":
            line += tok.count("\n")
            continue
        if c.isdigit():
            if len(tok) - tok.count("_") > MAX_DIGITS:
                return line, f"a number of more than {MAX_DIGITS} digits"
            continue
        if c in "[{":
            if depth == 0:
                in_header, group = not after_eq, 0  # ``[table]`` / ``[[array.of.tables]]`` at the top level
            depth += 1
        elif c in "]}":
            depth, dots = max(depth - 1, 0), 0
            if depth == 0 and in_header:
                header, in_header = group, False
        elif c == ".":
            s, e = m.start(), m.end()
            if not (s > 0 and text[s - 1].isdigit() and e < len(text) and text[e].isdigit()):
                dots += 1  # a dotted key's dot (a dot between digits is a number's)
        else:  # newline, ``=``, ``,``: the end of a key
            dots = 0
            if c == "=":
                after_eq = True
            elif c == "\n":
                line, after_eq = line + 1, False
        total = (0 if in_header else header) + depth + dots
        if in_header:
            group = max(group, total)
        if total > MAX_DEPTH:
            return line, f"nested deeper than {MAX_DEPTH} levels"
    return None


def read_input(path, error=None, missing: str = "no such file", limit: int = MAX_INPUT_BYTES,
               scan: bool = True) -> str:
    """The text of an input file within the limits, or ``error(path, key, why)`` raised (default ``InputError``)
    naming what is wrong: missing, a folder, larger than ``limit`` bytes, not UTF-8, nested too deep, a number too
    long (with ``scan``). A read the system refuses (permissions, an I/O error) raises ``IOFailure``."""
    error = error or InputError
    name = str(path)
    try:
        with open(path, "rb") as f:
            if stat.S_ISDIR(os.fstat(f.fileno()).st_mode):
                raise error(name, "", "is a folder, expected a file")
            data = f.read(limit + 1)
    except (FileNotFoundError, NotADirectoryError):
        raise error(name, "", missing) from None
    except IsADirectoryError:
        raise error(name, "", "is a folder, expected a file") from None
    except OSError as err:
        raise IOFailure(name, f"cannot be read ({os_reason(err)})") from None
    if len(data) > limit:
        raise error(name, "", f"larger than {_size_text(limit)} (the limit for this input)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(name, "", f"not UTF-8 text (byte {err.start})") from None
    if scan:
        found = scan_limits(text)
        if found is not None:
            raise error(name, f"line {found[0]}", found[1])
    return text
