"""Suppressions in the SGLang source (`# fencecheck: ignore[KIND] reason`): what they silence, their errors, unused ones.

On ``pr_pair.py``'s head: ``PagedBackend`` reads ``req_to_token`` at paged_backend.py:16 and ``LateReadBackend``
(declaration at late_backend.py:13, read at :19) are the two findings."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest
from pr_pair import lay

from fencecheck.commands.main import main

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "sglang-reader.schema.json").read_text("utf-8"))
PAGED = "sglang/srt/layers/attention/paged_backend.py"
LATE = "sglang/srt/layers/attention/late_backend.py"
OK = "  # fencecheck: ignore[read_outside_declaration] the gather runs only in eager mode"


def annotate(root: Path, rel: str, line: int, comment: str) -> None:
    f = root / rel
    lines = f.read_text().split("\n")
    lines[line - 1] += comment
    f.write_text("\n".join(lines))


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_on_the_read_and_on_the_declaration_they_silence_and_count_for_nothing(tmp_path):
    head = lay(tmp_path / "head", "head")
    assert run(str(head))[0] == 1
    annotate(head, PAGED, 16, OK)
    code, out, _ = run(str(head))
    assert code == 1 and "findings: 1 (1 confirmed" in out and "SUPPRESSED read_outside_declaration PagedBackend" in out
    annotate(head, LATE, 13, "  # fencecheck: ignore[worker_read_after_publish, read_outside_declaration] known")
    code, out, err = run(str(head))
    assert code == 0, out
    assert "findings: 0 (" in out and "suppressed: 2 root causes (not counted)" in out and err == ""
    doc = json.loads(run(str(head), "--json")[1])
    jsonschema.validate(doc, SCHEMA)
    assert all(f.get("suppressed") for f in doc["findings"]) and len(doc["findings"]) == 2
    assert {s["suppression"]["line"] for s in doc["suppressions"]["suppressed"]} == {16, 13}
    assert doc["suppressions"]["unused"] == []


def test_a_suppression_without_a_reason_is_one_line_naming_the_place_and_exit_2(tmp_path):
    head = lay(tmp_path / "head", "head")
    annotate(head, PAGED, 16, "  # fencecheck: ignore[read_outside_declaration]   ")
    code, out, err = run(str(head))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{PAGED.split('/')[-1]}:16" in err and "needs a reason" in err


def test_an_unknown_kind_or_a_malformed_comment_is_bad_input(tmp_path):
    head = lay(tmp_path / "head", "head")
    annotate(head, PAGED, 16, "  # fencecheck: ignore[race] a reason")
    code, _, err = run(str(head))
    assert code == 2 and "'race'" in err and ":16" in err
    head2 = lay(tmp_path / "head2", "head")
    annotate(head2, PAGED, 3, "  # fencecheck: skip this file")
    code, _, err = run(str(head2))
    assert code == 2 and ":3" in err and "expected a suppression" in err


def test_a_suppression_of_another_kind_or_line_is_unused_and_warned(tmp_path):
    head = lay(tmp_path / "head", "head")
    annotate(head, PAGED, 16, "  # fencecheck: ignore[worker_read_after_publish] not this kind")
    annotate(head, PAGED, 12, OK)
    code, out, err = run(str(head))
    assert code == 1
    warnings = err.strip().split("\n")
    assert len(warnings) == 2 and all("unused suppression" in w for w in warnings)
    assert f"{PAGED}:12" in warnings[0] and f"{PAGED}:16" in warnings[1]
    doc = json.loads(run(str(head), "--json")[1])
    assert [(u["line"], u["kinds"]) for u in doc["suppressions"]["unused"]] == \
        [(12, ["read_outside_declaration"]), (16, ["worker_read_after_publish"])]


def test_a_suppression_inside_a_string_is_no_comment(tmp_path):
    head = lay(tmp_path / "head", "head")
    annotate(head, PAGED, 5, "")  # the docstring line
    f = head / PAGED
    f.write_text(f.read_text().replace('"""Builds', '"""# fencecheck: ignore[read_outside_declaration]\n    Builds', 1))
    code, _, err = run(str(head))
    assert code == 1 and err == ""


def test_in_pull_request_mode_a_suppressed_addition_passes_and_sarif_says_why(tmp_path):
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")
    annotate(head, PAGED, 16, OK)
    code, out, _ = run(str(head), "--baseline", str(base))
    assert code == 0 and "findings: 0 added, 0 fixed, 1 unchanged, 1 suppressed" in out
    assert "SUPPRESSED read_outside_declaration: PagedBackend DECODE" in out
    log = json.loads(run(str(head), "--baseline", str(base), "--format", "sarif")[1])
    (r,) = [r for r in log["runs"][0]["results"] if r.get("suppressions")]
    assert r["baselineState"] == "new"
    assert r["suppressions"][0]["kind"] == "inSource"
    assert r["suppressions"][0]["justification"] == "the gather runs only in eager mode"
    pr = json.loads(run(str(head), "--baseline", str(base), "--json")[1])
    assert pr["counts"] == {"added": 0, "fixed": 0, "unchanged": 1, "suppressed": 1}


def test_removing_a_baseline_suppression_adds_the_finding(tmp_path):
    base, head = lay(tmp_path / "base", "head"), lay(tmp_path / "head", "head")
    annotate(base, PAGED, 16, OK)
    code, out, _ = run(str(head), "--baseline", str(base))
    assert code == 1 and "findings: 1 added, 0 fixed, 1 unchanged, 0 suppressed" in out


def test_a_reason_is_shown_escaped_on_one_line_of_at_most_200_characters(tmp_path):
    from fencecheck.decision.suppress import MAX_REASON, shown_reason

    assert shown_reason("ok \x1b[31mred\x1b[0m \u202egnp.exe\u202c \u2066x\u2069 a\u200bb") == \
        "ok \\x1b[31mred\\x1b[0m \\u202egnp.exe\\u202c \\u2066x\\u2069 a\\u200bb"
    long = shown_reason("why " * 200)
    assert len(long) == MAX_REASON and long.endswith("...") and long.startswith("why why")
    assert len(shown_reason("\x1b" * 150)) == MAX_REASON  # cut after escaping: the shown text is what is bounded
    head = lay(tmp_path / "head", "head")
    annotate(head, PAGED, 16, "  # fencecheck: ignore[read_outside_declaration] eager \x1b[2J only \u202ereversed")
    code, out, err = run(str(head))
    assert code == 1 and err == ""
    (line,) = [x for x in out.splitlines() if "SUPPRESSED" in x]
    assert "eager \\x1b[2J only \\u202ereversed" in line and "\x1b" not in out and "\u202e" not in out
    log = json.loads(run(str(head), "--format", "sarif")[1])
    (r,) = [r for r in log["runs"][0]["results"] if r.get("suppressions")]
    assert r["suppressions"][0]["justification"] == "eager \\x1b[2J only \\u202ereversed"
    annotate(head, PAGED, 16, " " + "x" * 400)
    line = next(x for x in run(str(head))[1].splitlines() if "SUPPRESSED" in x)
    assert "x" * (MAX_REASON - 3 - len("eager \\x1b[2J only \\u202ereversed ")) + "... (" in line


@pytest.mark.parametrize("reason", ["\u200b\u200c\u200d", "\u2060\ufeff", " \u202e\u202c\u2066\u2069 ", "\u200e\u200f\t"])
def test_a_reason_of_invisible_characters_is_no_reason(tmp_path, reason):
    head = lay(tmp_path / "head", "head")
    annotate(head, PAGED, 16, f"  # fencecheck: ignore[read_outside_declaration] {reason}")
    code, out, err = run(str(head))
    assert code == 2 and out == "" and err.count("\n") == 1 and "needs a reason" in err and ":16" in err


def test_two_suppressions_on_one_line_are_each_parsed_on_their_own(tmp_path):
    from fencecheck.decision.suppress import scan

    head = lay(tmp_path / "head", "head")
    annotate(head, LATE, 13, "  # fencecheck: ignore[worker_read_after_publish] first why "
                             "# fencecheck: ignore[read_outside_declaration] second why")
    (a, b) = [s for s in scan(head / "sglang") if s.line == 13]
    assert (a.kinds, a.reason) == (("worker_read_after_publish",), "first why")
    assert (b.kinds, b.reason) == (("read_outside_declaration",), "second why")
    code, out, err = run(str(head))
    # the declaration's line: its read_outside_declaration root cause is silenced by the second alone; the first
    # silences nothing there and is the one unused
    assert "SUPPRESSED read_outside_declaration LateReadBackend" in out and "; second why (" in out
    assert err.count("unused suppression") == 1 and "ignore[worker_read_after_publish]" in err
    head2 = lay(tmp_path / "head2", "head")
    annotate(head2, LATE, 13, "  # fencecheck: ignore[read_outside_declaration] fine # fencecheck: ignore[race] x")
    code, _, err = run(str(head2))
    assert code == 2 and "'race'" in err
