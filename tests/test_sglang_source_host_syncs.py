"""Tests calls the read walk cannot type that host-sync on every path (``host_syncs``): what they keep out of a graph.

The synthetic backend reads ``req_to_token`` in its decode forward only by handing it, with the batch's device
request indices, to a pool method on an untyped receiver; the pool lists the indices on the host first (a tensor's
``.cpu().tolist()``), and a second pool delegates the call to the first, as SGLang's FlashInfer dequant workspace
does (0.5.23 ``mem_cache/memory_pool.py:3168-3200,4513-4518``). Not a finding without breakable graphs, nor where
the debug replay falls back to POST_REPLAY; a finding naming the call where it falls back to PRE_REPLAY (0.5.18's
judged-real FlashInfer read). Each variant that breaks one link keeps the read a plain finding.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from fencecheck.decision.status import settle
from fencecheck.sglang_source import read_path
from fencecheck.sglang_source.host_syncs import HostSyncs
from fencecheck.sglang_source.tree import Tree
from sglang_reader_trees import ATTN, BREAKABLE, FB, HEAD, PRE_FALLBACK, build

BACKEND = HEAD + '''from sglang.srt.model_executor.forward_batch_info import ForwardBatch


class DequantBackend(AttentionBackend):
    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.token_to_kv_pool = model_runner.token_to_kv_pool

    def forward_decode(self, q, k, v, layer, forward_batch: ForwardBatch):
        kv = self.token_to_kv_pool.gather_workspace(layer, self.req_to_token, forward_batch.req_pool_indices)
        return q @ kv
'''
POOL = '''import torch


class QuantPool:
    def __init__(self, size):
        self.workspace = torch.zeros(size)
        self.quantized = True

    @staticmethod
    def _host_list(values):
        if isinstance(values, list):
            return [int(v) for v in values]
        if isinstance(values, torch.Tensor):
            return [int(v) for v in values.cpu().tolist()]
        return [int(v) for v in values]

    def _fill(self, layer_id, req_to_token, req_pool_indices):
        rows = self._host_list(req_pool_indices)
        for r in rows:
            self.workspace[req_to_token[r]] = 0
        return self.workspace

    def gather_workspace(self, layer, req_to_token, req_pool_indices):
        if not self.quantized:
            raise RuntimeError("not quantized")
        return self._fill(layer.layer_id, req_to_token, req_pool_indices)


class HybridPool:
    def __init__(self, full):
        self.full_kv_pool = full

    def gather_workspace(self, layer, *args, **kwargs):
        return self.full_kv_pool.gather_workspace(layer, *args, **kwargs)
'''
FORWARD_BATCH = ("import torch\nfrom dataclasses import dataclass\n"
                 + (build.__globals__["TREES"] / "common" / "sglang" / FB).read_text()
                 + "\n\n@dataclass\nclass ForwardBatch:\n    forward_mode: ForwardMode\n    batch_size: int\n"
                   "    req_pool_indices: torch.Tensor = None\n    seq_lens: object = None\n")
AT = f"sglang/{ATTN}/dequant_backend.py"
POOL_AT = "sglang/srt/mem_cache/quant_pool.py"
READ_LINE = BACKEND.splitlines().index("        kv = self.token_to_kv_pool.gather_workspace(layer, self.req_to_token, "
                                       "forward_batch.req_pool_indices)") + 1
SYNC_LINE = POOL.splitlines().index("            return [int(v) for v in values.cpu().tolist()]") + 1
CALL = (f"the call `self.token_to_kv_pool.gather_workspace` ({AT}:{READ_LINE}) -> QuantPool.gather_workspace -> "
        f"QuantPool._fill -> QuantPool._host_list host-syncs on every path ({POOL_AT}:{SYNC_LINE}), which a CUDA "
        "graph cannot capture")


def _files(replace=(), pool=None, extra=None):
    texts = [BACKEND, POOL if pool is None else pool, FORWARD_BATCH]
    for old, new in replace:
        (i,) = [i for i, t in enumerate(texts) if old in t]
        texts[i] = texts[i].replace(old, new)
    return {f"{ATTN}/dequant_backend.py": texts[0], "srt/mem_cache/quant_pool.py": texts[1], FB: texts[2],
            **(extra or {})}


def _ours(items):
    return [x for x in items if x.subject == "DequantBackend" and x.mode == "DECODE"]


def test_a_read_handed_to_a_pool_method_that_host_syncs_is_not_in_a_graph(tmp_path):
    ex = read_path(build(tmp_path, _files()))
    assert _ours(ex.findings) == []
    (nf,) = [n for n in _ours(ex.not_findings) if n.location == "req_to_token"]
    assert (nf.file, nf.line) == (AT, READ_LINE)
    assert nf.why == f"no graph captures its path: {CALL}; the tree has no breakable graphs"


def test_with_breakable_graphs_a_post_replay_fallback_covers_the_debug_replay(tmp_path):
    ex = read_path(build(tmp_path, _files(extra=BREAKABLE)))
    assert _ours(ex.findings) == []
    (nf,) = [n for n in _ours(ex.not_findings) if n.location == "req_to_token"]
    assert nf.why.startswith(f"no graph captures its path: {CALL}; the one replay that runs the forward eagerly")


def test_where_the_debug_replay_is_not_covered_the_finding_stays_and_names_the_call(tmp_path):
    """0.5.18's shape: the eager debug replay runs the call, host sync and all, after a PRE_REPLAY event."""
    (f,) = _ours(settle(read_path(build(tmp_path, _files(extra={**BREAKABLE, **PRE_FALLBACK})))).findings)
    assert f.status == "unresolved"
    assert f.status_why.startswith(f"not in a captured graph: {CALL}; only a replay that runs the forward eagerly "
                                   "runs the call, host sync and all (the breakable backend's debug replay")


@pytest.mark.parametrize("why,replace,extra", [
    ("the argument is not typed a tensor",
     [("    req_pool_indices: torch.Tensor = None", "    req_pool_indices: object = None")], {}),
    ("the batch parameter is not annotated",
     [("forward_batch: ForwardBatch):", "forward_batch):")], {}),
    ("the tensor branch is not taken: a list is passed",
     [("forward_batch.req_pool_indices)", "list(forward_batch.req_pool_indices))")], {}),
    ("the sync is under a test the types do not decide",
     [("        if isinstance(values, torch.Tensor):", "        if isinstance(values, SomeTensor):")], {}),
    ("a path returns before the sync",
     [("        rows = self._host_list(req_pool_indices)",
       "        if layer_id < 0:\n            return self.workspace\n        rows = self._host_list(req_pool_indices)")],
     {}),
    ("the sync is inside a loop body, which may not run",
     [("        rows = self._host_list(req_pool_indices)\n",
       "        rows = []\n        for x in range(layer_id):\n            rows = self._host_list(req_pool_indices)\n")],
     {}),
    ("the sync is on one side of a conditional expression",
     [("            return [int(v) for v in values.cpu().tolist()]",
       "            return [int(v) for v in (values.cpu().tolist() if values.is_cuda else [])]")], {}),
    ("another definition of the method does not sync",
     [], {"srt/mem_cache/plain_pool.py": "class PlainPool:\n    def gather_workspace(self, layer, req_to_token, "
                                         "req_pool_indices):\n        return req_to_token[req_pool_indices]\n"}),
    ("a subclass overrides the helper without a sync",
     [], {"srt/mem_cache/fast_pool.py": "from sglang.srt.mem_cache.quant_pool import QuantPool\n\n\n"
                                        "class FastPool(QuantPool):\n    @staticmethod\n    def _host_list(values):\n"
                                        "        return values\n"}),
    ("the method name is stored as an attribute somewhere",
     [], {"srt/mem_cache/patch.py": "def patch(pool, fn):\n    pool.gather_workspace = fn\n"}),
    ("the receiver method is not a pool method (outside the memory-cache package)",
     [], {"srt/mem_cache/quant_pool.py": "", "srt/layers/quant_pool.py": POOL}),
])
def test_each_broken_link_keeps_the_read_a_finding(tmp_path, why, replace, extra):
    ex = read_path(build(tmp_path, _files(replace, extra={**BREAKABLE, **PRE_FALLBACK, **extra})))
    (f,) = _ours(settle(ex).findings)
    assert f.whole_graph == (None,), why
    assert not (f.status_why or "").startswith("not in a captured graph"), (why, f.status_why)


def test_the_delegating_pool_alone_does_not_sync(tmp_path):
    """A definition that only delegates to its own name syncs when another definition does, not by itself."""
    only = POOL[:POOL.index("class QuantPool:")] + POOL[POOL.index("class HybridPool:"):]
    ex = read_path(build(tmp_path, _files(pool=only, extra={**BREAKABLE, **PRE_FALLBACK})))
    (f,) = _ours(settle(ex).findings)
    assert f.whole_graph == (None,)


def test_a_sync_in_code_that_may_not_run_is_neither_counted_nor_cited(tmp_path):
    root = build(tmp_path, _files())
    hs = HostSyncs(Tree(root))
    fn = ast.parse(BACKEND).body[-1].body[-1]
    call = next(n for n in ast.walk(fn) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") ==
                "gather_workspace")
    assert hs.call_sync(fn, call) == (POOL_AT, SYNC_LINE, "QuantPool.gather_workspace -> QuantPool._fill -> "
                                                          "QuantPool._host_list")
    root2 = build(tmp_path / "b", _files([("        rows = self._host_list(req_pool_indices)\n",
                                          "        for x in range(layer_id):\n            self._host_list("
                                          "req_pool_indices)\n        rows = [req_pool_indices.cpu()]\n")]))
    line = _files([("        rows = self._host_list(req_pool_indices)\n",
                    "        for x in range(layer_id):\n            self._host_list(req_pool_indices)\n"
                    "        rows = [req_pool_indices.cpu()]\n")])["srt/mem_cache/quant_pool.py"].splitlines().index(
        "        rows = [req_pool_indices.cpu()]") + 1
    assert HostSyncs(Tree(root2)).call_sync(fn, call) == (POOL_AT, line, "QuantPool.gather_workspace -> "
                                                                         "QuantPool._fill")


def test_the_memo_is_kept_on_the_tree_and_goes_with_it(tmp_path):
    """The memo holds syntax trees: a weak-keyed table or a reference from the read walker kept them alive after
    ``Tree.forget`` (the pull-request check's CPU grew by a third)."""
    import gc
    import weakref

    from fencecheck.sglang_source.host_syncs import host_syncs

    tree = Tree(build(tmp_path, _files()))
    hs = host_syncs(tree)
    assert host_syncs(tree) is hs
    ref = weakref.ref(hs)
    del hs
    tree.forget()
    gc.collect()
    assert ref() is None


HOLES = json.loads((Path(__file__).resolve().parent / "host_syncs_holes.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("why", HOLES)
def test_each_way_the_review_found_to_return_without_a_sync_keeps_the_read_a_finding(tmp_path, why):
    """An independent review of the first version found each of these dropped a read that can run in a captured
    graph (or, ``SOUND_*``, checked them and found the first version right): a helper replaced in a subclass's body or
    shadowed by an instance attribute or a local; the name stored through an annotated or tuple target; a decorated,
    generator or ``async`` method; a method called through its class; a parameter re-bound before its ``isinstance``
    test; a sync only in an ``assert`` message or a short-circuited comparison chain; ``except*``; a ``with`` that
    swallows the raise; a host event's ``synchronize``; a caller that catches the raise (after the call, or of a
    callee that read before raising); a conditional call; a caller's parameter re-bound; a helper's early return."""
    case = HOLES[why]
    files = _files([tuple(r) for r in case["replace"]], extra={**case["files"]})
    text = files[f"{ATTN}/dequant_backend.py"]
    target = case["target"]
    line = next(i + 1 for i, x in enumerate(text.splitlines()) if target in x
                and (target != "self.req_to_token" or ("(" in x and "kv_pool" in x)))
    ex = read_path(build(tmp_path, files))
    assert not [n for n in _ours(ex.not_findings) if (n.file, n.line) == (AT, line)], why
    assert [f for f in _ours(ex.findings) if any((e.file, e.line) == (AT, line) for e in f.evidence)], why
