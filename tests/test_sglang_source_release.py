"""The static reader on the released SGLang 0.5.23 sources, against the hand-audited tables.

The sources are read, never imported; the tables are tests/sglang_0_5_23_expected.json (every row with file:line;
audited against docs/sglang-0.5.23.md).

The release is found by ``tests/sglang_release.py`` (the test command installs it with ``--no-deps``); without it these
tests are skipped with the reason.
"""

from __future__ import annotations

import json
import re
import os
from pathlib import Path

import pytest

from sglang_release import release_tree

EXPECTED = json.loads((Path(__file__).resolve().parent / "sglang_0_5_23_expected.json").read_text(encoding="utf-8"))


RELEASE = release_tree()
#: Without the release: skipped, or failed when CI is set (the ``release_root`` fixture).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("release_root")]


@pytest.fixture(scope="module")
def extraction(release_extraction):
    return release_extraction


@pytest.fixture(scope="module")
def doc(extraction):
    return extraction.to_json()


def _at(d, key="file", line="line"):
    return f"{d[key]}:{d[line]}"


def test_version_and_forward_modes(doc):
    assert doc["sglang_version"] == "0.5.23"
    fm = doc["forward_modes"]
    assert {"modes": fm["modes"], "at": _at(fm)} == EXPECTED["forward_modes"]


def test_every_backend_and_its_declaration_per_mode(doc):
    got = [{"class": b["class"], "at": _at(b), "declared_in": _at(b["declared_in"]), "declares": b["declares"]}
           for b in doc["backends"]]
    want = EXPECTED["backends"]
    assert [(g["class"], g["at"]) for g in got] == [(w["class"], w["at"]) for w in want]
    for g, w in zip(got, want):
        assert g == w, g["class"]


def test_the_declarations_that_differ_from_the_base_rule(doc):
    by = {b["class"]: b for b in doc["backends"]}
    dsv4 = by["DeepseekV4AttnBackend"]["declares"]
    assert dsv4["TARGET_VERIFY"] == [
        {"condition": "self.model_runner.spec_algorithm.is_dspark()", "end": "IN_REPLAY"},
        {"condition": "not self.model_runner.spec_algorithm.is_dspark()", "end": "POST_REPLAY"}]
    assert by["DeepseekV4HipRadixBackend"]["declares"]["TARGET_VERIFY"] == "IN_REPLAY"
    assert by["TRTLLMHAAttnBackend"]["declares"]["EXTEND"] == "PRE_REPLAY"
    assert by["TRTLLMHAAttnBackend"]["declares"]["MIXED"] == "UNKNOWN"
    assert set(by["MiniMaxSparseNvfp4AttnBackend"]["declares"].values()) == {"PRE_REPLAY"}
    dots = by["DotsSWAMLAAttnBackend"]["declares"]
    assert dots["EXTEND"] == dots["SPLIT_PREFILL"] == dots["DLLM_EXTEND"] == "UNKNOWN"
    assert dots["DECODE"] == "delegate(self.backend)"
    hyb = by["HybridAttnBackend"]["declares"]
    assert hyb["DECODE"] == hyb["IDLE"] == "delegate(self.decode_backend)"
    assert hyb["TARGET_VERIFY"] == [{"condition": "self.spec_attn_is_decode", "end": "delegate(self.decode_backend)"},
                                    {"condition": "not self.spec_attn_is_decode",
                                     "end": "delegate(self.prefill_backend)"}]
    assert by["MiniMaxHybridAttnBackend"]["declares"]["DECODE"] == "max_of(self.sparse, self.dense)"
    assert by["TboAttnBackend"]["declares"]["DECODE"] == "max_of(self.primary, *self.children)"
    assert by["HybridLinearAttnBackend"]["declares"]["DECODE"] == "max_of(*self.attn_backend_list)"
    assert by["DotsHybridAttnBackend"]["declared_in"]["class"] == "AttentionBackend"
    snap = by["DeepseekV4AttnBackend"]["prefill_snapshot"]
    assert (snap["class"], snap["line"]) == ("DeepseekV4AttnBackend", 2935)
    assert {r["end"] for r in snap["declares"]} == {"UNKNOWN", "PRE_REPLAY"}


def test_workers_and_their_publishers(doc):
    got = [{"class": w["class"], "publisher": w["publisher"], "condition": w["condition"],
            "at": _at(w["returns_at"])} for w in doc["workers"]]
    assert got == EXPECTED["workers"]


def test_the_barrier_and_its_event_loops(doc):
    calls = [{"event_loop": c["event_loop"], "at": _at(c)} for c in doc["barrier"]["calls"]]
    assert calls == EXPECTED["barrier_calls"]
    assert [_at(d) for d in doc["barrier"]["defined"]] == ["sglang/srt/managers/scheduler.py:2012"]
    without = sorted(l["event_loop"] for l in doc["barrier"]["event_loops"] if not l["barrier_lines"])
    assert without == EXPECTED["event_loops_without_barrier"]


def test_runners_that_publish(doc):
    got = [{"class": r["class"], "publish": r["publish"], "at": _at(r["method"])} for r in doc["runners"]
           if r["publish"] != "never"]
    assert got == EXPECTED["publishing_runners"]
    never = {r["class"] for r in doc["runners"] if r["publish"] == "never"}
    assert {"EAGLEDraftCudaGraphRunner", "FrozenKVMTPCudaGraphRunner",
            "MultiLayerEagleDraftExtendCudaGraphRunner"} <= never


def test_the_findings_are_pinned(doc):
    got = [{"subject": f["subject"], "mode": f["mode"], "status": f["status"], "declared": f.get("declared"),
            "condition": f.get("condition"), "first_read": _at(f["evidence"][1])} for f in doc["findings"]]
    assert got == EXPECTED["findings"]


def test_dots_replan_after_dp_padding_runs_only_outside_capture(doc):
    """Dots' hybrid backend re-plans its DSA child from ``forward`` only when ``get_is_capture_mode()`` is false
    (dots_hybrid_backend.py:439): never in a captured graph, so its reads are not findings."""
    why = {(n["mode"], n["line"]): n["why"] for n in doc["not_findings"] if n["subject"] == "DotsHybridAttnBackend"
           and n["file"] == "sglang/srt/layers/attention/dsa_backend.py"}
    for mode in ("DECODE", "TARGET_VERIFY"):
        for line in (1117, 1122):
            assert why[mode, line].startswith(
                "behind a capture-mode test at sglang/srt/layers/attention/dots_hybrid_backend.py:439"), (mode, line)
    assert not [f for f in doc["findings"] if f["subject"] == "DotsHybridAttnBackend"]


def test_the_documented_races_are_found(doc):
    """The sparse decode reads of docs/sglang-0.5.23.md ("QSA and MiniMax sparse decode read req_to_token in every
    layer after the marker")."""
    reads = {(f["subject"], f["mode"]): [e for e in f["evidence"][1:]] for f in doc["findings"]}
    mm = reads["MiniMaxSparseAttnBackend", "DECODE"]
    assert any((e["file"], e["line"]) == ("sglang/srt/layers/attention/minimax_sparse_backend.py", 1820) for e in mm)
    qsa = reads["QwenSparseAttnBackend", "DECODE"]
    assert any(e["file"] == "sglang/srt/layers/attention/qwen_sparse_attn_backend.py"
               and "_forward_paged_attention" in e["what"] for e in qsa)
    assert ("TritonAttnBackend", "DECODE") not in reads  # its reads end in the out-of-graph prep
    snap = [f for f in doc["findings"] if f.get("declared_by") == "_snapshot_prefill_shared_reads"]
    assert {f["subject"] for f in snap} == {"DeepseekV4AttnBackend", "DeepseekV4MegaAttnBackend",
                                            "DeepseekV4MultiStepBackend", "DeepseekV4TrtllmAttnBackend",
                                            "DeepseekV4TrtllmMultiStepBackend"}
    assert all(f["condition"] == "not is_cp_active(forward_batch) and not (self.hisparse_coordinator is not None)"
               for f in snap)


def test_the_release_document_meets_its_schema(doc):
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[1] / "docs" / "sglang-reader.schema.json").read_text("utf-8"))
    jsonschema.validate(doc, schema)


def test_the_release_has_no_drift_against_its_recorded_fingerprints(extraction):
    from fencecheck.sglang_source.drift import compare, load_release

    ex = extraction
    _, recorded = load_release("sglang-0.5.23")
    assert recorded["sglang_version"] == "0.5.23"
    assert compare(recorded, ex.fingerprints.to_dict(ex.version)) == []
    funcs = recorded["functions"]
    assert "barrier" in funcs["sglang.srt.managers.scheduler.Scheduler._apply_war_barrier"]["facts"]
    dsv4 = "sglang.srt.layers.attention.deepseek_v4_backend.DeepseekV4AttnBackend.shared_read_ends"
    assert funcs[dsv4]["line"] == 1221


@pytest.fixture(scope="module")
def catalog_parsed():
    """The release's files the catalog cites, parsed once for the module: (fingerprints, path -> syntax tree)."""
    from fencecheck.files.catalog import RELEASE as VERSION
    from fencecheck.sglang_source.drift import catalog_fingerprints

    parsed: dict = {}
    return catalog_fingerprints(RELEASE, VERSION, parsed), parsed


def test_catalog_entries_record_the_fingerprints_of_what_they_cite(catalog_parsed):
    from fencecheck.files.catalog import RELEASE as VERSION, load_catalog
    from fencecheck.sglang_source.drift import compare_catalog, load_release

    _, recorded = load_release("sglang-0.5.23")
    assert recorded["catalog"]["version"] == VERSION
    assert set(recorded["catalog"]["entries"]) == {s.name for s in load_catalog(VERSION)}
    assert "missing" not in {h for e in recorded["catalog"]["entries"].values() for h in e.values()}
    assert compare_catalog(recorded["catalog"], catalog_parsed[0]) == []


def test_a_changed_declaration_flags_exactly_the_entries_that_cite_it(tmp_path, catalog_parsed):
    """A PR that edits TRT-LLM MHA's declaration: `--against` lists the catalog entries that cite it, and no other.
    The edited tree is the release with that one file changed: the edited file is read from a copy, every other
    cited file is the release's, parsed once for the module."""
    from fencecheck.sglang_source.drift import catalog_fingerprints, compare_catalog, load_release

    rel = "srt/layers/attention/trtllm_mha_backend.py"
    tree = tmp_path / "sglang"
    target = tree / rel
    target.parent.mkdir(parents=True)
    text = (RELEASE / rel).read_text(encoding="utf-8")
    assert "SharedReadEnds.PRE_REPLAY" in text
    target.write_text(text.replace("SharedReadEnds.PRE_REPLAY", "SharedReadEnds.IN_REPLAY", 1), encoding="utf-8")
    parsed = {k: v for k, v in catalog_parsed[1].items() if k != rel}
    _, recorded = load_release("sglang-0.5.23")
    flagged = compare_catalog(recorded["catalog"], catalog_fingerprints(tree, recorded["catalog"]["version"], parsed))
    cited = "srt/layers/attention/trtllm_mha_backend.py:TRTLLMHAAttnBackend.shared_read_ends"
    expected = sorted(name for name, names in recorded["catalog"]["entries"].items() if cited in names)
    assert expected and [x["entry"] for x in flagged] == expected
    assert all(x["changed"] == [cited] for x in flagged)


def test_qsa_sparse_decode_races_in_the_generated_configurations_that_replay_decode_in_a_graph(extraction):
    """QwenSparseAttnBackend's DECODE reads after the marker, decided in each configuration generated from the
    release's facts that runs a DECODE phase with the barrier on: a race where the decode graph runner publishes its
    marker (plain decode on CUDA), none where decode is eager, where no marker makes the release's POST_REPLAY
    fallback publish after the replay, where the barrier is coarse, where the loop has no barrier, or where the decode
    phase is EAGLE's draft (its runner never publishes)."""
    from fencecheck.decision.findings import decide_contexts, generated_contexts, scenario_dict, tree_rule

    backends = {b.at: b for b in extraction.backends}
    (f,) = [f for f in extraction.findings if (f.subject, f.mode) == ("QwenSparseAttnBackend", "DECODE")]
    (rows,) = decide_contexts([scenario_dict(f, backends[f.subject_at], 0, tree_rule(extraction))],
                              generated_contexts(extraction))
    f = {"contexts": [r.to_json() for r in rows]}
    racing = {r["context"]: r["races"] for r in f["contexts"] if r["verdict"] == "counterexample"}
    assert racing == {"no-speculation-decode-cuda-overlap-0": ["req_to_token@p0-decode/in_graph_after_marker"]}
    proved = {r["context"] for r in f["contexts"] if r["verdict"] == "proved"}
    for name in ("no-speculation-decode-cuda-overlap-1", "no-speculation-decode-cuda-normal-", "no-speculation-decode-cuda-pp-",
                 "no-speculation-decode-hip-no-marker-forced-overlap-", "no-speculation-decode-cuda-no-marker-overlap-",
                 "no-speculation-decode-cuda-coarse-overlap-", "eagle-cuda-overlap-"):
        assert any(p.startswith(name) for p in proved), name
    assert len(proved) == len(f["contexts"]) - 1


def test_backends_bound_to_a_device_whose_runners_never_publish_are_not_findings(doc):
    """intel_amx (sgl-kernel CPU operators) and the Ascend backends (torch_npu): their devices' decode graph runners
    (capture_decode_graph's map) never publish, so their DECODE and TARGET_VERIFY reads are not findings; XPU's
    runner inherits the CUDA runner's execute and MUSA, ROCm take the CUDA runner: those stay findings."""
    moved = {}
    for n in doc["not_findings"]:
        if n["why"].startswith("never resolved on "):
            moved.setdefault((n["subject"], n["mode"]), n["why"])
    assert set(moved) == {("AscendAttnBackend", "DECODE"), ("DeepseekV4AscendAttnBackend", "DECODE"),
                          ("DeepseekV4AscendAttnBackend", "TARGET_VERIFY"), ("IntelAMXAttnBackend", "DECODE"),
                          ("IntelAMXAttnBackend", "TARGET_VERIFY")}
    setup = "sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py"
    amx = moved["IntelAMXAttnBackend", "DECODE"]
    for cite in ("takes torch.ops.sgl_kernel.decode_attention_cpu (sglang/srt/layers/attention/intel_amx_backend.py:58)",
                 f"CPUGraphRunner ({setup}:774)",
                 "CPUGraphRunner.execute never publishes (sglang/srt/model_executor/cpu_graph_runner.py:992)",
                 "sglang/srt/managers/scheduler.py:2007 (is_cuda() or envs.SGLANG_ENABLE_WAR_BARRIER.get())"):
        assert cite in amx, cite
    npu = moved["AscendAttnBackend", "DECODE"]
    for cite in ("imports torch_npu at module level (sglang/srt/hardware_backend/npu/attention/ascend_backend.py:7)",
                 f"NPUGraphRunner ({setup}:775)", "NPUGraphRunner.execute never publishes "
                 "(sglang/srt/hardware_backend/npu/graph_runner/npu_graph_runner.py:238)"):
        assert cite in npu, cite
    subjects = {f["subject"] for f in doc["findings"]}
    assert {"XPUAttentionBackend", "MusaFlashAttentionBackend", "AiterAttnBackend", "TorchNativeAttnBackend",
            "TorchFlexAttnBackend"} <= subjects
    assert not subjects & {"IntelAMXAttnBackend", "AscendAttnBackend", "DeepseekV4AscendAttnBackend"}


def test_children_passed_to_the_release_composites(doc):
    by = {b["class"]: b for b in doc["backends"]}
    registry = "sglang/srt/layers/attention/attention_registry.py"
    mm = by["MiniMaxHybridAttnBackend"]
    assert mm["children"] == {"sparse": "MiniMaxSparseAttnBackend"}
    assert mm["passed_children"]["sparse"] == [{"class": "MiniMaxSparseAttnBackend", "condition": None,
                                                "file": registry, "line": 388}]
    (dense,) = mm["passed_children"]["dense"]
    assert dense["class"] is None and dense["reason"] == (
        f"a parameter of attn_backend_wrapper ({registry}:355), chosen by its callers")
    setup = "sglang/srt/model_executor/model_runner_components/attention_backend_setup.py"
    for attr in ("decode_backend", "prefill_backend"):  # the factory returns a registry lookup
        (dec,) = by["HybridAttnBackend"]["passed_children"][attr]
        assert dec["class"] is None and dec["reason"] == f"the value of ATTENTION_BACKENDS[backend_str](...) at {setup}:283"
    dots = by["DotsHybridAttnBackend"]
    assert dots["children"] == {"dsa_backend": "DeepseekSparseAttnBackend", "swa_backend": "DotsSWAMLAAttnBackend"}
    linear = by["HybridLinearAttnBackend"]["passed_children"]["linear_attn_backend"]
    assert {"GDNAttnBackend", "KDAAttnBackend", "LightningAttentionBackend", "Mamba2AttnBackend",
            "ShortConvAttnBackend", None} <= {o["class"] for o in linear}
    gdn = [o for o in linear if o["class"] == "GDNAttnBackend"]
    assert gdn == [{"class": "GDNAttnBackend", "condition": "hybrid_gdn_config(runner.model_config) is not None",
                    "file": registry, "line": 572}]
    (tbo,) = by["TboAttnBackend"]["passed_children"]["primary"]
    assert tbo["class"] is None and tbo["reason"].startswith("the value of creator(...)")


#: One screen: the rows a terminal of ``SCREEN_COLUMNS`` shows without scrolling (a laptop's full-screen terminal).
SCREEN_ROWS, SCREEN_COLUMNS = 50, 160


def test_the_release_summary_fits_one_screen_and_cuts_no_fix_or_configuration():
    """``fencecheck sglang`` on 0.5.23 without --details: every root cause's line, wrapped at 160 columns, and the
    lines around them fit 50 rows; each root cause's own lines fit the width (the summary's ``WIDTH``), and no
    confirmed or reachable one loses its least demanding configuration or its fix to the cut."""
    import subprocess
    import sys

    from fencecheck.render.summary import WIDTH

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "fencecheck", "sglang", str(RELEASE)], cwd=root,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    rows = sum(max(1, -(-len(x) // SCREEN_COLUMNS)) for x in lines)
    assert rows <= SCREEN_ROWS, f"{rows} rows at {SCREEN_COLUMNS} columns:\n{done.stdout}"
    start = next(i for i, x in enumerate(lines) if x.startswith("findings: "))
    end = next(i for i, x in enumerate(lines) if x.startswith("not findings: "))
    causes = [i for i in range(start + 1, end) if lines[i].startswith(("  CONFIRMED ", "  REACHABLE ", "  UNRESOLVED "))]
    assert len(causes) >= 10
    for i in causes:
        assert len(lines[i]) <= WIDTH and len(lines[i + 1]) <= WIDTH, (lines[i], lines[i + 1])
        if lines[i].startswith(("  CONFIRMED ", "  REACHABLE ")):
            assert re.search(r"least demanding \S+ \([^)]*\); fix \(proved\): declare \w+$", lines[i + 1]), lines[i + 1]


def test_the_reads_in_the_model_s_own_layers_are_unresolved_notes(doc):
    """Dots 3's KV write location (the pool's translate when the metadata has no matching swa_out_cache_loc) and
    Qwen4-Exp's per-layer-embedding batch (the mamba slots of the batch's requests) read in the forward, and the ROCm
    fused rope argument (through a local the map or None) on HIP only; MindSpore's block table (behind a host sync)
    is not noted."""
    notes = {(n["file"], n["line"]): n["what"] for n in doc["notes"] if "in the model's forward" in n["what"]}
    assert set(notes) == {("sglang/srt/models/dots3_common/modeling.py", 883), ("sglang/srt/models/qwen4_exp.py", 344),
                          ("sglang/srt/models/utils.py", 339)}
    assert notes["sglang/srt/models/utils.py", 339].startswith(
        "utils.create_fused_set_kv_buffer_arg reads full_to_swa_index_mapping in the model's forward (from ")
    assert "utils.create_fused_set_kv_buffer_arg; when _is_hip); only on hip:" in notes["sglang/srt/models/utils.py", 339]
    assert notes["sglang/srt/models/qwen4_exp.py", 344].startswith(
        "qwen4_exp._prepare_ple_batch reads req_index_to_mamba_index_mapping in the model's forward (from "
        "Qwen4ExpModel.forward and 1 more forward methods, via Qwen4ExpModel.forward -> qwen4_exp._prepare_ple_batch; "
        "when not breakable_ple and self.has_ple")
    assert notes["sglang/srt/models/dots3_common/modeling.py", 883].startswith(
        "Dots3AttentionMLA._get_kv_write_loc reads full_to_swa_index_mapping in the model's forward (from "
        "Dots3AttentionMLA.forward_normal_prepare and 6 more forward methods, via "
        "Dots3AttentionMLA.forward_normal_prepare -> Dots3AttentionMLA._get_kv_write_loc; when self.use_swa and "
        "(swa_loc is None or ")
    assert all(n["unresolved"] for n in doc["notes"] if "in the model's forward" in n["what"])
