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


def test_the_hook_is_declared_for_pre_commit():
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "- id: fencecheck-sglang" in text and "language: python" in text
    assert "entry: fencecheck sglang . --baseline HEAD" in text and "pass_filenames: false" in text


def _try_repo(repo: Path, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    return subprocess.run([*_tool("pre_commit"), "try-repo", str(ROOT), "fencecheck-sglang", "--all-files"],
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
    lay(repo / "python", "base")  # the commit to make adds no finding (a comment only)
    f = repo / "python/sglang/srt/layers/attention/paged_backend.py"
    f.write_text("# reviewed\n" + f.read_text())
    git(repo, "add", "-A")
    r = _try_repo(repo, tmp_path / "pre-commit-home")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Passed" in r.stdout
