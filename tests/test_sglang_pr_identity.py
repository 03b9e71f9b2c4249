"""Pull-request mode keeps a finding's identity across a refactor and says why a covered read races now.

On ``pr_pair.py``'s synthetic trees changed in ``tmp_path``: a read moved to another function or file is one
unchanged finding (``was``, ``pull_request.match``), a read whose code is the baseline's but whose declaration
changed races now (``races_now``, still exit 1), and a phase whose condition was respelled is one changed phase
(``was``, ``fact_changes.diff``)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
from pr_pair import lay

from fencecheck.commands.main import main
from fencecheck.decision.fact_changes import diff

PR_SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "sglang-pr.schema.json").read_text("utf-8"))
LATE = "sglang/srt/layers/attention/late_backend.py"
PAGED = "sglang/srt/layers/attention/paged_backend.py"
GATHER = "        pages = self.req_to_token[forward_batch.req_pool_indices, : forward_batch.seq_lens]\n"


def run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", *argv], out=out, err=err)
    assert code in (0, 1, 3), err.getvalue()
    return code, out.getvalue()


def pr_json(head: Path, base: Path) -> tuple[int, dict]:
    code, out = run(str(head), "--baseline", str(base), "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, PR_SCHEMA)
    return code, doc


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_a_read_moved_to_another_function_is_one_unchanged_finding(tmp_path):
    base, head = lay(tmp_path / "base", "head"), lay(tmp_path / "head", "head")
    _edit(head / LATE, GATHER + "        return q @ pages\n",
          "        return q @ self._gather(forward_batch)\n\n    def _gather(self, forward_batch):\n"
          + GATHER.replace("        ", "        ", 1) + "        return pages\n")
    code, doc = pr_json(head, base)
    assert code == 0, doc["findings"]["added"]
    assert doc["counts"] == {"added": 0, "fixed": 0, "unchanged": 2, "suppressed": 0}
    (moved,) = [r for r in doc["findings"]["unchanged"] if r.get("was")]
    assert (moved["subject"], moved["function"]) == ("LateReadBackend", "LateReadBackend._gather")
    assert moved["was"]["function"] == "LateReadBackend.forward_decode" and moved["was"]["changed"] == ["function"]
    assert moved["id"] != moved["was"]["id"]
    code, out = run(str(head), "--baseline", str(base))
    assert "findings: 0 added, 0 fixed, 2 unchanged, 0 suppressed" in out
    assert ("MOVED read_outside_declaration: LateReadBackend DECODE: LateReadBackend._gather reads req_to_token"
            in out and "function changed (was LateReadBackend.forward_decode at " + LATE in out)


def test_a_read_moved_to_another_file_is_one_unchanged_finding(tmp_path):
    base, head = lay(tmp_path / "base", "head"), lay(tmp_path / "head", "head")
    _edit(head / LATE, GATHER + "        return q @ pages\n",
          "        return q @ gather_pages(self, forward_batch)\n")
    _edit(head / LATE, "import AttentionBackend, SharedReadEnds\n",
          "import AttentionBackend, SharedReadEnds\nfrom sglang.srt.layers.attention.late_pages import gather_pages\n")
    (head / "sglang/srt/layers/attention/late_pages.py").write_text(
        "def gather_pages(req_to_token, forward_batch):\n"
        "    return req_to_token[forward_batch.req_pool_indices, : forward_batch.seq_lens]\n")
    code, doc = pr_json(head, base)
    assert code == 0, doc["findings"]["added"]
    assert (doc["counts"]["added"], doc["counts"]["fixed"]) == (0, 0)
    (moved,) = [r for r in doc["findings"]["unchanged"] if r.get("was")]
    assert moved["read"]["file"] == "sglang/srt/layers/attention/late_pages.py"
    assert moved["was"]["file"] == LATE and set(moved["was"]["changed"]) == {"function", "file"}


def test_a_declaration_change_alone_races_now_and_is_not_added_code(tmp_path):
    # the baseline declares POST_REPLAY, covering forward_decode's read; HEAD drops it back to the base IN_REPLAY
    base, head = lay(tmp_path / "base", "head"), lay(tmp_path / "head", "head")
    _edit(base / PAGED, "import AttentionBackend", "import AttentionBackend, SharedReadEnds")
    (base / PAGED).write_text((base / PAGED).read_text()
                              + "\n    def shared_read_ends(self, fm):\n        return SharedReadEnds.POST_REPLAY\n")
    code, doc = pr_json(head, base)
    assert code == 1  # a new race all the same
    (added,) = doc["findings"]["added"]
    assert (added["subject"], added["function"]) == ("PagedBackend", "PagedBackend.forward_decode")
    assert added["races_now"].startswith("the declaration for DECODE changed from POST_REPLAY to ")
    code, out = run(str(head), "--baseline", str(base))
    assert code == 1
    assert "RACES NOW" in out and "races now because the declaration for DECODE changed from POST_REPLAY" in out
    assert "ADDED" not in out


def test_added_code_has_no_races_now(tmp_path):
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")
    code, doc = pr_json(head, base)
    assert code == 1 and [r.get("races_now") for r in doc["findings"]["added"]] == [None]


def test_a_respelled_phase_condition_is_one_changed_phase():
    def phases(cond):
        return {"declarations": {}, "runners": {}, "publishers": {}, "barrier": {}, "protocol": {},
                "phases": {f"EAGLE (EagleWorker) when {cond}.enable_multi_layer_eagle": [
                    f"TpModelWorker TARGET_VERIFY if {cond}.enable_multi_layer_eagle"],
                    "NGRAM (NGRAMWorker)": ["TpModelWorker TARGET_VERIFY"]}}

    changes, unchanged = diff(phases("server_args"), phases("cfg"))
    (x,) = changes
    assert (x.category, x.change) == ("phases", "changed")
    assert x.key == "EAGLE (EagleWorker) when cfg.enable_multi_layer_eagle"
    assert x.was == "EAGLE (EagleWorker) when server_args.enable_multi_layer_eagle"
    assert x.to_json()["was"] == x.was and "respelled" in x.text()
    assert unchanged["phases"] == 1
    # a condition that changed in more than its receiver stays a removed and an added phase
    other = phases("cfg")
    other["phases"] = {k.replace("enable_multi_layer_eagle", "enable_eagle3"): v for k, v in other["phases"].items()}
    assert sorted(c.change for c in diff(phases("server_args"), other)[0]) == ["added", "removed"]
