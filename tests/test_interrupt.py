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

from test_terminate import default_signals

ROOT = Path(__file__).resolve().parents[1]


def _interrupted(args: list[str], after: float, cwd: Path) -> tuple[int | None, str]:
    """(exit status, stderr) of the command sent SIGINT ``after`` seconds in; the status is None when it had ended
    before that."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "fencecheck", *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=default_signals)
    time.sleep(after)
    ended_first = proc.poll() is not None
    if not ended_first:
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it: to the whole process group, workers included
    _, err = proc.communicate(timeout=120)
    return (None if ended_first else proc.returncode), err


@pytest.mark.slow
@pytest.mark.parametrize("after", [1.5, 3.0, 5.0])
def test_prove_interrupted_is_one_line(tmp_path, after):
    code, err = _interrupted(["prove", "--jobs", "2"], after, tmp_path)
    if code in (None, 0):  # ended before the signal, or between the look and the signal
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


@pytest.mark.slow
@pytest.mark.parametrize("after", [3.0, 4.5])
def test_verify_of_a_release_backend_interrupted_during_its_model_checks_is_one_line(tmp_path, after):
    """DeepseekV4AttnBackend on the installed release verifies six backend files in 5-8 s here, from about 2.5 s on
    z3 in the main process (the symbolic family and the advice's checks of each file): a Ctrl-C there once ended
    nothing (z3 took it, the check answered unknown, the run went to its end, exit 1). A machine that finishes
    before the interrupt skips it, as ``prove``'s test does."""
    from sglang_release import require_release

    root = require_release()
    start = time.monotonic()
    code, err = _interrupted(["verify", "--sglang", str(root), "DeepseekV4AttnBackend"], after, tmp_path)
    if code is None:
        pytest.skip("verify finished before the interrupt")
    assert code == 130, err
    assert err.splitlines() == ["fencecheck: interrupted"], err
    assert time.monotonic() - start < 30  # ended at the interrupt, not at the run's end


def test_a_ctrl_c_that_z3_takes_during_a_check_is_an_interrupt_not_a_verdict(monkeypatch):
    """Where z3 still takes SIGINT (a library user's process) and says so ("interrupted from keyboard"), that is
    Ctrl-C, raised as KeyboardInterrupt, while a resource limit stays an unknown verdict."""
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


_LONG_CHECK = """
import os, signal, sys, threading, z3
from fencecheck.errors import z3_leaves_interrupts_to_python
if sys.argv[1] == "python":
    z3_leaves_interrupts_to_python()
x = z3.Ints(" ".join(f"x{i}" for i in range(60)))
s = z3.SimpleSolver()
s.set("rlimit", 1_000_000)
for i in range(59):
    s.add(x[i] * x[i + 1] % 97 == (i * 7) % 97, x[i] > 1, x[i] < 10**6)
sent = []
def interrupt():
    sent.append(True)
    os.kill(os.getpid(), signal.SIGINT)
threading.Timer(0.3, interrupt).start()
try:
    r = s.check()
    late = not sent
except KeyboardInterrupt:
    print("interrupted")
else:
    print("late" if late else f"{r} {s.reason_unknown()}")
"""


@pytest.mark.parametrize("who", ["z3", "python"])
def test_a_ctrl_c_during_a_check_is_never_an_unknown_verdict(who):
    """Let take SIGINT, z3 cancels the check and says ``canceled``, the words of a spent rlimit: the run would go on
    with an unknown that is no verdict (``verify`` went to its end, exit 1, on a Ctrl-C during its model checks).
    The commands and their workers leave SIGINT to Python (``errors.z3_leaves_interrupts_to_python``): the check
    ends (its rlimit bounds it) and KeyboardInterrupt is raised."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", _LONG_CHECK, who], env=env, capture_output=True, text=True, timeout=120)
    if r.stdout.strip() == "late":
        pytest.skip("the check (about 2 s of rlimit) ended before the 0.3 s timer sent the signal: a machine too loaded "
                    "to run the timer's thread tests nothing here")
    assert r.stdout.strip() == ("interrupted" if who == "python" else "unknown canceled"), r.stdout + r.stderr


def test_a_ctrl_c_inside_a_finalizer_is_raised_again_at_the_next_check(monkeypatch):
    """Python cannot raise out of a finalizer (z3's ``__del__``): it reports the KeyboardInterrupt as unraisable and
    goes on. The hook drops that report and notes the Ctrl-C, which the next ``raise_if_interrupted`` (each model
    check, the command's end) raises, so it is not lost."""
    import types

    from fencecheck import errors

    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    monkeypatch.setattr(errors, "INTERRUPTED", [])
    seen = []
    monkeypatch.setattr(sys, "__unraisablehook__", lambda u: seen.append(u.exc_type))
    errors.quiet_interrupted_finalizers()
    errors.raise_if_interrupted()  # nothing came yet
    sys.unraisablehook(types.SimpleNamespace(exc_type=KeyboardInterrupt, exc_value=KeyboardInterrupt(),
                                             exc_traceback=None, err_msg=None, object=None))
    assert seen == []  # the report is dropped
    with pytest.raises(KeyboardInterrupt):
        errors.raise_if_interrupted()
    errors.INTERRUPTED.clear()
    sys.unraisablehook(types.SimpleNamespace(exc_type=ValueError, exc_value=ValueError(), exc_traceback=None,
                                             err_msg=None, object=None))
    assert seen == [ValueError]  # any other unraisable error is reported as before


def test_after_a_ctrl_c_a_finalizer_of_an_object_it_cut_short_is_not_reported(monkeypatch):
    """An interrupt inside z3's ``Context.__init__`` leaves an object without ``owner``, whose ``__del__`` then fails:
    after a Ctrl-C that report is the interrupt's consequence and dropped; before one, it is reported."""
    import types

    from fencecheck import errors

    def __del__(self):  # noqa: N807 - stands for a finalizer
        pass

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    monkeypatch.setattr(sys, "__unraisablehook__", lambda u: seen.append(u.exc_type))
    monkeypatch.setattr(errors, "INTERRUPTED", [])
    errors.quiet_interrupted_finalizers()
    broken = types.SimpleNamespace(exc_type=AttributeError, exc_value=AttributeError("owner"), exc_traceback=None,
                                   err_msg=None, object=__del__)
    sys.unraisablehook(broken)
    assert seen == [AttributeError]
    errors.INTERRUPTED.append(True)
    sys.unraisablehook(broken)
    assert seen == [AttributeError]


def test_an_error_a_ctrl_c_caused_is_the_interrupt_and_a_bug_otherwise(monkeypatch):
    """ctypes wraps a KeyboardInterrupt raised while it converts an argument (z3's ``from_param``) in an
    ``ArgumentError``: after a Ctrl-C came that is the interrupt (one line, exit 130); without one, a bug (exit 70),
    and each run starts with no Ctrl-C noted."""
    import ctypes
    import io

    from fencecheck import errors
    from fencecheck.commands import main as entry
    from fencecheck.commands import schema

    def interrupted(args, out):
        errors.INTERRUPTED.append(True)  # as the SIGINT handler notes it
        raise ctypes.ArgumentError("argument 3: KeyboardInterrupt: ")

    monkeypatch.setattr(schema, "cmd_schema", interrupted)
    err = io.StringIO()
    assert entry.main(["schema"], io.StringIO(), err) == errors.EXIT_INTERRUPTED
    assert err.getvalue() == "fencecheck: interrupted\n"

    def broken(args, out):
        raise ctypes.ArgumentError("argument 3: TypeError: ")

    monkeypatch.setattr(schema, "cmd_schema", broken)
    err = io.StringIO()
    assert entry.main(["schema"], io.StringIO(), err) == errors.EXIT_BUG  # the Ctrl-C noted before is forgotten
    assert err.getvalue().startswith("fencecheck: internal error, a bug in fencecheck: ArgumentError")
