"""No output replaces an input of the same run, and a multi-file output is written whole or not at all.

Inputs and outputs are compared by file identity (another spelling, a symlink or a hard link is the same file)."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest

from fencecheck.commands.main import main
from fencecheck.files import outputs

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "fencecheck" / "catalog" / "sglang-0.5.23" / "decode-triton.toml"
BACKEND = ROOT / "examples" / "honest-backend.toml"
TREES = Path(__file__).resolve().parent / "sglang_trees"


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main([str(a) for a in argv], out, err), out.getvalue(), err.getvalue()


def _copy(tmp_path, src: Path, name: str) -> Path:
    dest = tmp_path / name
    shutil.copyfile(src, dest)
    return dest


@pytest.mark.parametrize("spell", ["same", "dotted", "symlink", "hardlink"])
def test_trace_never_replaces_its_scenario(tmp_path, spell):
    src = _copy(tmp_path, SCENARIO, "in.toml")
    before = src.read_bytes()
    target = {"same": src, "dotted": tmp_path / "." / "in.toml", "symlink": tmp_path / "link.toml",
              "hardlink": tmp_path / "hard.toml"}[spell]
    if spell == "symlink":
        target.symlink_to(src)
    elif spell == "hardlink":
        os.link(src, target)
    code, out, err = run("trace", src, "-o", target)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "would replace the input" in err and "--out" in err
    assert src.read_bytes() == before


def test_verify_never_replaces_its_backend_file(tmp_path):
    back = _copy(tmp_path, BACKEND, "back.toml")
    before = back.read_bytes()
    code, _, err = run("verify", back, "-o", back)
    assert code == 2 and "would replace the input" in err and back.read_bytes() == before


def test_regress_never_replaces_its_corpus(tmp_path):
    from corpus_samples import one_record_corpus

    one_record_corpus(tmp_path)
    corpus = tmp_path / "corpus.jsonl"
    before = corpus.read_bytes()
    code, _, err = run("regress", tmp_path, "--out", corpus)
    assert code == 2 and "would replace the input" in err and corpus.read_bytes() == before


def test_sglang_never_writes_a_module_of_the_tree_it_reads(tmp_path):
    dest = tmp_path / "wheel"
    shutil.copytree(TREES / "common", dest)
    module = next((dest / "sglang").rglob("*.py"))
    before = module.read_bytes()
    code, _, err = run("sglang", dest / "sglang", "--fingerprints", module)
    assert code == 2 and "would replace the input" in err and module.read_bytes() == before


def test_another_file_is_written(tmp_path):
    src = _copy(tmp_path, SCENARIO, "in.toml")
    code, _, err = run("trace", src, "-o", tmp_path / "out.json")
    assert code == 0 and err == "" and (tmp_path / "out.json").read_text().startswith("{")


def test_scenarios_are_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """A disk that fills up while the scenarios are written leaves the folder as it was: none of them, no temporary
    folder."""
    dest = tmp_path / "wheel"
    shutil.copytree(TREES / "common", dest)
    shutil.copytree(TREES / "composite", dest, dirs_exist_ok=True)
    calls = []

    def full_on_second(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")

    scen = tmp_path / "scen"
    scen.mkdir()
    (scen / "keep.txt").write_text("mine\n")
    monkeypatch.setattr(outputs.os, "fsync", full_on_second)
    code, _, err = run("sglang", dest / "sglang", "--scenarios", scen)
    assert code == 4 and "No space left on device" in err and len(calls) >= 2
    assert sorted(p.name for p in scen.iterdir()) == ["keep.txt"]
    monkeypatch.undo()
    code, _, _ = run("sglang", dest / "sglang", "--scenarios", scen)
    written = sorted(p.name for p in scen.iterdir())
    assert code == 1 and "keep.txt" in written and len(written) > 2 and all(
        n.endswith(".toml") for n in written if n != "keep.txt")
