"""Every SGLang release with the declaration fence (0.5.18-0.5.23), read from its wheel, against its record.

Each against the hand-audited tables where there are some, the older fence of 0.5.17 recognized.

The wheels are fetched once with ``pip download --no-deps`` and cached (``sglang_release.py``); without them the tests
are skipped, or fail where ``CI`` is set."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RELEASES = ("0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")
#: The releases whose protocol tables were audited by hand (tests/sglang_<version>_expected.json, "protocol").
AUDITED = ("0.5.18", "0.5.22")

pytestmark = pytest.mark.slow


@functools.cache
def _read(version: str):
    """(extraction, decided document) of a release: read once per test run."""
    from sglang_release import require_tree

    from fencecheck.decision.fallback import decide_fallback
    from fencecheck.sglang_source import read_path

    ex = read_path(require_tree(version, fetching=True))
    decided, _ = decide_fallback(ex, model=False)
    return ex, decided.to_json()


def doc_of(version: str) -> dict:
    return copy.deepcopy(_read(version)[1])


@pytest.mark.parametrize("version", AUDITED)
def test_the_audited_tables_of_a_release(version):
    """The reader's protocol tables of the release equal the ones audited by hand, row for row (each with file:line)."""
    from sglang_release_tables import tables

    expected = json.loads((HERE / f"sglang_{version.replace('.', '_')}_expected.json").read_text("utf-8"))
    got = tables(doc_of(version))
    for key in got:
        assert got[key] == expected[key], key


@pytest.mark.parametrize("version", RELEASES)
def test_a_release_has_no_drift_against_its_record(version, tmp_path):
    """The release read now and its record in fencecheck/sglang_source/releases/ agree, fact for fact and function for
    function; --record writes that record again byte for byte."""
    from fencecheck.decision.drift import drift, record_document, write_record
    from fencecheck.sglang_source.tree import find_package_root

    ex, _ = _read(version)
    package = find_package_root(ex.root)
    current = record_document(ex, package)
    d = drift(f"sglang-{version}", current, package)
    assert (d["facts"], d["functions"], d["catalog_entries"]) == ([], [], [])
    path = write_record(str(tmp_path), current)
    assert path.read_bytes() == (ROOT / "fencecheck" / "sglang_source" / "releases" / path.name).read_bytes()


@pytest.mark.parametrize("version", RELEASES)
def test_the_fallback_is_read_from_each_release(version):
    """0.5.18 to 0.5.21 fall back to PRE_REPLAY without a marker (the TODO of the PR era), 0.5.22 and 0.5.23 to
    POST_REPLAY: the rule each release's findings are decided under, read from _resolve_shared_read_ends."""
    doc = doc_of(version)
    rule = doc["configurations"]["rule"]
    (runner,) = [r for r in doc["graph_runners"] if r["class"] == "DecodeCudaGraphRunner"]
    early = version in ("0.5.18", "0.5.19", "0.5.20", "0.5.21")
    assert runner["fallback"]["end"] == ("PRE_REPLAY" if early else "POST_REPLAY")
    assert rule == ("declaration_only" if early else "declaration_only_post_fallback")
    from fencecheck.decision.findings import generated_contexts, scenario_dict, tree_rule

    ex, _ = _read(version)
    assert tree_rule(ex) == rule
    assert {ctx["resolution"] for _, ctx in generated_contexts(ex)} == {rule}
    finding = next(f for f in ex.findings if f.kind == "read_outside_declaration")
    backend = next(b for b in ex.backends if b.at == finding.subject_at)
    assert scenario_dict(finding, backend, 0, rule)["resolution"] == rule


@pytest.mark.parametrize("version", RELEASES)
def test_the_no_marker_fallback_races_where_it_falls_back_early(version):
    """Where the fallback is PRE_REPLAY, a backend that honestly declares IN_REPLAY and reads in the graph before the
    marker races on the platforms without a marker once the barrier is on (ROCm, MUSA or XPU with
    SGLANG_ENABLE_WAR_BARRIER=1, or CUDA without external events): a no_marker_fallback finding per graph mode, its
    race at in_graph_before_marker. With the POST_REPLAY fallback there is none."""
    doc = doc_of(version)
    found = {f["mode"]: f for f in doc["findings"] if f["kind"] == "no_marker_fallback"}
    if doc["configurations"]["rule"] == "declaration_only_post_fallback":
        assert found == {}
        return
    assert set(found) == {"DECODE", "TARGET_VERIFY"}
    for f in found.values():
        assert f["status"] == "plausible" and f["verdict"] == "counterexample"
        assert any(r.endswith("/in_graph_before_marker") for r in f["races"]), f["races"]
        assert "SGLANG_ENABLE_WAR_BARRIER=True" in f["condition"] and "hip" in f["condition"]
        assert "DeepseekV4HipRadixBackend" in f["backends"]
        assert f["evidence"][0]["what"].endswith("to PRE_REPLAY (declaration_only)")


@pytest.mark.parametrize("version", RELEASES)
def test_the_eagle_draft_extend_runner_publishes_as_its_code_says(version):
    """0.5.18 to 0.5.21 assign a fresh event to the mailbox before the replay without asking the backend (no helper):
    publish_unconditionally, fingerprinted for drift; 0.5.22 and 0.5.23 clear the mailbox, then resolve."""
    ex, doc = _read(version)
    (r,) = [r for r in doc["graph_runners"] if r["class"] == "EAGLEDraftExtendCudaGraphRunner"]
    if version in ("0.5.22", "0.5.23"):
        assert r["policy"] == "clear_then_resolve" and r["clears"][0]["before_resolve"]
    else:
        assert r["policy"] == "publish_unconditionally"
        assert [(p["at"], p["event"], p["ends"]) for p in r["publishes"]] == [("before_replay", "fresh", None)]
        assert r["publishes"][0]["file"] == "sglang/srt/speculative/eagle_draft_extend_cuda_graph_runner.py"
    key = "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner.EAGLEDraftExtendCudaGraphRunner.execute"
    assert key in ex.fingerprints.to_dict(ex.version)["functions"]


def test_0_5_17_is_an_older_fence_reported_as_such():
    """0.5.17's barrier waits on war_fastpath_read_done_event, which its decode runner publishes before the replay
    (after it for a breakable verify) and the EAGLE draft-extend runner before its replay: exit 5, each with
    file:line; not bad input."""
    import io

    from sglang_release import require_tree

    from fencecheck.commands.main import main

    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", str(require_tree("0.5.17", fetching=True)), "--json"], out, err)
    assert (code, err.getvalue()) == (5, "")
    doc = json.loads(out.getvalue())
    fence = doc["fence"]
    assert (fence["kind"], fence["mailbox"], fence["publisher_property"]) == (
        "read_done_event", "war_fastpath_read_done_event", "war_fastpath_runner")
    assert fence["barrier"][0]["file"] == "sglang/srt/managers/scheduler.py" and fence["barrier"][0]["line"] == 1664
    pubs = {(w["function"].rsplit(".", 2)[-2], w["line"]) for w in fence["mailbox_writes"] if w["kind"] == "publish"}
    assert pubs == {("DecodeCudaGraphRunner", 1232), ("DecodeCudaGraphRunner", 1237),
                    ("EAGLEDraftExtendCudaGraphRunner", 596)}
    (decode,) = [r for r in doc["graph_runners"] if r["class"] == "DecodeCudaGraphRunner"]
    assert [(p["at"], p["line"]) for p in decode["publishes"]] == [("before_replay", 1232), ("after_replay", 1237)]
    assert doc["findings"] == [] and doc["backends"] == []
