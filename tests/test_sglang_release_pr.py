"""Pull-request mode on two releases: sglang 0.5.23 against 0.5.22 as its baseline (`sglang_release.require_tree`).

0.5.22 is fetched once into the cache folder of `sglang_release` when it is not there.

What the release adds and removes is checked against the two trees' own files: the class ``CuteDslMLAPrefillBackend``
(in ``srt/layers/attention/cutedsl_mla_backend.py``) is new in 0.5.23, ``TokenspeedMLABackend``
(``srt/layers/attention/tokenspeed_mla_backend.py``) is gone from it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest
from sglang_release import require_release, require_tree

from fencecheck.commands.main import main

pytestmark = pytest.mark.slow
PR_SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "sglang-pr.schema.json").read_text("utf-8"))


@pytest.fixture(scope="module")
def pr():
    head, base = require_release(), require_tree("0.5.22", fetching=True)
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", str(head), "--baseline", str(base), "--format", "json"], out=out, err=err)
    return code, json.loads(out.getvalue()), head, base


def _keys(rows):
    return {(r["kind"], r["subject"], r["mode"], r["location"], r["function"]) for r in rows}


def test_the_release_adds_only_questions_so_it_exits_3(pr):
    code, doc, head, base = pr
    # every root cause 0.5.23 adds is unresolved (a question: it races on its scenario, whether the release runs it
    # hangs on a value the reader names), so the gate answers 3, not 1, and not 0
    assert code == 3
    assert doc["findings"]["added"] and {rc["status"] for rc in doc["findings"]["added"]} == {"unresolved"}
    jsonschema.validate(doc, PR_SCHEMA)
    assert (doc["head"]["sglang_version"], doc["baseline"]["sglang_version"]) == ("0.5.23", "0.5.22")
    cute = "srt/layers/attention/cutedsl_mla_backend.py"
    assert "class CuteDslMLAPrefillBackend(" in (head / cute).read_text()
    assert "class CuteDslMLAPrefillBackend(" not in (base / cute).read_text()
    added = _keys(doc["findings"]["added"])
    # the new backend adds no finding: its decode and verify re-plans are in no replay of either release
    # (capture_state; the verify one since the per-size dict's unrun parent store is left out)
    assert not any(k[1] == "CuteDslMLAPrefillBackend" for k in added)
    # DSpark's KV inject read moved to another function: one unchanged finding that says where it was, not fixed + added
    dspark = ("worker_read_after_publish", "DSparkWorkerV2", "TARGET_VERIFY", "full_to_swa_index_mapping")
    assert not any(k[:4] == dspark for k in added | _keys(doc["findings"]["fixed"]))
    (moved,) = [r for r in doc["findings"]["unchanged"] if r.get("was") and tuple(_keys([r]))[0][:4] == dspark]
    assert (moved["function"], moved["was"]["function"]) == ("TargetHiddenKvInjector.committed_swa_loc",
                                                             "TargetHiddenKvInjector._inject_mla")
    for rc in doc["findings"]["added"]:
        assert rc["finding"]["verdict"] == "counterexample", rc  # each added one decided, and it races


def test_the_removed_backend_is_fixed_and_the_rest_unchanged(pr):
    _, doc, head, base = pr
    assert (base / "srt/layers/attention/tokenspeed_mla_backend.py").is_file()
    assert not (head / "srt/layers/attention/tokenspeed_mla_backend.py").exists()
    fixed = _keys(doc["findings"]["fixed"])
    unchanged = _keys(doc["findings"]["unchanged"])
    # the removed backend had no finding left on 0.5.22 (its re-plans are in no replay there: capture_state)
    assert not any(k[1] == "TokenspeedMLABackend" for k in fixed | unchanged)
    assert ("worker_read_after_publish", "NGRAMWorker", "TARGET_VERIFY", "req_to_token",
            "spec_utils.move_accept_tokens_to_target_kvcache") in fixed
    assert ("read_outside_declaration", "FlashAttentionBackend", "DECODE", "full_to_swa_index_mapping",
            "FlashAttentionBackend.forward_decode") in unchanged
    # bound to hip, where neither release has the marker and both fall back to POST_REPLAY: a not finding in both
    assert not any(k[1] == "AiterAttnBackend" for k in unchanged | fixed | _keys(doc["findings"]["added"]))
    assert not (_keys(doc["findings"]["added"]) & unchanged) and not (fixed & unchanged)
    assert doc["counts"] == {k: len(v) for k, v in doc["findings"].items()}


def test_the_protocol_facts_it_changes(pr):
    _, doc, _, _ = pr
    decl = {c["key"]: c for c in doc["facts"]["changed"]["declarations"]}
    assert decl["CuteDslMLAPrefillBackend"]["change"] == "added"
    assert decl["TokenspeedMLABackend"]["change"] == "removed"
    v4 = decl["DeepseekV4AttnBackend"]
    assert v4["change"] == "changed" and "EXTEND (prefill snapshot)" not in v4["before"]
    assert v4["after"]["EXTEND (prefill snapshot)"].endswith("PRE_REPLAY if not is_cp_active(forward_batch) and not "
                                                             "(self.hisparse_coordinator is not None)")
    assert doc["facts"]["unchanged"]["runners"] > 0 and doc["facts"]["unchanged"]["barrier"] > 0
