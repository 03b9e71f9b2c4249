"""Tests the metadata fields the capture of a whole graph binds to a buffer view (``capture_binding``).

A fallback the forward takes when such a field is None is never in a captured graph.
The synthetic backend (tests/sglang_trees/capture_binding) binds its captured metadata's ``swa_page_table`` to a
slice of a preallocated table when it uses the sliding-window pool and keeps the object per batch size, as the XPU
backend does; its forward re-derives the table from ``req_to_token`` only when the field is None. Not a finding
without breakable graphs, nor where the debug replay falls back to POST_REPLAY; a finding naming the fact where it
falls back to PRE_REPLAY. Each variant that breaks one link of the argument keeps the read a plain finding, and so
does each hole an independent review found in the first version (tests/capture_binding_holes.json). On the releases
the rule settles nothing: stores the reader cannot place relative to the capture hold the XPU translations open.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fencecheck.decision.status import settle
from fencecheck.sglang_source import read_path
from sglang_reader_trees import ATTN, BREAKABLE, FB, FORWARD_BATCH, PRE_FALLBACK, build

AT = "sglang/srt/layers/attention/bind_backend.py"
SRC = (build.__globals__["TREES"] / "capture_binding" / "sglang" / ATTN / "bind_backend.py").read_text()


def _extraction(tmp_path, replace=(), files=None):
    src = SRC
    for old, new in replace:
        assert old in src, old
        src = src.replace(old, new)
    return read_path(build(tmp_path, {f"{ATTN}/bind_backend.py": src, FB: FORWARD_BATCH, **(files or {})},
                           "capture_binding"))


def _ours(items):
    return [x for x in items if x.subject == "BindBackend"]


BINDING = (f"`metadata.swa_page_table is not None` ({AT}:39) is true when the graph is captured: the runner calls "
           "`init_forward_metadata_out_graph(..., in_capture=True)` (sglang/srt/model_executor/runner/"
           f"decode_capture.py:2) before capturing; `self.forward_metadata` is then `self.graph_metadata[bs]` "
           f"({AT}:33), and each store into `self.graph_metadata` under a key that is not a string ({AT}:31) puts "
           f"there a new object whose `swa_page_table` the capture binds to a slice of a buffer ({AT}:30) when "
           "`self.use_swa`, which the read's path needs (assigned only in `__init__`); nothing the capture, the "
           "warm-ups or the forward runs stores `.swa_page_table` otherwise, nor does anything in the tree on an "
           "object that may be this one")


def test_a_field_the_capture_binds_to_a_buffer_view_keeps_the_fallback_out_of_the_graph(tmp_path):
    ex = _extraction(tmp_path)
    assert _ours(ex.findings) == []
    (nf,) = _ours(ex.not_findings)
    assert (nf.mode, nf.file, nf.line) == ("DECODE", AT, 42)
    assert nf.why == f"no graph captures its path: {BINDING}; the tree has no breakable graphs"


def test_with_breakable_graphs_a_post_replay_fallback_covers_the_debug_replay(tmp_path):
    ex = _extraction(tmp_path, files=BREAKABLE)
    assert _ours(ex.findings) == []
    (nf,) = _ours(ex.not_findings)
    assert nf.why.startswith(f"no graph captures its path: {BINDING}; the one replay that runs the forward eagerly")


def test_where_the_debug_replay_is_not_covered_the_finding_stays_and_names_the_binding(tmp_path):
    (f,) = _ours(settle(_extraction(tmp_path, files={**BREAKABLE, **PRE_FALLBACK})).findings)
    assert f.status == "unresolved"
    assert f.status_why.startswith(f"not in a captured graph: {BINDING}; only a replay that runs the forward eagerly")


SPARE = "\n    def init_forward_metadata_spare(self, forward_batch):\n        {}\n"


@pytest.mark.parametrize("why,replace,files", [
    ("the binding's test is not one the read's path needs",
     [("            if self.use_swa:\n                metadata.swa_page_table",
       "            if self.use_other:\n                metadata.swa_page_table")], {}),
    ("the binding's test is on an attribute another method assigns",
     [("    def forward_decode(", "    def enable_swa(self):\n        self.use_swa = True\n\n    def forward_decode(")],
     {}),
    ("the binding is on one branch only",
     [("            if self.use_swa:\n                metadata.swa_page_table",
       "            if self.use_swa and forward_batch.seq_lens is not None:\n                metadata.swa_page_table")],
     {}),
    ("the value bound may be None (a buffer by name, not a view of it)",
     [('self.graph_metadata["swa_page_table"][:bs, :]', 'self.graph_metadata["swa_page_table"]')], {}),
    ("another store of the field on the object",
     [("            self.graph_metadata[bs] = metadata\n",
       "            metadata.swa_page_table = forward_batch.spare\n            self.graph_metadata[bs] = metadata\n")],
     {}),
    ("a call given the object after the binding",
     [("            self.graph_metadata[bs] = metadata\n",
       "            self.reshape(metadata)\n            self.graph_metadata[bs] = metadata\n")], {}),
    ("another store into the per-size dict, of an object not bound",
     [("    def forward_decode(", SPARE.format("self.graph_metadata[forward_batch.batch_size] = BindMetadata()")[1:]
       + "\n    def forward_decode(")], {}),
    ("the per-size dict taken whole (stores through it are not seen)",
     [("    def forward_decode(", SPARE.format("spare = self.graph_metadata")[1:] + "\n    def forward_decode(")], {}),
    ("the per-size dict replaced by an object that is not a literal",
     [('        self.graph_metadata = {"page_table": model_runner.page_table, "swa_page_table": '
       'model_runner.swa_table}', "        self.graph_metadata = model_runner.graph_metadata")], {}),
    ("a store into the dict from another receiver",
     [], {"srt/model_executor/runner/graph_fill.py":
          "def fill(backend, bs, m):\n    backend.graph_metadata[bs] = m\n"}),
    ("the capture keeps an object it did not make",
     [("        self.forward_metadata = metadata\n", "        self.forward_metadata = forward_batch.spare\n")], {}),
    ("the in-graph prep clears the field",
     [("    def forward_decode(", "    def init_forward_metadata_in_graph(self, forward_batch):\n"
                                "        self.forward_metadata.swa_page_table = None\n\n    def forward_decode(")], {}),
    ("the in-graph prep replaces the object",
     [("    def forward_decode(", "    def init_forward_metadata_in_graph(self, forward_batch):\n"
                                "        self.forward_metadata = forward_batch.spare\n\n    def forward_decode(")], {}),
])
def test_each_broken_link_keeps_the_read_a_finding(tmp_path, why, replace, files):
    (f,) = _ours(settle(_extraction(tmp_path, replace, {**BREAKABLE, **PRE_FALLBACK, **files})).findings)
    assert f.whole_graph == (None,), why
    assert f.status == "unresolved" and f.status_why.startswith("not settled: self.use_swa and "
                                                                "metadata.swa_page_table is None"), (why, f.status_why)


def test_a_wrapper_s_store_into_its_child_keeps_the_read_a_finding(tmp_path):
    """``self.backend.forward_metadata = ...`` in another class's method may store on this backend (a wrapper's child,
    as 0.5.23 dllm/attention.py:157 stores on the Triton backend it wraps): the binding does not hold."""
    wrap = "class Wrap:\n    def install(self, m):\n        self.backend.forward_metadata = m\n"
    (f,) = _ours(settle(_extraction(tmp_path, (), {**BREAKABLE, **PRE_FALLBACK,
                                                   "srt/model_executor/runner/wrap.py": wrap})).findings)
    assert f.whole_graph == (None,)


@pytest.mark.parametrize("why,replace", [
    ("a property that falls back to another object when its store is None",
     [("        self.forward_metadata = None\n",
       "        self._md = None\n        self._spare = BindMetadata()\n\n    @property\n"
       "    def forward_metadata(self):\n"
       "        return self._md if self._md is not None else self._spare\n\n    @forward_metadata.setter\n"
       "    def forward_metadata(self, v):\n        self._md = v\n")]),
    ("the forward re-creates the object on None through a call the reader does not follow",
     [("        self.forward_metadata = None\n",
       "        self.forward_metadata = None\n        self._on_none = self.rebuild\n\n"
       "    def rebuild(self, forward_batch):\n        self.forward_metadata = BindMetadata()\n"),
      ("    def forward_decode(self, q, k, v, layer, forward_batch):\n",
       "    def forward_decode(self, q, k, v, layer, forward_batch):\n        if self.forward_metadata is None:\n"
       "            self._on_none(forward_batch)\n")]),
])
def test_the_object_cleared_to_none_from_outside_keeps_the_read_a_finding(tmp_path, why, replace):
    """``runner.attn_backend.forward_metadata = None`` (0.5.23 eager_runner.py:456) may not leave None for the forward
    to fail on: an independent review found a property and an unfollowed re-creating call that turn it into an object
    without the binding (a first cut of this round allowed None stores)."""
    idle = "def idle(runner):\n    runner.attn_backend.forward_metadata = None\n"
    ex = _extraction(tmp_path, replace, {"srt/model_executor/runner/idle.py": idle})
    assert not [n for n in _ours(ex.not_findings) if "binds to a slice" in n.why], why
    assert len(_ours(ex.findings)) == 1, why


HOLES = json.loads((Path(__file__).resolve().parent / "capture_binding_holes.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("why", HOLES)
def test_each_way_the_review_found_to_change_the_field_or_the_object_keeps_the_read_a_finding(tmp_path, why):
    """An independent review of the first version found each of these settled wrongly: stores of the object or the
    field through a tuple or annotated target, a helper two calls down, a module function, a nested function or a
    lambda, the metadata's own method, the warm-up hook, the forward after the test, another receiver or an alias of
    the dict; an integer key; a loop; a ``match``; a helper given ``in_capture=False``; a property; ``del``;
    ``object.__setattr__``; a setting changed from outside."""
    case = HOLES[why]
    ex = _extraction(tmp_path, [tuple(r) for r in case["replace"]], case["files"])
    assert not [n for n in _ours(ex.not_findings) if "binds to a slice" in n.why], why
    assert len(_ours(ex.findings)) == 1, why


@pytest.mark.slow
@pytest.mark.parametrize("release", ["0.5.22", "0.5.23"])
def test_the_xpu_translation_is_held_open_by_stores_the_reader_cannot_place(release):
    """The XPU backend's capture binds ``swa_page_table`` (0.5.23 xpu_backend.py:1727-1757,1843), but the releases
    also store ``.forward_metadata`` through other receivers (0.5.23 model_executor/runner/metadata_glue_graph.py:82,
    101, dllm/attention.py:157,236, eager_runner.py:456) and
    ``.swa_page_table`` on objects the reader cannot type (hardware_backend/npu/attention/ascend_dsv4_backend.py:1182),
    and the reader cannot tell whether they run between the capture call and the captured test: the translations stay
    findings, as FlashAttention's do."""
    from sglang_release import require_tree

    ex = read_path(require_tree(release, fetching=True))
    assert not [n for n in ex.not_findings if "binds to a slice of a buffer" in n.why]
    held = {(f.subject, f.mode) for f in ex.findings if f.subject in ("XPUAttentionBackend", "FlashAttentionBackend")
            and "full_to_swa_index_mapping" in f.evidence[-1].what}
    assert held == {(s, m) for s in ("XPUAttentionBackend", "FlashAttentionBackend")
                    for m in ("DECODE", "TARGET_VERIFY")}
