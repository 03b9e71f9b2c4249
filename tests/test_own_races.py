"""A generated configuration's own race (one the backend's honest twin has too) is not counted for a finding.

``decision/findings.py``: a finding's configuration where each of its races is one the backend's honest twin (the
same declaration, reading only where it covers) has too is marked ``own`` and is not the finding's reach, status,
count or fix evidence: the read outside the declaration brings nothing there. The configuration here is the
disaggregated prefill server's loop with result processing writing before its deferred coarse barrier (the
generator's conservative ``results_touch_inflight``) and a prefill that does not publish: any pre-replay read races
there."""

from __future__ import annotations

from fencecheck.decision.findings import decide_contexts, reach
from fencecheck.sglang_source.contexts import scenario
from fencecheck.sglang_source.findings import ContextVerdict

PHASE = {"side": "target", "mode": "EXTEND", "policy": "prefill", "execution": "eager", "file": "x.py", "line": 1,
         "call": "EagerRunner.execute"}


def _config(loop: str, publish: bool = False) -> dict:
    return {"name": f"prefill-{loop}" + ("-publish" if publish else ""), "source": "no speculation: prefill",
            "condition": None, "phases": [PHASE], "publisher": "target", "marker": True, "barrier": True,
            "loop": loop, "force_coarse": False, "prefill_read_done": publish, "platforms": ["cuda"], "settings": [],
            "event_loops": ["e"], "platform_class": "cuda"}


def _finding(reads: dict) -> dict:
    return {"name": "f", "backends": {"b": {"declares": {"EXTEND": "PRE_REPLAY"}, "reads": {"EXTEND": reads}}},
            "algorithm": {"name": "none", "publisher": "target", "steps": {"normal": [{"name": "extend",
                                                                                        "runner": "target",
                                                                                        "mode": "EXTEND",
                                                                                        "backend": "b"}]}}}


def _rows(reads: dict) -> dict:
    contexts = [(c["name"], scenario(c, None)) for c in (_config("disagg_prefill"), _config("overlap"),
                                                          _config("overlap", publish=True))]
    return {r.context: r for r in decide_contexts([_finding(reads)], contexts, model="none")[0]}


def test_a_race_the_honest_twin_has_too_is_the_configuration_s_own():
    rows = _rows({"pre_replay": ["req_to_token"]})
    disagg = rows["prefill-disagg_prefill"]
    assert disagg.verdict == "counterexample" and disagg.own
    assert rows["prefill-overlap"].verdict == "proved" and not rows["prefill-overlap"].own
    configs = {c["name"]: c for c in (_config("disagg_prefill"), _config("overlap"))}
    assert reach(tuple(rows.values()), configs) is None  # nothing the backend brings


def test_a_race_beyond_the_honest_backend_s_is_the_finding_s():
    """Prefill publishes where the backend declares PRE_REPLAY: its read after the marker races and its twin (the
    same declaration, the pre-replay read alone) does not. Where nothing publishes and result processing writes
    unfenced, the twin races at the pre-replay read only: the in-graph race is still the finding's."""
    rows = _rows({"pre_replay": ["req_to_token"], "in_graph_after_marker": ["req_to_token"]})
    mine = rows["prefill-overlap-publish"]
    assert mine.verdict == "counterexample" and not mine.own
    assert mine.races == ("req_to_token@p0-extend/in_graph_after_marker",)
    disagg = rows["prefill-disagg_prefill"]
    assert disagg.races == ("req_to_token@p0-extend/in_graph_after_marker", "req_to_token@p0-extend/pre_replay")
    assert not disagg.own


def test_reach_skips_own_rows():
    configs = {"a": _config("disagg_prefill") | {"name": "a"}}
    assert reach((ContextVerdict("a", "counterexample", ("x",), None, own=True),), configs) is None
    assert reach((ContextVerdict("a", "counterexample", ("x",), None),), configs).configuration == "a"
