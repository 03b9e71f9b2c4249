"""The trace format: typed names, the JSON round trip, and trace files validated as strictly as scenario files."""

from __future__ import annotations

import io
import json

import pytest

from fencecheck import trace_json
from fencecheck.commands.main import main
from fencecheck.errors import TraceError
from fencecheck.reference.run import run_scenario
from fencecheck.reference.sim.races import check_trace
from fencecheck.trace import (
    FORMAT,
    MARK_TYPES,
    BarrierFine,
    ClearReason,
    MailboxCleared,
    MarkKind,
    RunBatchBegin,
    Trace,
    graph_id,
    marker_event,
    ring_event,
    stream_id,
)
from fencecheck.vocab import ForwardMode, StepKind, Stream


def test_ids_are_built_from_their_parts():
    assert ring_event("target", 1) == "target.ring1"
    assert marker_event("draft") == "draft.marker"
    assert graph_id("target", "verify", ForwardMode.TARGET_VERIFY, "fa3", 0) == "target/verify/TARGET_VERIFY/fa3#0"
    assert stream_id(Stream.P) == "P"
    with pytest.raises(ValueError):
        stream_id("Q")


def test_marks_are_a_closed_set_of_kinds():
    assert set(MARK_TYPES) == set(MarkKind)
    assert RunBatchBegin(1, StepKind.NORMAL, by="worker") == RunBatchBegin(1, StepKind.NORMAL, by="anyone")
    assert RunBatchBegin(1, StepKind.NORMAL) != RunBatchBegin(1, StepKind.IDLE)
    assert BarrierFine(2, ring_event("t", 0)).text() == "fine: S waits on t.ring0"


def test_every_catalog_trace_round_trips_with_its_verdict(catalog):
    seen = set()
    for s in catalog.values():
        trace = run_scenario(s)
        again = trace_json.parse_json(trace.to_json(), s.name)
        assert again == trace and again.to_dict() == trace.to_dict(), s.name  # prose (by) too
        assert check_trace(again) == check_trace(trace)
        seen |= {type(op) for op in trace.ops}
    assert set(MARK_TYPES.values()) <= seen  # the catalog writes and reads back every kind of mark


# -- trace files: one line naming the file and the key -----------------------------------------------------------


@pytest.fixture
def rg(catalog):
    """``fencecheck trace fencecheck/catalog/restored-graph-no-marker.toml -o rg.json`` as a document."""
    return json.loads(run_scenario(catalog["restored-graph-no-marker"]).to_json())


def _error(doc) -> str:
    with pytest.raises(TraceError) as info:
        trace_json.parse_json(json.dumps(doc), "rg.json")
    line = str(info.value)
    assert "\n" not in line and line.startswith("rg.json: ")
    return line


def test_a_stream_listed_twice_is_rejected(rg):
    rg["streams"].append("F")
    assert _error(rg) == "rg.json: streams[2]: duplicate stream 'F'"


def test_a_race_cannot_hide_behind_missing_run_batch_return_marks(rg):
    assert len(check_trace(trace_json.parse(rg, "rg.json")).races) == 3  # one read per step races
    first = next(i for i, op in enumerate(rg["ops"]) if op.get("mark") == "run_batch_return")
    rg["ops"] = [op for op in rg["ops"] if op.get("mark") != "run_batch_return"]
    begin2 = next(i for i, op in enumerate(rg["ops"]) if op.get("mark") == "run_batch_begin" and op["step"] == 2)
    assert begin2 > first
    assert _error(rg) == (f"rg.json: ops[{begin2}].mark: expected run_batch_return of step 1, "
                          "got run_batch_begin of step 2")


def test_the_last_run_batch_return_is_required_too(rg):
    last = max(i for i, op in enumerate(rg["ops"]) if op.get("mark") == "run_batch_return")
    del rg["ops"][last]
    assert _error(rg) == (f"rg.json: ops: expected run_batch_return of step 3 after ops[{len(rg['ops']) - 1}], got "
                          "the end of the ops (every step 1..3 has run_batch_begin and run_batch_return, in order)")


def test_a_duplicate_graph_id_is_rejected(rg):
    rg["graphs"].append(dict(rg["graphs"][0], nodes=[]))
    assert _error(rg) == "rg.json: graphs[1].id: duplicate graph 'target/decode/DECODE/flashinfer#0'"


def test_a_duplicate_event_is_rejected(rg):
    rg["events"].append(dict(rg["events"][0]))
    assert _error(rg) == "rg.json: events[2].id: duplicate event 'target.ring0'"


@pytest.mark.parametrize("value, got", [("false", 'a string "false"'), ([], "an array"), (0, "an integer 0"),
                                        (None, "null")])
def test_external_is_a_boolean(rg, value, got):
    rg["events"][0]["external"] = value
    assert _error(rg) == f"rg.json: events[0].external: expected true or false, got {got}"


def test_an_op_that_is_a_list_is_one_line(rg):
    rg["ops"][0] = ["write", "S"]
    assert _error(rg) == "rg.json: ops[0]: expected an object, got an array"


def test_an_op_tag_that_is_a_list_is_one_line(rg):
    rg["ops"][0]["op"] = ["write"]
    assert _error(rg) == ("rg.json: ops[0].op: expected one of record, wait_event, wait_stream, host_sync, read, "
                          "write, replay, mark, got an array")


@pytest.mark.parametrize(
    "edit, line",
    [
        (lambda d: d.update(format="fencecheck-trace/1"),
         f"format: expected {FORMAT!r}, got a string \"fencecheck-trace/1\""),
        (lambda d: d.pop("ops"), "ops: missing required key"),
        (lambda d: d.update(colour=1), "colour: unknown key"),
        (lambda d: d.update(steps=True), "steps: expected an integer, got a boolean true"),
        (lambda d: d.update(steps=3.0), "steps: expected an integer, got a number 3.0"),
        (lambda d: d.update(steps=0), "steps: expected an integer in 1..100,000, got 0"),
        (lambda d: d.update(steps=trace_json.MAX_STEPS + 1), "steps: expected an integer in 1..100,000, got 100001"),
        (lambda d: d.update(scenario=7), "scenario: expected a string, got an integer 7"),
        (lambda d: d.update(scenario="x" * 300), "scenario: expected at most 256 characters, got 300"),
        (lambda d: d.update(scenario="a\nb"), 'scenario: expected text without control characters, got a string "a\\nb"'),
        (lambda d: d["streams"].append("Q"), 'streams[2]: expected one of S, F, P, got a string "Q"'),
        (lambda d: d["events"][0].update(colour=1), "events[0].colour: unknown key"),
        (lambda d: d["events"][0].pop("external"), "events[0].external: missing required key"),
        (lambda d: d["graphs"][0].update(colour=1), "graphs[0].colour: unknown key"),
        (lambda d: d["graphs"][0]["nodes"][0].update(colour=1), "graphs[0].nodes[0].colour: unknown key"),
        (lambda d: d["graphs"][0]["nodes"][0].update(site="anywhere"),
         'graphs[0].nodes[0].site: expected one of pre_replay, in_graph_before_marker, in_graph_after_marker, '
         'post_replay, worker_after, got a string "anywhere"'),
        (lambda d: d["graphs"][0]["nodes"].append({"node": "record", "event": "target.ring0"}),
         "graphs[0].nodes[1].event: expected an external event for a record node, got 'target.ring0'"),
        (lambda d: d["ops"][0].update(op="teleport"),
         'ops[0].op: expected one of record, wait_event, wait_stream, host_sync, read, write, replay, mark, got a string '
         '"teleport"'),
        (lambda d: d["ops"][0].update(step="one"), 'ops[0].step: expected an integer, got a string "one"'),
        (lambda d: d["ops"][0].update(step=1.0), "ops[0].step: expected an integer, got a number 1.0"),
        (lambda d: d["ops"][0].update(stream="P"), "ops[0].stream: undeclared stream 'P'"),
        (lambda d: d["ops"][0].update(colour=1), "ops[0].colour: unknown key"),
        (lambda d: d["ops"][0].update(by=3), "ops[0].by: expected a string, got an integer 3"),
        (lambda d: d["ops"][1].update(mark="note"),
         'ops[1].mark: expected one of run_batch_begin, run_batch_return, resolve, mailbox_set, mailbox_cleared, '
         'barrier_disabled, barrier_fine, barrier_coarse, got a string "note"'),
        (lambda d: d["ops"][1].update(step_kind="busy"), 'ops[1].step_kind: expected one of normal, idle, fallback, '
                                                         'got a string "busy"'),
        (lambda d: d["ops"][1].update(detail="x"), "ops[1].detail: unknown key"),
        (lambda d: d["ops"][0].update(step=5), "ops[0].step: expected a step in 0..4 (the trace has 3 steps), got 5"),
        (lambda d: d.update(meta={"note": "x"}), "meta.note: unknown key"),
        (lambda d: d.update(meta={"resolution": "whatever"}),
         'meta.resolution: expected one of gated, declaration_only, declaration_only_post_fallback, got a string '
         '"whatever"'),
    ],
)
def test_bad_trace_is_one_line_naming_the_key(rg, edit, line):
    edit(rg)
    assert _error(rg) == f"rg.json: {line}"


def test_reads_lie_inside_their_run_batch(rg):
    i = next(i for i, op in enumerate(rg["ops"]) if op["op"] == "read")
    rg["ops"][i]["step"] = 2
    assert _error(rg) == f"rg.json: ops[{i}].step: expected a read of step 2 inside run_batch(2) (run_batch(1) is running)"


def test_mailbox_cleared_names_its_phase_exactly_when_the_worker_cleared_it(rg):
    i = next(i for i, op in enumerate(rg["ops"]) if op.get("mark") == "mailbox_cleared")
    assert rg["ops"][i]["why"] == ClearReason.BARRIER_RESET.value
    rg["ops"][i]["phase"] = "decode"
    assert _error(rg) == f'rg.json: ops[{i}].phase: expected an empty phase for a barrier reset, got a string "decode"'
    rg["ops"][i].update(phase="", why="cleared_after")
    assert _error(rg) == f'rg.json: ops[{i}].phase: expected the phase it was cleared after, got a string ""'
    assert MailboxCleared(1, "t", ClearReason.CLEARED_AFTER, "verify").text() == "t <- None (cleared_after verify)"


def test_the_ops_count_is_bounded(rg, monkeypatch):
    monkeypatch.setattr(trace_json, "MAX_OPS", 10)
    assert _error(rg) == f"rg.json: ops: expected at most 10 items, got {len(rg['ops'])}"


def test_duplicate_json_keys_and_deep_nesting_are_one_line(rg):
    text = json.dumps(rg)
    with pytest.raises(TraceError, match=r"^rg.json: steps: duplicate key in one object$"):
        trace_json.parse_json(text.replace('"steps": 3', '"steps": 3, "steps": 4'), "rg.json")
    with pytest.raises(TraceError, match=r"^rg.json: expected JSON nested at most 64 deep$"):
        trace_json.parse_json(text.replace('"meta": {', '"meta": {"x": ' + "[" * 5000 + "]" * 5000 + ', '), "rg.json")


def test_not_json():
    with pytest.raises(TraceError, match="not valid JSON"):
        trace_json.parse_json("{", "t.json")


def test_check_of_a_bad_trace_file_exits_2_with_one_line(rg, tmp_path):
    rg["streams"].append("F")
    path = tmp_path / "rg.json"
    path.write_text(json.dumps(rg))
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(path)], out, err) == 2
    assert err.getvalue() == f"fencecheck: error: {path}: streams[2]: duplicate stream 'F'\n" and out.getvalue() == ""


def test_the_documented_bounds_are_the_enforced_ones():
    from pathlib import Path

    text = " ".join((Path(__file__).parent.parent / "docs" / "simulator.md").read_text().split())
    t = trace_json
    assert (f"`steps` 1..{t.MAX_STEPS:,}; at most {t.MAX_OPS:,} ops, {t.MAX_EVENTS:,} events, {t.MAX_GRAPHS:,} graphs, "
            f"{t.MAX_NODES:,} nodes per graph; names and ids at most {t.MAX_NAME} characters, `by` at most "
            f"{t.MAX_PROSE:,}; JSON nested at most {t.MAX_DEPTH} deep") in text
