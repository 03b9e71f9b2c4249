"""Tests the whole graph's capture fixes on a read's path (``capture_state``): an attribute the capture's metadata never has.

The synthetic backend (tests/sglang_trees/capture_metadata) re-plans from ``req_to_token`` in its forward when the
metadata it finds has a ``batch_size`` smaller than the batch, as TRTLLM-MLA does: only the eager prep sets
``batch_size``, on a new object, and the capture call makes a new object without one. Not a finding without breakable
graphs, nor with them where the debug replay (the forward eager, no marker) falls back to POST_REPLAY; a finding
naming the fact where it falls back to PRE_REPLAY or the row declares PRE_REPLAY. Each variant that breaks one link of
that argument (a field, a store during the capture, an object the in-graph prep replaces, a forward-batch field, a
capture path that does not make the object) keeps the read a plain finding.
"""

from __future__ import annotations

import ast

import pytest

from fencecheck.decision.status import settle
from fencecheck.sglang_source import read_path
from fencecheck.sglang_source.capture_state import CaptureFact, graph_modes, local_value
from fencecheck.sglang_source.declare import Modes
from fencecheck.sglang_source.tree import Tree
from sglang_reader_trees import ATTN, BREAKABLE, FB, FORWARD_BATCH, PRE_FALLBACK, RUNNER, build

AT = "sglang/srt/layers/attention/replan_backend.py"
SRC = (build.__globals__["TREES"] / "capture_metadata" / "sglang" / ATTN / "replan_backend.py").read_text()


def _extraction(tmp_path, replace=(), files=None):
    src = SRC
    for old, new in replace:
        assert old in src
        src = src.replace(old, new)
    return read_path(build(tmp_path, {f"{ATTN}/replan_backend.py": src, FB: FORWARD_BATCH, **(files or {})},
                           "capture_metadata"))


def _finding(ex):
    (f,) = [f for f in ex.findings if f.subject == "ReplanBackend"]
    return f


def test_a_path_the_capture_never_takes_is_not_a_finding_without_breakable_graphs(tmp_path):
    ex = _extraction(tmp_path)
    assert [f for f in ex.findings if f.subject == "ReplanBackend"] == []
    (nf,) = [n for n in ex.not_findings if n.subject == "ReplanBackend"]
    assert (nf.mode, nf.file, nf.line) == ("DECODE", AT, 24)
    assert nf.why.startswith(f"no graph captures its path: `size is not None` ({AT}:36) is false when the graph is "
                             "captured: the runner calls `init_forward_metadata_out_graph(..., in_capture=True)` "
                             "(sglang/srt/model_executor/runner/decode_capture.py:2) before capturing; ")
    assert f"`getattr(forward_batch, 'replan_metadata', None)` is None (no ForwardBatch field `replan_metadata`; only " \
           f"{AT}:25 set it, outside the capture)" in nf.why
    assert f"`self.forward_metadata` is then a new ReplanMetadata ({AT}:29), which has no `batch_size`" in nf.why
    assert nf.why.endswith("; the tree has no breakable graphs")




def test_with_breakable_graphs_a_post_replay_fallback_covers_the_debug_replay(tmp_path):
    ex = _extraction(tmp_path, files=BREAKABLE)
    assert [f for f in ex.findings if f.subject == "ReplanBackend"] == []
    (nf,) = [n for n in ex.not_findings if n.subject == "ReplanBackend"]
    assert nf.why.endswith("the one replay that runs the forward eagerly, the breakable backend's debug replay (one "
                           "break, eager_on_graph at sglang/srt/model_executor/runner_backend_utils/breakable.py:1, "
                           "around the whole forward), records no marker (it is made and recorded only while a "
                           "stream captures: `if not self.device_module.is_current_stream_capturing(): return` at "
                           "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py:12), and DecodeCudaGraphRunner."
                           "_resolve_shared_read_ends falls back from IN_REPLAY to POST_REPLAY then (sglang/srt/"
                           "model_executor/runner/decode_cuda_graph_runner.py:22), which covers the forward")


CAPTURED = "            self.forward_metadata = metadata\n"
UNGUARDED = {RUNNER: (build.__globals__["TREES"] / "common" / "sglang" / RUNNER).read_text().replace(
    "        if not self.device_module.is_current_stream_capturing():\n            return\n", "")}


@pytest.mark.parametrize("why,replace,files", [
    ("a PRE_REPLAY fallback", (), PRE_FALLBACK),
    ("a marker made outside a capture too (the debug replay may record it)", (), UNGUARDED),
    ("a PRE_REPLAY declaration", [("    def forward_decode(", "    def shared_read_ends(self, fm):\n        return "
                                   "SharedReadEnds.PRE_REPLAY\n\n    def forward_decode(")], {}),
])
def test_where_the_debug_replay_is_not_covered_the_finding_stays_and_names_the_capture_fact(tmp_path, why, replace,
                                                                                           files):
    if files is not PRE_FALLBACK:
        replace = [("from sglang.srt.layers.attention.base_attn_backend import AttentionBackend\n",
                    "from sglang.srt.layers.attention.base_attn_backend import AttentionBackend, SharedReadEnds\n")] \
            + list(replace)
    f = _finding(settle(_extraction(tmp_path, replace, {**BREAKABLE, **files})))
    assert f.status == "unresolved", why
    assert f.status_why.startswith(f"not in a captured graph: `size is not None` ({AT}:") and \
        "is false when the graph is captured: " in f.status_why, why
    assert f.status_why.endswith("only a replay that runs the forward eagerly evaluates the test again, on the live "
                                 "objects (the breakable backend's debug replay, one eager_on_graph break around the "
                                 "whole forward, where the tree's no-marker fallback decides when its marker is "
                                 "made only under a capture): not settled there"), why


@pytest.mark.parametrize("why,replace", [
    ("the metadata class has the field", [("    pages: object = None\n",
                                           "    pages: object = None\n    batch_size: int = 0\n")]),
    ("the capture stores it", [("            self.forward_metadata = metadata\n",
                                "            self.forward_metadata = metadata\n"
                                "            metadata.batch_size = forward_batch.batch_size\n")]),
    ("the in-graph prep replaces the object", [("    def forward_decode(", "    def init_forward_metadata_in_graph("
                                                "self, forward_batch):\n        self.forward_metadata = "
                                                "forward_batch.spare\n\n    def forward_decode(")]),
    ("the capture makes it on one branch only", [("        if in_capture:\n",
                                                  "        if in_capture and forward_batch.seq_lens is None:\n")]),
    ("the capture keeps an object it did not make", [("            self.forward_metadata = metadata\n",
                                                       "            self.forward_metadata = forward_batch.spare\n")]),
    # what runs between the capture call and the captured test (an independent review found these missed)
    ("the warm-up hook replaces the object", [("    def forward_decode(", "    def on_after_cuda_graph_warmup(self):\n"
                                                "        self.forward_metadata = self.spare\n\n    def forward_decode(")]),
    ("an earlier layer's forward stores the field after the test",
     [("            self.init_forward_metadata(forward_batch)\n        return q\n",
       "            self.init_forward_metadata(forward_batch)\n        metadata.batch_size = forward_batch.batch_size\n"
       "        return q\n")]),
    ("an earlier layer's forward calls a helper storing the field after the test",
     [("            self.init_forward_metadata(forward_batch)\n        return q\n",
       "            self.init_forward_metadata(forward_batch)\n        self._mark(metadata)\n        return q\n\n"
       "    def _mark(self, m):\n        m.batch_size = 0\n")]),
    ("a tuple target in the prep replaces the object",
     [("    def forward_decode(", "    def init_forward_metadata_in_graph(self, forward_batch):\n"
                                "        self.forward_metadata, _ = forward_batch.spare, None\n\n    def forward_decode(")]),
    ("the prep stores the field by name",
     [("    def forward_decode(", "    def init_forward_metadata_in_graph(self, forward_batch):\n"
                                "        object.__setattr__(self.forward_metadata, 'batch_size', 1)\n\n"
                                "    def forward_decode(")]),
    # how the capture's own call may replace the object it made (the last store on each path decides)
    ("a helper two calls down replaces the object",
     [(CAPTURED, CAPTURED + "            self._again(forward_batch)\n"),
      ("    def forward_decode(", "    def _again(self, fb):\n        self._again2(fb)\n\n"
                                "    def _again2(self, fb):\n        self.forward_metadata = fb.spare\n\n"
                                "    def forward_decode(")]),
    ("a tuple target replaces the object",
     [(CAPTURED, CAPTURED + "            self.forward_metadata, _ = forward_batch.spare, None\n")]),
    ("an annotated target replaces the object",
     [(CAPTURED, CAPTURED + "            self.forward_metadata: object = forward_batch.spare\n")]),
    ("an augmented assignment replaces the object",
     [(CAPTURED, CAPTURED + "            self.forward_metadata += forward_batch.spare\n")]),
    ("a call in an if test replaces the object",
     [(CAPTURED, CAPTURED + "            if self._swap(forward_batch):\n                pass\n"),
      ("    def forward_decode(", "    def _swap(self, fb):\n        self.forward_metadata = fb.spare\n"
                                "        return True\n\n    def forward_decode(")]),
    ("a with statement's call replaces the object",
     [(CAPTURED, CAPTURED + "            with self._swap(forward_batch):\n                pass\n"),
      ("    def forward_decode(", "    def _swap(self, fb):\n        self.forward_metadata = fb.spare\n"
                                "        return fb\n\n    def forward_decode(")]),
    ("a with statement's target replaces the object",
     [(CAPTURED, CAPTURED + "            with forward_batch.spare as self.forward_metadata:\n                pass\n")]),
    ("a module function given the backend replaces the object",
     [(CAPTURED, CAPTURED + "            _swap(self, forward_batch)\n"),
      ("class ReplanBackend(", "def _swap(backend, fb):\n    backend.forward_metadata = fb.spare\n\n\n"
                             "class ReplanBackend(")]),
    ("a call the reader cannot follow is given the backend",
     [(CAPTURED, CAPTURED + "            forward_batch.register(self)\n")]),
    ("a nested function replaces the object",
     [(CAPTURED, CAPTURED + "            def swap():\n                self.forward_metadata = forward_batch.spare\n"
                           "            swap()\n")]),
])
def test_each_broken_link_keeps_the_read_a_finding_on_its_conditions(tmp_path, why, replace):
    f = _finding(settle(_extraction(tmp_path, replace, {**BREAKABLE, **PRE_FALLBACK})))
    assert f.whole_graph == (None,), why
    assert f.status == "unresolved" and f.status_why.startswith("not settled: size is not None and size < "
                                                                "forward_batch.batch_size"), why


@pytest.mark.parametrize("store", ["    backend.forward_metadata = fb.spare\n",
                                   "    runner.attn_backend.forward_metadata = None\n"])
def test_the_capture_s_object_replaced_through_another_receiver_keeps_the_read_a_finding(tmp_path, store):
    """Code outside the backend that stores the field holding the capture's object on a receiver the reader cannot
    type (0.5.23 model_executor/runner/eager_runner.py:456 ``model_runner.attn_backend.forward_metadata = None``)
    may replace it; the read stays a finding on its conditions, as the binding rule has it."""
    glue = f"def reinstall(backend, runner, fb):\n{store}"
    f = _finding(settle(_extraction(tmp_path, (), {**BREAKABLE, **PRE_FALLBACK,
                                                   "sglang/srt/model_executor/runner/glue.py": glue})))
    assert f.whole_graph == (None,)
    assert f.status == "unresolved" and f.status_why.startswith("not settled: size is not None and size < "
                                                                "forward_batch.batch_size")


def test_a_wrapper_s_store_into_its_child_keeps_the_read_a_finding(tmp_path):
    """``self.backend.forward_metadata = ...`` in another class's method stores on that class's child, which may be
    this backend (0.5.23 dllm/attention.py:157, ``DllmFlashAttention`` wrapping a Triton backend): only ``self``
    itself is surely another object."""
    wrap = "class Wrap:\n    def install(self, fb):\n        self.backend.forward_metadata = fb.spare\n"
    f = _finding(settle(_extraction(tmp_path, (), {**BREAKABLE, **PRE_FALLBACK,
                                                   "sglang/srt/model_executor/runner/wrap.py": wrap})))
    assert f.whole_graph == (None,)
    assert f.status == "unresolved" and f.status_why.startswith("not settled: size is not None and size < "
                                                                "forward_batch.batch_size")


def test_the_field_stored_through_self_of_another_class_leaves_the_read_settled(tmp_path):
    """``self.forward_metadata = ...`` in another class's method that nothing calls through its class stores on an
    instance of that class, never on this backend: the fact stands."""
    other = "class Other:\n    def swap(self, fb):\n        self.forward_metadata = fb.spare\n"
    f = _finding(settle(_extraction(tmp_path, (), {**BREAKABLE, **PRE_FALLBACK,
                                                   "sglang/srt/model_executor/runner/other.py": other})))
    assert isinstance(f.whole_graph[0], CaptureFact)


@pytest.mark.parametrize("why,replace", [
    ("a field of the object stored", [(CAPTURED, CAPTURED + "            self.forward_metadata.pages = None\n")]),
    ("a helper storing a field of the object", [
        (CAPTURED, CAPTURED + "            self._fill(forward_batch)\n"),
        ("    def forward_decode(", "    def _fill(self, fb):\n        self.forward_metadata.pages = fb.spare\n\n"
                                  "    def forward_decode(")]),
    ("a builtin that only looks at the backend", [(CAPTURED, CAPTURED + "            assert isinstance(self, object)\n")]),
    ("a tuple target that unpacks into other names", [
        (CAPTURED, CAPTURED + "            first, second = self.forward_metadata, None\n")]),
])
def test_what_keeps_the_capture_s_object_keeps_the_read_settled(tmp_path, why, replace):
    """The counterpart of the broken links: code that touches the capture's object without replacing it (a field of
    it, a look at the backend) leaves the fact standing, as the 0.5.18 TRTLLM-MLA capture does (its
    ``_apply_cuda_graph_metadata`` fills fields of ``self.forward_decode_metadata``)."""
    f = _finding(settle(_extraction(tmp_path, replace, {**BREAKABLE, **PRE_FALLBACK})))
    assert f.whole_graph != (None,) and isinstance(f.whole_graph[0], CaptureFact), why


def test_an_earlier_re_plan_under_the_same_test_is_left_out_by_induction(tmp_path):
    """CuteDSL-MLA repeats TRTLLM-MLA's re-plan in its own forward before calling the parent's (0.5.23
    cutedsl_mla_backend.py:243-253): a branch whose test needs the attribute the fact says is absent runs, in an
    earlier layer, only once that attribute is there, which nothing before it stored; the read stays settled."""
    early = ("        early = getattr(metadata, \"batch_size\", None)\n"
             "        if early is not None and early < forward_batch.batch_size:\n"
             "            self.init_forward_metadata(forward_batch)\n")
    ex = _extraction(tmp_path, [("        size = getattr(metadata, \"batch_size\", None)\n",
                                 early + "        size = getattr(metadata, \"batch_size\", None)\n")])
    assert [f for f in ex.findings if f.subject == "ReplanBackend"] == []


def _shared_dict(parent_guard: str) -> list[tuple[str, str]]:
    """ReplanBackend with the capture's object kept in a per-size dict that a parent's capture fills too, under
    ``parent_guard``, with an object that has ``batch_size``; the child calls the parent only outside decode."""
    return [
        ("class ReplanBackend(AttentionBackend):",
         "class Wrapped:\n    batch_size = 0\n\n\nclass ReplanBase(AttentionBackend):\n"
         "    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):\n"
         f"        if in_capture and {parent_guard}:\n"
         "            self.graph_metadata[forward_batch.batch_size] = Wrapped()\n\n\n"
         "class ReplanBackend(ReplanBase):"),
        ("        if in_capture:\n            metadata = ReplanMetadata()\n"
         "            self.graph_metadata[forward_batch.batch_size] = metadata\n"
         "            self.forward_metadata = metadata\n",
         "        if not forward_batch.forward_mode.is_decode():\n"
         "            return super().init_forward_metadata_out_graph(forward_batch, in_capture=in_capture)\n"
         "        if in_capture:\n"
         "            if forward_batch.batch_size in self.graph_metadata:\n"
         "                self.forward_metadata = self.graph_metadata[forward_batch.batch_size]\n"
         "                return\n"
         "            metadata = ReplanMetadata()\n"
         "            self.graph_metadata[forward_batch.batch_size] = metadata\n"
         "            self.forward_metadata = metadata\n")]


def test_a_per_size_dict_s_store_that_no_mode_runs_is_left_out_and_named(tmp_path):
    """TRTLLM-MLA's verify backstop (0.5.23 trtllm_mla_backend.py:743, flashinfer_mla_backend.py:373): the parent's
    capture stores a wrapper into the dict only in decode, and the child calls the parent only outside decode, so
    that store never runs: the dict holds the child's objects alone and the test is settled."""
    ex = _extraction(tmp_path, _shared_dict("forward_batch.forward_mode.is_decode()"))
    assert [f for f in ex.findings if f.subject == "ReplanBackend"] == []
    (nf,) = [n for n in ex.not_findings if n.subject == "ReplanBackend"]
    assert f"a new ReplanMetadata ({AT}:" in nf.why and "a per-size dict's store no forward mode runs is left out: " \
        f"{AT}:18 (ReplanBase.init_forward_metadata_out_graph)" in nf.why


@pytest.mark.parametrize("guard", ["forward_batch.forward_mode.is_extend()", "forward_batch.seq_lens is not None"])
def test_a_per_size_dict_s_store_some_mode_may_run_keeps_the_read_a_finding(tmp_path, guard):
    """The parent's store runs where a mode passes both its test and the child's call (``is_extend()``: EXTEND, and
    TARGET_VERIFY in this tree), or where its test is not a mode test: the dict may hold the parent's object, which
    has ``batch_size``, so the test is not settled."""
    f = _finding(settle(_extraction(tmp_path, _shared_dict(guard), {**BREAKABLE, **PRE_FALLBACK})))
    assert f.whole_graph == (None,) and f.status == "unresolved"
    assert f.status_why.startswith("not settled: size is not None and size < forward_batch.batch_size")


CHILD_CALL = "            return super().init_forward_metadata_out_graph(forward_batch, in_capture=in_capture)\n"


@pytest.mark.parametrize("why,extra", [
    ("the parent named with its class runs it in any mode",
     [("            metadata = ReplanMetadata()\n",
       "            ReplanBase.init_forward_metadata_out_graph(self, forward_batch, in_capture=in_capture)\n"
       "            metadata = ReplanMetadata()\n")]),
    ("the child passes another batch on", [(CHILD_CALL, CHILD_CALL.replace("(forward_batch,", "(self.decode_batch,"))]),
    ("the mode is changed before the call",
     [(CHILD_CALL, "            forward_batch.forward_mode = self.decode_mode\n" + CHILD_CALL)]),
])
def test_a_parent_s_store_that_may_run_after_all_keeps_the_read_a_finding(tmp_path, why, extra):
    """Where the call that reaches the parent's store is not sure to see the mode its tests see (found by an
    independent review), the store counts, and the dict may hold the parent's object, which has ``batch_size``."""
    f = _finding(settle(_extraction(tmp_path, _shared_dict("forward_batch.forward_mode.is_decode()") + extra,
                                    {**BREAKABLE, **PRE_FALLBACK})))
    assert f.whole_graph == (None,) and f.status == "unresolved", why


def test_a_store_of_the_batch_field_outside_the_runtime_folder_keeps_the_read_a_finding(tmp_path):
    """``getattr(forward_batch, "replan_metadata", None)`` is None only if nothing stores that field: a store in a
    module outside ``sglang/srt`` counts too (the searches cover the whole package; found by an independent review)."""
    prep = {"kernels/__init__.py": "", "kernels/replan_prep.py":
            "def prep(forward_batch):\n    forward_batch.replan_metadata = object()\n"}
    f = _finding(settle(_extraction(tmp_path, files={**prep, **BREAKABLE, **PRE_FALLBACK})))
    assert f.whole_graph == (None,) and f.status == "unresolved"


def test_a_forward_batch_field_of_that_name_keeps_the_read_a_finding(tmp_path):
    text = FORWARD_BATCH + "    replan_metadata: object = None\n"
    f = _finding(settle(_extraction(tmp_path, files={FB: text, **BREAKABLE, **PRE_FALLBACK})))
    assert f.whole_graph == (None,)


def test_the_graph_replayed_modes_are_the_tree_s_is_cuda_graph(tmp_path):
    assert graph_modes(Modes(Tree(build(tmp_path / "a", {})))) == ("DECODE", "IDLE", "TARGET_VERIFY")
    text = (build.__globals__["TREES"] / "common" / "sglang" / FB).read_text()
    dllm = text.replace("    DRAFT_EXTEND_V2 = auto()\n", "    DRAFT_EXTEND_V2 = auto()\n    DLLM_EXTEND = auto()\n") \
        .replace("ForwardMode.TARGET_VERIFY, ForwardMode.IDLE)", "ForwardMode.TARGET_VERIFY, ForwardMode.IDLE, "
                                                               "ForwardMode.DLLM_EXTEND)")
    assert "DLLM_EXTEND)" in dllm
    assert graph_modes(Modes(Tree(build(tmp_path / "b", {FB: dllm})))) == ("DECODE", "IDLE", "TARGET_VERIFY",
                                                                            "DLLM_EXTEND")
    broken = text.replace("return self in (ForwardMode.DECODE, ForwardMode.TARGET_VERIFY, ForwardMode.IDLE)",
                          "return graph_flag(self)")
    assert graph_modes(Modes(Tree(build(tmp_path / "c", {FB: broken})))) == ()  # not evaluated: no mode taken


def test_a_local_takes_its_last_assignment_only_when_that_one_runs_on_every_path_to_the_line():
    fn = ast.parse("def f(x):\n"
                   "    a = 1\n"
                   "    if x:\n"
                   "        a = 2\n"
                   "        b = a\n"
                   "    c = a\n"
                   "    if x:\n"
                   "        d = 3\n"
                   "    else:\n"
                   "        e = d\n").body[0]
    assert ast.unparse(local_value(fn, "a", 3)) == "1"
    assert ast.unparse(local_value(fn, "a", 5)) == "2"  # in the block that holds line 5
    assert local_value(fn, "a", 6) is None  # the last one before line 6 is on one branch only
    assert local_value(fn, "d", 10) is None  # another branch
    assert local_value(fn, "x", 5) is None  # a parameter


@pytest.mark.slow
def test_trtllm_mla_decode_re_plan_is_in_no_replay_of_the_release(release_extraction):
    """0.5.23: TRTLLM-MLA's decode and verify backstops are settled against the capture, and its debug replay falls
    back to POST_REPLAY: not findings. The verify capture takes its object from the per-size dict the decode capture
    filled; the FlashInfer-MLA parent's capture also stores wrappers there (flashinfer_mla_backend.py:373), but only
    in decode, and TRTLLM-MLA calls it only outside decode, verify and draft extend (trtllm_mla_backend.py:738-745)."""
    ex = settle(release_extraction)
    got = {f.mode: f for f in ex.findings if f.subject == "TRTLLMMLABackend" and f.kind == "read_outside_declaration"}
    at = "sglang/srt/layers/attention/trtllm_mla_backend.py"
    assert "DECODE" not in got
    nf = [n for n in ex.not_findings if n.subject == "TRTLLMMLABackend" and n.mode == "DECODE"
          and n.why.startswith("no graph captures its path: ")]
    assert nf and all(f"`batch_size is not None` ({at}:1341) is false when the graph is captured: the runner calls "
                      "`init_forward_metadata_out_graph(..., in_capture=True)` (sglang/srt/model_executor/runner/"
                      "decode_cuda_graph_runner.py:1400)" in n.why and f"a new TRTLLMMLADecodeMetadata ({at}:555)"
                      in n.why and "falls back from IN_REPLAY to POST_REPLAY then (sglang/srt/model_executor/runner/"
                      "decode_cuda_graph_runner.py:685)" in n.why for n in nf)
    assert "TARGET_VERIFY" not in got
    nf = [n for n in ex.not_findings if n.subject == "TRTLLMMLABackend" and n.mode == "TARGET_VERIFY"
          and n.why.startswith("no graph captures its path: ")]
    assert nf and all(f"`batch_size is not None` ({at}:1531) is false when the graph is captured" in n.why
                      and "a per-size dict's store no forward mode runs is left out: sglang/srt/layers/attention/"
                      "flashinfer_mla_backend.py:373 (FlashInferMLAAttnBackend.init_forward_metadata_out_graph)"
                      in n.why for n in nf)
