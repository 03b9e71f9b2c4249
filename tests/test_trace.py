from __future__ import annotations

import json

import pytest

from fencecheck.errors import TraceError
from fencecheck.reference.run import run_scenario
from fencecheck.reference.sim.races import check_trace
from fencecheck.trace import Trace


@pytest.mark.parametrize("name", ["eagle-v2", "deepseek-v4-verify", "ngram-no-clear", "plan-stream-unjoined"])
def test_json_round_trip_keeps_trace_and_verdict(catalog, name):
    trace = run_scenario(catalog[name])
    again = Trace.from_json(trace.to_json())
    assert again == trace
    assert check_trace(again) == check_trace(trace)


def _doc(catalog):
    return json.loads(run_scenario(catalog["plain-decode"], steps=1).to_json())


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda d: d.update(format="other/9"), "format"),
        (lambda d: d.pop("ops"), "ops"),
        (lambda d: d["ops"][0].update(op="teleport"), "ops[0].op"),
        (lambda d: d["ops"][0].update(step="one"), "ops[0].step"),
        (lambda d: d["ops"][0].update(stream="Q"), "ops[0].stream"),
        (lambda d: d["ops"][0].update(colour=1), "ops[0].colour"),
        (lambda d: d["graphs"][0]["nodes"][1].update(event="ghost"), "nodes[1].event"),
    ],
)
def test_bad_trace_names_the_field(catalog, edit, key):
    doc = _doc(catalog)
    edit(doc)
    with pytest.raises(TraceError) as info:
        Trace.from_json(json.dumps(doc), "t.json")
    assert key in str(info.value) and "\n" not in str(info.value)


def test_not_json():
    with pytest.raises(TraceError, match="not valid JSON"):
        Trace.from_json("{", "t.json")
