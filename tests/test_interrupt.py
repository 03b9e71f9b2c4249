"""Ctrl-C during a real run ends with one line and exit 130.

With worker processes and z3 objects alive: no worker's traceback, no finalizer's "Exception ignored" report."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _interrupted(args: list[str], after: float, cwd: Path) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "fencecheck", *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(after)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it: to the whole process group, workers included
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


@pytest.mark.slow
@pytest.mark.parametrize("after", [1.5, 3.0, 5.0])
def test_prove_interrupted_is_one_line(tmp_path, after):
    code, err = _interrupted(["prove", "--jobs", "2"], after, tmp_path)
    if code == 0:
        pytest.skip("prove finished before the interrupt")
    assert code == 130, err
    assert err.splitlines() == ["fencecheck: interrupted"], err


@pytest.mark.slow
@pytest.mark.parametrize("after", [4.0, 8.0])
def test_audit_interrupted_ends_with_one_line(tmp_path, after):
    code, err = _interrupted(["audit", "--docs", str(tmp_path / "docs"), "--corpus", str(tmp_path / "corpus"),
                              "--timings", str(tmp_path / "t.json")], after, tmp_path)
    assert code == 130, err
    lines = err.splitlines()
    assert lines[-1] == "fencecheck: interrupted", err
    assert all(line.startswith("[") for line in lines[:-1]), err  # the stage lines, nothing else
    assert "Traceback" not in err and "Exception ignored" not in err


def test_a_ctrl_c_that_z3_takes_during_a_check_is_an_interrupt_not_a_verdict(monkeypatch):
    """z3 cancels a check on SIGINT and answers unknown "interrupted from keyboard": that is Ctrl-C, raised as
    KeyboardInterrupt, while a resource limit stays an unknown verdict."""
    import z3

    from fencecheck.model.solver import Z3_INTERRUPTED, check, make_solver
    from fencecheck.verdict import Verdict

    s = make_solver()
    s.add(z3.Int("x") > 0)
    monkeypatch.setattr(s, "check", lambda *a: z3.unknown)
    monkeypatch.setattr(s, "reason_unknown", lambda: Z3_INTERRUPTED)
    with pytest.raises(KeyboardInterrupt):
        check(s)
    monkeypatch.setattr(s, "reason_unknown", lambda: "canceled")
    assert check(s).verdict is Verdict.UNKNOWN
