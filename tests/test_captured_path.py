"""Tests the captured path interpreted (``decision/captured.py`` over ``absint.py``) beside the rules it replaces.

On the capture rule's own corpus (tests/sglang_trees/capture_metadata and every variant
``test_sglang_source_capture_state.py`` keeps), with that rule and the binding rule switched off, the interpretation
decides what the rule decides: the read the capture never reaches is not captured, naming the test that is false
there, and each variant that breaks one link of the argument (a store the capture, a warm-up, the prep, a helper,
another receiver or a call it cannot follow may make) leaves it captured. Then the interpretation's own semantics, on
small backends: a store flows to the guard after it, a ``raise`` or a failed ``assert`` ends a path, ``getattr`` with
a default on an attribute no object has, a spread ``**kwargs`` that may fill a parameter, a nested function, a
platform predicate on the platform asked, the capture batch as the runner builds it.
"""

from __future__ import annotations

import textwrap

import pytest

import test_sglang_source_capture_state as CS
from fencecheck.decision.captured import captured
from fencecheck.sglang_source import capture_binding, capture_state, read_path
from fencecheck.sglang_source.backend_reader import Reader
from fencecheck.sglang_source.tree import Tree
from fencecheck.vocab import ReadSite
from sglang_reader_trees import ATTN, BREAKABLE, FB, FORWARD_BATCH, PRE_FALLBACK, build


@pytest.fixture
def rules_off(monkeypatch):
    """The capture and binding rules switched off: their reads stay findings, with their ``Read`` records."""
    monkeypatch.setattr(capture_state, "capture_fact", lambda *a, **k: None)
    monkeypatch.setattr(capture_binding, "binding_fact", lambda *a, **k: None)


def _answers(ex, subject: str) -> list:
    """The interpretation's answer for each in-graph read of ``subject``'s findings."""
    tree = Tree(__import__("pathlib").Path(ex.root))
    modes = Reader(tree).modes
    out = []
    for f in ex.findings:
        if f.subject != subject or f.kind != "read_outside_declaration":
            continue
        (ci,) = [c for c in tree.classes_named(f.subject) if f"{c.file}:{c.line}" == f.subject_at]
        out += [captured(tree, ci, modes, f.mode, r) for s, r in f.uncovered
                if s in (ReadSite.IN_GRAPH_BEFORE_MARKER, ReadSite.IN_GRAPH_AFTER_MARKER)]
    return out


def test_the_read_the_capture_never_reaches_is_not_captured_naming_the_false_test(tmp_path, rules_off):
    (a,) = _answers(CS._extraction(tmp_path), "ReplanBackend")
    assert a.captured is False
    assert a.why == ("`size is not None and size < forward_batch.batch_size` is false (ReplanBackend.forward_decode) "
                     f"at {CS.AT}:36")


def _broken_links():
    marks = CS.test_each_broken_link_keeps_the_read_a_finding_on_its_conditions.pytestmark
    (cases,) = [m.args[1] for m in marks if m.name == "parametrize"]
    return cases


@pytest.mark.parametrize("why,replace", _broken_links(), ids=[w for w, _ in _broken_links()])
def test_each_broken_link_of_the_rule_s_argument_leaves_the_read_captured(tmp_path, rules_off, why, replace):
    answers = _answers(CS._extraction(tmp_path, replace, {**BREAKABLE, **PRE_FALLBACK}), "ReplanBackend")
    assert answers and all(a.captured is not False for a in answers), (why, answers)


@pytest.mark.parametrize("name,text", [
    ("glue.py", "def reinstall(backend, runner, fb):\n    backend.forward_metadata = fb.spare\n"),
    ("glue.py", "def reinstall(backend, runner, fb):\n    runner.attn_backend.forward_metadata = None\n"),
    ("wrap.py", "class Wrap:\n    def install(self, fb):\n        self.backend.forward_metadata = fb.spare\n"),
])
def test_a_store_of_the_field_through_another_receiver_leaves_the_read_captured(tmp_path, rules_off, name, text):
    ex = CS._extraction(tmp_path, (), {**BREAKABLE, **PRE_FALLBACK, f"sglang/srt/model_executor/runner/{name}": text})
    answers = _answers(ex, "ReplanBackend")
    assert answers and all(a.captured is True for a in answers)


def test_the_field_stored_through_self_of_another_class_leaves_the_read_not_captured(tmp_path, rules_off):
    other = "class Other:\n    def swap(self, fb):\n        self.forward_metadata = fb.spare\n"
    ex = CS._extraction(tmp_path, (), {**BREAKABLE, **PRE_FALLBACK,
                                       "sglang/srt/model_executor/runner/other.py": other})
    (a,) = _answers(ex, "ReplanBackend")
    assert a.captured is False


# -- the interpretation's semantics on small backends ----------------------------------------------------------------

PREAMBLE = """\
from dataclasses import dataclass

from sglang.srt.layers.attention.base_attn_backend import AttentionBackend


@dataclass
class Meta:
    ready: bool = False


"""
HEAD = PREAMBLE + """\
class TinyBackend(AttentionBackend):
    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.forward_metadata = None
        self.flag = model_runner.flag

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        if in_capture:
            self.forward_metadata = Meta()
            self.forward_metadata.ready = True

"""


def _built(tmp_path, module: str, src: str, subject: str, files=None) -> list:
    """The interpretation's answers for ``subject``'s reads in the capture tree with ``src`` as ``module``."""
    root = build(tmp_path, {f"{ATTN}/{module}": src, FB: FORWARD_BATCH, **(files or {})}, "capture_metadata")
    return _answers(read_path(root), subject)


def _tiny(tmp_path, body: str, extra: str = ""):
    src = HEAD + textwrap.indent(textwrap.dedent(body), "    ") + textwrap.dedent(extra)
    return _built(tmp_path, "tiny_backend.py", src, "TinyBackend")


def test_a_store_of_the_capture_flows_to_the_guard_after_it(tmp_path, rules_off):
    (a,) = _tiny(tmp_path, """\
        def forward_decode(self, q, k, v, layer, forward_batch):
            if not self.forward_metadata.ready:
                return self.req_to_token[forward_batch.req_pool_indices]
            return q
        """)
    assert a.captured is False and "`not self.forward_metadata.ready` is false" in a.why


def test_a_guard_on_a_field_the_capture_leaves_unknown_keeps_the_read(tmp_path, rules_off):
    (a,) = _tiny(tmp_path, """\
        def forward_decode(self, q, k, v, layer, forward_batch):
            if self.flag:
                return self.req_to_token[forward_batch.req_pool_indices]
            return q
        """)
    assert a.captured is True


def test_a_warm_up_forward_that_may_clear_the_field_keeps_the_read(tmp_path, rules_off):
    (a,) = _tiny(tmp_path, """\
        def forward_decode(self, q, k, v, layer, forward_batch):
            if not self.forward_metadata.ready:
                return self.req_to_token[forward_batch.req_pool_indices]
            if self.flag:
                self.forward_metadata.ready = False
            return q
        """)
    assert a.captured is True


def test_a_raise_before_the_read_ends_every_path(tmp_path, rules_off):
    (a,) = _tiny(tmp_path, """\
        def forward_decode(self, q, k, v, layer, forward_batch):
            if layer.is_cross_attention:
                if self.forward_metadata.ready:
                    raise NotImplementedError("not in a graph")
                return self.req_to_token[forward_batch.req_pool_indices]
            return q
        """)
    assert a.captured is False and "raise NotImplementedError" in a.why


def test_a_failed_assert_ends_the_path(tmp_path, rules_off):
    (a,) = _tiny(tmp_path, """\
        def forward_decode(self, q, k, v, layer, forward_batch):
            if layer.is_cross_attention:
                assert not self.forward_metadata.ready
                return self.req_to_token[forward_batch.req_pool_indices]
            return q
        """)
    assert a.captured is False and "assert not self.forward_metadata.ready" in a.why


def test_getattr_with_a_default_on_an_attribute_nothing_has_is_the_default(tmp_path, rules_off):
    (a,) = _tiny(tmp_path, """\
        def forward_decode(self, q, k, v, layer, forward_batch):
            if getattr(forward_batch, "plan", None) is not None:
                return self.req_to_token[forward_batch.req_pool_indices]
            return q
        """)
    assert a.captured is False


def test_getattr_on_an_attribute_something_stores_is_unknown(tmp_path, rules_off):
    (a,) = _tiny(tmp_path, """\
        def forward_decode(self, q, k, v, layer, forward_batch):
            if getattr(forward_batch, "plan", None) is not None:
                return self.req_to_token[forward_batch.req_pool_indices]
            return q
        """, "\n\ndef attach(fb, plan):\n    fb.plan = plan\n")
    assert a.captured is True


def test_a_spread_keyword_argument_may_fill_a_parameter_with_a_default(tmp_path, rules_off):
    (a,) = _tiny(tmp_path, """\
        def forward_decode(self, q, k, v, layer, forward_batch, **kwargs):
            return self._inner(forward_batch, **kwargs)

        def _inner(self, forward_batch, indices=None):
            if indices is None:
                raise ValueError("needs indices")
            return self.req_to_token[forward_batch.req_pool_indices]
        """)
    assert a.captured is True


def test_a_nested_function_that_clears_the_field_is_followed(tmp_path, rules_off):
    (a,) = _tiny(tmp_path, """\
        def init_forward_metadata_in_graph(self, forward_batch):
            def clear():
                self.forward_metadata.ready = False
            clear()

        def forward_decode(self, q, k, v, layer, forward_batch):
            if not self.forward_metadata.ready:
                return self.req_to_token[forward_batch.req_pool_indices]
            return q
        """)
    assert a.captured is True


def test_the_mode_decides_a_test_in_the_prep_whose_store_the_guard_reads(tmp_path, rules_off):
    """A test of the forward mode is decided by the mode the graph runs (the tree's ``ForwardMode`` predicates): the
    prep clears the field only for verify batches, so the decode graph's guard is false."""
    (a,) = _tiny(tmp_path, """\
        def init_forward_metadata_in_graph(self, forward_batch):
            if forward_batch.forward_mode.is_target_verify():
                self.forward_metadata.ready = False

        def forward_decode(self, q, k, v, layer, forward_batch):
            if not self.forward_metadata.ready:
                return self.req_to_token[forward_batch.req_pool_indices]
            return q
        """)
    assert a.captured is False


def test_a_capture_whose_every_warm_up_raises_captures_nothing(tmp_path, rules_off):
    """Where every path of a step of this mode's own capture raises, the capture fails, and SGLang's runner fails
    with it (it re-raises a failed capture): no graph of the mode holds the read, and the answer names the raise."""
    (a,) = _tiny(tmp_path, """\
        def forward_decode(self, q, k, v, layer, forward_batch):
            if self.forward_metadata.ready:
                raise NotImplementedError("not in a graph")
            return self.req_to_token[forward_batch.req_pool_indices]
        """)
    assert a.captured is False and "the capture of DECODE raises" in a.why and "not in a graph" in a.why


DICT_HEAD = PREAMBLE + """\
class SizedBackend(AttentionBackend):
    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.forward_metadata = None

    def init_cuda_graph_state(self, max_bs, max_num_tokens):
        self.graph_metadata = {}

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        bs = forward_batch.batch_size
        if in_capture:
            metadata = Meta()
            self.graph_metadata[bs] = metadata
        self.forward_metadata = self.graph_metadata[bs]

    def init_forward_metadata(self, forward_batch):
        self.forward_metadata = Meta()
        self.forward_metadata.batch_size = forward_batch.batch_size

    def forward_decode(self, q, k, v, layer, forward_batch):
        size = getattr(self.forward_metadata, "batch_size", None)
        if size is not None and size < forward_batch.batch_size:
            return self.req_to_token[forward_batch.req_pool_indices]
        return q
"""


def _sized(tmp_path, replace=(), files=None):
    src = DICT_HEAD
    for old, new in replace:
        assert old in src, old
        src = src.replace(old, new)
    return _built(tmp_path, "sized_backend.py", src, "SizedBackend", files)


def test_a_per_size_dict_of_objects_the_captures_make_is_followed(tmp_path, rules_off):
    """TRTLLM-MLA's shape (0.5.23 trtllm_mla_backend.py:553, the per-size ``decode_cuda_graph_metadata``): every
    capture of every size and mode stores a new object without ``batch_size`` in the dict, and the forward's metadata
    is one of them, so the re-plan is in no captured graph."""
    (a,) = _sized(tmp_path)
    assert a.captured is False and "`size is not None and size < forward_batch.batch_size` is false" in a.why


@pytest.mark.parametrize("why,replace,files", [
    ("the capture stores the field on its object",
     [("            self.graph_metadata[bs] = metadata\n",
       "            metadata.batch_size = bs\n            self.graph_metadata[bs] = metadata\n")], {}),
    ("an entry stored from outside", [], {"srt/model_executor/runner/fill.py":
                                         "def fill(backend, bs, m):\n    backend.graph_metadata[bs] = m\n"}),
    ("the dict handed to a call not followed",
     [("        self.forward_metadata = self.graph_metadata[bs]\n",
       "        register(self.graph_metadata)\n        self.forward_metadata = self.graph_metadata[bs]\n")], {}),
    ("the dict not made by the backend",
     [("        self.graph_metadata = {}\n", "        self.graph_metadata = max_bs.table\n")], {}),
])
def test_each_way_the_dict_may_hold_another_object_leaves_the_read_captured(tmp_path, rules_off, why, replace,
                                                                            files):
    answers = _sized(tmp_path, replace, files)
    assert answers and all(a.captured is not False for a in answers), (why, answers)


def _many_ways(n: int) -> str:
    """A dict literal whose ``n`` entries each take one of two values: 2**n paths inside one expression."""
    return ", ".join(f'"k{i}": (layer.a{i} if layer.b{i} else None)' for i in range(n))


def test_paths_that_multiply_inside_one_expression_are_joined_and_the_guard_still_decided(tmp_path, rules_off):
    (a,) = _tiny(tmp_path, f"""\
        def forward_decode(self, q, k, v, layer, forward_batch):
            options = {{{_many_ways(16)}}}
            if not self.forward_metadata.ready:
                return self.req_to_token[forward_batch.req_pool_indices]
            return options
        """)
    assert a.captured is False and "`not self.forward_metadata.ready` is false" in a.why


def test_a_value_joined_from_paths_that_differ_is_unknown_and_keeps_the_read(tmp_path, rules_off):
    (a,) = _tiny(tmp_path, f"""\
        def forward_decode(self, q, k, v, layer, forward_batch):
            options = {{{_many_ways(16)}, "last": (None if layer.c else self.forward_metadata)}}
            if options["last"] is None:
                return self.req_to_token[forward_batch.req_pool_indices]
            return options
        """)
    assert a.captured is True


_GUARDED = """\
    def forward_decode(self, q, k, v, layer, forward_batch):
        if not self.forward_metadata.ready:
            return self.req_to_token[forward_batch.req_pool_indices]
        return q
    """


def test_past_the_work_bound_the_answer_stays_open(tmp_path, rules_off, monkeypatch):
    import fencecheck.decision.captured as C

    monkeypatch.setattr(C, "MAX_TOTAL", 0)
    (a,) = _tiny(tmp_path, _GUARDED)
    assert a.captured is None and "captured.MAX_TOTAL" in a.why


def test_other_captures_past_the_work_bound_leave_what_they_store_unknown_and_this_capture_decides(
        tmp_path, rules_off, monkeypatch):
    import fencecheck.decision.captured as C

    modes = C.graph_modes
    monkeypatch.setattr(C, "graph_modes", lambda m: list(modes(m)) * 200)  # the captures before this one: too many
    monkeypatch.setattr(C, "MAX_TOTAL", 20_000)
    (a,) = _tiny(tmp_path, _GUARDED)
    assert a.captured is False and "`not self.forward_metadata.ready` is false" in a.why


def test_a_chain_through_methods_the_class_borrows_is_followed(tmp_path, rules_off):
    src = HEAD + _GUARDED + textwrap.dedent("""\


        class Borrower(AttentionBackend):
            __init__ = TinyBackend.__init__
            init_forward_metadata_out_graph = TinyBackend.init_forward_metadata_out_graph
            forward_decode = TinyBackend.forward_decode
        """)
    answers = _built(tmp_path, "tiny_backend.py", src, "Borrower")
    assert answers and all(a.captured is False for a in answers), answers


def test_a_graph_state_that_raises_on_every_path_means_no_graph_is_captured(tmp_path, rules_off):
    (a,) = _tiny(tmp_path, """\
        def init_cuda_graph_state(self, max_bs, max_num_tokens):
            raise NotImplementedError()

        def forward_decode(self, q, k, v, layer, forward_batch):
            return self.req_to_token[forward_batch.req_pool_indices]
        """)
    assert a.captured is False and "no graph is ever captured" in a.why and "raise NotImplementedError()" in a.why


def _plat_backend(imports: str, local: str = "") -> str:
    """A backend that sets ``self.on_hip = is_hip()`` at start-up (``imports`` naming ``is_hip`` at the top, or
    ``local`` inside ``__init__``) and whose forward calls a helper that raises unless on ROCm before its read."""
    return PREAMBLE + imports + """\


class PlatBackend(AttentionBackend):
    def __init__(self, model_runner):
{local}        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.on_hip = is_hip()

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        pass

    def _check(self):
        if not self.on_hip:
            raise NotImplementedError("this path runs on ROCm only")

    def forward_decode(self, q, k, v, layer, forward_batch):
        if layer.is_cross_attention:
            self._check()
            return self.req_to_token[forward_batch.req_pool_indices]
        return q
""".replace("{local}", local)


def test_a_platform_predicate_is_a_constant_on_the_platform_asked(tmp_path, rules_off):
    """``self.on_hip = is_hip()`` at start-up, and a helper the forward calls before the read raises unless it
    holds: on CUDA no captured path reaches the read (the predicate is false there); on ROCm, or with no platform
    given, it stays captured."""
    src = _plat_backend("from sglang.srt.utils.common import is_hip\n")
    root = build(tmp_path, {f"{ATTN}/plat_backend.py": src, FB: FORWARD_BATCH}, "capture_metadata")
    ex = read_path(root)
    tree = Tree(__import__("pathlib").Path(ex.root))
    modes = Reader(tree).modes
    (f,) = [f for f in ex.findings if f.subject == "PlatBackend" and f.kind == "read_outside_declaration"]
    (ci,) = tree.classes_named("PlatBackend")
    (r,) = [r for s, r in f.uncovered if s in (ReadSite.IN_GRAPH_BEFORE_MARKER, ReadSite.IN_GRAPH_AFTER_MARKER)]
    on_cuda = captured(tree, ci, modes, f.mode, r, platform="cuda")
    assert on_cuda.captured is False and "raise NotImplementedError" in on_cuda.why
    assert captured(tree, ci, modes, f.mode, r, platform="hip").captured is True
    assert captured(tree, ci, modes, f.mode, r).captured is True


_RUNNER = """\
from sglang.srt.model_executor.forward_batch_info import ForwardBatch


class CaptureRunner:
    def capture_one(self, attn_backend, bs):
        forward_batch = self.prepare(bs)
        attn_backend.init_forward_metadata_out_graph(forward_batch, in_capture=True)

    def prepare(self, bs):
        forward_batch = ForwardBatch(forward_mode=self.mode, batch_size=bs, req_pool_indices=self.idx)
        forward_batch.seq_lens = self.lens
        return forward_batch

    def warm_up(self):
        return ForwardBatch(forward_mode=self.mode, batch_size=1, plan=self.plan)
"""
_PLAN_READ = """\
    def forward_decode(self, q, k, v, layer, forward_batch):
        if forward_batch.plan is not None:
            return self.req_to_token[forward_batch.req_pool_indices]
        return q
"""


def _plan(tmp_path, files=None):
    fb = FORWARD_BATCH + "    plan: object = None\n"
    root = build(tmp_path, {f"{ATTN}/tiny_backend.py": HEAD + _PLAN_READ, FB: fb,
                            "srt/model_executor/runner/decode_capture.py": _RUNNER, **(files or {})},
                 "capture_metadata")
    return _answers(read_path(root), "TinyBackend")


def test_the_capture_batch_is_the_runner_s_construction_its_other_fields_their_defaults(tmp_path, rules_off):
    """The runner builds its capture batch without ``plan`` (default None; the warm-up's batch, built elsewhere,
    is not the capture's): the read behind ``forward_batch.plan is not None`` is not captured."""
    (a,) = _plan(tmp_path)
    assert a.captured is False and "`forward_batch.plan is not None` is false" in a.why


@pytest.mark.parametrize("where,text,captured_", [
    ("glue.py", "def attach(fb, plan):\n    fb.plan = plan\n", True),  # a parameter: may be the capture batch
    ("glue.py", "from sglang.srt.model_executor.forward_batch_info import ForwardBatch\n\n\n"
                "def fresh(mode):\n    fb = ForwardBatch(forward_mode=mode, batch_size=1)\n    fb.plan = 1\n"
                "    return fb\n", False),  # a new batch of its own
    ("glue.py", "import copy\n\n\ndef view(batch):\n    v = copy.copy(batch)\n    v.plan = 1\n    return v\n",
     False),  # a copy
    ("glue.py", "def alias(batch, other):\n    v = batch\n    v = other\n    v.plan = 1\n", True),
])
def test_a_store_of_the_field_elsewhere_counts_unless_its_receiver_is_a_new_object(tmp_path, rules_off, where,
                                                                                  text, captured_):
    (a,) = _plan(tmp_path, {f"srt/model_executor/{where}": text})
    assert a.captured is captured_, a



def _on_cuda(tmp_path, src: str, subject: str, files=None) -> list:
    """The interpretation's answers on CUDA for ``subject``'s in-graph reads in the capture tree with ``src``."""
    root = build(tmp_path, {f"{ATTN}/tiny_backend.py": src, FB: FORWARD_BATCH + "    plan: object = None\n",
                            **(files or {})}, "capture_metadata")
    ex = read_path(root)
    tree = Tree(__import__("pathlib").Path(ex.root))
    modes = Reader(tree).modes
    out = []
    for f in ex.findings:
        if f.subject == subject and f.kind == "read_outside_declaration":
            (ci,) = tree.classes_named(subject)
            out += [captured(tree, ci, modes, f.mode, r, platform="cuda") for s, r in f.uncovered
                    if s in (ReadSite.IN_GRAPH_BEFORE_MARKER, ReadSite.IN_GRAPH_AFTER_MARKER)]
    return out


@pytest.mark.parametrize("imports", [
    "from sglang.srt.utils import is_hip\n",  # through the package's `from .common import *`
    "",  # imported inside the method that calls it
])
def test_a_cached_platform_predicate_however_imported_is_a_constant(tmp_path, rules_off, imports):
    """``is_hip`` behind ``@lru_cache``, named through a package that re-exports it with ``import *`` or imported
    inside ``__init__``: on CUDA it is false, so the helper before the read raises on every path."""
    common = ("import torch\nfrom functools import lru_cache\n\n\ndef is_cuda():\n    return True\n\n\n"
              "@lru_cache(maxsize=1)\ndef is_hip():\n    return False\n")
    local = "" if imports else "        from sglang.srt.utils import is_hip\n\n"
    src = _plat_backend(imports, local)
    (a,) = _on_cuda(tmp_path, src, "PlatBackend", {"srt/utils/common.py": common})
    assert a.captured is False and "ROCm only" in a.why


def test_an_attribute_of_none_in_an_unfollowed_call_s_argument_ends_the_path(tmp_path, rules_off):
    """``torch.cat([forward_batch.plan.device])``: Python evaluates the argument before the call it cannot follow,
    and the capture batch's ``plan`` is its default None there, so the capture raises before the read."""
    (a,) = _on_cuda(tmp_path, HEAD + """\
    def forward_decode(self, q, k, v, layer, forward_batch):
        lens = torch.cat([forward_batch.plan.device])
        return self.req_to_token[forward_batch.req_pool_indices]
""", "TinyBackend", {"srt/model_executor/runner/decode_capture.py": _RUNNER})
    assert a.captured is False and "`forward_batch.plan.device`: an attribute of None" in a.why


@pytest.mark.parametrize("helper,captured_", [
    ("            return self.req_to_token.shape\n", False),  # stores nothing: the guard stays decided
    ("            self.forward_metadata.ready = False\n", True),  # clears the field the guard reads
    ("            opaque_kernel(self)\n", True),  # hands the backend itself to code not followed
])
def test_a_nested_function_handed_to_a_kernel_changes_what_its_helpers_may_store(tmp_path, rules_off, helper,
                                                                                  captured_):
    """A nested function handed to a call the interpretation does not follow may run there: the method it calls
    is summarised (what it stores, what it hands on), and only that is forgotten."""
    (a,) = _tiny(tmp_path, """\
        def _helper(self, x):
""" + helper + """\

        def forward_decode(self, q, k, v, layer, forward_batch):
            def cb(x):
                return self._helper(x)

            run_kernel(q, cb)
            if not self.forward_metadata.ready:
                return self.req_to_token[forward_batch.req_pool_indices]
            return q
        """)
    assert a.captured is captured_, a


def test_a_store_in_test_code_is_not_a_store_the_runner_makes(tmp_path, rules_off):
    """``fb.plan = ...`` in a test module (no server runs it) leaves the capture batch's ``plan`` its default."""
    (a,) = _plan(tmp_path, {"test/unit/test_glue.py": "def attach(fb, plan):\n    fb.plan = plan\n"})
    assert a.captured is False


# -- the pipeline's step: shown findings decided by the interpretation ----------------------------------------------

def _paged_doc(tmp_path, forward_decode: str, extra: str = "") -> tuple[int, dict]:
    """``fencecheck sglang --json`` on the pull-request pair's head tree with PagedBackend's ``forward_decode``
    replaced by ``forward_decode`` (and ``extra`` appended to its module)."""
    import json

    code, out, _ = _paged_run(tmp_path, forward_decode, extra)
    return code, json.loads(out)


def _paged_run(tmp_path, forward_decode: str, extra: str = "") -> tuple[int, str, str]:
    """``_paged_doc``'s run: (exit status, stdout, stderr)."""
    import io

    from pr_pair import lay

    from fencecheck.commands.main import main

    root = lay(tmp_path / "head", "head")
    p = root / "sglang/srt/layers/attention/paged_backend.py"
    text = p.read_text()
    head, _, _ = text.partition("    def forward_decode(")
    p.write_text("from sglang.srt.utils.common import is_hip\n" + head.replace(
        "        self.page_table = None\n", "        self.page_table = None\n        self.on_hip = is_hip()\n")
        + textwrap.indent(textwrap.dedent(forward_decode), "    ") + extra)
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", str(root), "--json"], out, err)
    return code, out.getvalue(), err.getvalue()


#: A forward whose read follows a helper that raises unless on ROCm.
_HIP_ONLY = """\
    def _check(self):
        if not self.on_hip:
            raise NotImplementedError("ROCm only")

    def forward_decode(self, q, k, v, layer, forward_batch):
        self._check()
        pages = self.req_to_token[forward_batch.req_pool_indices, : forward_batch.seq_lens]
        return q @ pages
    """


def test_a_shown_finding_no_captured_graph_runs_becomes_a_not_finding_naming_how_its_paths_end(tmp_path):
    """The read follows a helper that raises unless on ROCm: the simulator alone confirms it, and the captured path
    interpreted on CUDA (the one platform with the marker) ends every path before it, so it is a not finding."""
    code, doc = _paged_doc(tmp_path, _HIP_ONLY)
    assert not [f for f in doc["findings"] if f["subject"] == "PagedBackend"]
    (n,) = [n for n in doc["not_findings"] if n["subject"] == "PagedBackend" and n["mode"] == "DECODE"]
    assert n["why"].startswith("no graph captures its path (the captured path interpreted on cuda): ")
    assert "ROCm only" in n["why"]


def test_a_shown_finding_a_captured_graph_may_run_stays_confirmed(tmp_path):
    code, doc = _paged_doc(tmp_path, """\
        def forward_decode(self, q, k, v, layer, forward_batch):
            if self.on_hip:
                raise NotImplementedError("CUDA only")
            pages = self.req_to_token[forward_batch.req_pool_indices, : forward_batch.seq_lens]
            return q @ pages
        """)
    (f,) = [f for f in doc["findings"] if f["subject"] == "PagedBackend"]
    assert code == 1 and f["status"] == "confirmed"




@pytest.mark.skipif((__import__("os").cpu_count() or 1) < 2, reason="the answers are asked beside only with a second core")
def test_the_step_s_answers_asked_beside_the_decision_are_those_it_finds_itself(tmp_path, monkeypatch):
    """Where a second core exists the captured path is asked in a forked process once the reader has the findings,
    for those that may settle as shown, while the reading and the decision go on: the step then asks nothing
    itself, and the document is the one it gives when it asks every answer itself."""
    import contextlib

    from fencecheck.decision import beside, graph_capture

    here = []
    real = graph_capture._why_not_captured
    monkeypatch.setattr(graph_capture, "_why_not_captured", lambda *a: here.append(a[2].subject) or real(*a))
    code, doc = _paged_doc(tmp_path / "beside", _HIP_ONLY)
    asked_beside = list(here)
    here.clear()
    monkeypatch.setattr(beside, "beside", lambda *a, **k: contextlib.nullcontext(None))  # as with one core
    code2, doc2 = _paged_doc(tmp_path / "here", _HIP_ONLY)
    assert asked_beside == [] and "PagedBackend" in here  # the forked process's calls are its own
    text = __import__("json").dumps(doc).replace(str(tmp_path / "beside"), str(tmp_path / "here"))
    assert (code, text) == (code2, __import__("json").dumps(doc2))
    assert not [f for f in doc["findings"] if f["subject"] == "PagedBackend"]


@pytest.mark.skipif((__import__("os").cpu_count() or 1) < 2 or not __import__("sys").platform.startswith("linux"),
                    reason="the answers are asked beside only with a second core; children read from /proc")
def test_a_read_that_fails_after_the_answers_were_asked_leaves_no_process(tmp_path, monkeypatch):
    """The forked process asked for the captured path once the reader had the findings ends with the command when
    the rest of the read fails (bad input found later): one line, exit 2, no process of it left."""
    import os
    from pathlib import Path

    from fencecheck.sglang_source import facts
    from fencecheck.sglang_source.tree import NotSGLang

    def broken(*a, **k):
        raise NotSGLang("somewhere.py", "line 1", "not valid Python: a test's")

    def children() -> set[int]:
        me = os.getpid()
        return {int(c) for t in Path(f"/proc/{me}/task").iterdir() for c in (t / "children").read_text().split()}

    from fencecheck.decision import pipeline

    started = []
    real = pipeline.EarlyAnswers.__call__

    def asked(self, *a):
        real(self, *a)
        started.append(self.result is not None and children() - before)  # forked, and alive then

    from fencecheck.decision import graph_capture

    before = children()
    monkeypatch.setattr(graph_capture, "answers_in", lambda *a: __import__("time").sleep(60))  # held: still asking
    monkeypatch.setattr(pipeline.EarlyAnswers, "__call__", asked)
    monkeypatch.setattr(facts, "read_facts", broken)  # read after the findings
    code, out, err = _paged_run(tmp_path, _HIP_ONLY)
    assert code == 2 and out == "" and err.count("\n") == 1 and "a test's" in err
    assert len(started) == 1 and started[0] and children() <= before

# -- a step run once per state shape ---------------------------------------------------------------------------------

def test_two_states_that_differ_only_in_numbering_have_one_canonical_form_and_a_step_is_renamed_onto_the_other():
    from fencecheck.decision import captured as C
    from fencecheck.decision.absint import Obj, Path, Ref, Sym

    def state(a: int, b: int, obj: str) -> Path:
        return Path({"backend": Obj(None, (("meta", Ref(obj)), ("x", Sym(a))), True),
                     obj: Obj(None, (("ready", Sym(b)), ("y", Sym(a))), True)}, {})

    one, two = C._Canon.of(state(3, 4, "o7"), {}), C._Canon.of(state(40, 41, "o9"), {})
    assert one.key == two.key and one.key != C._Canon.of(state(3, 3, "o7"), {}).key  # a link between fields counts
    # a step run on the first state stored x in a fresh object o20 and a fresh unknown 50 in y: renamed onto the second
    out = Path({"backend": Obj(None, (("meta", Ref("o7")), ("new", Ref("o20")), ("x", Sym(3))), True),
                "o7": Obj(None, (("ready", Sym(4)), ("y", Sym(50))), True),
                "o20": Obj(None, (("z", Sym(3)),), True)}, {})
    it = type("It", (), {})()
    it.budget = __import__("fencecheck.decision.absint", fromlist=["Budget"]).Budget()
    it.budget.resume((0, 100, 30))
    it.last_died = []
    entry = C._Entry(one, out, [], 5, 50, 51, 20, 21)
    got = C._replayed(it, entry, two, state(40, 41, "o9"))
    assert got.heap["backend"].fields == (("meta", Ref("o9")), ("new", Ref("o30")), ("x", Sym(40)))
    assert got.heap["o9"].fields == (("ready", Sym(41)), ("y", Sym(100)))
    assert got.heap["o30"].fields == (("z", Sym(40)),)
    assert it.budget.total == 5 and C._counters(it) == (101, 31)  # counted as the run counted


@pytest.mark.parametrize("test", [test_a_store_of_the_capture_flows_to_the_guard_after_it,
                                  test_a_warm_up_forward_that_may_clear_the_field_keeps_the_read,
                                  test_a_nested_function_that_clears_the_field_is_followed,
                                  test_a_per_size_dict_of_objects_the_captures_make_is_followed,
                                  test_the_capture_batch_is_the_runner_s_construction_its_other_fields_their_defaults])
def test_the_answers_are_the_same_when_no_step_is_replayed(tmp_path, rules_off, monkeypatch, test):
    """Each of these small backends answered with every step run afresh (the canonical form switched off)
    passes the same test: replaying a step changes no answer."""
    from fencecheck.decision import captured as C

    monkeypatch.setattr(C._Canon, "of", staticmethod(lambda p, named: None))
    test(tmp_path, None)


@pytest.mark.parametrize("body,captured_", [
    ("        return cls(fb.seq_lens)\n", False),  # reads the batch, stores nothing: the default stays
    ("        fb.plan = fb.seq_lens\n        return cls(fb.seq_lens)\n", True),  # stores the field the guard reads
])
def test_a_class_method_in_an_unfollowed_call_s_arguments_runs_as_its_summary_says(tmp_path, rules_off, body,
                                                                                   captured_):
    """``run_kernel(Loc.for_batch(forward_batch))``: Python runs the class method before the kernel; what it may
    store on the batch (its summary) is forgotten, not the whole batch it is handed."""
    loc = "\n\nclass Loc:\n    def __init__(self, x):\n        self.x = x\n\n    @classmethod\n" \
          "    def for_batch(cls, fb):\n" + body
    read = _PLAN_READ.replace("        if forward_batch.plan is not None:\n",
                              "        run_kernel(Loc.for_batch(forward_batch))\n"
                              "        if forward_batch.plan is not None:\n")
    fb = FORWARD_BATCH + "    plan: object = None\n"
    root = build(tmp_path, {f"{ATTN}/tiny_backend.py": HEAD + read + loc, FB: fb,
                            "srt/model_executor/runner/decode_capture.py": _RUNNER}, "capture_metadata")
    (a,) = _answers(read_path(root), "TinyBackend")
    assert a.captured is captured_, a


def test_a_function_s_summary_does_not_depend_on_which_was_summarised_first(tmp_path):
    """``a`` and ``b`` call each other: a summary made while the other is being made is cut at the cycle and not
    kept, so each function's summary is the same whichever is asked first."""
    from fencecheck.decision.absint import Fn, Interpreter

    mod = ("def a(x, y):\n    x.left = 1\n    b(x, y)\n\n\n"
           "def b(x, y):\n    y.right = 2\n    a(y, x)\n    kernel(x.inner)\n")
    root = build(tmp_path, {"srt/layers/cycle.py": mod, FB: FORWARD_BATCH}, "capture_metadata")
    tree = Tree(root)
    (m,) = [tree.module(n) for n in tree.paths if n.endswith("layers.cycle")]

    def summaries(first: str, second: str) -> dict:
        it = Interpreter(tree, Reader(tree).modes, None)
        return {name: it.effects(Fn(m.functions[name].node, m, None)) for name in (first, second)}

    assert summaries("a", "b") == summaries("b", "a")
