"""`fencecheck verify --sglang TREE CLASS`: the backend file built from the reader's reading of one class, then verified as a file is.

The builder is checked against hand-written backend files of the same facts (synthetic trees); the command against
`fencecheck verify` of that file (the same report), and on the release."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import tomli_w
from pr_pair import TREES, lay

from fencecheck.commands.main import main
from fencecheck.decision.backend_source import load
from fencecheck.files.scenario_io import backend_from_dict
from fencecheck.vocab import ReadSite


def tree(dest: Path, *cases: str) -> Path:
    for case in ("common", *cases):
        shutil.copytree(TREES / case, dest, dirs_exist_ok=True)
    return dest


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["verify", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


PRE = {"pre_replay": ["req_to_token"]}
EVERY_MODE = ("DECODE", "TARGET_VERIFY", "EXTEND", "MIXED", "IDLE", "DRAFT_EXTEND_V2")


def test_the_backend_file_is_the_backend_as_read(tmp_path):
    source, (v,) = load(str(lay(tmp_path / "head", "head")), "PagedBackend")
    assert (source.cls, source.file, source.line) == ("PagedBackend", "sglang/srt/layers/attention/paged_backend.py", 4)
    expected = {"name": "PagedBackend",
                "reads": {m: dict(PRE) for m in EVERY_MODE} | {
                    "DECODE": {"pre_replay": ["req_to_token"], "in_graph_after_marker": ["req_to_token"]}}}
    assert v.rows == () and v.backend == backend_from_dict(expected)
    _, (base,) = load(str(lay(tmp_path / "base", "base")), "PagedBackend")
    assert base.backend == backend_from_dict({"name": "PagedBackend", "reads": {m: dict(PRE) for m in EVERY_MODE}})


def test_a_composite_is_a_composite_of_its_children(tmp_path):
    _, (v,) = load(str(tree(tmp_path / "t", "composite")), "CompositeBackend")
    b = v.backend
    assert b.root.children == ("SneakyChildBackend", "HonestBackend") and not b.root.declares
    assert dict(b.backends["SneakyChildBackend"].reads["DECODE"]) == {ReadSite.IN_GRAPH_AFTER_MARKER: ("req_to_token",)}
    from fencecheck.model.backend_facts import child_findings, mode_facts

    facts = mode_facts(b)
    (decode,) = [f for f in facts if f.mode.value == "DECODE"]
    assert not decode.honest and decode.declared.name == "IN_REPLAY"  # max_of(base, base)
    assert any("SneakyChildBackend" in line for line in child_findings(b, facts))


def test_conditional_rows_and_the_prefill_snapshot_give_one_file_each(tmp_path):
    _, vs = load(str(tree(tmp_path / "t", "snapshot")), "SnapshotBackend")
    assert [r.text() for v in vs for r in v.rows] == [
        "SnapshotBackend EXTEND UNKNOWN (shared_read_ends)",
        "SnapshotBackend EXTEND UNKNOWN (_snapshot_prefill_shared_reads) when self.lazy",
        "SnapshotBackend EXTEND PRE_REPLAY (_snapshot_prefill_shared_reads) when not self.lazy"]
    extend = [v.data["reads"]["EXTEND"] for v in vs]
    assert extend[0] == {"in_graph_after_marker": ["req_to_token"], "in_graph_before_marker": ["req_to_token"]}
    # under the snapshot's publish the in-graph prep has run before it: read at pre_replay
    assert extend[1] == extend[2] == {"in_graph_after_marker": ["req_to_token"], "pre_replay": ["req_to_token"]}
    assert vs[2].data["declares"] == {"EXTEND": "PRE_REPLAY"} and "declares" not in vs[0].data


def test_an_unresolved_declaration_is_one_line_and_exit_3(tmp_path):
    t = tree(tmp_path / "t", "unresolved")
    (name,) = [ln.split()[1].split("(")[0] for ln in
               (t / "sglang/srt/layers/attention/loop_backend.py").read_text().splitlines() if ln.startswith("class ")]
    code, out, err = run("--sglang", str(t), name)
    assert code == 3 and out == "" and err.count("\n") == 1 and "nothing sound to verify" in err, err
    assert "(the reader: cannot evaluate a For statement)" in err  # the reader's own reason, not a guess


@pytest.mark.slow
def test_a_row_naming_a_child_of_unknown_class_says_which(tmp_path):
    """MiniMaxHybridAttnBackend on 0.5.23 declares ``max_of(self.sparse, self.dense)``; the reader knows the class of
    ``self.sparse`` only: the one line says ``self.dense`` is the child it cannot resolve."""
    from sglang_release import require_release

    code, out, err = run("--sglang", str(require_release()), "MiniMaxHybridAttnBackend")
    assert code == 3 and out == "" and err.count("\n") == 1, err
    assert "(self.dense: a child of unknown class, its declaration not known; children of known class: " \
           "{'sparse': 'MiniMaxSparseAttnBackend'})" in err


def test_an_unknown_class_is_one_line_and_exit_2(tmp_path):
    code, out, err = run("--sglang", str(lay(tmp_path / "head", "head")), "PagedBackends")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "expected an attention backend class" in err and "did you mean PagedBackend" in err


@pytest.mark.slow
def test_verify_sglang_is_verify_of_the_same_backend_file(tmp_path):
    head = lay(tmp_path / "head", "head")
    code, out, _ = run("--sglang", str(head), "PagedBackend")
    assert code == 1
    assert out.startswith("sglang 0.0.0+synthetic at ") and "PagedBackend (sglang/srt/layers/attention/" in out
    assert "finding: DECODE: PagedBackend reads req_to_token at in_graph_after_marker, outside what IN_REPLAY" in out
    _, (v,) = load(str(head), "PagedBackend")
    f = tmp_path / "paged.toml"
    f.write_text(tomli_w.dumps(v.data))
    code2, out2, _ = run(str(f))
    body = out.split("\n", 1)[1]
    tree_at = body.index("the tree's generated configurations: ")
    # the same report, after the line naming the source, up to the tree's configurations and the verdict line
    assert code2 == code and body[:tree_at] == out2[:out2.rindex("verify PagedBackend: ")]
    assert body.splitlines()[-1].endswith("and the tree's generated configurations)")
    doc = json.loads(run("--sglang", str(head), "PagedBackend", "--json")[1])
    assert doc["sglang"]["class"] == "PagedBackend" and doc["sglang"]["catalog"] == "sglang-0.5.23"
    (variant,) = doc["variants"]
    assert variant["rows"] == [] and variant["backend"] == "PagedBackend" and doc["safe"] is False


@pytest.mark.slow
def test_verify_sglang_on_the_release(tmp_path):
    from sglang_release import require_release

    root = require_release()
    code, out, _ = run("--sglang", str(root), "FlashInferAttnBackend")
    assert code == 1
    assert "FlashInferAttnBackend (sglang/srt/layers/attention/flashinfer_backend.py:" in out
    assert "finding: DECODE: FlashInferAttnBackend reads req_to_token at in_graph_after_marker" in out
    assert out.rstrip().split("\n")[-1].startswith("verify FlashInferAttnBackend: RACES in ")


@pytest.mark.slow
def test_verify_sglang_decides_the_tree_s_generated_configurations(tmp_path):
    """The late read races in the tree's plain CUDA decode configuration and not with an honest backend there (one
    the backend brings); the honest backend races in none; a configuration racing with an honest backend too is the
    configuration's own."""
    from fencecheck.decision.backend_source import Source
    from fencecheck.decision.backend_contexts import tree_races

    head = lay(tmp_path / "head", "head")
    code, out, _ = run("--sglang", str(head), "PagedBackend")
    assert "1 race with it and not with an honest backend" in out
    assert "    no-speculation-decode-cuda-overlap-0: req_to_token@p0-decode/in_graph_after_marker (model " \
           "counterexample)" in out
    assert out.splitlines()[-1].startswith("verify PagedBackend: RACES in ")  # the verdict line counts them, last
    source, (paged,) = load(str(head), "PagedBackend")
    decided, races = tree_races(source, paged.data)
    assert decided > 1 and [(r.configuration, r.own) for r in races] == [("no-speculation-decode-cuda-overlap-0",
                                                                          False)]
    assert races[0].to_json()["model_verdict"] == "counterexample"
    source, (honest,) = load(str(head), "HonestBackend")
    assert tree_races(source, honest.data)[1] == []
    phase = {"side": "target", "call": "c", "file": "f.py", "line": 1}
    eager_after_graph = {"name": "verify-after-verify", "source": "X", "condition": None, "publisher": "target",
                         "phases": [{**phase, "mode": "TARGET_VERIFY", "policy": "resolve", "execution": "graph"},
                                    {**phase, "mode": "TARGET_VERIFY", "policy": "prefill", "execution": "eager"}],
                         "platforms": ["cuda"], "marker": True, "barrier": True, "force_coarse": False,
                         "settings": [], "loop": "overlap", "event_loops": ["event_loop_overlap"],
                         "prefill_read_done": True}
    source = Source("r", None, "B", "f.py", 1, {"rule": "declaration_only_post_fallback",
                                                "configurations": [eager_after_graph]})
    table = {"name": "B", "declares": {"TARGET_VERIFY": "IN_REPLAY"},
             "reads": {"TARGET_VERIFY": {"pre_replay": ["req_to_token"]}}}
    decided, races = tree_races(source, table)
    assert decided == 1 and [(r.configuration, r.own) for r in races] == [("verify-after-verify", True)]


def test_the_tree_s_configurations_are_decided_once_per_content_and_own_races_model_only_when_asked(
        tmp_path, monkeypatch):
    """Two configurations equal but for their names and citations are one scenario, simulated and modelled once; a
    configuration's own race gets the model's verdict only with ``own_models`` (the text shows none), a race the
    backend brings always."""
    import fencecheck.model.decision as decision
    from fencecheck.decision.backend_source import Source
    from fencecheck.decision.backend_contexts import tree_races

    asked = []
    real = decision.Decision
    monkeypatch.setattr(decision, "Decision", lambda s: asked.append(s.name) or real(s))
    phase = {"side": "target", "call": "c", "file": "f.py", "line": 1}
    own = {"name": "verify-after-verify", "source": "X", "condition": None, "publisher": "target",
           "phases": [{**phase, "mode": "TARGET_VERIFY", "policy": "resolve", "execution": "graph"},
                      {**phase, "mode": "TARGET_VERIFY", "policy": "prefill", "execution": "eager"}],
           "platforms": ["cuda"], "marker": True, "barrier": True, "force_coarse": False,
           "settings": [], "loop": "overlap", "event_loops": ["event_loop_overlap"], "prefill_read_done": True}
    again = {**own, "name": "verify-after-verify-again", "condition": "flag",
             "phases": [{**ph, "file": "g.py", "line": 9} for ph in own["phases"]]}
    source = Source("r", None, "B", "f.py", 1, {"rule": "declaration_only_post_fallback",
                                                "configurations": [own, again]})
    table = {"name": "B", "declares": {"TARGET_VERIFY": "IN_REPLAY"},
             "reads": {"TARGET_VERIFY": {"pre_replay": ["req_to_token"]}}}
    decided, races = tree_races(source, table)
    assert decided == 2 and [(r.configuration, r.own, r.model_verdict) for r in races] == [
        ("verify-after-verify", True, "counterexample"), ("verify-after-verify-again", True, "counterexample")]
    assert asked == ["verify-after-verify"]  # the second is the first's scenario: its answers are the first's
    asked.clear()
    _, races = tree_races(source, table, own_models=False)
    assert [(r.own, r.model_verdict) for r in races] == [(True, None)] * 2 and asked == []
    head = lay(tmp_path / "head", "head")
    source, (paged,) = load(str(head), "PagedBackend")
    _, races = tree_races(source, paged.data, own_models=False)
    assert [(r.own, r.model_verdict) for r in races] == [(False, "counterexample")] and len(asked) == 1


def test_the_model_s_answer_in_a_tree_s_configurations_is_the_solver_s(tmp_path):
    """``tree_races`` asks the model through its host program run on a configuration's values (``Decision``); in
    every configuration of a tree, each backend of it swapped in, that answer (verdict and racing reads) is the
    solver's for the pinned scenario (``model_check``), racing or not."""
    from fencecheck.decision.backend_contexts import _with
    from fencecheck.files.scenario_io import scenario_from_dict
    from fencecheck.model.check import model_check
    from fencecheck.model.decision import Decision
    from fencecheck.model.solver import Budget
    from fencecheck.sglang_source.contexts import scenario

    head = lay(tmp_path / "head", "head")
    seen = {"counterexample": 0, "proved": 0}
    source, _ = load(str(head), "PagedBackend")
    conf = source.configurations
    late = {"declares": {m: "PRE_REPLAY" for m in EVERY_MODE},  # one that races wherever its mode runs late
            "reads": {m: {"pre_replay": ["req_to_token"], "in_graph_after_marker": ["req_to_token"],
                          "post_replay": ["req_to_token"]} for m in EVERY_MODE}}
    tables = [(n, {k: v for k, v in load(str(head), n)[1][0].data.items() if k not in ("name", "backends", "note")})
              for n in ("PagedBackend", "HonestBackend")] + [("Late", late)]
    for name, table in tables:
        modes = set(table.get("declares", {})) | set(table.get("reads", {}))
        for cfg in conf["configurations"]:
            if not cfg["barrier"]:
                continue
            data = _with(scenario(cfg, conf.get("rule")), name, {name: table}, modes)
            s = scenario_from_dict(data, cfg["name"], validate=False)
            got, want = Decision(s).report, model_check(s, budget=Budget(rlimit=50_000_000))
            assert (got.verdict, got.races) == (want.verdict, want.races), (name, cfg["name"])
            seen[want.verdict.value] += 1
    assert seen["counterexample"] >= 5 and seen["proved"] >= 10, seen


def test_the_tree_s_configurations_decided_beside_are_decided_as_here(tmp_path, monkeypatch):
    """The tables decided in a forked process (a second core) answer as ``tree_races`` answers here, table by table,
    in any order asked; on one core they are decided here."""
    import os

    from fencecheck.decision.backend_contexts import decided_beside, tree_races

    head = lay(tmp_path / "head", "head")
    source, (paged,) = load(str(head), "PagedBackend")
    _, (honest,) = load(str(head), "HonestBackend")
    tables = {0: paged.data, 1: honest.data}
    here = [tree_races(source, t) for t in tables.values()]
    assert here[0][1] and not here[1][1]  # one racing, one not: the answers tell the tables apart
    import multiprocessing

    made = []
    real = multiprocessing.get_context

    def context(method=None):
        made.append(method)
        return real(method)

    monkeypatch.setattr(multiprocessing, "get_context", context)
    with decided_beside(source, tables) as get:
        assert [get(1), get(0)] == [here[1], here[0]]
    assert made == (["fork"] if (os.cpu_count() or 1) > 1 else [])
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    before = len(made)
    with decided_beside(source, tables) as get:
        assert get(0) == here[0] and get(1) == here[1]
    assert len(made) == before  # no process on one core


def test_a_class_two_modules_define_is_named_module_colon_class(tmp_path):
    head = lay(tmp_path / "head", "head")
    attn = head / "sglang" / "srt" / "layers" / "attention"
    (attn / "paged_backend_copy.py").write_text((attn / "paged_backend.py").read_text())
    code, out, err = run("--sglang", str(head), "PagedBackend")
    assert code == 2 and err.count("\n") == 1
    assert "PagedBackend names 2 classes" in err and "sglang.srt.layers.attention.paged_backend:PagedBackend" in err
    for name in ("sglang.srt.layers.attention.paged_backend_copy:PagedBackend",
                 "sglang/srt/layers/attention/paged_backend_copy.py:PagedBackend"):
        source, (v,) = load(str(head), name)
        assert (source.cls, source.file) == ("PagedBackend", "sglang/srt/layers/attention/paged_backend_copy.py")
    code, out, err = run("--sglang", str(head), "sglang.srt.nowhere:PagedBackend")
    assert code == 2 and err.count("\n") == 1 and "MODULE:Class" in err


@pytest.mark.slow
def test_an_untouched_release_backend_is_safe_where_an_honest_backend_races_too(tmp_path):
    """TritonAttnBackend on 0.5.23 reads within its declarations; three catalog contexts race with it only where an
    honest backend (the base rule, reading the same locations at every site it covers) races too: the contexts'
    own, listed as such, and the backend is safe (exit 0)."""
    from sglang_release import require_release

    code, out, _ = run("--sglang", str(require_release()), "TritonAttnBackend")
    assert code == 0, out
    assert out.splitlines()[-1].startswith("verify TritonAttnBackend: SAFE in every context")
    lines = out.splitlines()
    for ctx in ("disagg-prefill-fine", "multi-layer-eagle-staged", "race-disagg-prefill-claim-fails"):
        at = next(i for i, ln in enumerate(lines) if ln.startswith(f"  {ctx}: "))
        assert lines[at].startswith(f"  {ctx}: adds no race"), lines[at]
        assert lines[at + 1].startswith("    races with an honest backend too (the context's own") \
            and lines[at + 1].endswith("; this backend adds: nothing"), lines[at + 1]


@pytest.mark.slow
def test_the_advice_for_a_late_read_is_the_fix_pull_request_mode_proves(tmp_path):
    """MiniMaxSparseAttnBackend on 0.5.23 reads req_to_token in the graph after the marker in DECODE and in
    TARGET_VERIFY under IN_REPLAY; ``fencecheck sglang`` proves ``declare POST_REPLAY`` for each finding. With the
    whole backend no single mode's change is race-free (the other mode's late read still races), so each mode's
    change is verified with the backend in that mode alone: the same fix, verified."""
    from sglang_release import require_release

    code, out, _ = run("--sglang", str(require_release()), "MiniMaxSparseAttnBackend")
    assert code == 1
    advice = [ln for ln in out.splitlines() if ln.startswith("advice: ")]
    for mode in ("DECODE", "TARGET_VERIFY"):
        line = next(ln for ln in advice if f" for {mode}" in ln.split(":")[1])
        assert line.startswith(f"advice: declare POST_REPLAY for {mode}: safe in all "), line
        assert f"verified with the backend in {mode} alone" in line
