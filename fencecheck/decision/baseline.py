"""The baseline of ``fencecheck sglang HEAD --baseline BASE``: another tree (a folder), or a git revision of HEAD's
repository, read from git's objects into a temporary folder; the working tree is never touched.

For a revision, the ``sglang`` package is taken at the same path inside the repository as HEAD's (``python/sglang``
in an SGLang checkout), named as ``COMMIT:PATH`` (a literal path, never a pattern: a folder may be named ``[x]`` or
``*``). Its files are listed from the commit's tree (``git ls-tree -r -z``) and read as the blobs committed (``git
cat-file --batch``), so nothing of ``.gitattributes`` applies (``export-ignore``, filters, line endings): its Python
files, and every symbolic link recreated as the committed link (mode 120000; the reader reads a link to a file and
notes a link to a folder, unfollowed, as it does in a working tree). They are written into ``/dev/shm`` where it can
(else the temporary folder).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from fencecheck.errors import InputError, signals_held


@dataclass(frozen=True)
class Baseline:
    """The baseline as given, checked: a folder (``path``), or a revision (``commit`` of the repository at ``top``,
    the package at ``inside`` there; ``path`` is None: it is unpacked into a ``scratch`` folder)."""

    given: str
    path: str | None
    revision: str | None = None
    top: str | None = None
    inside: str | None = None


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def repository_root(path: Path) -> Path | None:
    """The top folder of the git work tree holding ``path`` (None when it is in none, or git is missing)."""
    if shutil.which("git") is None:
        return None
    r = _git(["rev-parse", "--show-toplevel"], path if path.is_dir() else path.parent)
    return Path(r.stdout.strip()).resolve() if r.returncode == 0 and r.stdout.strip() else None


def _unpack(top: Path, commit: str, inside: PurePosixPath, into: Path, given: str) -> None:
    """The package at ``inside`` of ``commit`` in the repository at ``top``, written into ``into`` as committed:
    its Python files (the raw blobs, no attribute of ``.gitattributes`` applied) and its symbolic links (every one,
    recreated as the committed link: the reader notes a link to a folder and reads a link to a file)."""
    where = "" if inside == PurePosixPath(".") else inside.as_posix()
    env = {**os.environ, "GIT_LITERAL_PATHSPECS": "1"}  # the path is named as ``COMMIT:PATH``, never a glob
    tree = subprocess.run(["git", "ls-tree", "-r", "-z", f"{commit}:{where}"], cwd=top, env=env,
                          capture_output=True, check=False)
    if tree.returncode != 0:
        has = subprocess.run(["git", "cat-file", "-t", f"{commit}:{where}"], cwd=top, env=env, capture_output=True,
                             text=True, check=False)
        err = tree.stderr.decode(errors="replace").strip()
        why = err.splitlines()[-1] if err else f"git ls-tree exited {tree.returncode}"
        if has.returncode != 0 or has.stdout.strip() != "tree":
            why = f"the revision has no {inside} (where HEAD's sglang package is)"
        raise InputError("<flags>", "--baseline", f"{given} ({commit[:12]}): {why}")
    blobs: dict[str, list[PurePosixPath]] = {}  # object id -> the paths holding it (links among them)
    links: set[PurePosixPath] = set()
    for entry in tree.stdout.split(b"\0"):
        if not entry:
            continue
        meta, _, raw = entry.partition(b"\t")
        mode, kind, oid = meta.decode("ascii", "replace").split()
        name = PurePosixPath(os.fsdecode(raw))
        if kind != "blob" or name.is_absolute() or not name.parts or ".." in name.parts:
            continue  # a submodule (a commit) holds nothing of this repository
        if mode == "120000":
            links.add(name)
        elif name.suffix != ".py":
            continue  # the reader reads nothing else
        blobs.setdefault(oid, []).append(name)
    root = into / where if where else into
    root.mkdir(parents=True, exist_ok=True)
    _write_blobs(top, blobs, links, root, given, commit)


def _write_blobs(top: Path, blobs: dict[str, list[PurePosixPath]], links: set[PurePosixPath], root: Path,
                 given: str, commit: str) -> None:
    """Each blob of ``blobs`` read from ``git cat-file --batch`` and written at its paths under ``root``: a file,
    or for a path of ``links`` a symbolic link whose target is the blob's bytes."""
    made: set[Path] = set()
    with subprocess.Popen(["git", "cat-file", "--batch"], cwd=top, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as proc:
        def feed() -> None:
            try:
                for oid in blobs:
                    proc.stdin.write(f"{oid}\n".encode("ascii"))
                proc.stdin.close()
            except OSError:
                pass  # git ended early: the reply below says so

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        failed, done = None, False
        try:
            for oid, names in blobs.items():
                header = proc.stdout.readline().split()
                if len(header) != 3 or header[1] != b"blob":
                    failed = f"object {oid} is not readable"
                    break
                data = _read_exactly(proc.stdout, int(header[2]))
                proc.stdout.read(1)  # the newline after the content
                for name in names:
                    dest = root.joinpath(*name.parts)
                    if dest.parent not in made:
                        dest.parent.mkdir(parents=True, exist_ok=True)
                        made.add(dest.parent)
                    if name in links:
                        os.symlink(os.fsdecode(data), dest)
                    else:
                        dest.write_bytes(data)  # a plain write: the files are only read
            done = failed is None
        finally:
            if not done:
                proc.kill()  # nothing more is read: git must not wait on a full pipe, nor the feeder on git
            feeder.join()
            err = proc.stderr.read().decode(errors="replace").strip()
            code = proc.wait()
    if not done or code != 0:
        why = err.splitlines()[-1] if err else failed or f"git cat-file exited {code}"
        raise InputError("<flags>", "--baseline", f"{given} ({commit[:12]}): {why}")


def _read_exactly(stream, size: int) -> bytes:
    parts, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise InputError("<flags>", "--baseline", "git cat-file ended before an object's end")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def resolve(given: str, head: str | None) -> Baseline:
    """The baseline ``given`` for the tree at ``head`` (a path; None with ``--installed``), checked: a folder as it
    is, or a git revision of ``head``'s repository (its commit, and where HEAD's package is in the repository)."""
    if Path(given).is_dir():
        return Baseline(given, given)
    from fencecheck.sglang_source import find_package_root

    if head is None:
        raise InputError("<flags>", "--baseline", f"expected a folder (a git revision needs HEAD to be a path in a "
                                                  f"git repository, not --installed), got {given!r}")
    package = find_package_root(head)
    top = repository_root(package)
    if top is None:
        raise InputError("<flags>", "--baseline", f"expected a folder or a git revision, got {given!r}: it is no "
                                                  f"folder and {head} is in no git repository (or git is missing)")
    r = _git(["rev-parse", "--verify", "--quiet", f"{given}^{{commit}}"], top)
    if r.returncode != 0 or not r.stdout.strip():
        raise InputError("<flags>", "--baseline", f"expected a folder or a git revision of {top}, got {given!r}")
    return Baseline(given, None, r.stdout.strip(), str(top), package.relative_to(top).as_posix())


@contextlib.contextmanager
def scratch(b: Baseline) -> Iterator[str | None]:
    """A temporary folder to unpack revision ``b`` into, removed when the ``with`` block ends (None for a folder),
    named after this process (``fencecheck-baseline-PID-...``). Made by the caller's process, so it goes also when
    the process reading into it is ended; the removal runs with Ctrl-C, SIGTERM and SIGHUP held back."""
    if b.revision is None:
        yield None
        return
    shm = "/dev/shm"  # memory-backed where it exists: thousands of small files are made there many times faster
    where = shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None
    tmp = tempfile.mkdtemp(prefix=f"fencecheck-baseline-{os.getpid()}-", dir=where)
    try:
        yield tmp
    finally:
        with signals_held():  # removed whole even when a second Ctrl-C or SIGTERM comes meanwhile
            shutil.rmtree(tmp, ignore_errors=True)


def unpack(b: Baseline, into: str | None) -> str:
    """The folder to read for ``b``: its own, or its revision's package unpacked into ``into`` (``scratch``)."""
    if b.revision is None:
        return b.path
    _unpack(Path(b.top), b.revision, PurePosixPath(b.inside), Path(into), b.given)
    return str(Path(into) / b.inside)
