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

    def head_only(path, installed, cross, *rest):
        assert Path(path).resolve() == head.resolve(), f"read {path} again"
        return real(path, installed, cross, *rest)

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


_BAD_SHAPES = [
    "[]", "null", '"text"', "{}",
    '{"document": [], "suppressions": []}',
    '{"document": {"root": "x"}, "suppressions": 5}',
    '{"document": {"root": 3, "sglang_version": null, "findings": {}, "notes": []}, "suppressions": []}',
    '{"document": {}, "suppressions": [{"file": 1, "line": "x", "kinds": 3, "reason": null}]}',
]


@pytest.mark.parametrize("bad", _BAD_SHAPES)
def test_an_entry_of_valid_json_but_the_wrong_shape_is_a_miss_and_is_replaced(tmp_path, cache, bad):
    """No internal error (exit 70) and no traceback: the baseline is read again and its entry written over."""
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")
    first = run(str(head), "--baseline", str(base))
    (entry,) = _entries(cache)
    k = entry[:-len(".json")]
    (cache / entry).write_text(bad, encoding="utf-8")
    assert run(str(head), "--baseline", str(base)) == first
    assert _entries(cache) == [entry] and sglang_cache.load(k) is not None
    payload = json.loads(bad)
    if isinstance(payload, dict) and payload:  # under its own key and digest: the shape alone is checked
        (cache / entry).write_text(json.dumps(sglang_cache._sealed(k, payload)), encoding="utf-8")
        assert sglang_cache.load(k) is None
        assert run(str(head), "--baseline", str(base)) == first and sglang_cache.load(k) is not None


def test_an_entry_whose_document_lost_a_key_its_reader_needs_is_a_miss(tmp_path, cache):
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")
    first = run(str(head), "--baseline", str(base))
    (entry,) = _entries(cache)
    data = json.loads((cache / entry).read_text(encoding="utf-8"))
    for key in ("findings", "sglang_version"):
        broken = json.loads(json.dumps(data))
        del broken["document"][key]
        (cache / entry).write_text(json.dumps(broken), encoding="utf-8")
        assert run(str(head), "--baseline", str(base)) == first, key
        payload = {f: broken[f] for f in ("document", "suppressions")}  # sealed again: its shape is checked
        (cache / entry).write_text(json.dumps(sglang_cache._sealed(data["key"], payload)), encoding="utf-8")
        assert run(str(head), "--baseline", str(base)) == first, key
        assert json.loads((cache / entry).read_text(encoding="utf-8")) == data


def test_another_trees_entry_copied_over_a_key_is_a_miss(tmp_path, cache):
    """The entry names the key it was stored under: another baseline's entry (one that adds nothing) copied over
    this baseline's is not trusted, the baseline is read again."""
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")
    same = lay(tmp_path / "same", "head")
    first = run(str(head), "--baseline", str(base))
    assert first[0] == 1 and json.loads(first[1])["counts"]["added"] == 1
    (mine,) = _entries(cache)
    assert run(str(head), "--baseline", str(same))[0] == 0
    (other,) = set(_entries(cache)) - {mine}
    shutil.copyfile(cache / other, cache / mine)
    assert run(str(head), "--baseline", str(base)) == first
    assert (cache / mine).read_bytes() != (cache / other).read_bytes()
