"""The baseline of ``fencecheck sglang HEAD --baseline BASE``: another tree (a folder), or a git revision of HEAD's
repository, read from git's objects (``git archive``) into a temporary folder; the working tree is never touched.

For a revision, the ``sglang`` package is taken at the same path inside the repository as HEAD's (``python/sglang``
in an SGLang checkout); only its Python files are unpacked (the reader reads nothing else), into ``/dev/shm`` where
it can (else the temporary folder).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from fencecheck.errors import InputError


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
    """The Python files under ``inside`` at ``commit`` of the repository at ``top``, unpacked into ``into``."""
    spec = f"{inside}/*.py"  # a pathspec's * matches across folders: every Python file of the package
    with subprocess.Popen(["git", "archive", "--format=tar", commit, "--", spec], cwd=top,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                made: set[Path] = set()
                for member in tar:
                    name = PurePosixPath(member.name)
                    if not member.isfile() or name.suffix != ".py" or name.is_absolute() or ".." in name.parts:
                        continue
                    dest = into.joinpath(*name.parts)
                    if dest.parent not in made:
                        dest.parent.mkdir(parents=True, exist_ok=True)
                        made.add(dest.parent)
                    dest.write_bytes(tar.extractfile(member).read())  # a plain write: the files are only read
        except tarfile.TarError:
            pass  # git said why on stderr
        err = proc.stderr.read().decode(errors="replace").strip()
        code = proc.wait()
    if code != 0:
        why = err.splitlines()[-1] if err else f"git archive exited {code}"
        if "did not match any files" in err:
            why = f"the revision has no {inside} (where HEAD's sglang package is)"
        raise InputError("<flags>", "--baseline", f"{given} ({commit[:12]}): {why}")


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
    """A temporary folder to unpack revision ``b`` into, removed when the ``with`` block ends (None for a folder).
    Made by the caller's process, so it goes also when the process reading into it is ended."""
    if b.revision is None:
        yield None
        return
    shm = "/dev/shm"  # memory-backed where it exists: thousands of small files are made there many times faster
    where = shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None
    with tempfile.TemporaryDirectory(prefix="fencecheck-baseline-", dir=where) as tmp:
        yield tmp


def unpack(b: Baseline, into: str | None) -> str:
    """The folder to read for ``b``: its own, or its revision's package unpacked into ``into`` (``scratch``)."""
    if b.revision is None:
        return b.path
    _unpack(Path(b.top), b.revision, PurePosixPath(b.inside), Path(into), b.given)
    return str(Path(into) / b.inside)
