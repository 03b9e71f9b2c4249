"""The SMT check of a read's path: contradictions pruned only where the literals surely name one value."""

from __future__ import annotations

import json

from sglang_reader_trees import build

from fencecheck.commands.main import main
from fencecheck.sglang_source.feasible import contradiction, linkable

BACKEND = '''from sglang.srt.layers.attention.base_attn_backend import AttentionBackend, SharedReadEnds


class GuardedBackend(AttentionBackend):
    """Declares IN_REPLAY for decode; its late read runs only when self.fused and not self.fused."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.fused = model_runner.fused

    def shared_read_ends(self, fm):
        if fm.is_decode():
            return SharedReadEnds.IN_REPLAY
        return SharedReadEnds.UNKNOWN

    def forward_decode(self, q, k, v, layer, forward_batch):
        if not self.fused:
            return self._gather(forward_batch)
        return q

    def _gather(self, forward_batch):
        if self.fused:
            return self.req_to_token[forward_batch.req_pool_indices]
        return None
'''


def test_contradictions_of_linked_literals_are_found_with_their_core():
    assert contradiction(("self.fused", "x > 0", "not self.fused")) == ("self.fused", "not self.fused")
    assert contradiction(("self.pool is None", "self.pool is not None and self.n < 2")) is not None
    assert contradiction(("self.n < 2", "self.n >= 2")) == ("self.n < 2", "self.n >= 2")
    assert contradiction(("self.fused", "self.other")) is None


def test_literals_that_may_name_two_values_are_never_linked():
    """A local, a volatile attribute of self, or self on a path leaving the backend's class: no pruning."""
    assert contradiction(("n > 0", "not (n > 0)")) is None  # a local: two functions may each have one
    assert contradiction(("self.fused", "not self.fused"), volatile=frozenset({"fused"})) is None
    assert contradiction(("self.fused", "not self.fused"), same_self=False) is None
    assert linkable("isinstance(self.meta, DSV4Metadata)") and not linkable("hasattr(pool, 'x')")


def _run(root):
    from io import StringIO

    out, err = StringIO(), StringIO()
    code = main(["sglang", str(root), "--json"], out, err)
    return code, json.loads(out.getvalue())


def test_a_read_whose_path_contradicts_itself_is_not_a_finding(tmp_path):
    root = build(tmp_path / "t", {"srt/layers/attention/guarded_backend.py": BACKEND}, None)
    code, doc = _run(root)
    assert [f for f in doc["findings"] if f["subject"] == "GuardedBackend"] == []
    (nf,) = [n for n in doc["not_findings"] if n["subject"] == "GuardedBackend"]
    assert nf["mode"] == "DECODE" and nf["why"].startswith("its path cannot run: `not self.fused` and `self.fused` cannot all hold")


def test_the_same_read_is_a_finding_once_the_flag_can_change_between_the_tests(tmp_path):
    changing = BACKEND.replace("    def _gather(self, forward_batch):\n",
                               "    def _gather(self, forward_batch):\n        self.fused = forward_batch.fused\n")
    root = build(tmp_path / "t", {"srt/layers/attention/guarded_backend.py": changing}, None)
    code, doc = _run(root)
    found = [(f["subject"], f["mode"], f["status"]) for f in doc["findings"] if f["subject"] == "GuardedBackend"]
    assert found == [("GuardedBackend", "DECODE", "unresolved")]
    assert code == 3  # a question (whether the flag changes between the tests at run time), not a settled finding


def test_conditions_are_shown_in_negation_normal_form_each_once():
    from fencecheck.sglang_source.feasible import simplified

    assert simplified(["not (not isinstance(x, A)) and not (y is None or not self.f)"]) == \
        "isinstance(x, A) and y is not None and self.f"
    assert simplified(["not (a and b)", "not a", "c < d", "c < d"]) == "not a and c < d"  # (not a or not b) absorbed
    assert simplified(["not (a or b) or c"]) == "(not a and (not b) or c)"  # ast.unparse's own parentheses
    assert simplified([]) is None and simplified(["x ="]) == "x ="


def test_the_simplified_text_means_what_the_conditions_mean():
    """Evidence the simplifier can fail: z3 finds no assignment telling a condition from its simplified text."""
    import z3

    from fencecheck.sglang_source.feasible import _Atoms, simplified

    cases = [["not (not a) and not (b or not c)"], ["not (a and b)", "not a"], ["not (x is not None)", "y >= 2"],
             ["a or not (b and not c)", "a"]]
    for conds in cases:
        atoms = _Atoms(lambda t: True)
        import ast

        left = z3.And(*[atoms.formula(ast.parse(c, mode="eval").body) for c in conds])
        right = atoms.formula(ast.parse(simplified(conds), mode="eval").body)
        s = z3.Solver()
        s.add(left != right)
        assert s.check() == z3.unsat, conds


def test_the_solver_is_asked_only_when_an_atom_repeats():
    """A formula whose every atom occurs once is satisfiable: no repeat, no solver; a repeat, a candidate."""
    from fencecheck.sglang_source.feasible import may_contradict

    assert not may_contradict(("self.a", "not self.b", "x is None or y < 2"))
    assert may_contradict(("self.a", "not self.a")) and may_contradict(("x is not None", "x is None"))
    assert may_contradict(("n < 2", "n >= 2"))
