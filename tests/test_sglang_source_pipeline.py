"""Publisher rows that never hold or never meet the barrier (``pipeline.py``), on a small tree and on the release.

The tree's loop dispatch starts every loop with the barrier only on one pipeline stage; a worker names the target
runner only when it hosts no draft (not the pipeline's last rank), another always builds its draft."""

from __future__ import annotations

from pathlib import Path

import pytest

from fencecheck.sglang_source.pipeline import barrier_loop_needs, publisher_test, without_barrier
from fencecheck.sglang_source.tree import Tree

LOOPS = ("event_loop_overlap", "event_loop_overlap_disagg_decode")

FILES = {
    "__init__.py": "",
    "srt/__init__.py": "",
    "srt/managers/__init__.py": "",
    "srt/managers/scheduler.py": '''from sglang.srt.parallel import get_parallel


def dispatch(scheduler):
    if scheduler.disaggregation_mode == "null":
        if get_parallel().pp_size > 1:
            scheduler.event_loop_pp()
        elif scheduler.enable_overlap:
            scheduler.event_loop_overlap()
        else:
            scheduler.event_loop_normal()
    else:
        if get_parallel().pp_size > 1:
            return scheduler.event_loop_pp_disagg_decode()
        scheduler.event_loop_overlap_disagg_decode()
''',
    "srt/parallel.py": '''class GroupCoordinator:
    def __init__(self, ranks, rank):
        self.ranks, self.rank = ranks, rank

    @property
    def is_last_rank(self):
        return self.rank == self.ranks[-1]


def get_parallel():
    return None
''',
    "srt/speculative/__init__.py": "",
    "srt/speculative/workers.py": '''from sglang.srt.parallel import get_parallel


class DraftWorker:
    def __init__(self, target):
        self.draft_runner = target


class StageWorker:
    def __init__(self, target):
        self._target_worker = target
        self._hosts_draft = get_parallel().pp_group.is_last_rank
        self._draft_worker = DraftWorker(target) if self._hosts_draft else None

    @property
    def last_shared_read_runner(self):
        if self._draft_worker is None:
            return self._target_worker.model_runner
        return self._draft_worker.draft_runner


class AlwaysDraftWorker(StageWorker):
    def __init__(self, target):
        self._target_worker = target
        self._draft_worker = DraftWorker(target)


class DroppingWorker(AlwaysDraftWorker):
    def release(self):
        self._draft_worker = None


class ChainedWorker(StageWorker):
    def __init__(self, target):
        super().__init__(target)


class FlagWorker(StageWorker):
    def __init__(self, target, flag):
        self._target_worker = target
        self._draft_worker = DraftWorker(target) if flag else None
''',
}


def _tree(tmp_path: Path, files=FILES) -> Tree:
    root = tmp_path / "sglang"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return Tree(root)


def _cls(tree: Tree, name: str):
    return tree.classes_named(name)[0]


def test_what_every_loop_with_the_barrier_needs_is_read_from_the_dispatch(tmp_path):
    needs, sites = barrier_loop_needs(_tree(tmp_path), LOOPS)
    assert "get_parallel().pp_size <= 1" in needs
    assert sites == ("sglang/srt/managers/scheduler.py:9", "sglang/srt/managers/scheduler.py:15")
    other = dict(FILES)
    other["srt/managers/scheduler.py"] = FILES["srt/managers/scheduler.py"].replace(
        "        if get_parallel().pp_size > 1:\n            return scheduler.event_loop_pp_disagg_decode()\n", "")
    needs, _ = barrier_loop_needs(_tree(tmp_path / "b", other), LOOPS)
    assert "get_parallel().pp_size <= 1" not in needs  # the disaggregated decode loop starts on any stage


def test_a_publisher_row_is_read_through_the_workers_init(tmp_path):
    tree = _tree(tmp_path)
    assert publisher_test(tree, _cls(tree, "StageWorker"), "self._draft_worker is None")[0] == \
        "not get_parallel().pp_group.is_last_rank"
    assert publisher_test(tree, _cls(tree, "AlwaysDraftWorker"), "self._draft_worker is None")[0] == "False"
    assert publisher_test(tree, _cls(tree, "FlagWorker"), "self._draft_worker is None")[0] == "not flag"
    assert publisher_test(tree, _cls(tree, "StageWorker"), "self._hosts_draft") is None
    # a later assignment (another method), or a base __init__ the running one calls, leaves the row as it is
    assert publisher_test(tree, _cls(tree, "DroppingWorker"), "self._draft_worker is None") is None
    assert publisher_test(tree, _cls(tree, "ChainedWorker"), "self._draft_worker is None") is None


def test_a_row_only_off_the_last_stage_or_never_meets_no_barrier_and_any_other_may(tmp_path):
    tree = _tree(tmp_path)
    why = without_barrier(tree, _cls(tree, "StageWorker"), ("self._draft_worker is None",), LOOPS)
    assert why.startswith("no barrier with this publisher: `self._draft_worker is None` holds when not "
                          "get_parallel().pp_group.is_last_rank (sglang/srt/speculative/workers.py:13, "
                          "sglang/srt/speculative/workers.py:12)")
    assert "is_last_rank, sglang/srt/parallel.py:6" in why
    assert without_barrier(tree, _cls(tree, "AlwaysDraftWorker"), ("self._draft_worker is None",), LOOPS).startswith(
        "this publisher row never holds")
    assert without_barrier(tree, _cls(tree, "FlagWorker"), ("self._draft_worker is None",), LOOPS) is None
    other = dict(FILES)
    other["srt/managers/scheduler.py"] = FILES["srt/managers/scheduler.py"].replace(
        "        if get_parallel().pp_size > 1:\n            return scheduler.event_loop_pp_disagg_decode()\n", "")
    tree = _tree(tmp_path / "b", other)
    assert without_barrier(tree, _cls(tree, "StageWorker"), ("self._draft_worker is None",), LOOPS) is None


@pytest.mark.slow
@pytest.mark.usefixtures("release_root")
def test_the_releases_eagle_reads_with_the_target_as_publisher_are_not_findings(release_extraction):
    from fencecheck.decision.workers import decide_worker_reads

    rows = {(w["worker"], tuple(w["conditions"])): w["why"] for w in release_extraction.facts["publishers_without_barrier"]}
    assert rows[("EAGLEWorkerV2", ("self._draft_worker is None",))].startswith("no barrier with this publisher")
    assert rows[("StandaloneWorkerV2", ("self._draft_worker is None",))].startswith("this publisher row never holds")
    doc = decide_worker_reads(release_extraction)[0].to_json()
    assert not [f for f in doc["findings"] if f["kind"] == "worker_read_after_publish"
                and f["subject"] in ("EAGLEWorkerV2", "StandaloneWorkerV2")]
    ngram = [f for f in doc["findings"] if f["kind"] == "worker_read_after_publish" and f["subject"] == "NGRAMWorker"]
    assert ngram  # a publisher without a condition is decided as before
