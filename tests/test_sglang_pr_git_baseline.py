"""A git revision as the baseline is read exactly as committed (attributes, links, a glob-named folder).

Every Python file of the package is read whatever ``.gitattributes`` says (``export-ignore`` included), its symbolic
links are the committed links, and a package under a folder whose name holds glob characters (``[x]``, ``*``, ``?``)
is read whole."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from pr_pair import ADDED, commit_all, git, lay, repository

from fencecheck.commands.main import main
from fencecheck.decision.baseline import resolve, scratch, unpack

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

INSIDE = "py[x]*?"  # a folder a pathspec would read as a glob: it matches no path named so


def _repo(tmp_path: Path) -> Path:
    """The pull-request pair as two commits, the package at ``py[x]*?/sglang``; the base commit marks a module the
    reader needs ``export-ignore``, holds a link to a module, a link to a folder and a file the reader never reads."""
    repo = tmp_path / "repo"
    repository(repo, sides=("base",), inside=INSIDE)
    pkg = repo / INSIDE / "sglang"
    (repo / ".gitattributes").write_text(f"{INSIDE}/sglang/srt/layers/attention/base_attn_backend.py export-ignore\n"
                                         "*.py export-ignore\n")
    os.symlink("srt/layers/attention/__init__.py", pkg / "alias.py")
    os.symlink("srt", pkg / "srt_link")
    (pkg / "notes.txt").write_text("not a module\n")
    commit_all(repo, "base with attributes and links")
    lay(repo / INSIDE, "head")
    commit_all(repo, "head")
    return repo


def _committed(repo: Path, rev: str) -> dict[str, tuple[str, bytes]]:
    """What the package holds at ``rev``, from git itself: each Python file's bytes and each link's target."""
    out = subprocess.run(["git", "ls-tree", "-r", "-z", f"{rev}:{INSIDE}/sglang"], cwd=repo, check=True,
                         capture_output=True).stdout
    want = {}
    for entry in filter(None, out.split(b"\0")):
        meta, _, name = entry.partition(b"\t")
        mode, _, oid = meta.decode().split()
        if mode == "120000" or name.endswith(b".py"):
            data = subprocess.run(["git", "cat-file", "blob", oid], cwd=repo, check=True, capture_output=True).stdout
            want[name.decode()] = ("link" if mode == "120000" else "file", data)
    return want


def _unpacked(root: Path) -> dict[str, tuple[str, bytes]]:
    got = {}
    for dirpath, dirnames, filenames in os.walk(root):  # links to folders are not followed
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                got[rel] = ("link", os.fsencode(os.readlink(p)))
            elif p.is_file():
                got[rel] = ("file", p.read_bytes())
    return got


def test_the_unpacked_revision_is_exactly_the_committed_package(tmp_path):
    repo = _repo(tmp_path)
    (repo / INSIDE / "sglang" / "alias.py").unlink()  # the working tree differs: the objects are read
    base = resolve("HEAD~1", str(repo / INSIDE))
    with scratch(base) as into:
        got = _unpacked(Path(unpack(base, into)))
    want = _committed(repo, "HEAD~1")
    assert "srt/layers/attention/base_attn_backend.py" in want and want["alias.py"][0] == "link"
    assert want["srt_link"] == ("link", b"srt")
    assert got == want


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_a_revision_with_attributes_links_and_a_glob_named_folder_reads_as_its_folder(tmp_path):
    repo = _repo(tmp_path)
    folder = tmp_path / "base"
    git(repo, "worktree", "add", "-q", str(folder), "HEAD~1")  # the same commit, checked out
    code, out, err = _run(str(repo / INSIDE), "--baseline", "HEAD~1", "--format", "json")
    from_rev = json.loads(out)
    assert code == 1, err
    assert [(rc["kind"], rc["subject"], rc["mode"], rc["site"], rc["location"], rc["function"])
            for rc in from_rev["findings"]["added"]] == [ADDED]
    code2, out2, err2 = _run(str(repo / INSIDE), "--baseline", str(folder / INSIDE), "--format", "json")
    from_folder = json.loads(out2)
    assert code2 == code, err2
    assert from_rev["findings"] == from_folder["findings"] and from_rev["counts"] == from_folder["counts"]
    assert from_rev["facts"] == from_folder["facts"]
