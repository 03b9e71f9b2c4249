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


def _questioned(root, late_too: bool = False):
    """The head tree with PagedBackend's gather behind a flag the reader cannot settle (a question); with
    ``late_too``, LateReadBackend's as well (nothing but questions left)."""
    import glob

    p = root / PAGED
    p.write_text(p.read_text().replace(
        "        pages = self.req_to_token[forward_batch.req_pool_indices, : forward_batch.seq_lens]\n",
        "        pages = q\n        if self.gather_late:\n"
        "            pages = self.req_to_token[forward_batch.req_pool_indices, : forward_batch.seq_lens]\n"))
    if late_too:
        (late,) = [x for x in glob.glob(str(root / "**" / "late_backend.py"), recursive=True)]
        text = open(late).read()
        assert "        pages = self.req_to_token[" in text
        open(late, "w").write(text.replace(
            "        pages = self.req_to_token[forward_batch.req_pool_indices, : forward_batch.seq_lens]\n",
            "        pages = q\n        if self.gather_late:\n"
            "            pages = self.req_to_token[forward_batch.req_pool_indices, : forward_batch.seq_lens]\n"))
    return root


def _text(*argv) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", *map(str, argv)], out, err)
    return code, out.getvalue()


def test_questions_come_after_the_findings_with_what_they_hang_on_and_no_fix(tmp_path):
    code, text = _text(_questioned(lay(tmp_path / "head", "head")))
    lines = text.splitlines()
    assert code == 1 and lines[1].startswith("findings: 1 (1 confirmed, 0 reachable) in 1 root causes")
    confirmed = next(i for i, x in enumerate(lines) if x.startswith("  CONFIRMED late_backend.py"))
    asked = next(i for i, x in enumerate(lines) if x.startswith("questions: 1 (not findings"))
    question = next(i for i, x in enumerate(lines) if x.startswith("  UNRESOLVED paged_backend.py"))
    assert confirmed < asked < question
    entry = " ".join(lines[question:question + 2])
    assert "not settled: self.gather_late" in entry and "fix" not in entry
    assert "fix (proved): declare POST_REPLAY" in lines[confirmed + 1]
    assert lines[-1].endswith("1 finding(s) to review (1 confirmed), listed above; 1 question(s) listed after them "
                              "(--details: each with its evidence)")


def test_details_order_as_the_summary_and_show_no_fix_for_a_question(tmp_path):
    root = _questioned(lay(tmp_path / "head", "head"))
    _, text = _text(root, "--details")
    heads = [x for x in text.splitlines() if x.startswith(("  CONFIRMED ", "  UNRESOLVED "))]
    assert [h.split()[0] for h in heads] == ["CONFIRMED", "UNRESOLVED"], heads
    block = text.split("  UNRESOLVED PagedBackend DECODE", 1)[1].split("\nnot findings:", 1)[0]
    assert "unresolved: not settled: self.gather_late" in block and "scenario sglang-paged-backend-decode" in block
    assert "fix:" not in block


def test_a_tree_with_questions_alone_exits_3(tmp_path):
    root = _questioned(lay(tmp_path / "head", "head"), late_too=True)
    code, text = _text(root)
    assert code == 3 and text.splitlines()[1].startswith("findings: 0 (0 confirmed, 0 reachable)")
    assert text.splitlines()[-1].endswith("no finding, but 2 question(s) and facts left unresolved: nothing is "
                                          "proved there until each is answered")
    code, doc = _doc(root)
    assert code == 3 and {f["status"] for f in doc["findings"]} == {"unresolved"}
    assert all(f["verdict"] == "counterexample" for f in doc["findings"])  # each races if its flag is set


def test_sarif_gives_each_status_one_level_and_codeql_s_precision(tmp_path):
    root = _questioned(lay(tmp_path / "head", "head"))
    out = io.StringIO()
    assert main(["sglang", str(root), "--format", "sarif"], out, io.StringIO()) == 1
    results = json.loads(out.getvalue())["runs"][0]["results"]
    got = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].rsplit("/", 1)[-1]:
           (r["level"], r["properties"]["precision"], r["properties"]["status"]) for r in results}
    assert got == {"late_backend.py": ("error", "very-high", "confirmed"),
                   "paged_backend.py": ("note", "medium", "unresolved")}
    (question,) = [r for r in results if r["properties"]["status"] == "unresolved"]
    assert "Question, not a finding: not settled: self.gather_late" in question["message"]["text"]
    assert "Fix:" not in question["message"]["text"]


def test_a_change_that_adds_only_a_question_exits_3_in_pull_request_mode_without_a_fix(tmp_path):
    base = lay(tmp_path / "base", "base")
    head = _questioned(lay(tmp_path / "head", "head"))
    code, text = _text(head, "--baseline", base)
    assert code == 3 and "  ADDED UNRESOLVED read_outside_declaration: PagedBackend DECODE" in text
    added = text.split("  ADDED UNRESOLVED", 1)[1].split("\nprotocol facts:", 1)[0]
    assert "scenario sglang-paged-backend-decode: counterexample" in added and "fix:" not in added


def test_a_root_cause_folding_a_shown_finding_with_questions_is_listed_with_the_findings():
    """Two backends with the same uncovered read, one confirmed and one unresolved, are one root cause: it is shown
    under the findings (its worst status), not under the questions' line, which still counts the question."""
    from types import SimpleNamespace

    from fencecheck.render.summary import summary_lines

    from fencecheck.sglang_source.records import Evidence

    def at(line: int):
        return (Evidence("d.py", 1, "declares"), Evidence("f.py", line, "reads req_to_token at in_graph_after_marker "
                                                                         "via B.forward_decode"))

    shown = ReadOutsideDeclaration(**{**_rod(status="confirmed").__dict__, "evidence": at(3)})
    asked = ReadOutsideDeclaration(**{**_rod(status="unresolved").__dict__, "subject": "A", "subject_at": "g.py:1",
                                      "evidence": at(3)})
    other = ReadOutsideDeclaration(**{**_rod(status="unresolved").__dict__, "subject": "C", "subject_at": "h.py:1",
                                      "evidence": at(9)})  # another read: another root cause
    lines = summary_lines(SimpleNamespace(findings=(asked, shown, other)))
    heads = [i for i, line in enumerate(lines) if not line.startswith("      ")]
    assert lines[heads[0]].startswith("  CONFIRMED ") and "A, B (DECODE)" in lines[heads[0]]
    assert lines[heads[1]].startswith("questions: 2 ") and lines[heads[2]].startswith("  UNRESOLVED ")
