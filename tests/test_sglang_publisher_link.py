"""A worker's publisher test linked to the value its decode step gives the attribute it tests (publisher_link.py).

The synthetic tree (tests/sglang_trees/publisher_link) has SGLang's multi-layer EAGLE shape: the boundary rows are
read from req_to_token only when the draft-extend is not staged, and the step ends by setting the flag the publisher
tests from ``staged``; so the read cannot run with the target runner as publisher. Each variant below breaks one
condition the link needs, and the read is then a finding again (the rule is evidence that it can fail)."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

from fencecheck.decision.workers import decide_worker_reads
from fencecheck.sglang_source import read_path
from fencecheck.sglang_source.publisher_link import _guards, _numeric_value, _stable_locals

TREES = Path(__file__).resolve().parent / "sglang_trees"
STAGED = "sglang/srt/speculative/staged.py"
TARGET = "self.target_worker.model_runner"


def _reads(tmp_path: Path, edit=None) -> dict:
    dest = tmp_path / "wheel"
    shutil.copytree(TREES / "common", dest, dirs_exist_ok=True)
    shutil.copytree(TREES / "publisher_link", dest, dirs_exist_ok=True)
    if edit is not None:
        p = dest / STAGED
        text = p.read_text(encoding="utf-8")
        new = edit(text)
        assert new != text, "the variant's edit did not apply"
        p.write_text(new, encoding="utf-8")
    doc = decide_worker_reads(read_path(dest / "sglang"))[0].to_json()
    return {a["name"]: [r for r in a["reads_after_publisher"] if r["publisher"] == TARGET] for a in doc["algorithms"]}


def test_a_read_whose_path_needs_the_flag_false_is_not_one_under_the_publisher_that_needs_it_true(tmp_path):
    reads = _reads(tmp_path)
    (read,) = reads["STAGED"]
    assert (read["file"], read["line"], read["location"]) == (STAGED, 33, "req_to_token")
    assert read["finding"] is None
    why = read["why"]
    assert why.startswith("not with this publisher: the publisher's test and the read's path cannot hold together: ")
    assert f"`staged and self.front` is false on the read's path in extend_after_verify ({STAGED}:23)" in why
    assert f"`self.front == 0 or batch.forward_mode.is_idle()` is false on the read's path in _boundary ({STAGED}:31)" \
        in why
    assert ("the publisher's test `self.draft_worker.last_staged` holds: it is the value extend_after_verify stores "
            f"last, `self.last_staged = bool(staged and out.can_run_graph)` ({STAGED}:28)") in why
    # the same read where the flag does not come from `staged` races with the target publisher
    (other,) = reads["UNLINKED"]
    assert other["line"] == 33 and other["finding"]["status"] == "plausible"
    assert other["finding"]["races"] == ["req_to_token@target-target-verify-65/worker_after"]


def _still_races(tmp_path, edit) -> None:
    (read,) = _reads(tmp_path, edit)["STAGED"]
    assert read["what"] == "self.req_to_token_pool.req_to_token" and read["via"][-1].startswith("StagedDraftWorker._boundary")
    assert read["finding"] is not None, read["why"]
    (race,) = read["finding"]["races"]
    assert re.fullmatch(r"req_to_token@target-target-verify-\d+/worker_after", race)


def test_the_link_needs_nothing_to_run_after_the_call_in_the_step(tmp_path):
    _still_races(tmp_path, lambda t: t.replace(
        "        self.draft_worker.extend_after_verify(batch, out, staged=staged)\n        return out\n\n\nclass Unl",
        "        self.draft_worker.extend_after_verify(batch, out, staged=staged)\n        self.finish(batch)\n"
        "        return out\n\n    def finish(self, batch):\n        self.draft_worker.last_staged = True\n\n\nclass Unl"))


def test_the_link_needs_no_other_store_of_the_flag(tmp_path):
    _still_races(tmp_path, lambda t: t.replace(
        "    def plan(self, batch):\n        return batch.can_stage\n",
        "    def plan(self, batch):\n        self.last_staged = batch.can_stage\n        return batch.can_stage\n"))


def test_the_link_needs_the_store_on_every_path(tmp_path):
    _still_races(tmp_path, lambda t: t.replace(
        "        out.locs = locs\n        self.last_staged = bool(staged and out.can_run_graph)",
        "        out.locs = locs\n        if out.early:\n            return\n"
        "        self.last_staged = bool(staged and out.can_run_graph)"))


def test_an_attribute_another_method_sets_is_linked_only_when_nothing_runs_between_its_reads(tmp_path):
    _still_races(tmp_path, lambda t: t.replace(
        "    def _boundary(self, batch):\n        if self.front == 0",
        "    def _boundary(self, batch):\n        self.refresh(batch)\n        if self.front == 0"))


def test_not_x_and_x_equal_to_zero_are_linked_only_for_a_number(tmp_path):
    _still_races(tmp_path, lambda t: t.replace("        self.front = steps - 1\n", "        self.front = steps\n"))


@pytest.mark.parametrize("text, numeric", [("0", True), ("steps - 1 + warmup", True), ("-1", True), ("2 * n", False), ("[None] * (n - 1)", False), ("\"%d\" % 1", False),
                                           ("steps", False), ("True", False), ("'0'", False), ("a + b", False),
                                           ("f(1)", False)])
def test_a_number_is_a_literal_or_arithmetic_with_one(text, numeric):
    assert _numeric_value(ast.parse(text, mode="eval").body) is numeric


def test_the_guards_are_the_enclosing_tests_and_the_early_exits_on_the_path():
    fn = ast.parse(
        "def f(self, a, b):\n"  # 1
        "    if a:\n"  # 2
        "        return 1\n"  # 3
        "    if b:\n"  # 4
        "        if self.x:\n"  # 5
        "            return 2\n"  # 6
        "        y = 3\n"  # 7
        "    else:\n"  # 8
        "        z = self.g()\n"  # 9
        "    return 4\n").body[0]  # 10
    assert [(ast.unparse(s.test), v) for s, v in _guards(fn, 9)] == [("a", False), ("b", False)]
    assert [(ast.unparse(s.test), v) for s, v in _guards(fn, 7)] == [("a", False), ("b", True), ("self.x", False)]


def test_a_stable_local_is_a_parameter_never_rebound_or_a_name_bound_once_outside_loops():
    fn = ast.parse("def f(self, a, b, *, c=1):\n    b = 2\n    d = 3\n    for i in a:\n        e = i\n"
                   "    g = 1\n    g = 2\n").body[0]
    assert _stable_locals(fn) == {"a", "c", "d"}


@pytest.mark.parametrize("body, name", [
    ("    try:\n        pass\n    except Exception as a:\n        pass\n", "a"), ("    import a\n", "a"),
    ("    global d\n", "d"), ("    a += 1\n", "a"), ("    (a := 2)\n", "a"), ("    def a():\n        pass\n", "a"),
    ("    del a\n", "a"), ("    match b:\n        case [a]:\n            pass\n", "a"),
    ("    for i in b:\n        d = i\n", "d")])
def test_a_name_rebound_any_way_is_not_stable(body, name):
    fn = ast.parse(f"def f(self, a, b):\n    d = 1\n{body}").body[0]
    assert _stable_locals(fn) == {"a", "b", "d"} - {name}


def test_a_comprehension_variable_does_not_rebind_the_function_s_name():
    fn = ast.parse("def f(self, a):\n    x = [a for a in range(3)]\n").body[0]
    assert _stable_locals(fn) == {"a", "x"}


def test_the_link_needs_the_builtin_bool(tmp_path):
    _still_races(tmp_path, lambda t: t.replace("\n\nclass StagedDraftWorker:",
                                               "\n\ndef bool(x):\n    return True\n\n\nclass StagedDraftWorker:", 1))


def test_the_link_needs_the_call_of_the_method_alone_in_its_statement(tmp_path):
    _still_races(tmp_path, lambda t: t.replace(
        "        self.draft_worker.extend_after_verify(batch, out, staged=staged)\n        return out\n\n\nclass Unl",
        "        self.draft_worker.extend_after_verify(batch, out, staged=False) or "
        "self.draft_worker.extend_after_verify(batch, out, staged=True)\n        return out\n\n\nclass Unl"))


def test_a_parameter_handed_to_a_call_is_linked_only_when_annotated_immutable(tmp_path):
    _still_races(tmp_path, lambda t: t.replace(
        "    def extend_after_verify(self, batch, out, *, staged: bool = False):\n        if staged",
        "    def extend_after_verify(self, batch, out, *, staged=False):\n        out.note(staged)\n        if staged", 1))
