"""The static reader's ``algorithms``: each speculative algorithm's worker, the phases of one decode step, the
publisher and the worker's reads after the publisher's runner. A synthetic tree (tests/sglang_trees/algorithms) pins
each rule; the release's table is pinned against tests/sglang_0_5_23_algorithms.json (audited by hand)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fencecheck.sglang_source import read_path
from sglang_release import WHY, release_tree

TREES = Path(__file__).resolve().parent / "sglang_trees"
WORKERS = "sglang/srt/speculative/workers.py"


@pytest.fixture(scope="module")
def synthetic_doc(tmp_path_factory):
    dest = tmp_path_factory.mktemp("algorithms") / "wheel"
    shutil.copytree(TREES / "common", dest, dirs_exist_ok=True)
    shutil.copytree(TREES / "algorithms", dest, dirs_exist_ok=True)
    return read_path(dest / "sglang").to_dict()


@pytest.fixture(scope="module")
def synthetic(synthetic_doc):
    return {(a["name"], a["condition"]): a for a in synthetic_doc["algorithms"]}


def test_the_document_with_algorithms_meets_the_schema(synthetic_doc):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).resolve().parents[1] / "docs" / "sglang-reader.schema.json").read_text("utf-8"))
    jsonschema.validate(synthetic_doc, schema)
    bad = json.loads(json.dumps(synthetic_doc))
    bad["algorithms"][0]["phases"][0]["mode"] = 3
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def _runs(a):
    return [(p["runner"], p["mode"], p["condition"], p["file"], p["line"]) for p in a["phases"]]


def test_a_worker_drafts_verifies_publishes_and_draft_extends_in_order(synthetic):
    a = synthetic["ALPHA", None]
    assert a["worker"] == {"class": "AlphaWorker", "file": WORKERS, "line": 22}
    assert a["dispatch"] == {"file": "sglang/srt/speculative/spec_info.py", "line": 23}
    assert _runs(a) == [
        ("DraftWorker.cuda_graph_runner", "DECODE", None, WORKERS, 15),
        ("AlphaWorker.target_worker", "TARGET_VERIFY", None, WORKERS, 38),
        ("on_publish", None, "on_publish is not None", WORKERS, 40),
        ("DraftWorker.draft_extend_runner", "DRAFT_EXTEND_V2", "not self.skip_draft_extend", WORKERS, 19),
    ]
    assert [p["side"] for p in a["phases"]] == ["draft", "target", None, "draft"]
    assert a["publisher"] == [{"publisher": "self.draft_worker.draft_runner", "condition": None, "side": "draft",
                               "file": WORKERS, "line": 31}]
    assert a["unresolved"] == []


def test_a_device_read_after_the_publishers_runner_is_a_finding_and_a_host_copy_is_not(synthetic):
    reads = {r["line"]: r for r in synthetic["ALPHA", None]["reads_after_publisher"]}
    assert set(reads) == {47, 48}
    late = reads[48]
    assert late["location"] == "req_to_token" and late["file"] == WORKERS
    assert late["finding"] == {"kind": "worker_read_after_publish", "status": "plausible", "scenario": None}
    assert late["after"] == {"call": "self.draft_extend_runner.execute", "file": WORKERS, "line": 19}
    assert late["via"] == [f"AlphaWorker.forward_batch_generation ({WORKERS}:33)", f"AlphaWorker.commit ({WORKERS}:43)"]
    copied = reads[47]
    assert copied["finding"] is None
    assert copied["why"].startswith(f"copied to the host at {WORKERS}:47")


def test_unknown_classes_loops_and_dynamic_workers_are_unresolved_with_their_reason(synthetic):
    beta = synthetic["BETA", None]
    assert _runs(beta) == [("DraftWorker.cuda_graph_runner", "DECODE", None, WORKERS, 15)]
    assert beta["phases"][0]["repeat"] == f"for range(self.num_steps) ({WORKERS}:64)"
    assert beta["unresolved"] == [
        f"`self.helper_worker.verify` ({WORKERS}:66): the class of `self.helper_worker` is not known statically; "
        "its phases are not followed",
        f"`self.cuda_graph_runner.execute` ({WORKERS}:15) runs inside for range(self.num_steps) ({WORKERS}:64): "
        "a count known only at run time",
        "no phase runs on the publisher `self.target_worker.model_runner`'s side (target)",
    ]
    gamma = synthetic["GAMMA", None]
    assert gamma["worker"] is None and gamma["phases"] == []
    assert gamma["unresolved"] == ["create_worker returns `load_plugin_worker(self.name)` "
                                   "(sglang/srt/speculative/spec_info.py:28): not a class of the tree "
                                   "(known only at run time)"]


def test_the_summary_and_the_audit_table_show_the_phases_and_the_finding(synthetic_doc):
    from fencecheck.sglang_source.command import render
    from fencecheck.sglang_source.report import algorithms_markdown

    text = render(synthetic_doc)
    assert f"    DraftWorker.draft_extend_runner DRAFT_EXTEND_V2 ({WORKERS}:19) if not self.skip_draft_extend\n" in text
    assert f"    PLAUSIBLE: reads req_to_token after the publisher's runner ({WORKERS}:48)\n" in text
    rows = [r for r in algorithms_markdown(synthetic_doc["algorithms"]) if r.startswith("| ALPHA ")]
    assert len(rows) == 1 and "1 plausible findings, 1 not findings" in rows[0]
    assert "DraftWorker.draft_extend_runner: DRAFT_EXTEND_V2 at `workers.py:19` (conditional)" in rows[0]


def test_a_tree_without_speculative_algorithms_has_none(tmp_path):
    dest = tmp_path / "wheel"
    shutil.copytree(TREES / "common", dest)
    assert read_path(dest / "sglang").to_dict()["algorithms"] == []


# --- the release ------------------------------------------------------------------------------------------------------
EXPECTED = json.loads((Path(__file__).resolve().parent / "sglang_0_5_23_algorithms.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def release():
    root = release_tree()
    if root is None:
        pytest.skip(WHY)
    return read_path(root).to_dict()["algorithms"]


def _table(algorithms):
    return [{"name": a["name"], "condition": a["condition"],
             "worker": a["worker"] and f"{a['worker']['class']} {a['worker']['file']}:{a['worker']['line']}",
             "phases": [f"{p['runner']} {p['mode']} {p['file']}:{p['line']}" for p in a["phases"]]}
            for a in algorithms]


@pytest.mark.slow
def test_the_releases_algorithms_table_is_pinned(release):
    got = _table(release)
    want = [{k: row[k] for k in ("name", "condition", "worker", "phases")} for row in EXPECTED["algorithms"]]
    assert got == want


@pytest.mark.slow
def test_the_releases_worker_reads_after_the_publisher_are_pinned(release):
    got = {f"{a['name']} {a['condition']}": sorted(f"{r['file']}:{r['line']} {r['location']}"
                                                   + ("" if r["finding"] else " (not a finding)")
                                                   for r in a["reads_after_publisher"]) for a in release}
    assert got == EXPECTED["reads_after_publisher"]
