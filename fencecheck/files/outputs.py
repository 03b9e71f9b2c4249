"""Writing outputs: each output checked for writability before the work starts, regular files replaced atomically
(complete or untouched, no temporary file left, even on Ctrl-C), devices and pipes written through, a document set
swapped in whole, a folder's set of files of one kind (``write_owned``: ``--scenarios``) replaced whole."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import stat
import tempfile
from pathlib import Path, PurePosixPath

from fencecheck.errors import InputError, IOFailure, os_reason, quote


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


def write_owned(root, files: dict[str, str], suffix: str, ours) -> None:
    """Write ``files`` (names directly in ``root`` -> text) as the whole set of ``*suffix`` files this tool keeps in
    ``root``: each ``*suffix`` file there that ``ours(path)`` tells the tool wrote (an earlier run's) is removed in the
    same swap (``write_tree``), with a temporary folder a killed run left, so ``root`` holds the previous set or
    exactly this one, never a mix. Any other file (a user's ``pyproject.toml`` in ``--scenarios .``) and folders are
    never touched."""
    try:
        with os.scandir(root) as it:
            earlier = [e.name for e in it if (e.name.endswith(suffix) and e.is_file(follow_symlinks=False)
                                              and ours(Path(e.path)))
                       or (e.name.startswith((".fencecheck-new-", ".fencecheck-old-"))
                           and e.is_dir(follow_symlinks=False))]
    except FileNotFoundError:
        earlier = []
    except OSError as err:
        raise IOFailure(str(root), f"cannot be listed ({os_reason(err)})") from None
    write_tree(root, files, names=earlier)


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


def check_not_an_input(output, flag: str, inputs: list[Path], trees: list[Path], folder: bool = False) -> None:
    """Refuse, before any work, an output that would replace an input of the same run: an output file that is one
    of ``inputs`` (by file identity: the same device and inode, so another spelling, a hard link or a symlink to it
    counts), or a Python module under one of ``trees`` (a tree the run reads); for an output folder, one that holds
    an input file directly. One line naming both, exit 2."""
    out = Path(output)
    try:
        if folder:
            clash = [i for i in inputs if i.exists() and out.exists() and os.path.samefile(i.parent, out)]
        else:
            clash = [i for i in inputs if out.exists() and i.exists() and os.path.samefile(i, out)]
            real = Path(os.path.realpath(out))
            clash += [t for t in trees if real.suffix == ".py" and real.is_relative_to(os.path.realpath(t))]
    except OSError:
        return  # what cannot be compared cannot be the same file; check_output reports an unreachable path
    if clash:
        raise InputError("<flags>", flag, f"an output that is not an input of the same run; {quote(str(output))} "
                                          f"would replace the input {quote(str(clash[0]))}")
