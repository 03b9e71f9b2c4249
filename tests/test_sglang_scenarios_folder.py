"""``--scenarios DIR`` holds exactly the scenarios of the last run, all or none.

An earlier run's scenario files (each ``*.toml`` that loads as a scenario) are removed, the set is swapped in whole (an
interrupted run leaves the previous set), other files stay, a ``.toml`` that is no scenario included."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from pr_pair import lay

from fencecheck.commands.main import main
from fencecheck.files import outputs

TREES = Path(__file__).resolve().parent / "sglang_trees"


def run(*argv) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], out=out, err=err)
    return code, err.getvalue()


def _tree(tmp_path: Path) -> Path:
    dest = tmp_path / "wheel"
    shutil.copytree(TREES / "common", dest)
    shutil.copytree(TREES / "composite", dest, dirs_exist_ok=True)
    return dest / "sglang"


#: A scenario file as the tool writes one (what an earlier run may have left).
SCENARIO = (Path(__file__).resolve().parents[1] / "docs" / "counterexamples" / "ngram_without_clear.toml").read_text()


def _earlier(folder: Path) -> None:
    """What an earlier run left: a scenario of its own, a temporary folder of a run that was killed; and files of
    the user's, one of them a ``.toml`` that is no scenario."""
    folder.mkdir()
    (folder / "sglang-gone-backend-decode.toml").write_text(SCENARIO)
    (folder / ".fencecheck-new-x1y2").mkdir()
    (folder / ".fencecheck-new-x1y2" / "half.toml").write_text("")
    (folder / "keep.txt").write_text("mine\n")
    (folder / "pyproject.toml").write_text("[project]\n")


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_the_folder_holds_exactly_this_runs_scenarios(tmp_path):
    tree = _tree(tmp_path)
    code, _ = run("sglang", tree, "--scenarios", tmp_path / "fresh")
    assert code == 1
    fresh = _files(tmp_path / "fresh")
    assert fresh and all(n.endswith(".toml") for n in fresh)
    _earlier(tmp_path / "sc")
    code, err = run("sglang", tree, "--scenarios", tmp_path / "sc")
    assert code == 1, err
    assert _files(tmp_path / "sc") == sorted([*fresh, "keep.txt", "pyproject.toml"])
    assert (tmp_path / "sc" / "pyproject.toml").read_text() == "[project]\n"  # not the tool's: never removed
    assert all((tmp_path / "sc" / n).read_text() == (tmp_path / "fresh" / n).read_text() for n in fresh)


def test_pull_request_mode_holds_exactly_the_added_scenarios(tmp_path):
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")
    _earlier(tmp_path / "sc")
    code, err = run("sglang", head, "--baseline", base, "--scenarios", tmp_path / "sc")
    assert code == 1, err
    assert _files(tmp_path / "sc") == ["keep.txt", "pyproject.toml", "sglang-paged-backend-decode.toml"]


def test_an_interrupted_run_leaves_the_previous_set(tmp_path, monkeypatch):
    tree = _tree(tmp_path)
    sc = tmp_path / "sc"
    sc.mkdir()
    (sc / "sglang-gone-backend-decode.toml").write_text(SCENARIO)
    calls = []

    def interrupted_on_second(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(outputs.os, "fsync", interrupted_on_second)
    code, err = run("sglang", tree, "--scenarios", sc)
    assert code != 0 and err.count("\n") == 1 and len(calls) == 2, err
    assert sorted(p.name for p in sc.iterdir()) == ["sglang-gone-backend-decode.toml"]
    assert (sc / "sglang-gone-backend-decode.toml").read_text() == SCENARIO
