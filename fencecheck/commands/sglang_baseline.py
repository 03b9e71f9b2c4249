"""The baseline of ``fencecheck sglang HEAD --baseline BASE``: another tree (a folder), or a git revision of HEAD's
repository, read from git's objects (``git archive``) into a temporary folder; the working tree is never touched.

For a revision, the ``sglang`` package is taken at the same path inside the repository as HEAD's (``python/sglang``
in an SGLang checkout); only its Python files are unpacked (the reader reads nothing else).
"""

from __future__ import annotations

import contextlib
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
    """The baseline as read: ``path`` (a folder ``read_path`` takes), what was given, and the commit when a
    revision was given (``path`` is then a temporary folder, removed when the run ends)."""

    path: str
    given: str
    revision: str | None


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
    with subprocess.Popen(["git", "archive", "--format=tar", commit, "--", str(inside)], cwd=top,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                for member in tar:
                    if member.isfile() and member.name.endswith(".py"):
                        tar.extract(member, into, filter="data")
        except tarfile.TarError:
            pass  # git said why on stderr
        err = proc.stderr.read().decode(errors="replace").strip()
        code = proc.wait()
    if code != 0:
        why = err.splitlines()[-1] if err else f"git archive exited {code}"
        if "did not match any files" in err:
            why = f"the revision has no {inside} (where HEAD's sglang package is)"
        raise InputError("<flags>", "--baseline", f"{given} ({commit[:12]}): {why}")


@contextlib.contextmanager
def baseline(given: str, head: str | None) -> Iterator[Baseline]:
    """The baseline ``given`` for the tree at ``head`` (a path; None with ``--installed``): a folder as it is, or a
    git revision of ``head``'s repository unpacked into a temporary folder for the ``with`` block."""
    if Path(given).is_dir():
        yield Baseline(given, given, None)
        return
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
    commit = r.stdout.strip()
    inside = PurePosixPath(package.relative_to(top).as_posix())
    with tempfile.TemporaryDirectory(prefix="fencecheck-baseline-") as tmp:
        _unpack(top, commit, inside, Path(tmp), given)
        yield Baseline(str(Path(tmp) / inside), given, commit)
