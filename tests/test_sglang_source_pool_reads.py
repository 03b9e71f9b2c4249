"""Reads through the tree's pool methods (``pool_reads``): which methods are taken, and a worker's commit through one.

The commit reads the mamba row map after the verify, behind a test of the mode its step set (the NGRAM shape)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fencecheck.sglang_source.pool_reads import pool_reads
from fencecheck.sglang_source.tree import Tree

TREES = Path(__file__).resolve().parent / "sglang_trees"

#: A pool module of the memory-cache package: one method that reads a map (taken), and every kind that is not.
POOL = '''import torch


class MambaRowPool:
    def __init__(self, size):
        self.req_index_to_mamba_index_mapping = torch.zeros(size, dtype=torch.int32)
        self.req_to_token = torch.zeros((size, 8), dtype=torch.int32)

    def get_mamba_indices(self, req_indices):
        return self.req_index_to_mamba_index_mapping[req_indices]

    def alloc(self, req_indices, rows):
        self.req_index_to_mamba_index_mapping[req_indices] = rows
        return self.req_index_to_mamba_index_mapping[req_indices]

    def rows_and_slots(self, req_indices):
        return self.req_index_to_mamba_index_mapping[req_indices], self.req_to_token[req_indices]

    def clear(self):
        return self.req_index_to_mamba_index_mapping[0]

    def shadowed(self, req_indices):
        return self.req_index_to_mamba_index_mapping[req_indices]

    def shape_only(self):
        return self.req_index_to_mamba_index_mapping.shape[0]
'''
#: An attention backend defining a method of the pool's name: a backend's own methods are walked through ``self``.
BACKEND = '''from sglang.srt.layers.attention.base_attn_backend import AttentionBackend


class ShadowingBackend(AttentionBackend):
    def shadowed(self, req_indices):
        return req_indices
'''
#: Outside the memory-cache package: not a pool.
HELPER = '''class RowHelper:
    def __init__(self, pool):
        self.req_index_to_mamba_index_mapping = pool.req_index_to_mamba_index_mapping

    def helper_rows(self, req_indices):
        return self.req_index_to_mamba_index_mapping[req_indices]
'''


def _tree(tmp_path, *overlays) -> Path:
    dest = tmp_path / "wheel"
    for o in ("common",) + overlays:
        shutil.copytree(TREES / o, dest, dirs_exist_ok=True)
    root = dest / "sglang"
    (root / "srt/mem_cache/mamba_pool.py").write_text(POOL, encoding="utf-8")
    (root / "srt/layers/attention/shadowing_backend.py").write_text(BACKEND, encoding="utf-8")
    (root / "srt/row_helper.py").write_text(HELPER, encoding="utf-8")
    return root


def test_a_pool_method_that_reads_one_map_and_writes_none_is_taken_and_no_other(tmp_path):
    got = pool_reads(Tree(_tree(tmp_path)))
    line = POOL.splitlines().index("    def get_mamba_indices(self, req_indices):") + 1
    assert got == {"get_mamba_indices": ("req_index_to_mamba_index_mapping", "sglang/srt/mem_cache/mamba_pool.py",
                                         line)}


def test_a_worker_commit_through_a_pool_method_behind_its_own_mode_test_races(tmp_path):
    from fencecheck.decision.workers import decide_worker_reads
    from fencecheck.sglang_source import read_path

    root = _tree(tmp_path, "algorithms")
    comp = root / "srt/speculative/components.py"
    text = comp.read_text(encoding="utf-8")
    for old, new in (("        return self.req_to_token_pool.req_to_token[batch.req_pool_indices]",
                      "        return self.req_to_token_pool.get_mamba_indices(batch.req_pool_indices)"),
                     ("    def commit(self, batch):\n        self.injector.inject(batch)",
                      "    def commit(self, batch):\n        if batch.forward_mode.is_target_verify():\n"
                      "            self.injector.inject(batch)")):
        assert old in text
        text = text.replace(old, new)
    comp.write_text(text, encoding="utf-8")
    doc = decide_worker_reads(read_path(root))[0].to_json()
    zeta = [f for f in doc["findings"] if f["kind"] == "worker_read_after_publish" and f["subject"] == "ZetaWorker"]
    assert [(f["mode"], f["location"], f["races"]) for f in zeta] == [
        ("TARGET_VERIFY", "req_index_to_mamba_index_mapping",
         ["req_index_to_mamba_index_mapping@target-target-verify-22/worker_after"])]
    assert "batch.forward_mode.is_target_verify()" in zeta[0]["condition"]
    read_line = text.splitlines().index("        return self.req_to_token_pool.get_mamba_indices("
                                        "batch.req_pool_indices)") + 1
    assert (zeta[0]["evidence"][-1]["file"], zeta[0]["evidence"][-1]["line"]) == \
        ("sglang/srt/speculative/components.py", read_line)


@pytest.mark.slow
@pytest.mark.usefixtures("release_root")
def test_the_release_takes_the_mamba_row_lookup_and_not_a_backend_method(release_extraction):
    from fencecheck.sglang_source.tree import Tree as T

    got = pool_reads(T(Path(release_extraction.root)))
    assert got["get_mamba_indices"][:2] == ("req_index_to_mamba_index_mapping", "sglang/srt/mem_cache/memory_pool.py")
    assert got["translate_loc_from_full_to_swa"][0] == "full_to_swa_index_mapping"
    assert all(f.startswith("sglang/srt/mem_cache/") for _, f, _ in got.values())
    assert not {"alloc", "free", "clear", "init_forward_metadata"} & set(got)
