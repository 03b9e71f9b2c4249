"""The static reader's ``algorithms``: worker, decode-step phases, publisher and reads after it, per algorithm.

Each speculative algorithm's worker, the phases of one decode step, the publisher and the worker's reads after the
publisher's runner. A synthetic tree (tests/sglang_trees/algorithms) pins each rule; the release's table is pinned
against tests/sglang_0_5_23_algorithms.json (audited by hand)."""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from fencecheck.commands.main import main
from fencecheck.sglang_source import read_path
from fencecheck.decision.workers import decide_worker_reads

TREES = Path(__file__).resolve().parent / "sglang_trees"
WORKERS = "sglang/srt/speculative/workers.py"
COMPONENTS = "sglang/srt/speculative/components.py"


@pytest.fixture(scope="module")
def synthetic_ex(tmp_path_factory):
    dest = tmp_path_factory.mktemp("algorithms") / "wheel"
    shutil.copytree(TREES / "common", dest, dirs_exist_ok=True)
    shutil.copytree(TREES / "algorithms", dest, dirs_exist_ok=True)
    return decide_worker_reads(read_path(dest / "sglang"))[0]


@pytest.fixture(scope="module")
def synthetic_doc(synthetic_ex):
    return synthetic_ex.to_json()


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
    assert a["worker"] == {"class": "AlphaWorker", "file": WORKERS, "line": 24}
    assert a["dispatch"] == {"file": "sglang/srt/speculative/spec_info.py", "line": 25}
    assert _runs(a) == [
        ("DraftWorker.cuda_graph_runner", "DECODE", None, WORKERS, 17),
        ("AlphaWorker.target_worker", "TARGET_VERIFY", None, WORKERS, 40),
        ("on_publish", None, "on_publish is not None", WORKERS, 42),
        ("DraftWorker.draft_extend_runner", "DRAFT_EXTEND_V2", "not self.skip_draft_extend", WORKERS, 21),
        ("DraftWorker.cuda_graph_runner", "DECODE", None, WORKERS, 17),
    ]
    assert [p["side"] for p in a["phases"]] == ["draft", "target", None, "draft", "draft"]
    assert a["publisher"] == [{"publisher": "self.draft_worker.draft_runner", "condition": None, "side": "draft",
                               "file": WORKERS, "line": 33}]
    assert a["unresolved"] == []


def test_a_workers_prefill_step_is_its_step_entry_walked_with_an_extend_batch(synthetic):
    # AlphaWorker.forward_batch_generation hands an extend batch to the target and returns (workers.py:36-37)
    assert [(p["runner"], p["mode"], p["side"], p["file"], p["line"]) for p in synthetic["ALPHA", None]["prefill_phases"]] \
        == [("AlphaWorker.target_worker", "EXTEND", "target", WORKERS, 37)]


def test_a_speculative_prefill_step_is_a_configuration_and_publishes_as_its_gate_says(synthetic_doc):
    configs = synthetic_doc["configurations"]["configurations"]
    alpha = [c for c in configs if "ALPHA: prefill" in c["sources"]]
    assert alpha and all([(p["mode"], p["side"], p["policy"], p["execution"]) for p in c["phases"]]
                         == [("EXTEND", "target", "prefill", "eager")] and c["prefill_read_done"] for c in alpha)
    assert {c["loop"] for c in alpha} == {"overlap"}  # a loop without the barrier runs the plain steps only


def _alpha_prefill(tmp_path, body: list[str], target_publishes: bool) -> dict:
    """The synthetic tree's document with AlphaWorker's prefill branch replaced by ``body`` (its lines, from line 37
    on), the barrier waiting on the target's mailbox or, as the tree has it, the draft's."""
    dest = tmp_path / "wheel"
    shutil.copytree(TREES / "common", dest, dirs_exist_ok=True)
    shutil.copytree(TREES / "algorithms", dest, dirs_exist_ok=True)
    w = dest / WORKERS
    text = w.read_text(encoding="utf-8")
    prefill = "            return self.target_worker.forward_batch_generation(batch)\n"
    publisher = "        return self.draft_worker.draft_runner\n"
    assert text.count(prefill) == 1 and text.count(publisher) == 1
    if target_publishes:
        text = text.replace(publisher, "        return self.target_worker.model_runner\n")
    w.write_text(text.replace(prefill, "".join(f"            {x}\n" for x in body)), encoding="utf-8")
    return decide_worker_reads(read_path(dest / "sglang"))[0].to_json()


def _prefill_reads(doc: dict) -> tuple[list, list]:
    alpha = next(a for a in doc["algorithms"] if a["name"] == "ALPHA")
    return ([(r["location"], r["line"], r["after"]["mode"], r["finding"]["status"], r["why"])
             for r in alpha["prefill_reads_after_publisher"]],
            [n for n in doc["notes"] if "after its prefill step's publishing phase" in n["what"]])


PENDING_WHY = "after the prefill step's publishing phase: not decided (no scenario models a worker's read in a prefill step)"


@pytest.mark.parametrize("read, noted", [("self.req_to_token_pool.req_to_token[batch.req_pool_indices]", True),
                                         ("self.req_to_token_pool.req_to_token[batch.req_pool_indices].tolist()", False)])
def test_a_read_after_the_target_s_prefill_is_an_undecided_note(tmp_path, read, noted):
    doc = _alpha_prefill(tmp_path, ["out = self.target_worker.forward_batch_generation(batch)",
                                    f"out.kv_slots = {read}", "return out"], target_publishes=True)
    after, notes = _prefill_reads(doc)
    if not noted:  # copied to the host before the worker returns: no read after the publish
        assert after == [] and notes == []
        return
    assert after == [("req_to_token", 38, "EXTEND", "unresolved", PENDING_WHY)]
    assert [(n["file"], n["line"]) for n in notes] == [(WORKERS, 38)] and "ALPHA may publish" in notes[0]["what"]
    alpha = next(a for a in doc["algorithms"] if a["name"] == "ALPHA")
    assert all(r["location"] != "req_to_token" or r["line"] != 38 for r in alpha["reads_after_publisher"])
    assert not any(f["kind"] == "worker_read_after_publish" and f["evidence"][1]["line"] == 38
                   for f in doc["findings"])  # a note, never a finding nor a question


def test_a_read_after_a_prefill_step_s_draft_extend_is_a_note_too(tmp_path):
    # the barrier waits on the draft's mailbox, which the draft extend runner fills before its replay
    doc = _alpha_prefill(tmp_path, ["out = self.target_worker.forward_batch_generation(batch)",
                                    "self.draft_worker.draft_extend(batch, out)",
                                    "out.slots = self.req_to_token_pool.req_to_token[batch.req_pool_indices]",
                                    "return out"], target_publishes=False)
    after, notes = _prefill_reads(doc)
    assert after == [("req_to_token", 39, "DRAFT_EXTEND_V2", "unresolved", PENDING_WHY)]
    assert [(n["file"], n["line"]) for n in notes] == [(WORKERS, 39)]


def test_a_prefill_step_s_phase_in_another_mode_keeps_its_own_runner(tmp_path):
    doc = _alpha_prefill(tmp_path, ["out = self.target_worker.forward_batch_generation(batch)",
                                    "batch.forward_mode = ForwardMode.TARGET_VERIFY",
                                    "self.target_worker.forward_batch_generation(batch)", "return out"],
                         target_publishes=True)
    runs = {tuple((p["mode"], p["policy"], p["execution"]) for p in c["phases"])
            for c in doc["configurations"]["configurations"] if "ALPHA: prefill" in c["sources"]}
    # the verify forward replays the decode graph runner or runs eagerly: never the (absent) prefill graph runner
    assert (("EXTEND", "prefill", "eager"), ("TARGET_VERIFY", "resolve", "graph")) in runs
    assert (("EXTEND", "prefill", "eager"), ("TARGET_VERIFY", "prefill", "eager")) in runs


def test_a_changed_prefill_step_is_a_changed_fact_of_its_own(synthetic_doc):
    from fencecheck.decision.fact_changes import diff, facts
    from fencecheck.sglang_source.fact_drift import fact_table

    before = facts(synthetic_doc)
    assert before["phases"]["ALPHA (AlphaWorker), prefill step"] == ["AlphaWorker.target_worker EXTEND [resolve, graph]"]
    moved = json.loads(json.dumps(synthetic_doc))
    alpha = next(a for a in moved["algorithms"] if a["name"] == "ALPHA")
    alpha["prefill_phases"][0]["mode"] = "DECODE"  # the step no longer hands the target an extend batch
    (x,) = diff(before, facts(moved))[0]
    assert (x.category, x.key, x.change) == ("phases", "ALPHA (AlphaWorker), prefill step", "changed")
    assert fact_table(moved)["algorithm/ALPHA|AlphaWorker/prefill_phases"] \
        != fact_table(synthetic_doc)["algorithm/ALPHA|AlphaWorker/prefill_phases"]


@pytest.mark.parametrize("publish, want", [("allowed", (True, [])), ("may", (True, [])),
                                           ("with settings", (False, ["SGLANG_X=True"])), ("never", (False, []))])
def test_the_prefill_gate_of_an_algorithm_decides_its_prefill_read_done(publish, want):
    from fencecheck.sglang_source.contexts import _prefill_speculative

    gates = {"no_speculation": "with settings", "algorithms": [{"name": "ALPHA", "publish": publish}],
             "settings": [{"name": "SGLANG_X", "default": False, "publish_off_when": False}]}
    assert _prefill_speculative({"prefill_gates": gates}, "ALPHA") == want
    no_setting = {**gates, "settings": []}  # an algorithm gated by a test of its own: still a configuration with it on
    assert _prefill_speculative({"prefill_gates": no_setting}, "ALPHA")[1] == (
        ["ALPHA's prefill read-done turned on (steps.prefill_gates: with settings)"] if publish == "with settings"
        else [])
    assert _prefill_speculative({"prefill_gates": gates}, "OTHER") == (False, ["SGLANG_X=True"])  # as no speculation
    assert _prefill_speculative({}, "ALPHA") == (True, [])  # a tree without the gates publishes


def test_each_phase_publishes_as_its_runner_class_does(synthetic):
    def policies(a):
        return [(p["line"], p["publish"] and (p["publish"]["policy"], p["publish"]["execution"])) for p in a["phases"]]

    assert policies(synthetic["ALPHA", None]) == [
        (17, ("never", "graph")), (40, ("resolve", "graph")), (42, None), (21, ("always_pre_replay", "graph")),
        (17, ("never", "graph"))]
    extend = synthetic["ALPHA", None]["phases"][3]["publish"]
    assert extend["why"].startswith("AlwaysPublishingRunner: publish publish_unconditionally (sglang/srt/speculative/")
    delta = synthetic["DELTA", None]["phases"]
    assert [(p["line"], p["publish"] and p["publish"]["policy"]) for p in delta] == [
        (35, "resolve"), (37, None), (19, "never"), (20, "prefill")]
    assert delta[3]["publish"]["execution"] == "eager"
    assert delta[3]["publish"]["why"].startswith(
        "the worker sets its model runner up without decode graphs (sglang/srt/speculative/frozen.py:15)")


def test_a_device_read_after_the_publishing_runner_races_there_and_a_host_copy_does_not(synthetic):
    reads = {r["line"]: r for r in synthetic["ALPHA", None]["reads_after_publisher"]}
    assert set(reads) == {51, 52}
    late = reads[52]
    assert late["location"] == "req_to_token" and late["file"] == WORKERS
    # ordered against the draft-extend (which publishes), not the later draft (which never does)
    assert late["after"] == {"call": "self.draft_extend_runner.execute", "file": WORKERS, "line": 21,
                             "condition": "not self.skip_draft_extend", "mode": "DRAFT_EXTEND_V2", "can_publish": True}
    assert late["finding"] == {"kind": "worker_read_after_publish", "status": "plausible",
                               "scenario": "sglang-alpha-worker-reads-req-to-token-52", "verdict": "counterexample",
                               "races": ["req_to_token@draft-draft-extend-v2-21/worker_after"],
                               "mode": "DRAFT_EXTEND_V2"}
    assert late["via"] == [f"AlphaWorker.forward_batch_generation ({WORKERS}:35)", f"AlphaWorker.commit ({WORKERS}:45)"]
    copied = reads[51]
    assert copied["finding"] is None
    assert copied["why"].startswith(f"copied to the host at {WORKERS}:51")


def test_a_read_after_a_draft_that_publishes_nothing_is_covered_by_the_coarse_barrier(synthetic):
    (read,) = synthetic["DELTA", None]["reads_after_publisher"]
    assert (read["file"], read["line"], read["location"]) == ("sglang/srt/speculative/frozen.py", 40, "req_to_token")
    assert read["finding"] is None
    assert read["verdict"] == "proved" and read["races"] == []
    assert read["why"].startswith("the fence covers it: nothing publishes into the mailbox of the publisher "
                                  "`self.draft_worker.model_runner`")


def test_a_commit_through_a_component_handed_in_by_the_constructor_is_followed_and_races(synthetic):
    (read,) = synthetic["ZETA", None]["reads_after_publisher"]
    assert (read["file"], read["line"], read["location"]) == (COMPONENTS, 12, "req_to_token")
    assert read["via"][-1] == f"KvInjector.inject ({COMPONENTS}:25)"
    assert read["finding"]["status"] == "confirmed"
    assert read["finding"]["races"] == ["req_to_token@target-target-verify-22/worker_after"]


def test_the_findings_list_has_each_worker_read_that_races(synthetic_doc, synthetic):
    got = [(f["kind"], f["subject"], f["mode"], f["status"], f["location"], f["races"])
           for f in synthetic_doc["findings"] if f["kind"] == "worker_read_after_publish"]
    assert got == [
        ("worker_read_after_publish", "AlphaWorker", "DRAFT_EXTEND_V2", "plausible", "req_to_token",
         ["req_to_token@draft-draft-extend-v2-21/worker_after"]),
        ("worker_read_after_publish", "ZetaWorker", "TARGET_VERIFY", "confirmed", "req_to_token",
         ["req_to_token@target-target-verify-22/worker_after"]),
    ]
    alpha = synthetic_doc["findings"][[f["subject"] for f in synthetic_doc["findings"]].index("AlphaWorker")]
    assert alpha["condition"] == "not self.skip_draft_extend"
    assert [e["line"] for e in alpha["evidence"]] == [21, 52]  # the publisher's runner call, then the read


def test_each_racing_worker_read_comes_with_a_verified_change_to_the_worker(synthetic_doc):
    """The read before the publishing runner call where a phase comes before it, else the publisher's mailbox
    cleared after that call; each proved by the simulator and the model on the read's scenario with the change."""
    fixes = {f["subject"]: f["fix"] for f in synthetic_doc["findings"] if f["kind"] == "worker_read_after_publish"}
    for fix in fixes.values():
        assert fix["declares"] is None and (fix["verdict"], fix["model_verdict"]) == ("proved", "proved")
    assert fixes["AlphaWorker"]["change"] == (
        "take the req_to_token rows it needs before `self.draft_extend_runner.execute` (sglang/srt/speculative/"
        "workers.py:21) publishes and read that copy after it (the model: the read moved before that call, after "
        "the phase before it)")
    assert fixes["ZetaWorker"]["change"].startswith("clear the mailbox of `target` after `")


def test_a_read_stays_unresolved_until_decided_and_the_model_agrees_on_a_racing_and_a_covered_one(tmp_path):
    dest = tmp_path / "wheel"
    shutil.copytree(TREES / "common", dest)
    shutil.copytree(TREES / "algorithms", dest, dirs_exist_ok=True)
    ex = read_path(dest / "sglang")
    ex = replace(ex, algorithms=tuple(a for a in ex.algorithms if a.name in ("DELTA", "ZETA")))
    doc = ex.to_json()
    pending = [r for a in doc["algorithms"] for r in a["reads_after_publisher"]]
    assert [(r["finding"]["status"], r["finding"]["scenario"], r["why"].startswith("not decided yet"))
            for r in pending] == [("unresolved", None, True)] * 2
    assert doc["findings"] == []  # the extraction decides nothing
    decided, built = decide_worker_reads(ex, model=True)
    assert ex.to_json() == doc  # deciding builds new records: the extraction stays as read
    doc = decided.to_json()
    assert [(r.outcome.decision.scenario, r.outcome.decision.verdict) for a in decided.algorithms
            for r in a.reads_after_publisher] == [("sglang-delta-worker-reads-req-to-token-40", "proved"),
                                                  ("sglang-zeta-worker-reads-req-to-token-12", "counterexample")]
    (f,) = doc["findings"]
    assert f["subject"] == "ZetaWorker" and f["model_verdict"] == "counterexample" and f["oracles_agree"] is True
    assert [s.name for s in built] == ["sglang-zeta-worker-reads-req-to-token-12"]  # the findings' scenarios
    (covered,) = doc["algorithms"][0]["reads_after_publisher"]  # proved by both
    assert covered["model_verdict"] == "proved" and covered["oracles_agree"] is True
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).resolve().parents[1] / "docs" / "sglang-reader.schema.json").read_text("utf-8"))
    jsonschema.validate(doc, schema)


def test_unknown_classes_loops_and_dynamic_workers_are_unresolved_with_their_reason(synthetic):
    beta = synthetic["BETA", None]
    assert _runs(beta) == [("DraftWorker.cuda_graph_runner", "DECODE", None, WORKERS, 17)]
    assert beta["phases"][0]["repeat"] == f"for range(self.num_steps) ({WORKERS}:68)"
    assert beta["unresolved"] == [
        f"`self.helper_worker.verify` ({WORKERS}:70): the class of `self.helper_worker` is not known statically; "
        "its phases are not followed",
        f"`self.cuda_graph_runner.execute` ({WORKERS}:17) runs inside for range(self.num_steps) ({WORKERS}:68): "
        "a count known only at run time",
        "no phase runs on the publisher `self.target_worker.model_runner`'s side (target)",
    ]
    gamma = synthetic["GAMMA", None]
    assert gamma["worker"] is None and gamma["phases"] == []
    assert gamma["unresolved"] == ["create_worker returns `load_plugin_worker(self.name)` "
                                   "(sglang/srt/speculative/spec_info.py:38): not a class of the tree "
                                   "(known only at run time)"]


def test_the_summary_and_the_audit_table_show_the_phases_and_the_finding(synthetic_ex):
    from fencecheck.render.tree_text import render
    from fencecheck.render.release_markdown import algorithms_markdown

    text = render(synthetic_ex)
    assert f"    DraftWorker.draft_extend_runner DRAFT_EXTEND_V2 ({WORKERS}:21) if not self.skip_draft_extend\n" in text
    assert (f"    PLAUSIBLE: reads req_to_token after the publisher's runner ({WORKERS}:52); "
            "scenario sglang-alpha-worker-reads-req-to-token-52: counterexample\n") in text
    assert "  PLAUSIBLE AlphaWorker DRAFT_EXTEND_V2: worker read after publish\n" in text
    rows = [r for r in algorithms_markdown(synthetic_ex.algorithms) if r.startswith("| ALPHA ")]
    assert len(rows) == 1 and "1 findings, 1 not findings" in rows[0]
    assert "`workers.py:52` req_to_token (plausible)" in rows[0]
    assert "DraftWorker.draft_extend_runner: DRAFT_EXTEND_V2 at `workers.py:21` (conditional)" in rows[0]


def test_a_tree_without_speculative_algorithms_has_none(tmp_path):
    dest = tmp_path / "wheel"
    shutil.copytree(TREES / "common", dest)
    assert read_path(dest / "sglang").to_json()["algorithms"] == []


# --- the release ------------------------------------------------------------------------------------------------------
EXPECTED = json.loads((Path(__file__).resolve().parent / "sglang_0_5_23_algorithms.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def release(release_extraction):
    doc = decide_worker_reads(release_extraction)[0].to_json()
    return doc["algorithms"], doc["findings"]


def _table(algorithms):
    return [{"name": a["name"], "condition": a["condition"],
             "worker": a["worker"] and f"{a['worker']['class']} {a['worker']['file']}:{a['worker']['line']}",
             "phases": [f"{p['runner']} {p['mode']} {p['file']}:{p['line']}" for p in a["phases"]],
             "prefill_phases": [f"{p['runner']} {p['mode']} {p['file']}:{p['line']}" for p in a["prefill_phases"]]}
            for a in algorithms]


@pytest.mark.slow
def test_the_releases_algorithms_table_is_pinned(release):
    got = _table(release[0])
    want = [{k: row[k] for k in ("name", "condition", "worker", "phases", "prefill_phases")}
            for row in EXPECTED["algorithms"]]
    assert got == want


@pytest.mark.slow
def test_the_releases_worker_reads_after_the_publisher_are_decided_and_pinned(release):
    def tag(r):
        f = r["finding"]
        why = "host copy" if r["why"].startswith("copied to the host") else r["why"].split(":")[0]
        return f"{r['file']}:{r['line']} {r['location']}" + (
            f" ({f['status']}: {', '.join(f.get('races') or [])})" if f
            else f" (not a finding: {r.get('verdict') or why})")

    algorithms, findings = release
    got = {f"{a['name']} {a['condition']}": sorted(tag(r) for r in a["reads_after_publisher"]) for a in algorithms}
    assert got == EXPECTED["reads_after_publisher"]
    frozen = next(a for a in algorithms if a["name"] == "FROZEN_KV_MTP")
    covered = [r for r in frozen["reads_after_publisher"] if not r["why"].startswith("its path cannot run")]
    assert covered and all(r["why"].startswith("the fence covers it: nothing publishes into the mailbox of the "
                                               "publisher `self._draft_worker.draft_runner`") for r in covered)
    assert [f"{f['subject']} {f['mode']} {f['status']}: {f['location']} at {f['evidence'][1]['file']}:"
            f"{f['evidence'][1]['line']}" for f in findings if f["kind"] == "worker_read_after_publish"] \
        == EXPECTED["findings"]


def test_lines_on_paths_that_exclude_each_other_are_not_ordered():
    """A read in a branch that returns is not before a phase after that branch (UNO's tree path returns before its
    linear verify), nor is a line of one ``if`` branch before one of the other; lines one path runs both of are."""
    import ast

    from fencecheck.sglang_source.algorithms import _exclusive

    fn = ast.parse('''
def step(self, batch):
    if self.tree_mode:
        return self.tree(batch)
    self.linear(batch)
    if batch.x:
        a()
    else:
        b()
    c()
    for y in batch.ys:
        if y:
            d()
            return
    e()
''').body[0]
    assert _exclusive(fn, 4, 5) and _exclusive(fn, 5, 4)  # the tree branch returns before the linear call
    assert _exclusive(fn, 7, 9)  # the two branches of one if
    assert _exclusive(fn, 13, 15)  # a loop's branch that returns, and the line after the loop
    assert not _exclusive(fn, 5, 10) and not _exclusive(fn, 7, 10) and not _exclusive(fn, 10, 13)


_PLATFORM_INJECT = '''from sglang.srt.utils.common import is_cpu, is_cuda, is_npu

_is_npu = is_npu()
_is_cpu = is_cpu()
_is_cuda = is_cuda()
_on_npu = is_npu()
_on_cpu = is_cpu()
_on_cpu = False
_npu_only = is_npu()


def use_npu():
    global _on_npu
    _on_npu = True


class KvInjector:
    def __init__(self, req_to_token_pool):
        self.req_to_token_pool = req_to_token_pool

    def inject(self, batch, _npu_only=False):
        if _npu_only:
            return self.req_to_token_pool.req_to_token[batch.spec_info]
        if _is_npu:
            return self.req_to_token_pool.req_to_token[batch.req_pool_indices]
        if _is_cpu:
            return self.req_to_token_pool.req_to_token[batch.seq_lens]
        if _is_cuda and _is_npu:
            return self.req_to_token_pool.req_to_token[batch.out_cache_loc]
        if _on_npu:
            return self.req_to_token_pool.req_to_token[batch.positions]
        if _on_cpu:
            return self.req_to_token_pool.req_to_token[batch.extend_seq_lens]
        return self.req_to_token_pool.req_to_token[batch.input_ids]
'''


def test_a_worker_read_only_on_devices_whose_runners_never_publish_is_not_a_finding(tmp_path):
    """ZETA's commit after the verify, split by module-level platform flags (``_is_npu = is_npu()``): on the NPU
    or the CPU only (their decode graph runners in capture_decode_graph's map never publish, the eager runner only a
    prefill's PRE_REPLAY) or on no platform, the read is not a finding, with why citing the flag's binding and each
    runner; the read on every other platform stays a finding, and so does one under a name that is no flag: rebound
    through ``global``, bound twice at module level, or a parameter of a function on the path. Once the NPU runner
    publishes, the NPU read is a finding again."""
    dest = tmp_path / "wheel"
    for case in ("common", "algorithms", "device"):
        shutil.copytree(TREES / case, dest, dirs_exist_ok=True)
    utils = dest / "sglang" / "srt" / "utils" / "common.py"
    utils.write_text(utils.read_text("utf-8") + "\n\ndef is_npu():\n    return hasattr(torch, 'npu')\n\n\n"
                     "def is_cpu():\n    return False\n", "utf-8")
    comp = dest / COMPONENTS
    text = comp.read_text("utf-8")
    start, end = text.index("class KvInjector:"), text.index("class VerifyExecutor:")
    comp.write_text(text[:text.index("from sglang")] + _PLATFORM_INJECT + "\n\n" + text[end:], "utf-8")
    lines = comp.read_text("utf-8").splitlines()
    at = {key: lines.index(next(x for x in lines if key in x)) + 1
          for key in ("[batch.req_pool_indices]", "[batch.seq_lens]", "[batch.out_cache_loc]", "[batch.positions]",
                      "[batch.input_ids]", "[batch.extend_seq_lens]", "[batch.spec_info]", "_is_npu = is_npu()", "_is_cpu = is_cpu()")}

    def zeta(root):
        ex = decide_worker_reads(read_path(root))[0]
        doc = ex.to_json()
        (a,) = [a for a in doc["algorithms"] if a["name"] == "ZETA"]
        return {r["line"]: r for r in a["reads_after_publisher"]}, {
            f"{e['file']}:{e['line']}" for f in doc["findings"] if f["subject"] == "ZetaWorker"
            for e in f["evidence"][1:]}

    reads, found = zeta(dest / "sglang")
    assert found == {f"{COMPONENTS}:{at[k]}" for k in ("[batch.spec_info]", "[batch.positions]",
                                                       "[batch.extend_seq_lens]", "[batch.input_ids]")}
    npu, cpu, nowhere = (reads[at[k]] for k in ("[batch.req_pool_indices]", "[batch.seq_lens]",
                                                 "[batch.out_cache_loc]"))
    assert npu["finding"] is None and npu["why"].startswith(
        f"runs only on npu: `_is_npu` (_is_npu = is_npu() ({COMPONENTS}:{at['_is_npu = is_npu()']})); npu's decode "
        "graph runner is NPUGraphRunner (sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py:12), "
        "whose NPUGraphRunner.execute never publishes (sglang/srt/hardware_backend/npu/graph_runner/"
        "npu_graph_runner.py:4), and the eager runner publishes only a prefill PRE_REPLAY "
        "(sglang/srt/model_executor/runner/eager_runner.py:8): `self.target_worker.model_runner`'s mailbox gets no "
        "event from a TARGET_VERIFY step there")
    assert "one platform's predicate is taken to hold at a time (is_npu (sglang/srt/utils/common.py:" in npu["why"]
    assert cpu["finding"] is None and cpu["why"].startswith(
        f"runs only on cpu: `not (_is_npu)` and `_is_cpu` (_is_npu = is_npu() ({COMPONENTS}:{at['_is_npu = is_npu()']})"
        f"; _is_cpu = is_cpu() ({COMPONENTS}:{at['_is_cpu = is_cpu()']})); cpu's decode graph runner is "
        "CPUGraphRunner")
    assert nowhere["finding"] is None and nowhere["why"].startswith(
        "its path runs on no platform: `not (_is_npu)` and `not (_is_cpu)` and `_is_cuda and _is_npu`")
    # _on_npu is rebound through `global`, _on_cpu at module level, _npu_only is a parameter of inject: none is a flag
    assert reads[at["[batch.positions]"]]["finding"]["status"] == "plausible"
    assert reads[at["[batch.extend_seq_lens]"]]["finding"]["status"] == "plausible"
    out = io.StringIO()
    main(["sglang", str(dest / "sglang")], out=out, err=io.StringIO())
    assert "worker reads after the publisher's runner (2 on a device whose runners never publish)" in out.getvalue()
    runner = dest / "sglang" / "srt" / "hardware_backend" / "npu" / "graph_runner" / "npu_graph_runner.py"
    runner.write_text(runner.read_text("utf-8").replace(
        "        return self.backend.replay(forward_batch)",
        "        self.backend.shared_read_ends(forward_batch.forward_mode)\n        read_done = self.device_module.Event()\n"
        "        read_done.record()\n        self.model_runner.shared_read_done_event = read_done\n"
        "        return self.backend.replay(forward_batch)"), "utf-8")
    reads, found = zeta(dest / "sglang")
    assert f"{COMPONENTS}:{at['[batch.req_pool_indices]']}" in found
    assert reads[at["[batch.seq_lens]"]]["finding"] is None and reads[at["[batch.out_cache_loc]"]]["finding"] is None


#: Per release, the worker reads after the publisher on a platform branch (judged in tests/sglang_judged.json):
#: (file, line) -> the platform the reader binds it to, or None for one that stays a finding.
PLATFORM_READS = {
    "0.5.18": {("sglang/kernels/ops/speculative/cache_locs.py", 449): None,
               ("sglang/kernels/ops/speculative/cache_locs.py", 467): "npu",
               ("sglang/kernels/ops/speculative/cache_locs.py", 483): "cpu",
               ("sglang/srt/speculative/spec_utils.py", 732): "cpu"},
    "0.5.22": {("sglang/srt/speculative/spec_utils.py", 826): "cpu"},
}


@pytest.mark.slow
@pytest.mark.parametrize("release", sorted(PLATFORM_READS))
def test_the_release_worker_reads_on_a_cpu_or_npu_branch_are_not_findings(release):
    """DSpark's cache-location kernels (0.5.18: the ``_is_npu`` and ``_is_cpu`` branches of
    kernels/ops/speculative/cache_locs.py) and the spec commit's CPU kernel (``if _is_cpu:`` in spec_utils.py) run
    only where the decode graph runner never publishes; the CUDA-alike branch stays a finding."""
    from sglang_release import require_tree

    ex = decide_worker_reads(read_path(require_tree(release, fetching=True)))[0]
    doc = ex.to_json()
    got = {}
    for a in doc["algorithms"]:
        for r in a["reads_after_publisher"]:
            if (r["file"], r["line"]) in PLATFORM_READS[release]:
                got.setdefault((r["file"], r["line"]), set()).add(
                    "finding" if r["finding"] else r["why"].split(":")[0])
    want = {k: {"finding"} if v is None else {f"runs only on {v}"} for k, v in PLATFORM_READS[release].items()}
    for k in want:  # a read several algorithms share: each of its rows is decided alike, or by an earlier rule
        if k in got and want[k] != {"finding"}:
            got[k] -= {"no barrier with this publisher", "this publisher row never holds", "the fence covers it"}
    assert got == want


def test_a_read_after_a_draft_runner_of_the_worker_s_own_stays_a_finding_on_a_silent_device(tmp_path):
    """ALPHA's draft runner publishes before every replay (a class of the worker's own, not the device's decode graph
    runner: 0.5.18's NPU draft-extend runner is one), here in DECODE: its commit read on the NPU branch stays a
    finding; the same read after a target verify that the NPU's decode graph runner replays would not be one."""
    dest = tmp_path / "wheel"
    for case in ("common", "algorithms", "device"):
        shutil.copytree(TREES / case, dest, dirs_exist_ok=True)
    utils = dest / "sglang" / "srt" / "utils" / "common.py"
    utils.write_text(utils.read_text("utf-8") + "\n\ndef is_npu():\n    return hasattr(torch, 'npu')\n", "utf-8")
    workers = dest / WORKERS
    text = workers.read_text("utf-8")
    text = text.replace("from sglang.srt.speculative.runners import", "from sglang.srt.utils.common import is_npu\n"
                        "from sglang.srt.speculative.runners import", 1)
    text = text.replace("\n\nclass DraftWorker:", "\n\n_is_npu = is_npu()\n\n\nclass DraftWorker:", 1)
    text = text.replace("        batch.forward_mode = ForwardMode.DRAFT_EXTEND_V2\n",
                        "        batch.forward_mode = ForwardMode.DECODE\n", 1)
    text = text.replace("        out.kv_slots = self.req_to_token_pool.req_to_token[batch.req_pool_indices]\n",
                        "        if _is_npu:\n"
                        "            out.kv_slots = self.req_to_token_pool.req_to_token[batch.req_pool_indices]\n", 1)
    workers.write_text(text, "utf-8")
    line = next(n for n, x in enumerate(text.splitlines(), 1) if "out.kv_slots = self.req_to_token_pool" in x)
    doc = decide_worker_reads(read_path(dest / "sglang"))[0].to_json()
    (alpha,) = [a for a in doc["algorithms"] if a["name"] == "ALPHA"]
    read = next(r for r in alpha["reads_after_publisher"] if r["line"] == line)
    assert read["condition"] == "_is_npu" and read["after"]["mode"] == "DECODE"
    runs = next(n for n, x in enumerate(text.splitlines(), 1) if "self.draft_extend_runner.execute(batch)" in x)
    assert read["finding"] is not None and read["finding"]["races"] == [f"req_to_token@draft-decode-{runs}/worker_after"]


def test_the_tests_that_hold_both_a_worker_read_and_the_publishing_call_are_taken_as_held():
    """The tests of the ``if`` statements holding both the publishing runner call and the read, and the early exits
    before both, held when the phase ran; a test around the read alone, or one after the call, did not."""
    import ast

    from fencecheck.sglang_source.algorithms import _enclosing_both

    src = """\
def step(self, batch):
    if batch.skip:
        return None
    if batch.forward_mode.is_target_verify():
        out = self.target.run(batch)
        if self.flag:
            return out
        if batch.cold:
            commit(batch)
        commit(batch)
    else:
        commit(batch)
"""
    fn = ast.parse(src).body[0]
    functions = {"m.step": (fn, "m.py")}
    call = [("m.step", 5)]
    both = {"not (batch.skip)", "batch.forward_mode.is_target_verify()"}
    assert _enclosing_both([("m.step", 10)], call, functions) == both
    assert _enclosing_both([("m.step", 9)], call, functions) == both  # `batch.cold` holds the read alone
    assert _enclosing_both([("m.step", 12)], call, functions) == {"not (batch.skip)"}  # the other branch
    # a call both chains go through: everything holding it holds both
    assert _enclosing_both([("m.step", 5), ("n.run", 3)], [("m.step", 5), ("n.run", 7)], functions) >= both


@pytest.mark.slow
@pytest.mark.parametrize("release, file, line, subject", [
    ("0.5.18", "spec_utils.py", 741, "NGRAMWorker"),
    ("0.5.22", "spec_utils.py", 835, "NGRAMWorker")])
def test_the_release_post_verify_commit_is_reachable_not_a_question(release, file, line, subject):
    """NGRAM's post-verify KV commit (judged real, the hazard the fence's PR fixed): its read sits in the verify
    branch with the verify call (``batch.forward_mode.is_target_verify()``) behind ``not _is_cpu`` (``_is_cpu =
    is_cpu()``), both settled on CUDA, so it is a finding that needs its algorithm, not a question. Multi-layer
    EAGLE's read of the same line stays a question: it needs ``topk > 1`` and a staged draft-extend, run-time
    values."""
    from sglang_release import require_tree

    out = io.StringIO()
    main(["sglang", str(require_tree(release, fetching=True)), "--format", "json"], out=out, err=io.StringIO())
    doc = json.loads(out.getvalue())
    (f,) = [f for f in doc["findings"] if f["kind"] == "worker_read_after_publish" and f["subject"] == subject
            and any(e["file"].endswith(file) and e["line"] == line for e in f["evidence"][1:])]
    assert f["status"] == "reachable" and f["status_why"].startswith("needs --speculative-algorithm "), f
    others = [g for g in doc["findings"] if g["kind"] == "worker_read_after_publish" and g["subject"] != subject
              and any(e["file"].endswith(file) and e["line"] == line for e in g["evidence"][1:])]
    assert all(g["status"] == "unresolved" and "topk > 1" in g["status_why"] for g in others), others


#: Per release, the undecided notes on worker reads after a prefill step's publishing phase, judged by reading.
#: 0.5.22: real. ``DSparkWorkerV2._forward_prefill`` runs the target's prefill (``dspark_worker_v2.py:650``), then
#: injects the draft KV (``:728``): ``TargetHiddenKvInjector._inject_mla`` reads ``full_to_swa_index_mapping``
#: (``dspark_kv_inject.py:144``, or the translate at ``:149``, ``deepseek_v4_memory_pool.py:1220-1222``) unless
#: ``is_unified_kv_triton()``, after the read-done DSpark may publish early when DeepSeek-V4 declares ``PRE_REPLAY``
#: for ``EXTEND`` (``deepseek_v4_backend.py:1118-1123``). 0.5.23: not races. ``place_prefill`` computes ``swa_loc``
#: before the target's prefill (``dspark_worker_v2.py:823-826``, ``dspark_kv_inject.py:104-117``), so the injection's
#: ``committed_swa_loc`` under ``swa_loc is None`` never runs after it: the notes stand, with that condition, until
#: the interpretation decides it.
PREFILL_READ_NOTES = {
    "0.5.18": ([], None),
    "0.5.22": ([144, 149], "not (is_unified_kv_triton())"),
    "0.5.23": ([299, 304], "swa_loc is None"),
}


@pytest.mark.slow
@pytest.mark.parametrize("version", sorted(PREFILL_READ_NOTES))
def test_the_releases_reads_after_a_prefill_step_are_undecided_notes(version):
    from sglang_release import require_tree

    lines, condition = PREFILL_READ_NOTES[version]
    doc = read_path(require_tree(version, fetching=True)).to_json()
    notes = [n for n in doc["notes"] if "after its prefill step's publishing phase" in n["what"]]
    assert [(n["file"], n["line"]) for n in notes] \
        == [("sglang/srt/speculative/dspark_components/dspark_kv_inject.py", x) for x in lines]
    assert all(n["what"].startswith("DSparkWorkerV2 reads full_to_swa_index_mapping") and "DSPARK may publish" in
               n["what"] and condition in n["what"] for n in notes)
