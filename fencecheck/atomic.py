"""Files in and out.

In: ``read_input`` reads an input file within the file-level limits (size, nesting depth, digits of a number), or
raises a one-line error naming the file (and the line).

Out: ``check_output`` says before any work whether an output can be written; ``write_text_atomic`` writes one file;
``write_tree`` writes a set of documents and swaps it in whole. What is replaced is replaced atomically: a regular
file through a temporary file beside it and a rename, so it is complete or untouched, and the temporary file is removed
on any failure, Ctrl-C included. A character device or a named pipe (``/dev/stdout``, ``/dev/null``, a FIFO) is
written through, and a symlink is followed to the file it names. A read or write the system refuses raises
``IOFailure`` (exit 4) naming the path as the user gave it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import signal
import stat
import tempfile
from pathlib import Path, PurePosixPath

from .errors import InputError, IOFailure, os_reason

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


# -- outputs -------------------------------------------------------------------------------------------------------


def _kind(path: Path) -> int | None:
    """``st_mode`` of what ``path`` names (symlinks followed), or ``None`` if nothing is there."""
    try:
        return os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ENOTDIR:
            raise IOFailure(str(path), f"cannot be created ({_existing_ancestor(path)} is not a folder)") from None
        raise IOFailure(str(path), f"cannot be reached ({os_reason(err)})") from None


def _existing_ancestor(path: Path) -> Path:
    p = Path(os.path.abspath(path))
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def _writable_folder(user: str, folder: Path) -> None:
    """Raise ``IOFailure`` naming ``user`` unless ``folder`` exists and is writable, or can be created."""
    anc = _existing_ancestor(folder)
    verb = "cannot be written" if os.path.lexists(user) else "cannot be created"
    if not anc.is_dir():
        raise IOFailure(user, f"{verb} ({anc} is not a folder)")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise IOFailure(user, f"{verb} ({anc} is not writable)")


def check_output(path, folder: bool = False) -> None:
    """Raise ``IOFailure`` now, before any work, if ``path`` cannot be written: as a file (``folder=False``) or as a
    folder to write files in. Nothing is created."""
    user, p = str(path), Path(path)
    mode = _kind(p)
    if folder:
        if mode is not None and not stat.S_ISDIR(mode):
            raise IOFailure(user, "is a file, expected a folder")
        _writable_folder(user, p)
        return
    if mode is None or stat.S_ISREG(mode):
        _writable_folder(user, Path(os.path.realpath(p)).parent)
    elif stat.S_ISDIR(mode):
        raise IOFailure(user, "is a folder, expected a file")
    elif stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        if not os.access(p, os.W_OK):
            raise IOFailure(user, "is not writable")
    else:
        raise IOFailure(user, "is not a regular file, a character device or a named pipe")


def _umask_mode() -> int:
    """The mode a new file gets (0o666 less the umask)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _new_mode(path: Path) -> int:
    """The mode of the file at ``path`` (kept when it is replaced), or a new file's."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return _umask_mode()


def write_text_atomic(path, text: str) -> None:
    """Write ``text`` to ``path``: a regular file (or a new one) through a temporary file beside it and a rename, a
    character device or named pipe directly; a symlink is followed. Errors name ``path`` as given."""
    user, p = str(path), Path(path)
    mode = _kind(p)
    if mode is not None and not stat.S_ISREG(mode):
        check_output(p)  # a folder or a socket: refused in one line
        try:
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as err:
            raise IOFailure(user, f"cannot be written ({os_reason(err)})") from None
        return
    target = Path(os.path.realpath(p))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise IOFailure(user, f"cannot be created ({os_reason(err)})") from None
    file_mode = _new_mode(target)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, file_mode)
        os.replace(tmp, target)
        tmp = None
    except OSError as err:
        raise IOFailure(user, f"cannot be written ({os_reason(err)})") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


@contextlib.contextmanager
def _sigint_deferred():
    """Hold Ctrl-C until the block ends (then raise it), so a few renames are done whole; a no-op off the main
    thread."""
    got = []
    try:
        old = signal.signal(signal.SIGINT, lambda *_: got.append(True))
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if got:
        raise KeyboardInterrupt


def _relative(rel: str) -> PurePosixPath:
    p = PurePosixPath(rel)
    if p.is_absolute() or not p.parts or ".." in p.parts:
        raise ValueError(f"document path {rel!r} is not a plain relative path")
    return p


def write_tree(root, files: dict[str, str], names=None) -> None:
    """Write a set of documents (``files``: path relative to ``root`` -> text) and swap it in whole. ``names`` are
    the top-level entries the set owns (default: those ``files`` names), e.g. ``audit``, ``proofs.md``: each is
    replaced by its new version, or removed if ``files`` has none, and old files inside it go. Everything is first
    written to a temporary folder in ``root``; the swap is a few renames, done with Ctrl-C held and undone on
    failure, so ``root`` holds the old set or the new one, never a mix, and no temporary folder is left."""
    user, root = str(root), Path(root)
    rels = {_relative(rel): text for rel, text in files.items()}
    names = sorted(set(names or ()) | {p.parts[0] for p in rels})
    try:
        root.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=".fencecheck-new-", dir=root))
    except OSError as err:
        raise IOFailure(user, f"cannot be written ({os_reason(err)})") from None
    old = stage.with_name(stage.name.replace("-new-", "-old-"))
    file_mode = _umask_mode()
    try:
        for rel, text in rels.items():
            dest = stage.joinpath(*rel.parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with open(dest, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(dest, file_mode)
        with _sigint_deferred():
            _swap(root, stage, old, names)
    except OSError as err:
        raise IOFailure(user, f"cannot be written ({os_reason(err)})") from None
    finally:
        for folder in (stage, old):
            shutil.rmtree(folder, ignore_errors=True)


def _swap(root: Path, stage: Path, old: Path, names: list[str]) -> None:
    os.mkdir(old)
    moved_out, moved_in = [], []
    try:
        for n in names:
            if os.path.lexists(root / n):
                os.rename(root / n, old / n)
                moved_out.append(n)
        for n in names:
            if os.path.lexists(stage / n):
                os.rename(stage / n, root / n)
                moved_in.append(n)
    except BaseException:
        for n in moved_in:
            with contextlib.suppress(OSError):
                os.rename(root / n, stage / n)
        for n in moved_out:
            with contextlib.suppress(OSError):
                os.rename(old / n, root / n)
        raise
