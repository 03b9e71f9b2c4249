"""Reads in a capture tail hook a worker registers on its publisher's model runner: inside the graph, after the marker.

The synthetic ZETA worker (tests/sglang_trees/algorithms) gets an epilogue registered as a capture tail hook of the
target model runner (DSpark's shape, 0.5.23 ``dspark_worker_v2.py:451-453``): the decode graph runner calls such hooks
inside each captured graph after the model forward, so the hook's read of ``req_to_token`` runs after the in-graph
marker of the target verify that publishes. A hook on a runner that is not the publisher, and a hook whose read runs
only in a mode no captured phase of that side has, add no read.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from fencecheck.decision.workers import decide_worker_reads
from fencecheck.sglang_source import read_path

TREES = Path(__file__).resolve().parent / "sglang_trees"
COMPONENTS = "sglang/srt/speculative/components.py"
EPILOGUE = '''

class Epilogue:
    def __init__(self, req_to_token_pool):
        self.req_to_token_pool = req_to_token_pool

    def capture_hook(self, runner, out, forward_batch, num_tokens):
        if not forward_batch.forward_mode.is_{mode}():
            return
        self(forward_batch)

    def __call__(self, forward_batch):
        return self.req_to_token_pool.req_to_token[forward_batch.req_pool_indices]
'''
REGISTER = '''        self._executor = VerifyExecutor(target_worker, injector=self._injector)
        self._epilogue = Epilogue(target_worker.req_to_token_pool)
        if target_worker.fold_commit:
            {runner}.capture_tail_hooks.append(self._epilogue.capture_hook)
'''


def _zeta(tmp_path, runner="self.target_worker.model_runner", mode="target_verify"):
    dest = tmp_path / "wheel"
    shutil.copytree(TREES / "common", dest, dirs_exist_ok=True)
    shutil.copytree(TREES / "algorithms", dest, dirs_exist_ok=True)
    p = dest / COMPONENTS
    text = p.read_text()
    old = "        self._executor = VerifyExecutor(target_worker, injector=self._injector)\n"
    assert old in text
    text = text.replace(old, REGISTER.format(runner=runner)) + EPILOGUE.format(mode=mode)
    p.write_text(text)
    ex = decide_worker_reads(read_path(dest / "sglang"))[0]
    (zeta,) = [a for a in ex.to_json()["algorithms"] if a["name"] == "ZETA"]
    return ex.to_json(), zeta, text


def test_a_hook_read_runs_in_the_verify_graph_after_its_marker_and_races_with_a_verified_snapshot_fix(tmp_path):
    doc, zeta, text = _zeta(tmp_path)
    line = text.splitlines().index("        return self.req_to_token_pool.req_to_token[forward_batch.req_pool_indices]") + 1
    hook = [r for r in zeta["reads_after_publisher"] if r.get("site") == "in_graph_after_marker"]
    (r,) = hook
    assert (r["file"], r["line"], r["location"]) == (COMPONENTS, line, "req_to_token")
    at = next(n for n, x in enumerate(text.splitlines(), 1) if "capture_tail_hooks.append" in x)
    assert r["via"][0] == f"self.target_worker.model_runner.capture_tail_hooks ({COMPONENTS}:{at})"
    assert [v.split(" (")[0] for v in r["via"][1:]] == ["Epilogue.capture_hook", "Epilogue.__call__"]
    assert r["condition"].startswith("target_worker.fold_commit")
    assert r["finding"]["races"] == ["req_to_token@target-target-verify-22/in_graph_after_marker"]
    (f,) = [f for f in doc["findings"] if f["kind"] == "worker_read_after_publish" and f["subject"] == "ZetaWorker"
            and any("capture tail hook" in e["what"] for e in f["evidence"])]
    assert f["evidence"][1]["what"].startswith("reads req_to_token at in_graph_after_marker (a capture tail hook in "
                                               "its graph) via ")
    assert f["why"].startswith("read by a capture tail hook inside the graph of `self.target_worker."
                               "forward_batch_generation`")
    assert (f["fix"]["verdict"], f["fix"]["model_verdict"]) == ("proved", "proved")
    assert f["fix"]["change"].startswith("take the req_to_token rows the capture tail hook needs before ")
    # the commit after the verify is still the worker's own read after the publisher
    assert any(x.get("site") is None and x["line"] == 12 for x in zeta["reads_after_publisher"])


@pytest.mark.parametrize("runner,mode,why", [
    ("self.target_worker.draft_runner", "target_verify", "a runner that is not its publisher"),
    ("self.target_worker.model_runner", "decode", None),
])
def test_a_hook_elsewhere_or_in_another_mode_adds_no_read(tmp_path, runner, mode, why):
    doc, zeta, _ = _zeta(tmp_path, runner, mode)
    assert [r for r in zeta["reads_after_publisher"] if r.get("site")] == []
    if why:
        assert any(why in n for n in zeta["unresolved"])


def test_a_hook_read_after_a_host_sync_is_no_read(tmp_path, monkeypatch):
    """The hook runs only inside the captured graph, which no capture that syncs can make (``reads.never_captured``)."""
    monkeypatch.setattr(sys.modules[__name__], "EPILOGUE", EPILOGUE.replace(
        "    def __call__(self, forward_batch):\n",
        "    def __call__(self, forward_batch):\n        n = int(forward_batch.seq_lens.max().item())\n"))
    doc, zeta, _ = _zeta(tmp_path)
    assert [r for r in zeta["reads_after_publisher"] if r.get("site")] == []
