"""Pull-request mode (`fencecheck sglang HEAD --baseline BASE`) on a synthetic pair of trees, as folders and as git commits.

The pair is ``pr_pair.py``'s: the change adds one finding (``PagedBackend`` reads after the marker) and moves another
(``LateReadBackend``'s, which keeps its identity)."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import jsonschema
import pytest
from pr_pair import ADDED, git, lay, repository

from fencecheck.commands.main import main
from fencecheck.decision.identity import root_causes

PR_SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "sglang-pr.schema.json").read_text("utf-8"))


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def pr_json(*argv: str) -> tuple[int, dict]:
    code, out, err = run(*argv, "--format", "json")
    assert code in (0, 1, 3), err
    doc = json.loads(out)
    jsonschema.validate(doc, PR_SCHEMA)
    return code, doc


def _key(rc: dict) -> tuple:
    return (rc["kind"], rc["subject"], rc["mode"], rc["site"], rc["location"], rc["function"])


def test_the_change_adds_one_finding_and_keeps_the_moved_one(tmp_path):
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")
    code, doc = pr_json(str(head), "--baseline", str(base))
    assert code == 1
    assert [_key(rc) for rc in doc["findings"]["added"]] == [ADDED]
    added = doc["findings"]["added"][0]
    assert (added["read"]["file"], added["read"]["line"]) == ("sglang/srt/layers/attention/paged_backend.py", 16)
    assert added["finding"]["verdict"] == "counterexample"
    assert added["finding"]["races"] == ["req_to_token@decode/in_graph_after_marker"]
    (same,) = doc["findings"]["unchanged"]
    assert same["subject"] == "LateReadBackend" and same["read"]["line"] == 16 + 3  # moved, same identity
    assert doc["findings"]["fixed"] == [] and doc["counts"] == {"added": 1, "fixed": 0, "unchanged": 1,
                                                                 "suppressed": 0}
    assert all(v == [] for v in doc["facts"]["changed"].values())  # reads changed, no declaration did
    assert doc["facts"]["unchanged"]["declarations"] == 4


def test_the_reverse_change_fixes_it_and_exits_0(tmp_path):
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")
    code, doc = pr_json(str(base), "--baseline", str(head))
    assert code == 0
    assert [_key(rc) for rc in doc["findings"]["fixed"]] == [ADDED]
    assert doc["findings"]["added"] == [] and doc["counts"]["unchanged"] == 1


def test_a_tree_against_itself_changes_nothing(tmp_path):
    head = lay(tmp_path / "head", "head")
    code, out, _ = run(str(head), "--baseline", str(head))
    assert code == 0
    assert "findings: 0 added, 0 fixed, 2 unchanged, 0 suppressed" in out
    assert "protocol facts: 0 changed" in out


def test_a_declaration_change_is_a_changed_fact(tmp_path):
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")
    f = head / "sglang/srt/layers/attention/paged_backend.py"
    f.write_text(f.read_text().replace("import AttentionBackend", "import AttentionBackend, SharedReadEnds")
                 + "\n    def shared_read_ends(self, fm):\n        return SharedReadEnds.POST_REPLAY\n")
    code, doc = pr_json(str(head), "--baseline", str(base))
    assert code == 0, doc["findings"]["added"]  # POST_REPLAY covers the forward's read: nothing added
    (change,) = doc["facts"]["changed"]["declarations"]
    assert change["key"] == "PagedBackend" and change["change"] == "changed"
    assert change["before"]["DECODE"] == "IN_REPLAY" and change["after"]["DECODE"] == "POST_REPLAY"
    _, out, _ = run(str(head), "--baseline", str(base))
    assert "declarations: PagedBackend: DECODE: IN_REPLAY -> POST_REPLAY" in out


def test_an_added_unresolved_declaration_alone_exits_3(tmp_path):
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "base2", "base")
    f = head / "sglang/srt/layers/attention/paged_backend.py"
    f.write_text(f.read_text() + "\n    def shared_read_ends(self, fm):\n        for _ in ():\n            pass\n"
                 "        return None\n")
    code, doc = pr_json(str(head), "--baseline", str(base))
    assert code == 3
    assert {rc["kind"] for rc in doc["findings"]["added"]} == {"unresolved_declaration"}


def test_identities_ignore_lines_and_name_the_reading_function(tmp_path):
    from fencecheck.sglang_source import read_path

    doc = read_path(lay(tmp_path / "head", "head")).to_json()
    ids = [rc.id for rc in root_causes(doc)]
    shifted = json.loads(json.dumps(doc).replace('"line": 16', '"line": 99').replace(".py:16", ".py:99"))
    assert [rc.id for rc in root_causes(shifted)] == ids
    renamed = json.loads(json.dumps(doc).replace("PagedBackend.forward_decode", "PagedBackend.gather"))
    assert [rc.id for rc in root_causes(renamed)] != ids


def _git(repo: Path, *args: str) -> str:
    return git(repo, *args)


def _repo(tmp_path: Path) -> Path:
    """A git repository whose first commit is the base and second the head (the package at python/sglang)."""
    return repository(tmp_path / "repo")


def _snapshot(repo: Path) -> dict:
    return {p.relative_to(repo).as_posix(): p.read_bytes() for p in repo.rglob("*")
            if p.is_file() and ".git" not in p.relative_to(repo).parts}


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_git_revision_is_read_from_the_objects_and_the_working_tree_is_untouched(tmp_path):
    repo = _repo(tmp_path)
    before, status = _snapshot(repo), _git(repo, "status", "--porcelain")
    code, doc = pr_json(str(repo), "--baseline", "HEAD~1")
    assert code == 1 and [_key(rc) for rc in doc["findings"]["added"]] == [ADDED]
    assert doc["baseline"]["revision"] == _git(repo, "rev-parse", "HEAD~1").strip()
    assert doc["baseline"]["root"] is None
    assert _snapshot(repo) == before and _git(repo, "status", "--porcelain") == status
    code, doc = pr_json(str(repo / "python"), "--baseline", "HEAD")  # the working tree is the committed head
    assert code == 0 and doc["counts"]["added"] == 0 and doc["counts"]["unchanged"] == 2


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_an_uncommitted_change_is_compared_with_its_commit(tmp_path):
    repo = _repo(tmp_path)
    lay(repo / "python", "base")  # the working tree undoes the head commit's change
    code, doc = pr_json(str(repo), "--baseline", "HEAD")
    assert code == 0 and [_key(rc) for rc in doc["findings"]["fixed"]] == [ADDED]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("base, says", [
    ("no-such-rev", "--baseline: expected a folder or a git revision of"),
    ("HEAD~5", "--baseline: expected a folder or a git revision of"),
])
def test_a_bad_revision_is_one_line_and_exit_2(tmp_path, base, says):
    repo = _repo(tmp_path)
    code, out, err = run(str(repo), "--baseline", base)
    assert code == 2 and out == "" and err.count("\n") == 1 and says in err, err


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_revision_without_the_package_is_one_line_and_exit_2(tmp_path):
    repo = _repo(tmp_path)
    (repo / "README").write_text("x")
    _git(repo, "add", "README")
    _git(repo, "commit", "-q", "-m", "readme")
    _git(repo, "rm", "-r", "-q", "python")
    _git(repo, "commit", "-q", "-m", "no package")
    shutil.rmtree(repo / "python", ignore_errors=True)
    lay(repo / "python", "head")
    code, _, err = run(str(repo), "--baseline", "HEAD")
    assert code == 2 and err.count("\n") == 1 and "the revision has no python/sglang" in err, err


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_unpacked_revision_is_removed_also_when_its_read_fails(tmp_path):
    import tempfile

    def left():  # this process's only: tests running beside it in other processes make and remove their own
        return {p for d in ("/dev/shm", tempfile.gettempdir()) if Path(d).is_dir()
                for p in Path(d).glob(f"fencecheck-baseline-{os.getpid()}-*")}

    before = left()
    repo = _repo(tmp_path)
    assert pr_json(str(repo), "--baseline", "HEAD~1")[0] == 1
    (repo / "python/sglang/srt/layers/attention/base_attn_backend.py").write_text("class AttentionBackend(:\n")
    _git(repo, "commit", "-q", "-am", "unparsable")
    lay(repo / "python", "head")
    code, _, err = run(str(repo), "--baseline", "HEAD")
    assert code == 2 and "the baseline: " in err
    assert left() == before


def test_a_baseline_folder_that_is_not_sglang_is_one_line_and_exit_2(tmp_path):
    head = lay(tmp_path / "head", "head")
    (tmp_path / "empty").mkdir()
    code, out, err = run(str(head), "--baseline", str(tmp_path / "empty"))
    assert code == 2 and out == "" and err.count("\n") == 1 and "the baseline: " in err and "not an SGLang" in err


def test_baseline_with_against_is_bad_input(tmp_path):
    head = lay(tmp_path / "head", "head")
    code, _, err = run(str(head), "--baseline", str(head), "--against", "sglang-0.5.23")
    assert code == 2 and "--baseline" in err and err.count("\n") == 1


def test_scenarios_of_the_added_findings_are_written(tmp_path):
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")
    code, _, _ = run(str(head), "--baseline", str(base), "--scenarios", str(tmp_path / "sc"))
    assert code == 1
    assert sorted(p.name for p in (tmp_path / "sc").iterdir()) == ["sglang-paged-backend-decode.toml"]


def test_the_example_pair_is_the_test_pair(tmp_path):
    examples = Path(__file__).resolve().parents[1] / "examples" / "sglang-pr"
    for side in ("base", "head"):
        laid = lay(tmp_path / side, side)
        files = {p.relative_to(laid).as_posix(): p.read_bytes() for p in laid.rglob("*") if p.is_file()}
        ex = examples / side
        assert {p.relative_to(ex).as_posix(): p.read_bytes() for p in ex.rglob("*") if p.is_file()} == files


def test_an_unresolved_note_the_change_adds_is_reported_and_exits_3(tmp_path):
    """A module the reader cannot follow (nested past its limit) added by the change, and nothing else: a note of
    the change, exit 3; the same note in the baseline too: nothing added, exit 0."""
    deep = ("from sglang.srt.layers.attention.base_attn_backend import AttentionBackend\n\n\n"
            "class DeepBackend(AttentionBackend):\n    X = " + "[" * 150 + "1" + "]" * 150 + "\n")
    head = lay(tmp_path / "head", "head")
    base = lay(tmp_path / "base", "head")
    (head / "sglang/srt/layers/attention/deep_module.py").write_text(deep, "utf-8")
    code, doc = pr_json(str(head), "--baseline", str(base))
    assert code == 3 and doc["counts"]["added"] == 0
    (note,) = doc["notes"]["added"]
    assert note["file"] == "sglang/srt/layers/attention/deep_module.py" and note["unresolved"] is True
    code, out, _ = run(str(head), "--baseline", str(base))
    assert code == 3 and "unresolved notes the change adds: 1" in out and "sglang/srt/layers/attention/deep_module.py" in out
    (base / "sglang/srt/layers/attention/deep_module.py").write_text(deep, "utf-8")
    code, doc = pr_json(str(head), "--baseline", str(base))
    assert code == 0 and doc["notes"]["added"] == []
