"""The baseline's document kept between pull-request runs (`sglang_cache`): a second check reads HEAD alone and says the same bytes; a changed baseline or fencecheck misses.

The cache is off in the rest of the suite (conftest.py); here it is on, in a temporary folder."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pr_pair import lay, repository

from fencecheck.decision import cache as sglang_cache
from fencecheck.commands.main import main


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(sglang_cache.ENV, str(folder))
    return folder


def run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", *argv, "--json"], out=out, err=err)
    assert code in (0, 1), err.getvalue()
    return code, out.getvalue()


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.json")) if folder.exists() else []


def test_a_second_check_against_the_same_baseline_uses_its_entry_and_says_the_same(tmp_path, cache, monkeypatch):
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")
    first = run(str(head), "--baseline", str(base))
    (entry,) = _entries(cache)
    from fencecheck.decision import pull_request as sglang_pr

    real = sglang_pr.read_document

    def head_only(path, installed, cross):
        assert Path(path).resolve() == head.resolve(), f"read {path} again"
        return real(path, installed, cross)

    monkeypatch.setattr(sglang_pr, "read_document", head_only)  # the baseline's process is forked from here
    assert run(str(head), "--baseline", str(base)) == first
    moved = tmp_path / "elsewhere"
    shutil.copytree(base, moved)  # the same files in another folder: the same entry, the document names the folder
    code, text = run(str(head), "--baseline", str(moved))
    assert (code, text.replace(str(moved.resolve()), str(base.resolve()))) == first and _entries(cache) == [entry]


def test_a_changed_baseline_misses(tmp_path, cache):
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")
    run(str(head), "--baseline", str(base))
    lay(base, "head")  # the baseline now holds the change: nothing is added
    code, _ = run(str(head), "--baseline", str(base))
    assert code == 0 and len(_entries(cache)) == 2


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_revision_is_keyed_by_its_tree_and_needs_no_unpacking_the_second_time(tmp_path, cache, monkeypatch):
    repo = repository(tmp_path / "repo")
    first = run(str(repo), "--baseline", "HEAD~1")
    from fencecheck.decision import baseline as sglang_baseline

    monkeypatch.setattr(sglang_baseline, "_unpack", lambda *a: (_ for _ in ()).throw(AssertionError("unpacked")))
    assert run(str(repo), "--baseline", "HEAD~1") == first
    assert len(_entries(cache)) == 1


def test_off_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(sglang_cache.ENV, "off")
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")
    run(str(head), "--baseline", str(base))
    assert sglang_cache.folder() is None and not list(tmp_path.rglob("*.json"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_in_the_trees_blocks_neither_the_suppressions_nor_the_baselines_key(tmp_path, cache):
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")
    for tree in (base, head):
        os.mkfifo(tree / "sglang/srt/layers/attention/fifo_backend.py")  # a read of it would wait for a writer
    env = {**os.environ, sglang_cache.ENV: str(cache)}
    proc = subprocess.run([sys.executable, "-m", "fencecheck", "sglang", str(head), "--baseline", str(base), "--json"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 1 and proc.stderr == "", proc.stderr
    assert json.loads(proc.stdout)["counts"]["added"] == 1 and len(_entries(cache)) == 1
