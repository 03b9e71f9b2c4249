"""fencecheck in the engineer's workflow: the pre-commit hook run for real by `pre-commit try-repo`, and the GitHub workflow of docs/ci.md against the workflow schema.

The hook runs on a synthetic SGLang repository (``pr_pair.py``): a commit that adds a finding fails, one that adds none
passes though the tree has a finding already."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pr_pair import git, lay, repository
from sglang_release import in_ci

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "docs" / "ci" / "fencecheck.yml"


def _tool(module: str) -> list[str]:
    r = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        why = f"{module} is not installed (the test extra brings it)"
        if in_ci():
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    return [sys.executable, "-m", module]


def _schema_check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*_tool("check_jsonschema"), "--builtin-schema", "vendor.github-workflows", str(path)],
                          capture_output=True, text=True, check=False)


def test_the_workflow_is_a_valid_github_workflow_and_a_broken_one_is_not(tmp_path):
    r = _schema_check(WORKFLOW)
    assert r.returncode == 0, r.stdout + r.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("runs-on:", "runs_on:", 1))
    assert _schema_check(broken).returncode != 0


def test_the_workflow_gates_on_the_merge_base_and_uploads_sarif():
    text = WORKFLOW.read_text()
    assert "fetch-depth: 0" in text and "git merge-base" in text
    assert 'fencecheck sglang . --baseline "${{ steps.base.outputs.sha }}" --format sarif > fencecheck.sarif' in text
    assert "uses: github/codeql-action/upload-sarif@" in text and "sarif_file: fencecheck.sarif" in text
    assert 'exit "${{ steps.fence.outputs.status }}"' in text


def test_docs_ci_holds_the_workflow_file_as_it_is():
    page = (ROOT / "docs" / "ci.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", page, re.DOTALL)
    assert WORKFLOW.read_text() in blocks


def _hook() -> dict:
    import yaml  # pre-commit's own dependency (the test extra brings it)

    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = [h for h in hooks if h["id"] == "fencecheck-sglang"]
    return hook


def test_the_hook_is_declared_for_pre_commit():
    hook = _hook()
    assert hook["language"] == "python" and hook["pass_filenames"] is False
    assert hook["entry"] == "fencecheck sglang . --baseline HEAD --paths repository"


@pytest.mark.parametrize("name, runs", [
    ("python/sglang/srt/layers/attention/paged_backend.py", True),
    ("python/sglang/__init__.py", True),
    ("sglang/srt/managers/scheduler.py", True),  # a checkout whose root holds the package (`fencecheck sglang .`)
    ("test/srt/test_fence.py", False),
    ("benchmark/gsm8k/bench_sglang.py", False),
    ("docs/conf.py", False),
    ("sgl-kernel/python/sgl_kernel/__init__.py", False),
    ("python/sglang_router/router.py", False),
    ("python/sglang/srt/README.md", False),
    ("scripts/ci/python/sglang/x.py", False),
])
def test_the_hook_runs_only_when_a_python_file_of_the_package_changes(name, runs):
    # pre-commit runs a hook when its `files` pattern is found (re.search) in a changed file's repository path
    assert bool(re.search(_hook()["files"], name)) == runs


@pytest.mark.parametrize("inside, prefix", [("python", "python/"), ("", "")])
def test_the_hook_names_files_relative_to_the_repository_root(tmp_path, monkeypatch, inside, prefix):
    import io
    import shlex

    from fencecheck.commands.main import main

    repo = repository(tmp_path / "sglang-repo", sides=("base",), inside=inside)
    lay(repo / inside if inside else repo, "head")  # the change: PagedBackend reads after the marker
    f = repo / inside / "sglang/srt/layers/attention/base_attn_backend.py"
    f.write_text(f.read_text() + "X = 1  # fencecheck: ignore[read_outside_declaration] nothing reads here\n")
    monkeypatch.chdir(repo)
    out, err = io.StringIO(), io.StringIO()
    assert main(shlex.split(_hook()["entry"])[1:], out, err) == 1, err.getvalue()
    paged = f"{prefix}sglang/srt/layers/attention/paged_backend.py:16"
    assert f"ADDED CONFIRMED read_outside_declaration: PagedBackend DECODE: PagedBackend.forward_decode reads " \
           f"req_to_token at in_graph_after_marker ({paged}), outside IN_REPLAY (shared_read_ends, " \
           f"{prefix}sglang/srt/layers/attention/base_attn_backend.py:29)" in out.getvalue()
    assert f"warning: {prefix}sglang/srt/layers/attention/base_attn_backend.py:" in err.getvalue()
    for stream in (out.getvalue(), err.getvalue()):
        named = re.findall(r"(?<![\w./-])[\w./-]*sglang/srt/[\w./-]*\.py", stream)
        assert named and all(n.startswith(f"{prefix}sglang/") for n in named), named
        assert all((repo / n).is_file() for n in named)  # each as git and an editor at the root name it


def test_the_default_paths_are_the_packages(tmp_path, monkeypatch):
    import io

    from fencecheck.commands.main import main

    repo = repository(tmp_path / "sglang-repo", sides=("base",))
    lay(repo / "python", "head")
    monkeypatch.chdir(repo)
    out, err = io.StringIO(), io.StringIO()
    assert main(["sglang", ".", "--baseline", "HEAD"], out, err) == 1, err.getvalue()
    assert "(sglang/srt/layers/attention/paged_backend.py:16)" in out.getvalue()


def _try_repo(repo: Path, home: Path, *files: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    which = ["--files", *files] if files else ["--all-files"]
    return subprocess.run([*_tool("pre_commit"), "try-repo", str(ROOT), "fencecheck-sglang", *which],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=900, check=False)


@pytest.mark.slow
def test_pre_commit_try_repo_fails_on_a_seeded_finding_and_passes_without(tmp_path):
    repo = repository(tmp_path / "sglang-repo", sides=("base",))  # LateReadBackend's finding is committed
    lay(repo / "python", "head")  # the commit to make: PagedBackend reads after the marker
    git(repo, "add", "-A")
    r = _try_repo(repo, tmp_path / "pre-commit-home")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "fencecheck-sglang" in r.stdout and "Failed" in r.stdout
    assert "findings: 1 added, 0 fixed, 1 unchanged" in r.stdout
    assert "ADDED CONFIRMED read_outside_declaration: PagedBackend DECODE" in r.stdout
    assert "(python/sglang/srt/layers/attention/paged_backend.py:16)" in r.stdout
    (repo / "test").mkdir()
    (repo / "test" / "test_fence.py").write_text("def test_nothing():\n    pass\n")  # outside the package
    git(repo, "add", "-A")
    r = _try_repo(repo, tmp_path / "pre-commit-home", "test/test_fence.py")
    assert r.returncode == 0 and "Skipped" in r.stdout, r.stdout + r.stderr
    lay(repo / "python", "base")  # the commit to make adds no finding (a comment only)
    f = repo / "python/sglang/srt/layers/attention/paged_backend.py"
    f.write_text("# reviewed\n" + f.read_text())
    git(repo, "add", "-A")
    r = _try_repo(repo, tmp_path / "pre-commit-home")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Passed" in r.stdout


def _job_after_the_merge_base(tmp_path: Path, codes: tuple[int, int]) -> tuple[int, bool, dict]:
    """The workflow's steps from its fencecheck run on, run as GitHub Actions would (each step after a failed one is
    skipped unless its ``if`` asks for ``always()``; a ``run`` under ``bash -e``) with a ``fencecheck`` that exits
    ``codes[0]`` for the report and ``codes[1]`` for ``--format sarif``: the job's exit code, whether the SARIF was
    uploaded, the step's outputs."""
    import yaml

    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["shared-read-fence"]["steps"]
    first = next(i for i, s in enumerate(steps) if s.get("id") == "fence")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    stub = bin_ / "fencecheck"
    stub.write_text(f"""#!/usr/bin/env bash
case " $* " in
  *" --format sarif "*) [ {codes[1]} -le 1 ] || [ {codes[1]} -eq 3 ] && echo '{{"version": "2.1.0"}}'; exit {codes[1]} ;;
  *) echo "findings: ..."; exit {codes[0]} ;;
esac
""")
    stub.chmod(0o755)
    work = tmp_path / "checkout"
    work.mkdir()
    outputs = tmp_path / "github_output"
    env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}", "GITHUB_OUTPUT": str(outputs)}
    failed, uploaded, got = 0, False, {}
    for step in steps[first:]:
        cond = step.get("if", "success()")
        if failed and "always()" not in cond:
            continue
        if "hashFiles('fencecheck.sarif') != ''" in cond and not (work / "fencecheck.sarif").exists():
            continue
        if "uses" in step:
            assert step["uses"].startswith("github/codeql-action/upload-sarif@")
            assert (work / "fencecheck.sarif").read_text().strip(), "an empty SARIF uploaded"
            uploaded = True
            continue
        script = step["run"].replace("${{ steps.base.outputs.sha }}", "0123abc")
        script = script.replace("${{ steps.fence.outputs.status }}", got.get("status", ""))
        outputs.write_text("")
        r = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-c", script], cwd=work, env=env,
                           capture_output=True, text=True, check=False)
        got.update(line.split("=", 1) for line in outputs.read_text().splitlines() if "=" in line)
        if r.returncode != 0 and not step.get("continue-on-error"):
            failed = failed or r.returncode
    return failed, uploaded, got


@pytest.mark.parametrize("code", [0, 1, 3])
def test_the_workflow_uploads_what_the_pull_request_adds_and_exits_with_its_code(tmp_path, code):
    # docs/guide.md's exit codes with --baseline: 0 adds nothing, 1 adds a finding (or weakens the fence), 3 adds
    # only questions; each is reported as SARIF and the job ends with it
    job, uploaded, outputs = _job_after_the_merge_base(tmp_path, (code, code))
    assert (job, uploaded, outputs.get("status")) == (code, True, str(code))


@pytest.mark.parametrize("code", [2, 4, 5, 6, 70, 130])
def test_the_workflow_stops_without_uploading_on_any_other_exit_code(tmp_path, code):
    # bad input, an I/O failure, no declaration fence, a bug, an interrupt: no report to upload, the job fails with it
    job, uploaded, _ = _job_after_the_merge_base(tmp_path, (code, code))
    assert (job, uploaded) == (code, False)


@pytest.mark.parametrize("codes, job", [((1, 4), 4), ((1, 2), 2), ((1, 0), 70), ((0, 1), 70)])
def test_the_workflow_uploads_no_sarif_whose_run_differs_from_the_report(tmp_path, codes, job):
    assert _job_after_the_merge_base(tmp_path, codes)[:2] == (job, False)
