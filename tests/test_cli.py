"""The command line: exit codes, reports, and one-line errors with no traceback."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fencecheck.files.catalog import PR_ERA, catalog_paths
from fencecheck.commands.main import main

PATHS = {p.stem: str(p) for p in catalog_paths(PR_ERA)}
PACKAGE_ROOT = Path(__import__("fencecheck").__file__).resolve().parent.parent


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
        {"location": "req_to_token", "phase": "decode", "site": "in_graph_before_marker", "step": 0, "read_by": []}]


def test_catalog_command_agrees_with_every_expectation():
    code, out, _ = run("catalog", PR_ERA)
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
    proc = subprocess.run([sys.executable, "-m", "fencecheck", "check", str(bad)], capture_output=True, text=True,
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


# -- exit codes, --help, --version ---------------------------------------------------------------------------------

COMMANDS = ["check", "catalog", "trace", "prove", "verify", "traces", "replay", "regress", "audit", "schema"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_lists_the_exit_codes(command):
    code, out, err = run(command, "--help")
    assert (code, err) == (0, "")
    assert out.startswith(f"usage: fencecheck {command}")
    for line in ("  0  safe / proved", "  1  race / counterexample", "  2  bad input", "  3  unknown",
                 "  4  I/O failure", "  70 a bug in fencecheck", "  130 interrupted"):
        assert line in out, line


def test_version():
    from fencecheck import __version__

    assert run("--version") == (0, f"fencecheck {__version__}\n", "")


def test_an_unexpected_exception_is_one_line_naming_a_bug(monkeypatch):
    import fencecheck.commands.main as cli

    def broken(args, out):
        raise ZeroDivisionError("x\n" * 10_000)

    monkeypatch.setattr("fencecheck.commands.schema.cmd_schema", broken)
    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
    code, out, err = run("schema")
    assert code == 70 and code not in (0, 1, 2, 3, 4)
    assert err.count("\n") == 1 and len(err) < 600
    assert err.startswith("fencecheck: internal error, a bug in fencecheck: ZeroDivisionError: x\\nx\\n")
    assert err.endswith(f"(set {cli.TRACEBACK_ENV}=1 for the traceback)\n")


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch):
    import fencecheck.commands.main as cli

    def interrupted(args, out):
        raise KeyboardInterrupt

    monkeypatch.setattr("fencecheck.commands.schema.cmd_schema", interrupted)
    assert run("schema") == (130, "", "fencecheck: interrupted\n")


def test_a_closed_stdout_ends_quietly():
    """``fencecheck schema | head -0``: the reader is gone before the first write."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "fencecheck", "schema"], stdout=write_end, stderr=subprocess.PIPE,
                              text=True)
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (141, "")


def test_the_real_entry_point_reports_a_bug_in_one_line(tmp_path):
    """A scenario whose defect is not caught by validation yet would crash deeper; whatever crashes, the process
    prints one line and exits 70, never a traceback. (A non-UTF-8 locale cannot break the line either.)"""
    code = ("import sys, fencecheck.commands.main as c, fencecheck.commands.schema as s\n"
            "s.cmd_schema = lambda a, o: {}['missing']\n"
            "sys.exit(c.main(['schema']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**__import__("os").environ, "PYTHONPATH": str(PACKAGE_ROOT)})
    assert proc.returncode == 70 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr and "KeyError: 'missing'" in proc.stderr


# -- outputs --------------------------------------------------------------------------------------------------------


def _no_temp_files(folder):
    return [p.name for p in folder.iterdir() if p.name.startswith(".")] == []


def test_disk_full_on_a_device_names_the_users_path():
    code, out, err = run("trace", PATHS["plain-decode"], "-o", "/dev/full")
    assert (code, out, err) == (4, "", "fencecheck: error: /dev/full: cannot be written (No space left on device)\n")


def test_disk_full_on_a_regular_file_names_it_and_leaves_the_old_one(tmp_path, monkeypatch):
    import errno
    import os

    from fencecheck.files import outputs

    target = tmp_path / "t.json"
    target.write_text("old\n")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(outputs.os, "fsync", full)
    code, out, err = run("trace", PATHS["plain-decode"], "-o", str(target))
    assert (code, err) == (4, f"fencecheck: error: {target}: cannot be written (No space left on device)\n")
    assert target.read_text() == "old\n" and _no_temp_files(tmp_path)


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    from fencecheck.files import outputs

    target = tmp_path / "t.json"
    target.write_text("old\n")

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(outputs.os, "fsync", interrupted)
    assert run("trace", PATHS["plain-decode"], "-o", str(target)) == (130, "", "fencecheck: interrupted\n")
    assert target.read_text() == "old\n" and _no_temp_files(tmp_path)


def test_a_regular_output_is_replaced_keeping_its_mode(tmp_path):
    target = tmp_path / "t.json"
    target.write_text("old\n")
    target.chmod(0o600)
    assert run("trace", PATHS["plain-decode"], "-o", str(target))[0] == 0
    assert target.read_text().startswith("{") and (target.stat().st_mode & 0o777) == 0o600
    assert _no_temp_files(tmp_path)


def test_a_symlink_output_is_followed(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old\n")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert run("trace", PATHS["plain-decode"], "-o", str(link))[0] == 0
    assert link.is_symlink() and real.read_text().startswith("{") and _no_temp_files(tmp_path)


def test_a_named_pipe_output_is_written_through(tmp_path):
    import os
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    code = run("trace", PATHS["plain-decode"], "-o", str(fifo))[0]
    reader.join()
    assert code == 0 and got[0].startswith("{") and got[0].endswith("}\n")


def test_a_folder_given_as_an_output_file_is_refused(tmp_path):
    code, out, err = run("trace", PATHS["plain-decode"], "-o", str(tmp_path))
    assert (code, err) == (4, f"fencecheck: error: {tmp_path}: is a folder, expected a file\n")


WRITERS = {  # command line with OUT for the output, and the command function that must not start
    "trace": (["trace", "SCENARIO", "-o", "OUT"], "fencecheck.commands.trace.cmd_trace"),
    "traces": (["traces", "--out", "OUT"], "fencecheck.commands.traces.cmd_traces"),
    "prove": (["prove", "--docs", "OUT"], "fencecheck.commands.prove.cmd_prove"),
    "audit --docs": (["audit", "--docs", "OUT", "--corpus", "CORPUS"], "fencecheck.commands.audit.cmd_audit"),
    "audit --corpus": (["audit", "--docs", "DOCS", "--corpus", "OUT"], "fencecheck.commands.audit.cmd_audit"),
    "regress": (["regress", "CORPUS", "--out", "OUT"], "fencecheck.commands.regress.cmd_regress"),
    "verify": (["verify", "BACKEND", "-o", "OUT"], "fencecheck.commands.verify.cmd_verify"),
}


def _argv(template, tmp_path, out):
    subs = {"OUT": str(out), "SCENARIO": PATHS["plain-decode"], "CORPUS": str(tmp_path / "corpus"),
            "DOCS": str(tmp_path / "docs"), "BACKEND": "examples/honest-backend.toml"}
    return [subs.get(a, a) for a in template]


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_an_output_under_a_file_fails_before_the_work(name, tmp_path, monkeypatch):
    import fencecheck.commands.main as cli

    template, func = WRITERS[name]
    monkeypatch.setattr(func, lambda args, out: pytest.fail("the work started"))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    target = blocker / "sub" / "out"
    code, out, err = run(*_argv(template, tmp_path, target))
    assert (code, out, err) == (4, "", f"fencecheck: error: {target}: cannot be created ({blocker} is not a folder)\n")


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_an_unwritable_output_folder_fails_before_the_work(name, tmp_path, monkeypatch):
    """Permissions are simulated (the tests may run as root, who may write anywhere)."""
    import os

    import fencecheck.commands.main as cli

    template, func = WRITERS[name]
    monkeypatch.setattr(func, lambda args, out: pytest.fail("the work started"))
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if os.path.abspath(p) == str(locked) else real_access(p, mode))
    target = locked / "out"
    code, out, err = run(*_argv(template, tmp_path, target))
    assert code == 4 and out == ""
    assert err == f"fencecheck: error: {target}: cannot be created ({locked} is not writable)\n"


def test_errors_quote_one_line_of_bounded_length():
    from fencecheck.errors import InputError, one_line

    err = InputError("a\nb.toml", "runners.x\u2028y", "expected a name, got " + repr("z" * 5_000_000) + "\r\n\x1b[2J")
    text = str(err)
    assert "\n" not in text and "\r" not in text and "\x1b" not in text and "\u2028" not in text and len(text) < 1000
    assert text.startswith("a\\nb.toml: runners.x\\u2028y: expected a name, got 'zzz")
    assert text.endswith("zz'\\r\\n\\x1b[2J")
    assert err.source == "a\nb.toml"  # the attributes keep what was given
    assert one_line("plain text") == "plain text"


# -- the catalog by version ------------------------------------------------------------------------------------------


def test_check_catalog_defaults_to_the_release_and_takes_a_version():
    from fencecheck.files.catalog import RELEASE, load_catalog

    code, out, _ = run("check", "--catalog", "--json")
    names = [d["scenario"] for d in json.loads(out)]
    assert names == [s.name for s in load_catalog(RELEASE)] and code == 1  # the release has races
    code, out, _ = run("check", "--catalog", PR_ERA, "--json")
    assert [d["scenario"] for d in json.loads(out)] == sorted(PATHS, key=lambda n: Path(PATHS[n]).name)


def test_a_file_right_after_a_bare_catalog_flag_is_a_target():
    code, out, _ = run("check", "--catalog", PATHS["plain-decode"], "--json")
    assert json.loads(out)[0]["scenario"] == "plain-decode"


@pytest.mark.parametrize("argv", [["check", "--catalog", "sglang-9"], ["catalog", "sglang-9"]])
def test_an_unknown_catalog_version_is_one_line_exit_2(argv):
    code, out, err = run(*argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "sglang-9" in err
