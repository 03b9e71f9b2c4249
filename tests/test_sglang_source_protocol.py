"""The protocol facts the reader takes from a tree's code, on small synthetic trees.

tests/sglang_trees/common has a minimal fence: the no-marker fallback and the rule it makes, publishes by any means,
the marker and the gate per platform, the no-marker fallback's race, the shared locations, the generated
configurations, records and drift against another tree."""

from __future__ import annotations

import io
import json

from sglang_reader_trees import build

from fencecheck.commands.main import main
from fencecheck.sglang_source import read_path

DECODE_RUNNER = "srt/model_executor/runner/decode_cuda_graph_runner.py"
SCHEDULER = "srt/managers/scheduler.py"
LATE_PREP = '''from sglang.srt.layers.attention.base_attn_backend import AttentionBackend


class InGraphPrepBackend(AttentionBackend):
    """Declares the base rule (IN_REPLAY for DECODE) and reads req_to_token in its in-graph prep: honest."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token

    def init_forward_metadata_in_graph(self, fb):
        self.page_table = self.req_to_token[fb.req_pool_indices]
'''


def _tree(tmp_path, files=None, case=None):
    return build(tmp_path / "t", files or {}, case)


def _edit(root, rel, old, new):
    p = root / rel
    text = p.read_text("utf-8")
    assert old in text, old
    p.write_text(text.replace(old, new), "utf-8")


def _run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", *map(str, argv)], out, err)
    return code, out.getvalue(), err.getvalue()


def _runner(doc, name):
    (r,) = [r for r in doc["graph_runners"] if r["class"] == name]
    return r


def test_the_fallback_and_the_rule_are_read_from_the_resolver(tmp_path):
    """The resolver's no-marker branch returns POST_REPLAY: declaration_only_post_fallback, the rule every scenario
    of the tree uses; PRE_REPLAY there is declaration_only; any other member is unresolved, with its reason."""
    root = _tree(tmp_path)
    doc = read_path(root).to_json()
    fb = _runner(doc, "DecodeCudaGraphRunner")["fallback"]
    assert (fb["rule"], fb["end"], fb["marker"], fb["line"]) == (
        "declaration_only_post_fallback", "POST_REPLAY", "in_graph_metadata_prep_done", 22)
    assert doc["configurations"]["rule"] == "declaration_only_post_fallback"
    _edit(root, DECODE_RUNNER, "return SharedReadEnds.POST_REPLAY", "return SharedReadEnds.PRE_REPLAY")
    doc = read_path(root).to_json()
    assert _runner(doc, "DecodeCudaGraphRunner")["fallback"]["rule"] == "declaration_only"
    assert doc["configurations"]["rule"] == "declaration_only"
    _edit(root, DECODE_RUNNER, "return SharedReadEnds.PRE_REPLAY", "return SharedReadEnds.UNKNOWN")
    fb = _runner(read_path(root).to_json(), "DecodeCudaGraphRunner")["fallback"]
    assert fb["rule"] == "unresolved" and "no resolution rule" in fb["reason"]


def test_each_publish_is_placed_against_the_replay_by_any_means(tmp_path):
    """The decode runner's helper publishes a fresh event before the replay for PRE_REPLAY, the marker after it for
    IN_REPLAY and a fresh event after it for POST_REPLAY; a runner that assigns the mailbox itself before its replay
    without asking publishes unconditionally, and after its replay it publishes after_replay."""
    direct = '''class DirectRunner:
    def execute(self, forward_batch):
        read_done = self.device_module.Event()
        read_done.record()
        self.model_runner.shared_read_done_event = read_done
        return self.backend.replay(self.key, forward_batch)
'''
    root = _tree(tmp_path, {"srt/speculative/direct.py": direct})
    doc = read_path(root).to_json()
    pubs = [(p["at"], p["event"], p["ends"]) for p in _runner(doc, "DecodeCudaGraphRunner")["publishes"]]
    assert pubs == [("before_replay", "fresh", ["PRE_REPLAY"]), ("in_graph_marker", "marker", ["IN_REPLAY"]),
                    ("after_replay", "fresh", ["POST_REPLAY"])]
    r = _runner(doc, "DirectRunner")
    assert r["policy"] == "publish_unconditionally"
    assert [(p["at"], p["event"], p["ends"], p["line"]) for p in r["publishes"]] == [("before_replay", "fresh", None, 5)]
    moved = direct.replace("        return self.backend.replay(self.key, forward_batch)\n", "").replace(
        "        read_done = self.device_module.Event()", "        out = self.backend.replay(self.key, forward_batch)\n"
        "        read_done = self.device_module.Event()") + "        return out\n"
    (root / "srt/speculative/direct.py").write_text(moved, "utf-8")
    r = _runner(read_path(root).to_json(), "DirectRunner")
    assert [p["at"] for p in r["publishes"]] == ["after_replay"]


def test_the_mailbox_is_whatever_the_barrier_waits_on(tmp_path):
    """Renamed in the barrier and the runners alike, the mailbox is still found: no name is assumed."""
    root = _tree(tmp_path)
    for rel in (SCHEDULER, DECODE_RUNNER, "srt/model_executor/runner_utils/shared_read_event.py",
                "srt/model_executor/model_runner.py"):
        _edit(root, rel, "shared_read_done_event", "fence_event")
    doc = read_path(root).to_json()
    assert doc["fence"]["mailbox"] == "fence_event"
    assert _runner(doc, "DecodeCudaGraphRunner")["policy"] == "resolve"
    assert _runner(doc, "EagerRunner")["policy"] == "prefill_publish"


def test_the_marker_and_the_gate_are_evaluated_per_platform(tmp_path):
    """make_external_event returns None unless is_cuda(): the marker is present on CUDA (unless the external event
    raises TypeError) and absent elsewhere; the barrier is on by default on CUDA only and forced on by the setting.
    A gate without is_cuda() is off by default on CUDA too."""
    root = _tree(tmp_path)
    doc = read_path(root).to_json()
    rows = {p["platform"]: p for p in doc["platforms"]["platforms"]}
    assert rows["cuda"]["marker"] == "present" and rows["hip"]["marker"] == "absent"
    assert rows["cuda"]["marker_absent_when"] == ["device_module.Event(external=True) raises TypeError"]
    assert rows["cuda"]["barrier"] == {"default": True, "on_when": [], "off_when": []}
    assert rows["hip"]["barrier"] == {"default": False, "off_when": [],
                                      "on_when": [{"setting": "SGLANG_ENABLE_WAR_BARRIER", "value": True}]}
    _edit(root, SCHEDULER, "is_cuda() or envs.SGLANG_ENABLE_WAR_BARRIER.get()", "envs.SGLANG_ENABLE_WAR_BARRIER.get()")
    rows = {p["platform"]: p for p in read_path(root).to_json()["platforms"]["platforms"]}
    assert rows["cuda"]["barrier"]["default"] is False


def test_the_no_marker_fallback_races_only_when_it_falls_back_before_the_replay(tmp_path):
    """An honest backend reading in the graph before the marker: with the POST_REPLAY fallback no finding; with
    PRE_REPLAY a no_marker_fallback finding whose scenario races at in_graph_before_marker, on the platforms without
    a marker once the barrier is on."""
    root = _tree(tmp_path, {"srt/layers/attention/in_graph_prep_backend.py": LATE_PREP})
    code, out, _ = _run(root, "--json")
    doc = json.loads(out)
    assert [f for f in doc["findings"] if f["kind"] == "no_marker_fallback"] == []
    _edit(root, DECODE_RUNNER, "return SharedReadEnds.POST_REPLAY", "return SharedReadEnds.PRE_REPLAY")
    code, out, _ = _run(root, "--json")
    doc = json.loads(out)
    found = {f["mode"]: f for f in doc["findings"] if f["kind"] == "no_marker_fallback"}
    assert set(found) == {"DECODE", "TARGET_VERIFY"}  # both graph-replayed modes the base rule declares IN_REPLAY
    f = found["DECODE"]
    assert code == 1 and (f["subject"], f["status"], f["verdict"]) == (
        "DecodeCudaGraphRunner", "reachable", "counterexample")
    assert f["status_why"] == f"needs {f['condition']}"  # the platform without the marker, the barrier forced on
    assert f["races"] == ["req_to_token@decode/in_graph_before_marker"] and f["backends"] == ["InGraphPrepBackend"]
    assert "hip" in f["condition"] and "SGLANG_ENABLE_WAR_BARRIER=True" in f["condition"]
    assert f["oracles_agree"] is True


def test_the_shared_locations_are_the_tensors_the_scheduler_writes_and_a_backend_reads(tmp_path):
    """req_to_token, written through ReqToTokenPool.write below the overlap loop, is a location; a second tensor the
    pool writes and a backend reads is one too and differs from the vocabulary's list; one no backend reads is not."""
    root = _tree(tmp_path)
    loc = read_path(root).to_json()["shared_locations"]
    (x,) = loc["locations"]
    assert x["name"] == "req_to_token" and x["writes"][0]["line"] == 9
    assert x["writes"][0]["via"] == ["Scheduler.event_loop_overlap", "Scheduler.get_next_batch_to_run",
                                     "ReqToTokenPool.write (by name)"]
    assert loc["only_in_code"] == [] and loc["only_in_vocabulary"] == ["full_to_swa_index_mapping",
                                                                       "req_index_to_mamba_index_mapping"]
    pool = "srt/mem_cache/memory_pool.py"
    _edit(root, pool, "        self.req_to_token = torch.zeros((size, 8), dtype=torch.int32, device=device)",
          "        self.req_to_token = torch.zeros((size, 8), dtype=torch.int32, device=device)\n"
          "        self.slot_map = torch.zeros(size, device=device)\n        self.unread = torch.zeros(size)")
    _edit(root, pool, "        self.req_to_token[indices] = values",
          "        self.req_to_token[indices] = values\n        self.slot_map[indices] = 0\n        self.unread.fill_(0)")
    (root / "srt/layers/attention/slot_backend.py").write_text(
        "from sglang.srt.layers.attention.base_attn_backend import AttentionBackend\n\n\n"
        "class SlotBackend(AttentionBackend):\n    def forward_decode(self, q, k, v, layer, fb):\n"
        "        return self.pool.slot_map[fb.req_pool_indices]\n", "utf-8")
    loc = read_path(root).to_json()["shared_locations"]
    assert [x["name"] for x in loc["locations"]] == ["req_to_token", "slot_map"]
    assert loc["only_in_code"] == ["slot_map"] and [x["name"] for x in loc["not_read_by_backends"]] == ["unread"]


def test_the_configurations_are_generated_from_the_facts_and_decide_the_findings(tmp_path):
    """The common tree's facts give the plain decode step (graph, eager) and the prefill step, on CUDA, on the
    platforms without a marker (barrier forced, and off) and in the normal loop; a late read is decided in those
    that apply the barrier: it races where the decode graph publishes fine."""
    root = _tree(tmp_path, case="after_marker")
    _, out, _ = _run(root, "--json")
    doc = json.loads(out)
    conf = doc["configurations"]
    assert [c["name"] for c in conf["platform_classes"]] == ["cuda", "hip-no-marker-forced", "cuda-no-marker",
                                                            "hip-no-marker-barrier-off"]
    assert {x["kind"] for x in conf["loops"]} == {"overlap", "normal"}
    names = {c["name"] for c in conf["configurations"]}
    assert {"no-speculation-decode-cuda-overlap-0", "no-speculation-decode-cuda-overlap-1",
            "no-speculation-prefill-cuda-overlap-2"} <= names
    (f,) = [f for f in doc["findings"] if f["kind"] == "read_outside_declaration"]
    racing = {r["context"] for r in f["contexts"] if r["verdict"] == "counterexample"}
    assert racing == {"no-speculation-decode-cuda-overlap-0"}
    assert all("barrier-off" not in r["context"] for r in f["contexts"])
    from fencecheck.decision.findings import generated_contexts
    from fencecheck.files.scenario_io import scenario_from_dict

    for name, table in generated_contexts(read_path(root)):  # every generated table is a valid scenario (the schema holds)
        scenario_from_dict(table, name)


def test_a_record_and_drift_against_another_tree(tmp_path):
    """--record writes DIR/sglang-VERSION.json; against the tree before an edit of the fallback the changed fact is
    listed first and exits 1; against itself nothing differs."""
    root = _tree(tmp_path)
    before = tmp_path / "before"
    build(before, {})
    assert _run(root, "--record", tmp_path / "rec")[2] == ""
    record = json.loads((tmp_path / "rec" / "sglang-0.0.0+synthetic.json").read_text("utf-8"))
    assert set(record) == {"sglang_version", "facts", "functions", "configurations"}
    assert record["facts"]["runner/DecodeCudaGraphRunner/fallback"]["value"] == {
        "end": "POST_REPLAY", "rule": "declaration_only_post_fallback"}
    code, out, _ = _run(root, "--json", "--against", before / "sglang")
    assert code == 0 and json.loads(out)["drift"]["facts"] == []
    _edit(root, DECODE_RUNNER, "return SharedReadEnds.POST_REPLAY", "return SharedReadEnds.PRE_REPLAY")
    code, out, _ = _run(root, "--json", "--against", before / "sglang")
    d = json.loads(out)["drift"]
    assert code == 1 and d["source"].startswith("the tree ")
    fb = next(x for x in d["facts"] if x["fact"] == "runner/DecodeCudaGraphRunner/fallback")
    assert (fb["old"]["end"], fb["new"]["end"]) == ("POST_REPLAY", "PRE_REPLAY")
    key = "sglang.srt.model_executor.runner.decode_cuda_graph_runner.DecodeCudaGraphRunner._resolve_shared_read_ends"
    assert [(f["function"], f["drift"]) for f in d["functions"]] == [(key, True)]


def _never_replayed_tree(tmp_path):
    """The after-marker tree with a base graph-state hook that raises and a decode graph runner that calls it while
    it is built; ``ReplayedLateBackend`` overrides the hook, ``LateReadBackend`` does not."""
    root = _tree(tmp_path, {"srt/layers/attention/replayed_backend.py": (
        "from sglang.srt.layers.attention.late_backend import LateReadBackend\n\n\n"
        "class ReplayedLateBackend(LateReadBackend):\n"
        "    def init_cuda_graph_state(self, max_bs, max_num_tokens):\n        self.buf = max_bs\n")},
        case="after_marker")
    _edit(root, "srt/layers/attention/base_attn_backend.py", "class AttentionBackend(ABC):\n",
          "class AttentionBackend(ABC):\n    def init_cuda_graph_state(self, max_bs, max_num_tokens):\n"
          "        \"\"\"Init the global shared states for cuda graph.\"\"\"\n        raise NotImplementedError()\n\n")
    _edit(root, DECODE_RUNNER, "        self.in_graph_metadata_prep_done = None\n",
          "        self.in_graph_metadata_prep_done = None\n        self._init_state()\n\n"
          "    def _init_state(self):\n        self.attn_backend.init_cuda_graph_state(8, 64)\n")
    return root


def test_a_backend_no_decode_graph_replays_has_its_graph_reads_decided_eagerly(tmp_path):
    """A backend that inherits the raising hook the decode graph runner calls unconditionally runs DECODE eagerly,
    where the eager runner publishes nothing for DECODE: its late read is a not finding citing the hook, the base
    and the eager scenario (proved by both oracles); the backend that overrides the hook keeps its finding."""
    root = _never_replayed_tree(tmp_path)
    code, out, _ = _run(root, "--json")
    doc = json.loads(out)
    replay = doc["graph_replay"]
    assert [(h["hook"], h["function"], h["base"]["raises"]) for h in replay["hooks"]] == [
        ("init_cuda_graph_state", "DecodeCudaGraphRunner._init_state", True)]
    never = {r["class"]: r for r in replay["never_replayed"]}
    assert "LateReadBackend" in never and "ReplayedLateBackend" not in never
    assert "DECODE" in never["LateReadBackend"]["modes"] and "EXTEND" not in never["LateReadBackend"]["modes"]
    subjects = {(f["subject"], f["mode"]) for f in doc["findings"]}
    assert ("ReplayedLateBackend", "DECODE") in subjects and ("LateReadBackend", "DECODE") not in subjects
    (nf,) = [n for n in doc["not_findings"] if n["subject"] == "LateReadBackend" and n["mode"] == "DECODE"]
    assert nf["why"].startswith("never replayed in a decode graph: LateReadBackend inherits init_cuda_graph_state")
    assert "sglang/srt/layers/attention/base_attn_backend.py:" in nf["why"] and nf["why"].endswith(
        "scenario sglang-late-read-backend-decode-eager: proved")
    assert code == 1  # the overriding backend's finding


def test_a_hook_called_under_a_condition_or_a_base_that_does_not_raise_replays_every_backend(tmp_path):
    """Evidence the rule can fail both ways: the hook called only under a condition, or a base hook that does
    something, leaves every backend replayable and the late read a finding."""
    root = _never_replayed_tree(tmp_path)
    _edit(root, DECODE_RUNNER, "        self.attn_backend.init_cuda_graph_state(8, 64)\n",
          "        if self.model_runner.enable_graphs:\n            self.attn_backend.init_cuda_graph_state(8, 64)\n")
    doc = read_path(root).to_json()
    assert doc["graph_replay"]["hooks"] == [] and doc["graph_replay"]["never_replayed"] == []
    root = _never_replayed_tree(tmp_path / "b")
    _edit(root, "srt/layers/attention/base_attn_backend.py", "        raise NotImplementedError()\n",
          "        self.graph_state = (max_bs, max_num_tokens)\n")
    code, out, _ = _run(root, "--json")
    doc = json.loads(out)
    assert doc["graph_replay"]["never_replayed"] == [] and doc["graph_replay"]["hooks"][0]["base"]["raises"] is False
    assert ("LateReadBackend", "DECODE") in {(f["subject"], f["mode"]) for f in doc["findings"]}


AITER_LATE = '''try:
    from aiter import paged_attention
except ImportError:
    paged_attention = None

from sglang.srt.layers.attention.base_attn_backend import AttentionBackend


class RocmLateBackend(AttentionBackend):
    """Takes the base rule (IN_REPLAY for DECODE) and reads req_to_token in its forward, after the marker."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token

    def forward_decode(self, q, k, v, layer, forward_batch):
        return paged_attention(self.req_to_token[forward_batch.req_pool_indices])
'''


ROCM_BY_CONSTRUCTION = AITER_LATE.replace("try:\n    from aiter import paged_attention\nexcept ImportError:\n"
                                          "    paged_attention = None\n", "paged_attention = None\n") + '''

class RocmMultiStep:
    def __init__(self, model_runner):
        self.backends = [RocmLateBackend(model_runner) for _ in range(2)]
'''
#: The registry of the tree: RocmLateBackend is constructed after ``if not _is_hip: raise`` (a local import), and
#: inside RocmMultiStep, itself bound under another name by an import under ``is_hip()``.
ROCM_REGISTRY = '''from sglang.srt.utils.common import is_hip

_is_hip = is_hip()


def create_rocm_backend(runner):
    if not _is_hip:
        raise ValueError("the ROCm backend runs on ROCm only")
    from sglang.srt.layers.attention.rocm_late_backend import RocmLateBackend

    return RocmLateBackend(runner)


def create_multistep(runner):
    if is_hip():
        from sglang.srt.layers.attention.rocm_late_backend import RocmMultiStep as MultiStep
    else:
        from sglang.srt.layers.attention.triton_like_backend import HonestBackend as MultiStep
    return MultiStep(runner)
'''


def test_a_backend_constructed_only_on_one_platform_is_bound_to_it(tmp_path):
    """A backend whose every construction runs on hip (behind the registry's predicate alias, inside a class bound
    under another name on hip) is decided there by the tree's fallback, as an imported platform package is; one more
    construction without a predicate binds it to nothing and it stays a finding."""
    files = {"srt/layers/attention/rocm_late_backend.py": ROCM_BY_CONSTRUCTION,
             "srt/layers/attention/attention_registry.py": ROCM_REGISTRY}
    root = _tree(tmp_path, files)
    doc = json.loads(_run(root, "--json")[1])
    (row,) = doc["backend_platforms"]
    assert (row["class"], row["platform"]) == ("RocmLateBackend", "hip")
    assert row["why"].startswith("every construction of RocmLateBackend runs on hip only: ")
    reg = "sglang/srt/layers/attention/attention_registry.py"
    lines = ROCM_REGISTRY.splitlines()
    for needle, why in (("    from sglang.srt.layers.attention.rocm_late_backend import RocmLateBackend", "when _is_hip"),
                        ("        self.backends = [RocmLateBackend(model_runner) for _ in range(2)]",
                         "inside RocmMultiStep, itself constructed on hip only")):
        src = lines if needle in lines else ROCM_BY_CONSTRUCTION.splitlines()
        at = (reg if src is lines else "sglang/srt/layers/attention/rocm_late_backend.py") + f":{src.index(needle) + 1}"
        assert f"{at} ({why})" in row["why"], (at, row["why"])
    assert not [f for f in doc["findings"] if f["subject"] == "RocmLateBackend"]
    (nf,) = [n for n in doc["not_findings"] if n["subject"] == "RocmLateBackend" and n["mode"] == "DECODE"]
    assert nf["why"].startswith("on hip only: every construction of RocmLateBackend") and \
        nf["why"].endswith("-hip-no-marker: proved")
    other = _tree(tmp_path / "b", {**files, "srt/layers/attention/attention_registry.py": ROCM_REGISTRY + '''

def create_anywhere(runner):
    from sglang.srt.layers.attention.rocm_late_backend import RocmLateBackend

    return RocmLateBackend(runner)
'''})
    doc = json.loads(_run(other, "--json")[1])
    assert doc["backend_platforms"] == []
    assert ("RocmLateBackend", "DECODE") in {(f["subject"], f["mode"]) for f in doc["findings"]}


def test_a_backend_bound_to_a_platform_without_the_marker_is_decided_by_the_trees_fallback(tmp_path):
    """A backend whose module imports aiter unconditionally runs on hip only, where the tree's decode graph runner has
    no marker: with the POST_REPLAY fallback its late read is covered (a not finding citing the import, the marker's
    absence and the fallback); with PRE_REPLAY it races and stays a finding; imported under a condition it binds to
    nothing and stays a finding."""
    rel = "srt/layers/attention/rocm_late_backend.py"
    root = _tree(tmp_path, {rel: AITER_LATE})
    code, out, _ = _run(root, "--json")
    doc = json.loads(out)
    assert [(r["class"], r["platform"], r["at"]["line"]) for r in doc["backend_platforms"]] == [
        ("RocmLateBackend", "hip", 2)]
    assert not [f for f in doc["findings"] if f["subject"] == "RocmLateBackend"]
    (nf,) = [n for n in doc["not_findings"] if n["subject"] == "RocmLateBackend" and n["mode"] == "DECODE"]
    assert nf["why"].startswith("on hip only: ") and "no in-graph marker" in nf["why"] and \
        "fallback to POST_REPLAY" in nf["why"] and nf["why"].endswith("-hip-no-marker: proved")
    _edit(root, DECODE_RUNNER, "return SharedReadEnds.POST_REPLAY", "return SharedReadEnds.PRE_REPLAY")
    code, out, _ = _run(root, "--json")
    assert ("RocmLateBackend", "DECODE") in {(f["subject"], f["mode"]) for f in json.loads(out)["findings"]}
    other = _tree(tmp_path / "b", {rel: AITER_LATE.replace("try:\n    from aiter", "if False:\n    from aiter").replace(
        "except ImportError:\n    paged_attention = None", "else:\n    paged_attention = None")})
    code, out, _ = _run(other, "--json")
    doc = json.loads(out)
    assert doc["backend_platforms"] == []
    assert ("RocmLateBackend", "DECODE") in {(f["subject"], f["mode"]) for f in doc["findings"]}
