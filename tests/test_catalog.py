"""Every catalog scenario: its verdict, the specific races it expects, and the races shown happening."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from fencecheck.catalog import catalog_paths, load_catalog
from fencecheck.report import Verdict
from fencecheck.reference.check import check_scenario
from fencecheck.reference.run import run_scenario
from fencecheck.reference.sim.hb import analyze
from fencecheck.reference.sim.interleave import host_order, random_schedule, stale_reads, witness_schedule
from fencecheck.reference.sim.races import find_races

SCENARIOS = {s.name: s for s in load_catalog()}
NAMES = sorted(SCENARIOS)

REQUIRED = {
    "plain-decode", "eagle-v2", "eagle-pp-no-draft", "multi-layer-eagle-first", "multi-layer-eagle-final", "dflash",
    "ngram", "ngram-no-clear", "dspark", "deepseek-v4-verify", "hybrid-backend", "composite-backend",
    "restored-graph-no-marker", "breakable-graph-in-replay",
}


def test_catalog_covers_the_configurations_the_issue_names():
    assert REQUIRED <= set(NAMES)
    assert len(catalog_paths()) == len(NAMES)


DOCS = Path(__file__).resolve().parents[1] / "docs"
UPSTREAM = re.compile(r"PR #\d+|python/sglang/srt/[\w/]+\.py")


def _anchors(page: str) -> set[str]:
    """GitHub's heading anchors of a docs page: lower case, punctuation dropped, spaces to hyphens."""
    heads = re.findall(r"^#+ (.+)$", (DOCS / page).read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


@pytest.mark.parametrize("name", NAMES)
def test_scenario_cites_sglang_facts(name):
    """Every cite names one of our doc anchors (which must exist) or an upstream PR or file, never a file outside
    the product."""
    s = SCENARIOS[name]
    assert s.cites and s.expect is not None
    for cite in s.cites:
        refs = re.findall(r"docs/([\w-]+\.md)#([\w-]+)", cite)
        assert refs or UPSTREAM.search(cite), cite
        for page, anchor in refs:
            assert anchor in _anchors(page), f"{cite}: no heading #{anchor} in docs/{page}"
        assert "sglang-fence" not in cite and "shared/" not in cite, cite


@pytest.mark.parametrize("name", NAMES)
def test_verdict_and_specific_races(name):
    s = SCENARIOS[name]
    report = check_scenario(s)
    assert report.verdict is s.expect.verdict
    expected = {e.place() for e in s.expect.races}
    assert {r.key() for r in report.races} == expected
    # Each expected race happens in every step that runs its phase: structural, not a start-up artefact.
    for key in expected:
        runs_phase = {n for n in range(1, s.steps + 1) if key.phase in {p.name for p in s.algorithm.steps[s.step_kind(n)]}}
        assert {r.step for r in report.races if r.key() == key} == runs_phase


def test_the_two_hazards_sglang_documents():
    no_marker = check_scenario(SCENARIOS["restored-graph-no-marker"])
    (race,) = no_marker.distinct()
    assert (race.site, race.read_graph != "") == ("in_graph_before_marker", True)
    assert "ring0" in race.via  # the barrier waited on the pre-replay ring event
    ngram = check_scenario(SCENARIOS["ngram-no-clear"])
    (race,) = ngram.distinct()
    assert race.site == "worker_after" and "target.marker" in race.via
    assert check_scenario(SCENARIOS["ngram"]).safe


@pytest.mark.parametrize("name", [n for n in NAMES if SCENARIOS[n].expect.verdict is Verdict.COUNTEREXAMPLE])
def test_every_race_shows_as_a_stale_read_under_its_witness(name):
    hb = analyze(run_scenario(SCENARIOS[name]))
    races = find_races(hb)
    assert not stale_reads(hb, host_order(hb))  # the device keeping up with the host hides every race
    for race in races:
        stale = stale_reads(hb, witness_schedule(hb, race))
        hit = [o for o in stale if hb.kernels[o.kernel].host == race.read_op and o.key() == race.key()]
        assert hit and hit[0].seen == race.step + 1


@pytest.mark.parametrize("name", [n for n in NAMES if SCENARIOS[n].expect.verdict is Verdict.PROVED])
def test_safe_scenarios_never_show_a_stale_read(name):
    hb = analyze(run_scenario(SCENARIOS[name]))
    rng = random.Random(name)
    for _ in range(50):
        assert not stale_reads(hb, random_schedule(hb, rng))


#: The catalog's dishonest declarations: (scenario, phase, backend, declared, site). Each is a backend that reads
#: after its marker while declaring IN_REPLAY; the barrier still holds in force-coarse (the coarse wait covers it).
DISHONEST = {
    ("breakable-graph-in-replay", "verify", "segmented", "IN_REPLAY", "in_graph_after_marker"),
    ("force-coarse", "decode", "flashinfer", "IN_REPLAY", "in_graph_after_marker"),
}


def test_the_catalogs_dishonest_declarations():
    from fencecheck.reference.honesty import honesty_findings

    found = {(name, f.phase, f.backend, f.declared, f.site) for name in NAMES for f in honesty_findings(SCENARIOS[name])}
    assert found == DISHONEST
    # a dishonest declaration is a finding, not a race: force-coarse stays proved
    assert check_scenario(SCENARIOS["force-coarse"]).verdict is Verdict.PROVED
