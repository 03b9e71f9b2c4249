"""Tests what a host sync or a capture-mode test on a read's path decides per kind of run, and reads tied to platforms.

``reads.hard_sync`` and ``extract._whole_graph`` judge the first, ``extract._platform_paths`` the second.

No CUDA graph captures a path that host-syncs (the capture fails), so in a decode graph such a read is a read no
whole-graph replay makes; a replay that runs the forward eagerly (a breakable backend's debug replay) runs it, sync
and all, so there it races unless the no-marker fallback covers the forward. A mode no decode graph replays runs
eagerly: neither a host sync nor a capture-mode test keeps its read from running after the event. A sync under a
conditional expression, or in a helper that may return first, is not on every path. A read whose tests hold only on
a device whose runners never publish, on a platform whose runner falls back to an end that covers it, or on no
platform, is not a finding.
"""

from __future__ import annotations

import pytest

from fencecheck.decision.status import settle
from fencecheck.sglang_source import read_path
from sglang_reader_trees import ATTN, BREAKABLE, HEAD, PRE_FALLBACK, build

AT = f"sglang/{ATTN}/sync_kinds_backend.py"
SYNC = "        n = int(forward_batch.seq_lens.max().item())\n"
READ = "        pages = self.req_to_token[forward_batch.req_pool_indices, :n]\n"


def _backend(decode: str, extend: str = "        return q\n", extra: str = "") -> str:
    return HEAD + f'''from sglang.srt.model_executor.runner_utils.capture_mode import get_is_capture_mode


class SyncKindsBackend(AttentionBackend):
    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.cap = model_runner.cap

    def shared_read_ends(self, fm):
        if fm.is_extend():
            return SharedReadEnds.PRE_REPLAY
        return super().shared_read_ends(fm)

    def forward_decode(self, q, k, v, layer, forward_batch):
{decode}        return q

    def forward_extend(self, q, k, v, layer, forward_batch):
{extend}        return q
{extra}'''


def _line(text: str, line: str) -> int:
    return text.splitlines().index(line.rstrip("\n")) + 1


def _doc(tmp_path, text: str, extra=None, case=None):
    return settle(read_path(build(tmp_path, {f"{ATTN}/sync_kinds_backend.py": text, **(extra or {})}, case)))


def _ours(items, mode="DECODE"):
    return [x for x in items if x.subject == "SyncKindsBackend" and x.mode == mode]


def _reads(f) -> set[int]:
    return {r.line for _, r in f.uncovered}


def test_without_breakable_graphs_a_read_after_a_host_sync_is_in_no_graph(tmp_path):
    text = _backend(SYNC + READ)
    ex = _doc(tmp_path, text)
    assert _ours(ex.findings) == []
    (nf,) = _ours(ex.not_findings)
    assert (nf.line, nf.why) == (_line(text, READ), f"no graph captures its path: it host-syncs first ({AT}:"
                                                    f"{_line(text, SYNC)}), which a CUDA graph cannot capture; the "
                                                    "tree has no breakable graphs")


def test_a_post_replay_fallback_covers_the_eager_debug_replay(tmp_path):
    ex = _doc(tmp_path, _backend(SYNC + READ), BREAKABLE)
    assert _ours(ex.findings) == []
    (nf,) = _ours(ex.not_findings)
    assert nf.why.startswith(f"no graph captures its path: it host-syncs first ({AT}:")
    assert "the one replay that runs the forward eagerly, the breakable backend's debug replay" in nf.why


def test_where_the_eager_debug_replay_is_not_covered_the_read_after_the_sync_is_a_finding(tmp_path):
    """0.5.18's shape: the debug replay runs the forward eagerly after a PRE_REPLAY event, the sync included."""
    text = _backend(SYNC + READ)
    (f,) = _ours(_doc(tmp_path, text, {**BREAKABLE, **PRE_FALLBACK}).findings)
    assert _reads(f) == {_line(text, READ)}
    assert f.status == "unresolved"
    assert f.status_why.startswith(f"not in a captured graph: it host-syncs first ({AT}:{_line(text, SYNC)}), which "
                                   "a CUDA graph cannot capture; only a replay that runs the forward eagerly runs the "
                                   "host sync (the breakable backend's debug replay")


def test_in_a_mode_that_runs_eagerly_neither_a_sync_nor_a_capture_mode_test_keeps_the_read_out(tmp_path):
    guard = "        if not get_is_capture_mode():\n            m = self.req_to_token[forward_batch.req_pool_indices]\n"
    text = _backend("", extend=SYNC + READ + guard)
    ex = _doc(tmp_path, text)
    (f,) = _ours(ex.findings, "EXTEND")
    assert _reads(f) == {_line(text, READ), _line(text, guard.splitlines()[1])}
    assert _ours(ex.not_findings, "EXTEND") == []
    # in the decode graph the same guard keeps its read out, with the test cited
    text = _backend(guard)
    ex = _doc(tmp_path / "decode", text)
    assert _ours(ex.findings) == []
    (nf,) = _ours(ex.not_findings)
    assert nf.why.startswith(f"behind a capture-mode test at {AT}:{_line(text, guard.splitlines()[0])}")


def test_a_sync_under_a_conditional_expression_is_not_on_every_path(tmp_path):
    text = _backend("        n = self.cap if self.cap else int(forward_batch.seq_lens.max().item())\n" + READ)
    (f,) = _ours(_doc(tmp_path, text).findings)
    assert _reads(f) == {_line(text, READ)}
    assert f.status == "confirmed"


def test_a_sync_in_a_helper_that_may_return_first_is_not_on_every_path(tmp_path):
    helper = ("\n    def _len(self, forward_batch):\n        if self.cap:\n            return self.cap\n"
              "        return int(forward_batch.seq_lens.max().item())\n")
    text = _backend("        n = self._len(forward_batch)\n" + READ, extra=helper)
    (f,) = _ours(_doc(tmp_path, text).findings)
    assert _reads(f) == {_line(text, READ)}
    # the helper that syncs on every path keeps the read out of the graph
    text = _backend("        n = self._len(forward_batch)\n" + READ,
                    extra="\n    def _len(self, forward_batch):\n        return int(forward_batch.seq_lens.max().item())\n")
    ex = _doc(tmp_path / "always", text)
    assert _ours(ex.findings) == []
    assert [n.line for n in _ours(ex.not_findings)] == [_line(text, READ)]


PLATFORM = HEAD + '''from sglang.srt.utils.common import is_hip, is_npu


class SyncKindsBackend(AttentionBackend):
    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.is_npu = is_npu()
        self.is_hip = is_hip()

    def forward_decode(self, q, k, v, layer, forward_batch):
        if self.is_npu:
            a = self.req_to_token[forward_batch.req_pool_indices, 0]
        if self.is_hip:
            if self.is_npu:
                b = self.req_to_token[forward_batch.req_pool_indices, 1]
        if not self.is_npu:
            c = self.req_to_token[forward_batch.req_pool_indices, 2]
        return q
'''
UTILS = ("import torch\n\n\ndef is_cuda():\n    return torch.version.cuda is not None\n\n\ndef is_hip():\n"
         "    return torch.version.hip is not None\n\n\ndef is_npu():\n    return hasattr(torch, 'npu')\n")


def test_reads_that_run_only_where_nothing_publishes_or_nowhere_are_not_findings(tmp_path):
    ex = _doc(tmp_path, PLATFORM, {"srt/utils/common.py": UTILS}, case="device")
    npu, nowhere, cuda = (next(n for n, x in enumerate(PLATFORM.splitlines(), 1)
                               if x.strip() == f"{v} = self.req_to_token[forward_batch.req_pool_indices, {i}]")
                          for i, v in enumerate("abc"))
    (f,) = _ours(ex.findings)
    assert _reads(f) == {cuda}  # `not self.is_npu` holds on CUDA, which publishes
    why = {n.line: n.why for n in _ours(ex.not_findings)}
    assert set(why) == {npu, nowhere}
    defs = (f"self.is_npu = is_npu() at {AT}:{_line(PLATFORM, '        self.is_npu = is_npu()')}")
    assert why[npu].startswith(f"runs only on npu: `self.is_npu` ({defs}); npu's decode graph runner is "
                               "NPUGraphRunner (")
    assert why[npu].endswith("the barrier waits on the whole forward stream after a DECODE step there")
    assert why[nowhere].startswith("its path runs on no platform: `self.is_hip` and `self.is_npu` cannot all hold "
                                   "with one platform's predicate true (self.is_hip = is_hip() at ")


def test_on_a_platform_without_the_marker_the_runners_fallback_decides(tmp_path):
    """No device map: NPU takes the CUDA decode graph runner, whose marker is made only on CUDA
    (``make_external_event``); its IN_REPLAY then falls back to POST_REPLAY, which covers the NPU read, and to
    PRE_REPLAY in a copy of the runner (0.5.18's rule), which does not."""
    npu = next(n for n, x in enumerate(PLATFORM.splitlines(), 1)
               if x.strip() == "a = self.req_to_token[forward_batch.req_pool_indices, 0]")
    ex = _doc(tmp_path, PLATFORM, {"srt/utils/common.py": UTILS})
    (f,) = _ours(ex.findings)
    assert len(_reads(f)) == 1 and npu not in _reads(f)
    why = {n.line: n.why for n in _ours(ex.not_findings)}
    assert why[npu].startswith("runs only on npu: `self.is_npu` (self.is_npu = is_npu() at ")
    assert "npu has no in-graph marker (make_external_event returns None when not is_cuda() (" in why[npu]
    assert ("so its decode graph runner resolves IN_REPLAY by the fallback to POST_REPLAY (declaration_only_post_"
            "fallback, sglang/srt/model_executor/runner/decode_cuda_graph_runner.py:") in why[npu]
    assert why[npu].endswith("which covers in_graph_after_marker")
    ex = _doc(tmp_path / "pre", PLATFORM, {"srt/utils/common.py": UTILS, **PRE_FALLBACK})
    (f,) = _ours(ex.findings)
    assert npu in _reads(f) and len(_reads(f)) == 2  # the PRE_REPLAY fallback races on NPU; the impossible one is gone
    assert [n.why.split(":")[0] for n in _ours(ex.not_findings)] == ["its path runs on no platform"]


# -- the holes an independent review of the first version found, each a test -----------------------------------------

HOLE_READ = "            a = self.req_to_token[forward_batch.req_pool_indices]\n"


def _probe(init="        self.fused = is_npu()\n", extra="", base="    pass\n", head=""):
    """A backend reading under ``if self.fused:`` on a base class of its own, with ``init``, ``extra`` methods and the
    base's body ``base``."""
    return {f"{ATTN}/probe_base.py": HEAD + "class ProbeBase(AttentionBackend):\n" + base,
            f"{ATTN}/sync_kinds_backend.py": (
                "from sglang.srt.layers.attention.probe_base import ProbeBase\n"
                "from sglang.srt.utils.common import is_npu\n" + head + "\n\nclass SyncKindsBackend(ProbeBase):\n"
                "    def __init__(self, model_runner):\n"
                "        self.req_to_token = model_runner.req_to_token_pool.req_to_token\n" + init +
                "\n    def forward_decode(self, q, k, v, layer, forward_batch):\n        if self.fused:\n" + HOLE_READ
                + "        return q\n" + extra),
            "srt/utils/common.py": UTILS}


CHILD = HEAD + '''from sglang.srt.utils.common import is_cuda, is_npu


class ProbeChild(AttentionBackend):
    def __init__(self, model_runner):
        self.fast = is_cuda()

    def shared_read_ends(self, fm):
        if self.fast:
            return SharedReadEnds.PRE_REPLAY
        return SharedReadEnds.POST_REPLAY


class SyncKindsBackend(AttentionBackend):
    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.child = ProbeChild(model_runner)
        self.fast = is_npu()

    def shared_read_ends(self, fm):
        return self.child.shared_read_ends(fm)

    def forward_decode(self, q, k, v, layer, forward_batch):
        a = self.req_to_token[forward_batch.req_pool_indices]
        return q
'''
HELPER = '''from sglang.srt.utils.common import is_cuda, is_npu


def _fused_ok():
    return is_cuda() or is_npu()


def gather(fb):
    if _fused_ok():
        return fb.req_to_token_pool.req_to_token[fb.req_pool_indices]
    return None
'''
SAME_NAME = HEAD + '''from sglang.srt.layers.attention.probe_helpers import gather
from sglang.srt.utils.common import is_npu


def _fused_ok():
    return is_npu()


class SyncKindsBackend(AttentionBackend):
    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token

    def forward_decode(self, q, k, v, layer, forward_batch):
        gather(forward_batch)
        return q
'''
SELF_PARAM = HEAD + '''from sglang.srt.utils.common import is_npu


class DecodePlan:
    def __init__(self, batch_size):
        self.fast = batch_size > 8


def plan_kernel(self, fb):
    if self.fast:
        return fb.req_to_token_pool.req_to_token[fb.req_pool_indices]
    return None


class SyncKindsBackend(AttentionBackend):
    def __init__(self, model_runner):
        self.fast = is_npu()

    def forward_decode(self, q, k, v, layer, forward_batch):
        plan_kernel(DecodePlan(forward_batch.batch_size), forward_batch)
        return q
'''
REASSIGN = "\n    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):\n        {}\n"


@pytest.mark.parametrize("why,files", [
    ("a base method re-assigns the attribute", _probe(base=REASSIGN.format("self.fused = forward_batch.batch_size > 8"))),
    ("setattr in the backend's own method", _probe(extra=REASSIGN.format(
        "setattr(self, 'fused', forward_batch.batch_size > 8)"))),
    ("a base __init__ runs after and overwrites", _probe(init="        self.fused = is_npu()\n"
                                                              "        super().__init__(model_runner)\n",
                                                         base="    def __init__(self, model_runner):\n"
                                                              "        self.fused = True\n")),
    ("a child's row tests its own self", {f"{ATTN}/sync_kinds_backend.py": CHILD, "srt/utils/common.py": UTILS}),
    ("a helper named alike in another module", {f"{ATTN}/sync_kinds_backend.py": SAME_NAME,
                                                f"{ATTN}/probe_helpers.py": HELPER, "srt/utils/common.py": UTILS}),
    ("a module function's parameter named self", {f"{ATTN}/sync_kinds_backend.py": SELF_PARAM,
                                                  "srt/utils/common.py": UTILS}),
])
def test_each_way_the_review_found_to_race_on_cuda_keeps_the_read_a_finding(tmp_path, why, files):
    ex = _doc(tmp_path, files.pop(f"{ATTN}/sync_kinds_backend.py"), files, case="device")
    (f,) = _ours(ex.findings)
    assert len(_reads(f)) == 1, why
    assert not [n for n in _ours(ex.not_findings) if n.why.startswith(("runs only on", "its path runs on no"))], why


@pytest.mark.parametrize("sync", ["        n = int(forward_batch.seq_lens_cpu.max().item())\n",
                                  "        n = forward_batch.extend_seq_lens_cpu.tolist()\n",
                                  "        with contextlib.suppress(KeyError):\n"
                                  "            n = int(self.lens[forward_batch.rid].max().item())\n"])
def test_a_host_tensors_copy_or_a_sync_a_raise_may_skip_keeps_the_read_a_finding(tmp_path, sync):
    text = _backend(sync + READ).replace("from sglang.srt.model_executor", "import contextlib\n"
                                                                            "from sglang.srt.model_executor", 1)
    (f,) = _ours(_doc(tmp_path, text).findings)
    assert _reads(f) == {_line(text, READ)}


def test_a_helper_that_syncs_before_it_returns_early_keeps_the_read_out(tmp_path):
    helper = ("\n    def _len(self, forward_batch):\n        n = int(forward_batch.seq_lens.max().item())\n"
              "        if n == 0:\n            return 0\n        return n\n")
    text = _backend("        n = self._len(forward_batch)\n" + READ, extra=helper)
    ex = _doc(tmp_path, text)
    assert _ours(ex.findings) == []
    assert [n.line for n in _ours(ex.not_findings)] == [_line(text, READ)]


PREDICATE = "\n    def _sparse(self, fb, *, n):\n        return n > 4 and fb.forward_mode.is_extend()\n"
GATED = "        if self.cap and self._sparse(forward_batch, n=self.cap):\n" + HOLE_READ


@pytest.mark.parametrize("extra,gone", [
    (PREDICATE, True),  # the helper's mode test is false in DECODE: no path reads
    (PREDICATE.replace("        return", "        x = 1\n        return"), False),  # two statements: not a predicate
    (PREDICATE + "\n    def swap(self):\n        self._sparse = None\n", False),  # the name stored: it may change
    ("\n    @staticmethod" + PREDICATE.replace("(self, fb", "(fb"), False),  # decorated: not taken
])
def test_a_one_return_predicate_is_decided_by_the_mode_inside_it(tmp_path, extra, gone):
    text = _backend(GATED, extra=extra)
    reads = {r.line for f in _ours(_doc(tmp_path, text).findings) for r in (x for _, x in f.uncovered)}
    assert reads == (set() if gone else {_line(text, HOLE_READ)})


EAGER = "srt/model_executor/runner/eager_runner.py"


def test_where_an_eager_run_of_a_graph_mode_publishes_nothing_keeps_its_read_out(tmp_path):
    """The common eager runner publishes on its prefill path only; one that also publishes after an eager decode
    makes a decode read behind a capture-mode test or a host sync race in that eager run."""
    guard = "        if not get_is_capture_mode():\n            m = self.req_to_token[forward_batch.req_pool_indices]\n"
    text = _backend(guard + SYNC + READ)
    assert _ours(_doc(tmp_path, text).findings) == []
    runner = (build.__globals__["TREES"] / "common" / "sglang" / EAGER).read_text()
    old = "        self.model_runner.attn_backend.init_forward_metadata(forward_batch)\n        return self.model_runner" \
          ".model.forward(forward_batch)\n\n    def _execute_extend"
    assert old in runner
    publishing = runner.replace(old, "        self.model_runner.attn_backend.init_forward_metadata(forward_batch)\n"
                                     "        self.model_runner.shared_read_done_event = object()\n"
                                     "        return self.model_runner.model.forward(forward_batch)\n\n"
                                     "    def _execute_extend")
    (f,) = _ours(_doc(tmp_path / "publishing", text, {EAGER: publishing}).findings)
    assert _reads(f) == {_line(text, guard.splitlines()[1]), _line(text, READ)}


# -- the holes a second review found, each a test ---------------------------------------------------------------------

SPARSE = "\n    def _sparse(self, fb):\n        return fb.forward_mode.is_extend()\n"
GATE = "        if self._sparse(forward_batch):\n" + HOLE_READ


def _subclassed(override: str) -> str:
    """The gate in a base class's method, the predicate on the base, ``override`` in the class body of the walked
    subclass."""
    text = _backend("        return self._go(q, forward_batch)\n",
                    extra="\n    def _go(self, q, forward_batch):\n" + GATE + "        return q\n" + SPARSE)
    return (text.replace("class SyncKindsBackend(AttentionBackend):", "class Base(AttentionBackend):")
            + "\n\nclass SyncKindsBackend(Base):\n" + override)


@pytest.mark.parametrize("why,text", [
    ("a parameter left to its default", _backend(GATE, extra="\n    def _sparse(self, fb, fm=ForwardMode.EXTEND):\n"
                                                               "        return fm.is_extend()\n")),
    ("an override under an if in the subclass's body",
     _subclassed("    if True:\n        def _sparse(self, fb):\n            return True\n")),
    ("an override by an annotated class attribute", _subclassed("    _sparse: object = lambda self, fb: True\n")),
    ("an instance attribute stored with an annotation",
     _backend(GATE, extra=SPARSE + "\n    def swap(self):\n        self._sparse: object = lambda fb: True\n")),
    ("an instance attribute stored without spaces",
     _backend(GATE, extra=SPARSE + "\n    def swap(self):\n        self._sparse=lambda fb: True\n")),
])
def test_each_way_the_second_review_found_to_take_another_predicate_keeps_the_read(tmp_path, why, text):
    reads = {r.line for f in _ours(_doc(tmp_path, text).findings) for _, r in f.uncovered}
    assert len(reads) == 1, why
    control = _backend(GATE, extra=SPARSE)  # the plain predicate decides: DECODE never reads
    assert _ours(_doc(tmp_path / "control", control).findings) == []


DECODE_AT = "    def _execute_decode(self, forward_batch):\n" \
            "        self.model_runner.attn_backend.init_forward_metadata(forward_batch)\n"


@pytest.mark.parametrize("why,change", [
    ("the decode calls the prefill-named helper", lambda r: r.replace(DECODE_AT, DECODE_AT + (
        "        maybe_publish_prefill_shared_read_done(self.model_runner, self.ends, self.device_module)\n")),),
    ("a decode publish whose text names a prefill", lambda r: r.replace(DECODE_AT, DECODE_AT + (
        "        self.model_runner.shared_read_done_event = self.prefill_event\n"))),
    ("the decode goes through a helper named for prefill", lambda r: r.replace(DECODE_AT, (
        "    def _execute_decode(self, forward_batch):\n        return self._run_prefill_or_decode(forward_batch)\n\n"
        "    def _run_prefill_or_decode(self, forward_batch):\n"
        "        self.model_runner.attn_backend.init_forward_metadata(forward_batch)\n"
        "        self.model_runner.shared_read_done_event = object()\n"))),
    ("a subclass of the eager runner publishes after a decode", lambda r: r + (
        "\n\nclass NpuEagerRunner(EagerRunner):\n    def _execute_decode(self, forward_batch):\n"
        "        self.model_runner.shared_read_done_event = object()\n"
        "        return self.model_runner.model.forward(forward_batch)\n")),
])
def test_each_way_the_second_review_found_an_eager_decode_to_publish_keeps_the_read(tmp_path, why, change):
    runner = (build.__globals__["TREES"] / "common" / "sglang" / EAGER).read_text()
    assert DECODE_AT in runner
    text = _backend(SYNC + READ)
    (f,) = _ours(_doc(tmp_path, text, {EAGER: change(runner)}).findings)
    assert {r.line for _, r in f.uncovered} == {_line(text, READ)}, why
