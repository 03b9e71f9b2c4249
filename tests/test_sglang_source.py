"""The static SGLang reader on small synthetic trees (tests/sglang_trees), and the subcommand's exit codes.

Each case lays its files over the common minimal package and asserts the specific finding (or non-finding) it
exists for."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest

from fencecheck.commands.main import main
from fencecheck.sglang_source import NotSGLang, find_package_root, read_path
from fencecheck.decision.findings import decide

TREES = Path(__file__).resolve().parent / "sglang_trees"


def _tree(tmp_path: Path, case: str | None, layout: str = "package") -> Path:
    """The case laid over ``common/`` in ``tmp_path``; ``layout`` places the package as a wheel (``package``), in a
    checkout's ``python/`` folder (``checkout``)."""
    dest = tmp_path / ("repo/python" if layout == "checkout" else "wheel")
    shutil.copytree(TREES / "common", dest, dirs_exist_ok=True)
    if case:
        shutil.copytree(TREES / case, dest, dirs_exist_ok=True)
    return tmp_path / "repo" if layout == "checkout" else dest / "sglang"


def _doc(tmp_path, case):
    return read_path(_tree(tmp_path, case)).to_json()


def _decided(tmp_path, case, **kw):
    """The document of the case's extraction with its findings decided (``decide``)."""
    return decide(read_path(_tree(tmp_path, case)), **kw)[0].to_json()


def _findings(doc, kind="read_outside_declaration"):
    return {(f["subject"], f["mode"]): f for f in doc["findings"] if f["kind"] == kind}


def _backend(doc, name):
    (b,) = [b for b in doc["backends"] if b["class"] == name]
    return b


def test_the_common_tree_is_clean_and_reads_its_modes(tmp_path):
    doc = _doc(tmp_path, None)
    assert doc["sglang_version"] == "0.0.0+synthetic"
    assert doc["forward_modes"]["modes"] == ["EXTEND", "DECODE", "MIXED", "IDLE", "TARGET_VERIFY", "DRAFT_EXTEND_V2"]
    assert doc["findings"] == []
    honest = _backend(doc, "HonestBackend")
    assert honest["declares"]["DECODE"] == "IN_REPLAY" and honest["declares"]["EXTEND"] == "UNKNOWN"
    assert honest["declared_in"]["class"] == "AttentionBackend" and honest["kind"] == "inherited"
    sites = {(r["mode"], r["site"]) for r in honest["reads"]}
    assert ("DECODE", "pre_replay") in sites and not any(s == "in_graph_after_marker" for _, s in sites)


def test_a_read_after_the_marker_under_in_replay_is_a_confirmed_finding(tmp_path):
    doc = _doc(tmp_path, "after_marker")
    found = _findings(doc)
    assert set(found) == {("LateReadBackend", "DECODE")}
    f = found["LateReadBackend", "DECODE"]
    assert f["status"] == "confirmed" and f["declared"] == "IN_REPLAY"
    decl, read = f["evidence"]
    assert (decl["file"], decl["line"]) == ("sglang/srt/layers/attention/late_backend.py", 10)
    assert (read["file"], read["line"]) == ("sglang/srt/layers/attention/late_backend.py", 16)
    assert "req_to_token at in_graph_after_marker" in read["what"] and "LateReadBackend.forward_decode" in read["what"]


def test_a_composite_does_not_hide_its_dishonest_child(tmp_path):
    doc = _doc(tmp_path, "composite")
    comp = _backend(doc, "CompositeBackend")
    assert comp["declares"]["DECODE"] == "max_of(self.sparse, self.dense)"
    assert comp["children"] == {"dense": "HonestBackend", "sparse": "SneakyChildBackend"}
    found = _findings(doc)
    assert set(found) == {("CompositeBackend", "DECODE"), ("SneakyChildBackend", "DECODE")}
    read = found["CompositeBackend", "DECODE"]["evidence"][1]
    assert (read["file"], read["line"]) == ("sglang/srt/layers/attention/composite_backend.py", 12)
    assert "CompositeBackend.forward_decode -> SneakyChildBackend.forward_decode" in read["what"]
    assert found["CompositeBackend", "DECODE"]["declared"] == "IN_REPLAY"  # max_of(base IN_REPLAY, base IN_REPLAY)


def test_a_read_two_helper_calls_deep_is_followed(tmp_path):
    doc = _doc(tmp_path, "deep_helper")
    found = _findings(doc)
    assert set(found) == {("DeepReadBackend", "TARGET_VERIFY")}  # decode does not read; extend is UNKNOWN
    read = found["DeepReadBackend", "TARGET_VERIFY"]["evidence"][1]
    assert (read["file"], read["line"]) == ("sglang/srt/mem_cache/page_utils.py", 3)
    assert read["what"].endswith(
        "DeepReadBackend.forward_extend -> DeepReadBackend._pages_for -> page_utils.gather_pages")
    (r,) = [r for r in _backend(doc, "DeepReadBackend")["reads"] if r["mode"] == "TARGET_VERIFY"]
    assert r["site"] == "in_graph_after_marker" and len(r["via"]) == 4


def test_a_declaration_inherited_from_a_grandparent_in_another_module(tmp_path):
    doc = _doc(tmp_path, "grandparent")
    g = _backend(doc, "GrandchildBackend")
    assert g["mro"] == ["GrandchildBackend", "ParentBackend", "GrandBackend", "AttentionBackend"]
    assert g["declared_in"] == {"class": "GrandBackend", "file": "sglang/srt/layers/attention/family/grand.py",
                                "line": 7}
    assert set(g["declares"].values()) == {"PRE_REPLAY"}
    found = _findings(doc)
    assert {s for s, _ in found} == {"GrandchildBackend"}
    f = found["GrandchildBackend", "DECODE"]
    assert f["declared"] == "PRE_REPLAY" and f["status"] == "confirmed"
    assert "at in_graph_before_marker via GrandchildBackend.init_forward_metadata_in_graph" in f["evidence"][1]["what"]


def test_a_read_only_behind_a_host_sync_is_not_a_finding(tmp_path):
    doc = _doc(tmp_path, "host_sync")
    assert doc["findings"] == []
    (nf,) = [n for n in doc["not_findings"] if n["subject"] == "HostSyncBackend"]
    assert (nf["mode"], nf["file"], nf["line"]) == ("DECODE", "sglang/srt/layers/attention/sync_backend.py", 12)
    assert nf["why"] == ("no graph captures its path: it host-syncs first (sglang/srt/layers/attention/sync_backend.py:11), "
                         "which a CUDA graph cannot capture; the tree has no breakable graphs")


def test_a_read_only_outside_graph_capture_is_not_a_finding_and_the_guard_ends_with_its_function(tmp_path):
    doc = _doc(tmp_path, "capture_guard")
    at = "sglang/srt/layers/attention/guarded_backend.py"
    nf = {(n["line"], n["why"]) for n in doc["not_findings"] if n["subject"] == "CaptureGuardBackend"}
    assert nf == {(15, f"behind a capture-mode test at {at}:13 (the path needs get_is_capture_mode() false, and it "
                       "is true while a CUDA graph is captured or a breakable graph runs: a path no graph replay of "
                       "this mode runs)"),
                  (19, f"behind a capture-mode test at {at}:18 (the path needs get_is_capture_mode() false, and it "
                       "is true while a CUDA graph is captured or a breakable graph runs: a path no graph replay of "
                       "this mode runs)")}
    f = _findings(doc)["CaptureGuardBackend", "DECODE"]  # the gather after the helpers return is still captured
    assert [(e["file"], e["line"]) for e in f["evidence"][1:]] == [(at, 24)]


def test_a_declaration_in_a_loop_is_unresolved_with_its_reason(tmp_path):
    doc = _doc(tmp_path, "unresolved")
    rows = _backend(doc, "LoopDeclBackend")["declares"]["DECODE"]
    assert rows == [{"condition": None, "end": "unresolved", "reason": "cannot evaluate a For statement", "line": 9}]
    assert {f["status"] for f in doc["findings"]} == {"unresolved"}


def _run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", *map(str, argv)], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("case,code", [(None, 0), ("after_marker", 1), ("host_sync", 0), ("unresolved", 3)])
def test_exit_codes(tmp_path, case, code):
    got, out, err = _run(_tree(tmp_path, case))
    assert (got, err) == (code, "")
    assert out.startswith("sglang 0.0.0+synthetic at ")


def test_json_is_the_document_and_deterministic(tmp_path):
    root = _tree(tmp_path, "composite")
    code, out, _ = _run(root, "--json")
    code2, out2, _ = _run(root, "--json")
    assert code == code2 == 1 and out == out2
    doc = json.loads(out)
    assert [f["subject"] for f in doc["findings"]] == ["CompositeBackend", "SneakyChildBackend"]


def test_a_checkout_root_and_its_python_folder_are_found(tmp_path):
    repo = _tree(tmp_path, None, layout="checkout")
    assert find_package_root(repo) == find_package_root(repo / "python") == (repo / "python" / "sglang").resolve()


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    code, out, err = _run(tmp_path)
    assert code == 2 and out == "" and err.count("\n") == 1 and "not an SGLang tree" in err
    code, _, err = _run(tmp_path / "missing")
    assert code == 2 and "no such file or folder" in err
    code, _, err = _run()
    assert code == 2 and "exactly one of PATH or --installed" in err
    root = _tree(tmp_path, None)
    (root / "srt" / "layers" / "attention" / "broken.py").write_text("class AttentionBackend(:\n", encoding="utf-8")
    code, _, err = _run(root)
    assert code == 2 and err.count("\n") == 1 and "broken.py: line 1: not valid Python" in err


def test_not_sglang_is_a_bad_input_error():
    assert NotSGLang.exit_code == 2


def test_help_names_every_option_and_the_exit_codes():
    code, out, _ = _run("--help")
    assert code == 0
    for word in ("--installed", "--json", "PATH", "0  no finding", "3  questions (unresolved findings", "or drift: with"):
        assert word in out


SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "sglang-reader.schema.json").read_text("utf-8"))


@pytest.mark.parametrize("case", [None, "composite", "grandparent", "host_sync", "unresolved"])
def test_the_document_meets_its_schema(tmp_path, case):
    import jsonschema

    jsonschema.validate(_doc(tmp_path, case), SCHEMA)


def test_the_schema_rejects_a_finding_without_evidence(tmp_path):
    import jsonschema

    doc = _doc(tmp_path, "after_marker")
    doc["findings"][0]["evidence"] = []
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA)


def test_each_finding_is_decided_by_the_simulator_with_its_race(tmp_path):
    root = _tree(tmp_path, "composite")
    code, out, _ = _run(root, "--json", "--witness", "--scenarios", tmp_path / "scen")
    assert code == 1
    doc = json.loads(out)
    import jsonschema

    jsonschema.validate(doc, SCHEMA)
    for f in doc["findings"]:
        assert f["verdict"] == "counterexample" and f["races"] == ["req_to_token@decode/in_graph_after_marker"]
        assert f["model_verdict"] == "counterexample" and f["oracles_agree"] is True
        (w,) = f["witness"]
        assert w["stale_read"]["location"] == "req_to_token" and w["stale_read"]["seen"] > w["stale_read"]["step"]
    assert sorted(p.name for p in (tmp_path / "scen").iterdir()) == [
        "sglang-composite-backend-decode.toml", "sglang-sneaky-child-backend-decode.toml"]
    # the written scenario is an ordinary scenario file: check finds the same race in it
    code, out, _ = main_check(tmp_path / "scen" / "sglang-sneaky-child-backend-decode.toml")
    assert code == 1 and "RACE read of req_to_token by step 1 phase 'decode' at in_graph_after_marker" in out


def main_check(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(["check", *map(str, argv)], out=out, err=err), out.getvalue(), err.getvalue()


def test_a_clean_tree_builds_no_scenario(tmp_path):
    code, out, _ = _run(_tree(tmp_path, "host_sync"), "--json", "--scenarios", tmp_path / "scen")
    assert code == 0 and json.loads(out)["findings"] == [] and list((tmp_path / "scen").iterdir()) == []


@pytest.mark.slow  # over 2 s
def test_drift_lists_a_changed_function_and_ignores_comments(tmp_path):
    root = _tree(tmp_path, "composite")
    prints = tmp_path / "prints.json"
    code, _, err = _run(root, "--fingerprints", prints)
    assert code == 1 and err == ""
    recorded = json.loads(prints.read_text("utf-8"))["functions"]
    key = "sglang.srt.layers.attention.composite_backend.SneakyChildBackend.forward_decode"
    assert recorded[key]["facts"] == ["reads of CompositeBackend", "reads of SneakyChildBackend"]
    assert "sglang.srt.layers.attention.composite_backend.CompositeBackend.shared_read_ends" in recorded
    src = root / "srt" / "layers" / "attention" / "composite_backend.py"
    text = src.read_text("utf-8")
    src.write_text(text.replace("    def forward_decode(self, q, k, v, layer, forward_batch):\n        return sparse",
                                "    def forward_decode(self, q, k, v, layer, forward_batch):\n        # a comment\n\n"
                                "        return sparse", 1), "utf-8")
    code, out, _ = _run(root, "--json", "--against", prints)
    assert json.loads(out)["drift"]["functions"] == []
    src.write_text(text.replace("forward_batch.req_pool_indices)", "forward_batch.req_pool_indices[:1])", 1), "utf-8")
    code, out, _ = _run(root, "--json", "--against", prints)
    (d,) = json.loads(out)["drift"]["functions"]
    assert (d["function"], d["status"], d["line"], d["review"]) == (key, "changed", 11, True)  # the same reads
    code, out, _ = _run(root, "--against", prints)
    assert f"review changed {key} (sglang/srt/layers/attention/composite_backend.py:11)" in out


def test_drift_is_a_changed_fact_and_a_changed_function_without_one_is_review(tmp_path):
    """A tree saying it is 0.5.23 that holds a class at a path and name the release catalog cites: against its own
    record it exits 0. A code change that changes no fact (the base call spelled with an explicit argument) lists the
    function as review and the catalog entries citing it, exit 0; an edit of the declaration changes a fact: the
    fact first, the function as drift, exit 1."""
    from fencecheck.files.catalog import RELEASE, load_catalog

    root = _tree(tmp_path, "drift")
    prints = tmp_path / "prints.json"
    assert _run(root, "--fingerprints", prints)[0] == 0
    code, out, err = _run(root, "--json", "--against", prints)
    drift = json.loads(out)["drift"]
    assert (code, err, drift["facts"], drift["functions"], drift["catalog_entries"]) == (0, "", [], [], [])
    src = root / "srt" / "layers" / "attention" / "trtllm_mha_backend.py"
    text = src.read_text("utf-8")
    key = "sglang.srt.layers.attention.trtllm_mha_backend.TRTLLMHAAttnBackend.shared_read_ends"
    cited = "srt/layers/attention/trtllm_mha_backend.py:TRTLLMHAAttnBackend.shared_read_ends"
    citing = sorted(s.name for s in load_catalog(RELEASE) if any(c.startswith(cited + ":") for c in s.cites))
    assert "decode-trtllm-mha" in citing
    src.write_text(text.replace("return super().shared_read_ends(fm)",
                                "return super(TRTLLMHAAttnBackend, self).shared_read_ends(fm)", 1), "utf-8")
    code, out, _ = _run(root, "--json", "--against", prints)
    drift = json.loads(out)["drift"]
    assert code == 0 and drift["facts"] == []
    assert [(d["function"], d["status"], d["review"]) for d in drift["functions"]] == [(key, "changed", True)]
    assert drift["catalog_entries"] == [{"entry": e, "changed": [cited]} for e in citing]
    src.write_text(text.replace("fm.is_extend()", "fm.is_extend() or fm.is_idle()", 1), "utf-8")
    code, out, _ = _run(root, "--json", "--against", prints)
    doc = json.loads(out)
    assert code == 1 and doc["findings"] == []  # drift alone
    (fact,) = doc["drift"]["facts"]
    assert (fact["fact"], fact["status"], fact["old"]["IDLE"], fact["new"]["IDLE"]) == (
        "declaration/TRTLLMHAAttnBackend", "changed", "UNKNOWN", "PRE_REPLAY")
    assert [(d["function"], d["drift"]) for d in doc["drift"]["functions"]] == [(key, True)]
    code, out, _ = _run(root, "--against", prints)
    assert code == 1 and "CHANGED declaration/TRTLLMHAAttnBackend" in out and "IDLE: \"UNKNOWN\" -> \"PRE_REPLAY\"" in out
    assert f"catalog entries whose cited sources changed (review): {len(citing)}" in out


def test_against_an_unknown_release_is_bad_input(tmp_path):
    code, out, err = _run(_tree(tmp_path, None), "--against", "sglang-0.0.1")
    assert code == 2 and out == "" and "--against: expected a recorded release (" in err and "sglang-0.5.23" in err
    bad = tmp_path / "bad.json"
    bad.write_text("[]", "utf-8")
    code, _, err = _run(_tree(tmp_path, None), "--against", bad)
    assert code == 2 and "bad.json: functions: expected a fingerprint file" in err


def test_installed_finds_the_package_without_importing_it(tmp_path, monkeypatch):
    import importlib
    import sys

    root = _tree(tmp_path, "after_marker")
    (root / "__init__.py").write_text("raise RuntimeError('imported')\n", "utf-8")  # importing it would fail
    monkeypatch.syspath_prepend(str(root.parent))
    importlib.invalidate_caches()
    code, out, err = _run("--installed")
    assert (code, err) == (1, "") and f"at {root.resolve()}:" in out
    assert "sglang" not in sys.modules


def test_a_tree_without_forward_modes_is_bad_input(tmp_path):
    root = _tree(tmp_path, None)
    (root / "srt/model_executor/forward_batch_info.py").unlink()
    code, out, err = _run(root)
    assert code == 2 and out == "" and err.count("\n") == 1 and "no ForwardMode class found" in err


def test_a_barrier_without_declarations_is_an_older_fence_and_no_barrier_is_no_fence(tmp_path):
    """Without an AttentionBackend defining shared_read_ends the tree's barrier is an older fence: reported with its
    read-done event and exit 5; without the barrier as well, no fence: exit 6. Neither is bad input."""
    from fencecheck.errors import EXIT_NO_FENCE, EXIT_OLDER_FENCE

    root = _tree(tmp_path, None)
    (root / "srt/layers/attention/base_attn_backend.py").unlink()
    code, out, err = _run(root)
    assert (code, err) == (EXIT_OLDER_FENCE, "") and "a fence older than the SharedReadEnds declarations" in out
    assert "waits on `shared_read_done_event`" in out and "sglang/srt/managers/scheduler.py:10" in out
    (root / "srt/managers/scheduler.py").unlink()
    code, out, err = _run(root)
    assert (code, err) == (EXIT_NO_FENCE, "") and "no shared-read fence" in out


def test_a_method_taken_from_another_class_by_assignment_is_followed(tmp_path):
    doc = _doc(tmp_path, "aliased")
    found = _findings(doc)
    assert ("AliasedBackend", "DECODE") in found and ("GatherBackend", "DECODE") not in found
    read = found["AliasedBackend", "DECODE"]["evidence"][1]
    assert (read["file"], read["line"]) == ("sglang/srt/layers/attention/alias_backend.py", 8)
    assert read["what"].endswith("via AttentionBackend.forward -> GatherBackend.forward_extend")


@pytest.mark.slow  # over 2 s
def test_a_prefill_snapshot_claiming_pre_replay_is_checked_against_the_forward(tmp_path):
    doc = _doc(tmp_path, "snapshot")
    snap = [f for f in doc["findings"] if f.get("declared_by") == "_snapshot_prefill_shared_reads"]
    (f,) = snap
    assert (f["subject"], f["mode"], f["declared"], f["condition"]) == ("SnapshotBackend", "EXTEND", "PRE_REPLAY",
                                                                         "not self.lazy")
    assert f["status"] == "plausible"
    # the in-graph prep runs before a snapshot's publish (line 17): only the forward's read (line 23) is outside
    assert [(e["line"], e["what"].split(" via ")[0]) for e in f["evidence"][1:]] == [
        (23, "reads req_to_token at in_graph_after_marker")]
    (f,) = [f for f in _decided(tmp_path, "snapshot")["findings"]
            if f.get("declared_by") == "_snapshot_prefill_shared_reads"]
    assert f["scenario"] == "sglang-snapshot-backend-extend-snapshot"
    assert f["races"] == ["req_to_token@extend/in_graph_after_marker"] and f["oracles_agree"] is True


def test_deciding_builds_new_records_and_leaves_the_extraction_as_read(tmp_path):
    import dataclasses

    ex = read_path(_tree(tmp_path, "after_marker"))
    before = ex.to_json()
    decided, built = decide(ex, contexts=False)
    assert ex.to_json() == before and ex.findings[0].decision is None  # the extraction as read
    (f,) = decided.findings
    assert f.decision.scenario == built[0].name and f.decision.verdict == "counterexample"
    assert decided.to_json()["findings"][0] == {**before["findings"][0], **f.decision.to_json()}
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.status = "confirmed"


def test_each_finding_is_decided_in_the_generated_configurations_of_its_mode(tmp_path):
    """A late decode read, decided in every configuration of the tree that applies the barrier and runs DECODE: a race
    in the graph replay on CUDA (both oracles agree), none where decode runs eagerly, where no marker makes the tree's
    POST_REPLAY fallback publish after the replay, where the barrier is coarse or the loop applies none."""
    ex, _ = decide(read_path(_tree(tmp_path, "after_marker")), context_model="flagged")
    (f,) = ex.to_json()["findings"]
    rows = {r["context"]: r for r in f["contexts"]}
    assert [r["context"] for r in f["contexts"]] == sorted(rows)
    assert not any("prefill" in name or "barrier-off" in name for name in rows)  # only DECODE, only with the barrier
    late = ["req_to_token@p0-decode/in_graph_after_marker"]
    graph = rows["no-speculation-decode-cuda-overlap-0"]
    assert graph["verdict"] == "counterexample" and graph["races"] == late and graph["oracles_agree"] is True
    assert graph["own"] is False  # an honest backend does not race there: the race is the backend's
    for name, r in rows.items():
        if name != "no-speculation-decode-cuda-overlap-0":
            assert r == {"context": name, "verdict": "proved", "races": [], "oracles_agree": None, "own": False}, name
    from fencecheck.render.release_markdown import contexts_text

    line = contexts_text(ex.findings[0].decision.contexts)
    assert line == f"in 1 of {len(rows)} configurations: races in no-speculation-decode-cuda-overlap"


def test_a_context_runs_each_phase_of_the_mode_with_the_backend_as_read(tmp_path):
    from fencecheck.decision.findings import context_dict, generated_contexts

    data = {"name": "x", "backends": {"ReadBackend": {"declares": {"DECODE": "IN_REPLAY"},
                                                      "reads": {"DECODE": {"pre_replay": ["req_to_token"]}}}},
            "algorithm": {"steps": {"normal": [{"mode": "DECODE"}]}}}
    ctx = dict(generated_contexts(read_path(_tree(tmp_path, None))))
    graph = next(c for n, c in ctx.items() if n.startswith("no-speculation-decode-cuda-overlap"))
    out = context_dict(graph, data)
    phases = [(k, p["backend"]) for k, v in out["algorithm"]["steps"].items() for p in v]
    assert phases == [("normal", "ReadBackend")] and "expect" not in out
    assert out["backends"]["ReadBackend"] == data["backends"]["ReadBackend"] and "attn" in out["backends"]
    assert graph["algorithm"]["steps"]["normal"][0]["backend"] == "attn"  # the context is not changed
    prefill = next(c for n, c in ctx.items() if n.startswith("no-speculation-prefill"))
    assert context_dict(prefill, data) is None


def test_without_cross_check_the_contexts_are_the_simulators_alone(tmp_path):
    (f,) = _decided(tmp_path, "after_marker", context_model="none")["findings"]
    assert f["oracles_agree"] is True  # the finding's own scenario: both oracles, always
    assert f["contexts"] and all(r["oracles_agree"] is None for r in f["contexts"])
    assert "counterexample" in {r["verdict"] for r in f["contexts"]}


def test_a_backend_bound_to_a_device_whose_runners_never_publish_is_not_a_finding(tmp_path):
    """The same late decode read in three backends: bound to the NPU (a module-level torch_npu import) or to the CPU
    (an sgl-kernel *_cpu operator), whose decode graph runners in capture_decode_graph's map never publish, it is
    not a finding, with why citing each fact; bound to no device it stays a finding. Once the NPU runner publishes,
    the NPU backend's read is a finding again."""
    root = _tree(tmp_path, "device")
    doc = read_path(root).to_json()
    assert set(_findings(doc)) == {("CudaLateBackend", "DECODE")}
    moved = {(n["subject"], n["mode"]): n for n in doc["not_findings"] if n["why"].startswith("never resolved")}
    assert set(moved) == {("NpuLateBackend", "DECODE"), ("CpuLateBackend", "DECODE")}
    npu = moved["NpuLateBackend", "DECODE"]
    assert (npu["file"], npu["line"], npu["location"]) == ("sglang/srt/layers/attention/npu_late_backend.py", 13,
                                                           "req_to_token")
    for cite in ("imports torch_npu at module level (sglang/srt/layers/attention/npu_late_backend.py:1)",
                 "NPUGraphRunner (sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py:12)",
                 "NPUGraphRunner.execute never publishes (sglang/srt/hardware_backend/npu/graph_runner/"
                 "npu_graph_runner.py:4)", "prefill PRE_REPLAY (sglang/srt/model_executor/runner/eager_runner.py:8)"):
        assert cite in npu["why"], cite
    cpu = moved["CpuLateBackend", "DECODE"]
    assert "takes torch.ops.sgl_kernel.decode_attention_cpu (sglang/srt/layers/attention/cpu_late_backend.py:11)" \
        in cpu["why"] and "CPUGraphRunner.execute never publishes" in cpu["why"]
    code, out, _ = _run(root)
    # the CUDA backend's read races in its own scenario but in none of this small tree's configurations: a question
    assert code == 3 and ("not findings: 0 reads no graph replay runs (a capture-mode test, a host sync or a branch "
                          "the capture rules out), 0 start-up reads, 2 reads on a device") in out
    runner = root / "srt" / "hardware_backend" / "npu" / "graph_runner" / "npu_graph_runner.py"
    runner.write_text(runner.read_text("utf-8").replace(
        "        return self.backend.replay(forward_batch)",
        "        self.backend.shared_read_ends(forward_batch.forward_mode)\n        read_done = self.device_module.Event()\n"
        "        read_done.record()\n        self.model_runner.shared_read_done_event = read_done\n"
        "        return self.backend.replay(forward_batch)"), "utf-8")
    doc = read_path(root).to_json()
    assert set(_findings(doc)) == {("CudaLateBackend", "DECODE"), ("NpuLateBackend", "DECODE")}


def test_children_passed_to_a_constructor_are_resolved_from_the_calls_that_construct_it(tmp_path):
    """Children its caller passes in, in another module: one class at every call (the composite's finding goes
    through the child, citing the constructing call); a class picked by a setting (conditional rows, the finding
    on the row that picks the late child); a caller's own parameter (unresolved, with the reason)."""
    root = _tree(tmp_path, "passed")
    ex = read_path(root)
    doc = ex.to_json()
    factory = "sglang/srt/model_executor/backend_factory.py"
    # drift covers the constructing calls
    prints = ex.fingerprints.entries["sglang.srt.model_executor.backend_factory.build_composite"]
    assert prints["facts"] == {"children passed to PassedCompositeBackend"}
    found = _findings(doc)
    assert set(found) == {("LateChildBackend", "DECODE"), ("PassedCompositeBackend", "DECODE"),
                          ("SwitchBackend", "DECODE")}
    comp = _backend(doc, "PassedCompositeBackend")
    # sparse: a local of the caller; dense: what the factory make_dense returns
    assert comp["children"] == {"dense": "HonestBackend", "sparse": "LateChildBackend"} and comp["unfollowed"] == []
    f = found["PassedCompositeBackend", "DECODE"]
    assert (f["status"], f["declared"]) == ("confirmed", "IN_REPLAY")
    decl, read, ctor = f["evidence"]
    assert (read["file"], read["line"]) == ("sglang/srt/layers/attention/passed_backend.py", 11)
    assert read["what"].endswith("via AttentionBackend.forward -> PassedCompositeBackend.forward_decode -> "
                                 "LateChildBackend.forward_decode")
    assert ctor == {"file": factory, "line": 12,
                    "what": "constructs PassedCompositeBackend with self.sparse = LateChildBackend"}
    pick = f"self.inner is LateChildBackend ({factory}:24)"
    assert _backend(doc, "SwitchBackend")["declares"]["DECODE"] == [
        {"condition": f"not model_runner.server_args.late_decode and self.inner is HonestBackend ({factory}:24)",
         "end": "IN_REPLAY"},
        {"condition": f"model_runner.server_args.late_decode and {pick}", "end": "IN_REPLAY"}]
    sw = found["SwitchBackend", "DECODE"]
    assert (sw["status"], sw["condition"]) == ("plausible", f"model_runner.server_args.late_decode and {pick}")
    assert sw["evidence"][-1] == {"file": factory, "line": 24, "what": "constructs SwitchBackend with self.inner = "
                                  "LateChildBackend when model_runner.server_args.late_decode"}
    decided = _findings(decide(ex, contexts=False)[0].to_json())
    assert decided["SwitchBackend", "DECODE"]["races"] == decided["PassedCompositeBackend", "DECODE"]["races"] == [
        "req_to_token@decode/in_graph_after_marker"]
    assert _backend(doc, "OpenBackend")["passed_children"] == {"inner": [
        {"class": None, "condition": None, "file": factory, "line": 28,
         "reason": f"a parameter of build_open ({factory}:27), chosen by its callers"}]}
    assert ("OpenBackend", "DECODE") not in found and _backend(doc, "OpenBackend")["declares"]["DECODE"] == \
        "delegate(self.inner)"


def test_the_summary_ends_with_its_verdict_line(tmp_path):
    code, out, _ = _run(_tree(tmp_path, None))
    assert code == 0 and out.splitlines()[-1] == "sglang 0.0.0+synthetic: no finding"
    code, out, _ = _run(_tree(tmp_path / "c", "composite"))
    last = out.splitlines()[-1]
    assert code == 1 and last.startswith("sglang 0.0.0+synthetic: ") and "finding(s) to review (" in last


def test_the_short_summary_has_a_line_per_root_cause_and_details_has_each_finding(tmp_path):
    """Without --details the findings that share their reads are one line, naming each backend and mode it affects
    and the read site; --details lists each finding with its evidence."""
    from fencecheck.render.summary import root_causes

    root = _tree(tmp_path, "after_marker")
    code, out, _ = _run(root)
    ex = read_path(root)
    lines = [x for x in out.splitlines() if x.startswith("  CONFIRMED ") or x.startswith("  PLAUSIBLE ")]
    assert len(lines) == len(root_causes(ex.findings)) == 1
    assert re.search(r"^  CONFIRMED late_backend\.py:\d+: reads req_to_token in_graph_after_marker; LateReadBackend "
                     r"\(DECODE\), declares IN_REPLAY$", lines[0]), lines[0]
    second = out.splitlines()[out.splitlines().index(lines[0]) + 1]
    assert re.fullmatch(r"      races in 1 of \d+ configurations, least demanding no-speculation-decode-cuda-overlap-0 "
                        r"\(needs nothing more\); fix \(proved\): declare POST_REPLAY", second), second
    assert "reads req_to_token at in_graph_after_marker via" not in out  # the evidence is in --details
    code, out, _ = _run(root, "--details")
    assert "CONFIRMED LateReadBackend DECODE: declares IN_REPLAY but reads outside it" in out
    assert "reads req_to_token at in_graph_after_marker via" in out


def test_each_racing_finding_carries_its_smallest_fix_verified_by_both_oracles(tmp_path):
    """The late decode read is covered by POST_REPLAY, the earliest end holding its site: the fix's scenario is
    proved by the simulator and the model, and so is every generated configuration where the finding raced; a finding
    that does not race gets no fix."""
    from fencecheck.decision.findings import covering_end

    ex, _ = decide(read_path(_tree(tmp_path, "after_marker")))
    (f,) = ex.findings
    fix = f.decision.fix
    assert (fix.change, fix.declares, fix.verdict, fix.model_verdict) == (
        "declare POST_REPLAY for DECODE", "POST_REPLAY", "proved", "proved")
    racing = [c for c in f.decision.contexts if c.verdict == "counterexample"]
    assert fix.contexts == len(racing) >= 1 and fix.contexts_proved == fix.contexts and fix.still_racing == ()
    from fencecheck.vocab import ReadSite

    assert covering_end("PRE_REPLAY", [ReadSite.IN_GRAPH_BEFORE_MARKER]) == "IN_REPLAY"
    assert covering_end("IN_REPLAY", [ReadSite.PRE_REPLAY, ReadSite.IN_GRAPH_AFTER_MARKER]) == "POST_REPLAY"
    assert covering_end("POST_REPLAY", [ReadSite.POST_REPLAY]) is None


def test_a_racing_finding_names_the_least_demanding_configuration_it_races_in(tmp_path):
    """The late decode read races in plain decode on CUDA under the overlap scheduler: that configuration, needing
    nothing more; a configuration's needs name the algorithm, the platform, the settings and the loop."""
    from fencecheck.decision.findings import needs

    ex, _ = decide(read_path(_tree(tmp_path, "after_marker")))
    (f,) = ex.findings
    assert (f.decision.reach.configuration, f.decision.reach.needs) == ("no-speculation-decode-cuda-overlap-0", ())
    cfg = {"source": "EAGLE", "condition": "self.x", "platform_class": "hip-no-marker-forced", "platforms": ["hip"],
           "marker": False, "settings": ["SGLANG_ENABLE_WAR_BARRIER=True"], "loop": "pp"}
    assert needs(cfg) == ("--speculative-algorithm EAGLE (when self.x)", "platform hip without the in-graph marker",
                          "SGLANG_ENABLE_WAR_BARRIER=True", "pipeline parallelism")
    code, out, _ = _run(_tree(tmp_path / "b", "after_marker"))
    assert "least demanding no-speculation-decode-cuda-overlap-0 (needs nothing more)" in out
