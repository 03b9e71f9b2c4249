"""The command line: exit codes, reports, and one-line errors with no traceback."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from fencecheck.catalog import catalog_paths
from fencecheck.cli import main

PATHS = {p.stem: str(p) for p in catalog_paths()}


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_check_safe_exits_0():
    code, out, _ = run("check", PATHS["eagle-v2"])
    assert code == 0 and out.startswith("eagle-v2: proved")


def test_check_race_exits_1_and_explains_with_witness():
    code, out, _ = run("check", PATHS["ngram-no-clear"], "--witness")
    assert code == 1
    assert "RACE read of req_to_token by step 1 phase 'verify' at worker_after" in out
    assert "missing edge:" in out
    assert "saw step 2's data (stale)" in out


def test_check_json():
    code, out, _ = run("check", PATHS["restored-graph-no-marker"], PATHS["plain-decode"], "--json")
    data = json.loads(out)
    assert code == 1
    assert [d["verdict"] for d in data] == ["counterexample", "proved"]
    assert data[0]["distinct_races"] == [
        {"location": "req_to_token", "phase": "decode", "site": "in_graph_before_marker", "step": 0}]


def test_catalog_command_agrees_with_every_expectation():
    code, out, _ = run("catalog")
    assert code == 0
    assert f"{len(PATHS)} scenarios, {len(PATHS)} as expected" in out


def test_trace_then_check_the_trace(tmp_path):
    target = tmp_path / "t.json"
    assert run("trace", PATHS["ngram-no-clear"], "--steps", "2", "-o", str(target))[0] == 0
    code, out, _ = run("check", str(target))
    assert code == 1 and "worker_after" in out


@pytest.mark.parametrize(
    "argv, words",
    [
        (["check", "missing.toml"], "missing.toml: no such file"),
        (["check", "--steps", "0", "x.toml"], "--steps"),
        (["check"], "expected at least one scenario"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, words):
    code, out, err = run(*argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and words in err


def test_bad_file_through_the_real_entry_point_has_no_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[runners.t]\nmarker = "yes"\n')
    proc = subprocess.run([sys.executable, "-m", "fencecheck.cli", "check", str(bad)], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert str(bad) in proc.stderr


def test_trace_output_is_not_left_partial_on_bad_input(tmp_path):
    target = tmp_path / "t.json"
    code, _, _ = run("trace", str(tmp_path / "missing.toml"), "-o", str(target))
    assert code == 2 and not target.exists()


def test_an_output_that_cannot_be_written_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    target = blocker / "sub" / "t.json"
    code, out, err = run("trace", PATHS["plain-decode"], "-o", str(target))
    assert code == 4 and out == ""
    assert err == f"fencecheck: error: {target}: cannot be created ({blocker} is not a folder)\n"
