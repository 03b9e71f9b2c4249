"""gpu/check.sh stays current with the code it runs.

Every module it starts exists and accepts the flags the script passes, the GPU tests it selects exist, the report names every check, the requirements it installs are
pyproject.toml's and cover what the checks import, and gpu/fetch_wheels.sh downloads exactly those. Each of these
fails on a script edited to go stale. The whole script also runs on the CPU stand-in (slow), and so do the timings."""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import importlib
import importlib.metadata
import io
import json
import os
import re
import runpy
import shlex
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path
from unittest import mock

import pytest

import fake_torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "gpu" / "check.sh"
STAND_IN = ROOT / "tests" / "gpu_stand_in"
NAME = re.compile(r"[A-Za-z0-9._-]+")


class _Parsed(BaseException):
    """Raised once a command's argparse accepted its command line, so the command itself never runs."""


def checks(text: str) -> list[tuple[str, list[str]]]:
    """(name, command line) of each ``check NAME SECONDS COMMAND...`` line of the script; a ``bash -c 'A | B'``
    command is unwrapped to A."""
    out = []
    for line in text.splitlines():
        if not line.startswith("check "):
            continue
        words = shlex.split(line)
        argv = words[3:]
        if argv[:1] == ["bash"] and "-c" in argv:
            inner = shlex.split(argv[argv.index("-c") + 1])
            argv = inner[:inner.index("|")] if "|" in inner else inner
        out.append((words[1], argv))
    return out


def _parse_only(module: str, args: list[str]) -> str:
    """Run ``python3 -m module args`` in this process up to the point where its argparse accepts the command line:
    "" when it does, else what went wrong, in one line."""
    original = argparse.ArgumentParser.parse_args

    def parse_args(self, argv=None, namespace=None):
        original(self, argv, namespace)
        raise _Parsed

    said = io.StringIO()
    with (mock.patch.object(argparse.ArgumentParser, "parse_args", parse_args),
          mock.patch.object(sys, "argv", [module, *args]),
          contextlib.redirect_stdout(said), contextlib.redirect_stderr(said), warnings.catch_warnings()):
        warnings.simplefilter("ignore", RuntimeWarning)  # runpy: the module was imported before (by other tests)
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except _Parsed:
            return ""
        except SystemExit as e:
            last = (said.getvalue().strip().splitlines() or [""])[-1]
            return f"exit {e.code}: {last}"
        except ImportError as e:
            return f"{type(e).__name__}: {e}"
    return "it ran to the end without parsing a command line"


@functools.cache
def _collects(argv: tuple[str, ...]) -> str:
    """"" when the pytest command line of the script selects at least one test, else why not (asked once per
    command line per test process: the stale variants that leave the pytest line as it is share the answer)."""
    run = subprocess.run([sys.executable, *argv[1:], "--collect-only"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    tail = (run.stdout.strip().splitlines() or [""])[-1]
    if run.returncode == 5 or (run.returncode == 0 and not re.search(r"\b[1-9]\d* tests? collected", tail)):
        return f"selects no test: {tail}"
    return f"exit {run.returncode}: {tail}" if run.returncode else ""


def heredocs(text: str) -> list[str]:
    """The Python programs the script feeds to ``python3 -`` (``<<'EOF'`` ... ``EOF``)."""
    return re.findall(r"python3 -[^\n]*<<'EOF'\n(.*?)\nEOF\n", text, re.DOTALL)


def problems(text: str, work: Path) -> list[str]:
    """Everything in the script text that does not fit the code: one line each."""
    found = []
    commands = checks(text)
    if not commands:
        return ["no check lines (check NAME SECONDS COMMAND...)"]
    for name, argv in commands:
        argv = [a.replace("$WORK", str(work)) for a in argv]
        if argv[:2] != ["python3", "-m"] or len(argv) < 3:
            found.append(f"{name}: not a python3 -m command: {argv}")
            continue
        why = _collects(tuple(argv)) if argv[2] == "pytest" else _parse_only(argv[2], argv[3:])
        if why:
            found.append(f"{name}: {shlex.join(argv)}: {why}")
    reported = re.search(r"for name in \(([^)]*)\)", text)
    names = ast.literal_eval(f"({reported.group(1)})") if reported else ()
    if sorted(names) != sorted(n for n, _ in commands):
        found.append(f"the report lists the checks {sorted(names)}, the script runs {sorted(n for n, _ in commands)}")
    if f"len(checks) == {len(commands)}" not in text:
        found.append(f"the report's ok does not count {len(commands)} checks")
    for program in heredocs(text):
        try:
            tree = ast.parse(program)
        except SyntaxError as e:
            found.append(f"a python3 - program does not compile: {e}")
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fencecheck"):
                mod = importlib.import_module(node.module)
                found += [f"a python3 - program imports {a.name} from {node.module}, which has none"
                          for a in node.names if not hasattr(mod, a.name)]
    return found


def requirements_of_pyproject() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    tools = [r for r in project["optional-dependencies"]["test"] if NAME.match(r).group() in ("pytest", "hypothesis")]
    return project["dependencies"] + tools


def _dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# -- the script fits the code -------------------------------------------------------------------------------------


def test_every_check_of_the_script_fits_the_code(tmp_path):
    assert problems(SCRIPT.read_text(), tmp_path) == []


STALE = {
    "a module that does not exist": ("-m fencecheck.gpu.litmus ", "-m fencecheck.gpu.litmus_tests ",
                                     "No module named fencecheck.gpu.litmus_tests"),
    "a flag the module does not take": ("--trials 200", "--runs 200", "unrecognized arguments: --runs"),
    "a subcommand's flag renamed": ("traces --out", "traces --dir", "the following arguments are required: --out"),
    "a GPU test file that does not exist": ("tests/test_gpu.py", "tests/test_cuda.py", "exit 4"),
    "a marker no GPU test has": ("-m gpu", "-m cuda", "selects no test"),
    "a check the report leaves out": ('"replay", "bench")', '"replay")', "the report lists the checks"),
    "a probe importing a name that is gone": ("import missing_features", "import missing_capabilities",
                                              "imports missing_capabilities from fencecheck.gpu.device"),
}


@pytest.mark.parametrize("stale", STALE)
def test_a_stale_script_is_caught(tmp_path, stale):
    old, new, says = STALE[stale]
    text = SCRIPT.read_text()
    assert old in text, f"the script no longer holds {old!r}: update this test"
    found = problems(text.replace(old, new), tmp_path)
    assert any(says in p for p in found), found


# -- the requirements ------------------------------------------------------------------------------------------


def test_the_script_installs_pyprojects_requirements():
    run = subprocess.run(["bash", str(SCRIPT), "--requirements"], capture_output=True, text=True, check=True)
    assert run.stdout.split() == requirements_of_pyproject()


def test_the_requirements_cover_every_third_party_import_of_the_checks():
    """What the package and the GPU tests import, outside the standard library, is a requirement (torch aside)."""
    files = [p for top in ("fencecheck", "model", "reference", "gpu", "proofs") for p in (ROOT / top).rglob("*.py")]
    files += [ROOT / "tests" / "test_gpu.py", ROOT / "tests" / "conftest.py"]
    modules = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules.add(node.module.split(".")[0])
    helpers = {p.stem for p in (ROOT / "tests").glob("*.py")}
    third_party = modules - set(sys.stdlib_module_names) - helpers - {"fencecheck"}
    dists = importlib.metadata.packages_distributions()
    unknown = sorted(m for m in third_party if m not in dists)
    assert not unknown, f"imported but not installed here: {unknown}"
    needed = {_dist(d) for m in third_party for d in dists[m]} - {"torch"}
    wanted = {_dist(NAME.match(r).group()) for r in requirements_of_pyproject()}
    assert needed <= wanted, f"imported, not in the requirements: {sorted(needed - wanted)}"


def test_the_script_installs_what_is_missing_or_of_a_version_excluded():
    program = next(p for p in heredocs(SCRIPT.read_text()) if "importlib.metadata" in p)
    have = importlib.metadata.version("z3-solver")
    reqs = f"z3-solver=={have} networkx>=3.0 z3-solver==0.0.1 no-such-distribution-here>=1 networkx>=999"

    def missing(prelude: str) -> list[str]:
        run = subprocess.run([sys.executable, "-c", f"import sys\n{prelude}\nexec(sys.stdin.read())", reqs],
                             input=program, capture_output=True, text=True, check=True)
        return run.stdout.split()

    pytest.importorskip("packaging")
    assert missing("") == ["z3-solver==0.0.1", "no-such-distribution-here>=1", "networkx>=999"]
    # Without the packaging module only exact pins are compared.
    assert missing("sys.modules['packaging'] = None") == ["z3-solver==0.0.1", "no-such-distribution-here>=1"]


def test_fetch_wheels_downloads_the_requirements_for_cpython_312_on_linux(tmp_path):
    """pip is replaced by a recorder; the script's requirements come from the real check.sh."""
    bin_dir, record = tmp_path / "bin", tmp_path / "pip-args"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(
        "#!/usr/bin/env bash\n"
        f'if [ "$1 $2" = "-m pip" ]; then printf "%s\\n" "$@" > {shlex.quote(str(record))}; exit 0; fi\n'
        f'exec {shlex.quote(sys.executable)} "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", str(ROOT / "gpu" / "fetch_wheels.sh"), str(wheels), "3.12"], env=env, check=True,
                   capture_output=True, text=True)
    args = record.read_text().split("\n")[:-1]
    assert args[:3] == ["-m", "pip", "download"]
    assert args[-len(requirements_of_pyproject()):] == requirements_of_pyproject()
    assert {"--only-binary=:all:", "--implementation", "cp", "-d", str(wheels)} <= set(args)
    assert args[args.index("--python-version") + 1] == "3.12"
    platforms = {args[i + 1] for i, a in enumerate(args) if a == "--platform"}
    assert "manylinux2014_x86_64" in platforms and all(p.endswith("x86_64") for p in platforms)


# -- the timings on the stand-in ---------------------------------------------------------------------------------


def test_the_timings_run_every_race_free_scenario_or_say_why_not(tmp_path, monkeypatch):
    from fencecheck.files.catalog import PR_ERA, VERSIONS, load_catalog
    from fencecheck.gpu import bench
    from fencecheck.verdict import Verdict
    from fencecheck.vocab import EventLoop

    monkeypatch.setattr(bench, "REPEATS", 1)
    out = tmp_path / "bench.json"
    with contextlib.redirect_stdout(io.StringIO()):
        assert bench.main(["--json", str(out)], torch=fake_torch.new()) == 0
    report = json.loads(out.read_text())
    safe = {(s.name if v == PR_ERA else f"{v}/{s.name}"): s for v in VERSIONS for s in load_catalog(v)
            if s.expect is None or s.expect.verdict is Verdict.PROVED}
    timed = {r["scenario"] for r in report["scenarios"]}
    untimed = {r["scenario"]: r["why"] for r in report["untimed"]}
    assert timed | set(untimed) == set(safe) and not timed & set(untimed)
    # Only the loops that never apply the barrier have no wait to time.
    assert set(untimed) == {n for n, s in safe.items() if s.scheduler.loop in (EventLoop.NORMAL, EventLoop.PP)}
    assert all("never applies the barrier" in why for why in untimed.values())
    assert all(r["fine_us"] == 0.0 for r in report["scenarios"])  # the stand-in's events time nothing
    assert set(report["op_costs_us"]) == {"empty kernel launch", "event record", "stream wait on an event",
                                          "wait_stream"}


# -- the whole script on the stand-in ----------------------------------------------------------------------------


@pytest.mark.slow
def test_the_whole_check_runs_on_the_stand_in(tmp_path):
    """gpu/check.sh end to end with tests/gpu_stand_in as torch: every check runs and passes, and the report holds
    each one's result (the figures are the stand-in's, not a GPU's)."""
    out = tmp_path / "report"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(STAND_IN), str(ROOT / "tests"),
                                                        *filter(None, [os.environ.get("PYTHONPATH")])])}
    run = subprocess.run(["bash", str(SCRIPT), str(out)], capture_output=True, text=True, env=env, timeout=900)
    log = (out / "check.log").read_text() if (out / "check.log").exists() else ""
    assert run.returncode == 0, run.stdout + log[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["check.log", "report.json"]
    report = json.loads((out / "report.json").read_text())
    assert report["ok"] and report["setup"] == "ok" and report["machine"]["device"] == "CPU stand-in"
    c = report["checks"]
    assert sorted(c) == ["bench", "litmus", "pytest", "replay", "traces"]
    assert all(x["exit"] == 0 and not x["timed_out"] for x in c.values())
    assert c["litmus"]["result"]["ok"] and {t["rule"] for t in c["litmus"]["result"]["tests"]} == {
        f"R{i}" for i in range(1, 9)}
    # The sanitizer tests skip: the stand-in runs no kernels for PyTorch's sanitizer to watch.
    assert re.fullmatch(r"\d+ passed, 2 skipped in .*", c["pytest"]["result"]), c["pytest"]["result"]
    replay = c["replay"]["result"]
    assert replay["complete"] and replay["conformant"] == replay["traces"] > 0 and replay["errors"] == 0
    assert replay["races_manifesting_99"] == replay["race_traces"] > 0 and replay["safe_with_stale"] == 0
    assert c["bench"]["result"]["scenarios"] and c["bench"]["result"]["untimed"]
