"""Reads through getter fields (``getters``): which keyword lambdas make a getter, and a backend's read through one.

A component gets ``req_to_token`` as ``resolve_req_to_token=lambda: (...req_to_token)`` in a constructing call (the
0.5.23 DSpark commit's shape) and calls it where it uses the map: that use is the read, a shape query is not."""

from __future__ import annotations

import textwrap

import pytest
from sglang_reader_trees import ATTN, HEAD, build, validate

from fencecheck.sglang_source import read_path
from fencecheck.sglang_source.getters import getters
from fencecheck.sglang_source.tree import Tree

#: A context handing out the map, and its constructing call (the worker's shape).
CTX = '''class CommitCtx:
    resolve_req_to_token: object
    resolve_pool: object


def make_ctx(model_runner):
    return CommitCtx(
        resolve_req_to_token=lambda: (
            model_runner.req_to_token_pool.req_to_token
        ),
        resolve_pool=lambda: model_runner.token_to_kv_pool,
    )
'''

#: A backend reading the map through the getter inside forward_decode (in DECODE: after the marker), and asking
#: only its shape in the out-of-graph prep.
BACKEND = HEAD + textwrap.dedent('''\
    from sglang.srt.ctx import make_ctx


    class X(AttentionBackend):
        def __init__(self, model_runner):
            self.ctx = make_ctx(model_runner)

        def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
            self.rows = self.ctx.resolve_req_to_token().shape[0]

        def forward_decode(self, q, k, v, layer, forward_batch):
            return gather_pages(self.ctx.resolve_req_to_token(), forward_batch.req_pool_indices)
''')


def _getters(tmp_path, extra: dict[str, str] | None = None) -> dict:
    root = build(tmp_path, {"srt/ctx.py": CTX, **(extra or {})})
    return getters(Tree(root))


def test_a_keyword_lambda_returning_a_map_is_a_getter_of_it_cited_at_the_lambda(tmp_path):
    assert _getters(tmp_path) == {"resolve_req_to_token": ("req_to_token", "sglang/srt/ctx.py", 8)}


@pytest.mark.parametrize("other, why", [
    ("f(resolve_req_to_token=self.rows)\n", "another call passes something else under the name"),
    ("f(resolve_req_to_token=lambda: pool.kv_indices)\n", "another call passes a lambda of something else"),
    ("f(resolve_req_to_token=lambda i: pool.req_to_token)\n", "a lambda with an argument"),
    ("class A:\n    def resolve_req_to_token(self):\n        return 1\n", "a method of that name"),
    ("ctx.resolve_req_to_token = other\n", "the field set after the constructing call"),
    ("class B:\n    resolve_req_to_token: object = None\n", "a field default that is no such lambda"),
])
def test_a_name_used_otherwise_anywhere_in_the_tree_is_no_getter(tmp_path, other, why):
    assert _getters(tmp_path, {"srt/other.py": other}) == {}, why


def test_a_field_default_of_the_same_lambda_keeps_the_getter(tmp_path):
    other = "class B:\n    resolve_req_to_token: object = lambda: pool.req_to_token\n"
    assert set(_getters(tmp_path, {"srt/other.py": other})) == {"resolve_req_to_token"}


def test_the_use_of_a_getter_s_map_is_a_read_cited_through_the_lambda_and_its_shape_is_none(tmp_path):
    root = build(tmp_path, {"srt/ctx.py": CTX, f"{ATTN}/x.py": BACKEND})
    doc = read_path(root).to_json()
    validate(doc)
    (b,) = [b for b in doc["backends"] if b["class"] == "X"]
    got = sorted((r["mode"], r["site"], r["line"]) for r in b["reads"] if r["location"] == "req_to_token")
    assert got and {s for _, s, _ in got} == {"in_graph_after_marker"} and {ln for _, _, ln in got} == {15}
    (r,) = [r for r in b["reads"] if r["mode"] == "DECODE" and r["location"] == "req_to_token"]
    assert r["via"][-1] == ("`resolve_req_to_token()` returns req_to_token: the lambda passed as "
                            "resolve_req_to_token= (sglang/srt/ctx.py:8)")
    (f,) = [f for f in doc["findings"] if f["subject"] == "X" and f["mode"] == "DECODE"
            and f["kind"] == "read_outside_declaration"]
    assert any(e["line"] == 15 and "the lambda passed as resolve_req_to_token= (sglang/srt/ctx.py:8)" in e["what"]
               for e in f["evidence"])


def test_without_the_getter_the_call_is_no_read(tmp_path):
    root = build(tmp_path, {"srt/ctx.py": CTX.replace("lambda: (\n            model_runner", "lambda: (\n"
                                                              "            model_runner.rows or model_runner"),
                            f"{ATTN}/x.py": BACKEND})
    doc = read_path(root).to_json()
    (b,) = [b for b in doc["backends"] if b["class"] == "X"]
    assert not [r for r in b["reads"] if r["location"] == "req_to_token"]
