"""A decided finding's status says confirmed, reachable or unresolved, with its ``status_why``.

Confirmed: it races in the default configuration; reachable: it needs the named flags or platform; unresolved: a
named fact is not settled. On the synthetic pull-request tree and on findings built by hand."""

from __future__ import annotations

import io
import json

from pr_pair import lay

from fencecheck.commands.main import main
from fencecheck.decision.status import counted, status_of
from fencecheck.sglang_source.findings import Decision, ReadOutsideDeclaration, Reach, WorkerReadFinding

PAGED = "sglang/srt/layers/attention/paged_backend.py"


def _doc(root) -> tuple[int, dict]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", str(root), "--json"], out, err)
    return code, json.loads(out.getvalue())


def _paged(doc) -> dict:
    (f,) = [f for f in doc["findings"] if f["subject"] == "PagedBackend"]
    return f


def test_a_read_with_no_condition_racing_in_the_default_configuration_is_confirmed(tmp_path):
    code, doc = _doc(lay(tmp_path / "head", "head"))
    f = _paged(doc)
    assert code == 1 and f["status"] == "confirmed" and f["reach"]["needs"] == []
    assert f["status_why"] == "races in the default configuration (no-speculation-decode-cuda-overlap-0)"


def test_a_read_behind_a_condition_the_reader_cannot_settle_is_unresolved_and_names_it(tmp_path):
    root = lay(tmp_path / "head", "head")
    p = root / PAGED
    text = p.read_text()
    p.write_text(text.replace("        pages = self.req_to_token[forward_batch.req_pool_indices, : forward_batch.seq_lens]\n",
                              "        pages = q\n        if self.gather_late:\n"
                              "            pages = self.req_to_token[forward_batch.req_pool_indices, : forward_batch.seq_lens]\n"))
    code, doc = _doc(root)
    f = _paged(doc)
    assert code == 1 and f["verdict"] == "counterexample"  # it still races when the condition holds
    assert (f["status"], f["status_why"]) == ("unresolved", "not settled: self.gather_late")


def _rod(conditions=(), read_conditions=(), decision=None, status="confirmed", paths=None):
    from fencecheck.sglang_source.reads import Read
    from fencecheck.vocab import ReadSite

    reads = [Read("req_to_token", "f.py", 3 + i, "x", (), tuple(c), None)
             for i, c in enumerate(paths if paths is not None else [read_conditions])]
    return ReadOutsideDeclaration("B", "f.py:1", "DECODE", "IN_REPLAY", "shared_read_ends", tuple(conditions), status,
                                  (), tuple((ReadSite.IN_GRAPH_AFTER_MARKER, r) for r in reads), decision)


def test_the_status_follows_what_was_decided():
    racing = Decision("s", "counterexample", ("req_to_token@decode/in_graph_after_marker",), contexts=())
    flags = Reach("dflash-cuda-overlap-4", ("--speculative-algorithm DFLASH",))
    assert status_of(_rod(decision=Decision(**{**racing.__dict__, "reach": flags}))) == (
        "reachable", "races in dflash-cuda-overlap-4, which needs --speculative-algorithm DFLASH")
    assert status_of(_rod(decision=racing)) == (
        "unresolved", "races in its own scenario, in none of the tree's generated configurations")
    assert status_of(_rod(conditions=("self.a",), read_conditions=("not self.b", "self.a"), decision=racing)) == (
        "unresolved", "not settled: self.a and not self.b")  # the row's and the read's conditions, each once
    reached = Decision(**{**racing.__dict__, "reach": Reach("no-speculation-decode-cuda-overlap-0", ())})
    assert status_of(_rod(paths=[("self.x",), ()], decision=reached))[0] == "confirmed"  # one read needs nothing
    assert status_of(_rod(paths=[("self.x", "self.y"), ("self.z",)], decision=reached)) == (
        "unresolved", "not settled: self.z (or those of 1 other read path)")  # the path needing fewest named
    proved = Decision("s", "proved", ())
    assert status_of(_rod(decision=proved))[0] == "unresolved"
    assert status_of(_rod(decision=None)) == ("confirmed", None)  # not decided yet: the extraction's word stands
    w = WorkerReadFinding("W", "w.py:1", "TARGET_VERIFY", "confirmed", (), ("NGRAM",), "req_to_token", (), "", None)
    assert status_of(w) == ("reachable", "needs --speculative-algorithm NGRAM")
    assert status_of(WorkerReadFinding(**{**w.__dict__, "conditions": ("breadth == 1",)})) == (
        "unresolved", "not settled: breadth == 1")
    assert counted([w, _rod()]) == "2 confirmed, 0 reachable, 0 unresolved"
