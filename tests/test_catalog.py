"""Every catalog scenario of every version: its verdict, the specific races it expects, and the races shown happening."""

from __future__ import annotations

import ast
import os
import random
import re
from pathlib import Path

import pytest

from fencecheck.files.catalog import DEFAULT_VERSION, PR_ERA, RELEASE, VERSIONS, catalog_paths, load_catalog
from fencecheck.verdict import Verdict
from fencecheck.reference.check import check_scenario
from fencecheck.reference.run import run_scenario
from fencecheck.reference.sim.hb import analyze
from fencecheck.reference.sim.interleave import host_order, random_schedule, stale_reads, witness_schedule
from fencecheck.reference.sim.races import find_races
from fencecheck.vocab import PublishPolicy, ResolutionRule

CATALOGS = {v: {s.name: s for s in load_catalog(v)} for v in VERSIONS}
SCENARIOS = CATALOGS[PR_ERA]
RELEASED = CATALOGS[RELEASE]
NAMES = sorted(SCENARIOS)
ALL = [(v, n) for v in VERSIONS for n in sorted(CATALOGS[v])]

REQUIRED = {
    "plain-decode", "eagle-v2", "eagle-pp-no-draft", "multi-layer-eagle-first", "multi-layer-eagle-final", "dflash",
    "ngram", "ngram-no-clear", "dspark", "deepseek-v4-verify", "hybrid-backend", "composite-backend",
    "restored-graph-no-marker", "breakable-graph-in-replay",
}

#: The release's configurations that touch the fence: every backend family on decode, prefill with the publish on and
#: off, every speculative algorithm, composites and hybrids, two-batch overlap, disaggregation, every event loop, and
#: the possible races of the shipping code (docs/sglang-0.5.23.md).
REQUIRED_RELEASE = {
    "decode-triton", "decode-flashinfer", "decode-fa3", "decode-trtllm-mha", "decode-mla", "decode-deepseek-v4",
    "decode-dsa", "decode-hpc-ops", "decode-minimax-nvfp4", "decode-eager", "decode-hybrid-linear",
    "prefill-trtllm-mha", "prefill-trtllm-mha-graph", "prefill-flashinfer", "prefill-publish-off-env",
    "prefill-eagle-algorithm-gate", "prefill-hierarchical-cache", "prefill-dspark",
    "eagle", "standalone", "multi-layer-eagle-staged", "multi-layer-eagle-not-staged", "ngram", "dflash",
    "dspark-swa-ring", "uno-linear", "uno-tree", "frozen-kv-mtp",
    "deepseek-v4-verify-breakable", "hybrid-attn-verify-prefill-mode", "hybrid-attn-verify-decode-mode",
    "two-batch-overlap", "disagg-prefill-deferred-coarse", "race-disagg-prefill-claim-fails", "disagg-decode",
    "loop-normal", "loop-pp",
    "race-dspark-commit-in-graph", "race-dspark-commit-after-verify", "race-qsa-sparse-decode",
    "race-minimax-sparse-decode", "race-mamba-commit-after-verify", "race-uno-tree-eager-verify",
}

#: Release scenarios whose expectation needs semantics the simulator does not give yet (event loops other than
#: ``overlap``): expected to fail, strictly, so this set must be emptied when the loops are implemented.


def test_catalog_covers_the_configurations_the_issue_names():
    assert REQUIRED <= set(NAMES)
    assert REQUIRED_RELEASE <= set(RELEASED)
    assert DEFAULT_VERSION == RELEASE and [s.name for s in load_catalog()] == [p.stem for p in catalog_paths()]
    for v in VERSIONS:
        assert len(catalog_paths(v)) == len(CATALOGS[v])
        assert {p.stem for p in catalog_paths(v)} == set(CATALOGS[v])  # a file is named after its scenario


def test_an_unknown_version_is_one_line():
    from fencecheck.errors import InputError

    with pytest.raises(InputError, match="expected one of pr-35059, sglang-0.5.23, got 'sglang-9'"):
        load_catalog("sglang-9")


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


#: A release cite: ``path:function:lines: role: fact``, the path relative to the wheel's ``sglang/`` package.
RELEASE_CITE = re.compile(r"^((?:srt|kernels)/[\w/]+\.py):([\w.]+):(\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*): "
                          r"(declaration|read|publish|barrier|publisher|step|condition): \S")


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_release_scenario_cites_the_release_by_file_function_and_line(name):
    """Every release fact names the file, the enclosing function and the lines, with its role in the fence
    (declaration, read, publish, barrier, publisher, step, condition); each scenario cites its barrier and, unless
    its loop never applies one, where it publishes."""
    s = RELEASED[name]
    assert s.cites and s.expect is not None and s.description
    roles = set()
    for cite in s.cites:
        m = RELEASE_CITE.match(cite)
        assert m, cite
        roles.add(m.group(4))
    assert {"barrier", "read", "publisher"} <= roles, (name, roles)
    assert s.resolution is ResolutionRule.DECLARATION_ONLY_POST_FALLBACK
    assert all(r.fresh_events for r in s.runners.values())


def _spans(path: Path) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}

    def walk(node, prefix):
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = prefix + ch.name
                out.setdefault(q, []).append((ch.lineno - len(ch.decorator_list), ch.end_lineno))
                walk(ch, q + ".")
            else:
                walk(ch, prefix)

    walk(ast.parse(path.read_text(encoding="utf-8")), "")
    return out


@pytest.mark.slow  # over 2 s
def test_every_release_cite_lies_inside_the_function_it_names(release_root):
    bad, parsed = [], {}
    for s in RELEASED.values():
        for cite in s.cites:
            path, func, lines = RELEASE_CITE.match(cite).groups()[:3]
            if path not in parsed:  # each file parsed once (large files are cited many times)
                parsed[path] = _spans(release_root / path)
            spans = parsed[path].get(func, [])
            for part in lines.split(","):
                a, _, b = part.partition("-")
                if not any(lo <= int(a) and int(b or a) <= hi for lo, hi in spans):
                    bad.append(f"{s.name}: {cite}")
    assert not bad, "\n".join(bad)


#: What a release race scenario's description must say for the audit: the condition, the default, the fix.
RACE_PARTS = ("Runtime condition: ", "Default configuration: ", "Fix: ")


@pytest.mark.parametrize("name", sorted(n for n, s in RELEASED.items() if s.expect.verdict is Verdict.COUNTEREXAMPLE))
def test_release_races_name_their_condition_default_and_fix(name):
    text = RELEASED[name].description
    assert [text.count(p) for p in RACE_PARTS] == [1, 1, 1], name
    assert text.index(RACE_PARTS[0]) < text.index(RACE_PARTS[1]) < text.index(RACE_PARTS[2])


def _params(version: str, names):
    return [pytest.param(version, n, id=f"{version}/{n}") for n in sorted(names)]


@pytest.mark.parametrize("version, name", [p for v in VERSIONS for p in _params(v, CATALOGS[v])])
def test_verdict_and_specific_races(version, name):
    s = CATALOGS[version][name]
    report = check_scenario(s)
    assert report.verdict is s.expect.verdict
    expected = {e.place() for e in s.expect.races}
    assert {r.key() for r in report.races} == expected
    # Each expected race happens in every step that runs its phase: structural, not a start-up artefact.
    for key in expected:
        runs_phase = {n for n in range(1, s.steps + 1) if key.phase in {p.name for p in s.algorithm.steps[s.step_kind(n)]}}
        assert {r.step for r in report.races if r.key() == key} == runs_phase



@pytest.mark.slow
def test_the_model_and_the_simulator_decide_the_release_alike():
    """Both oracles on every release configuration, race for race (the expectation is the other test's)."""
    from fencecheck.model.check import model_check

    differ = []
    for name, s in sorted(RELEASED.items()):
        m, r = model_check(s), check_scenario(s)
        if m.verdict is not r.verdict or set(m.races) != {x.id for x in r.races}:
            differ.append(name)
    assert differ == []


def test_the_two_hazards_sglang_documents():
    no_marker = check_scenario(SCENARIOS["restored-graph-no-marker"])
    (race,) = no_marker.distinct()
    assert (race.site, race.read_graph != "") == ("in_graph_before_marker", True)
    assert "ring0" in race.via  # the barrier waited on the pre-replay ring event
    ngram = check_scenario(SCENARIOS["ngram-no-clear"])
    (race,) = ngram.distinct()
    assert race.site == "worker_after" and "target.marker" in race.via
    assert check_scenario(SCENARIOS["ngram"]).safe


def test_the_releases_possible_races_wait_on_the_marker_they_outlive():
    """Each race the release's code may have (docs/sglang-0.5.23.md#10-possible-races-in-the-shipping-code) is a read after the event the barrier
    waited on: the target's marker (QSA, MiniMax, DSpark, mamba) or the tree draft's marker (UNO tree, eager verify)."""
    for name in ("race-qsa-sparse-decode", "race-minimax-sparse-decode", "race-dspark-commit-in-graph",
                 "race-dspark-commit-after-verify", "race-mamba-commit-after-verify"):
        races = check_scenario(RELEASED[name]).distinct()
        assert races and all("target.marker" in r.via for r in races), name
    uno = check_scenario(RELEASED["race-uno-tree-eager-verify"]).distinct()
    assert uno and all("tree_draft.marker" in r.via for r in uno)
    # the DSpark race needs DSpark's IN_REPLAY: the same configuration under any other algorithm is POST_REPLAY, safe
    dspark = RELEASED["race-dspark-commit-in-graph"]
    assert check_scenario(dspark.replace(settings={"spec_algorithm": "eagle"})).safe
    # forcing the coarse barrier is the mitigation for each read-after-marker race
    import dataclasses

    for name in ("race-qsa-sparse-decode", "race-dspark-commit-in-graph", "race-mamba-commit-after-verify"):
        s = RELEASED[name]
        assert check_scenario(s.replace(scheduler=dataclasses.replace(s.scheduler, force_coarse=True))).safe, name


def _witnessable(version: str, verdict: Verdict):
    return [p for p in _params(version, [n for n, s in CATALOGS[version].items() if s.expect.verdict is verdict])
            if not p.marks]


@pytest.mark.parametrize("version, name", [p for v in VERSIONS for p in _witnessable(v, Verdict.COUNTEREXAMPLE)])
def test_every_race_shows_as_a_stale_read_under_its_witness(version, name):
    hb = analyze(run_scenario(CATALOGS[version][name]))
    races = find_races(hb)
    assert races
    assert not stale_reads(hb, host_order(hb))  # the device keeping up with the host hides every race
    for race in races:
        stale = stale_reads(hb, witness_schedule(hb, race))
        hit = [o for o in stale if hb.kernels[o.kernel].host == race.read_op and o.key() == race.key()]
        assert hit and hit[0].seen == race.step + 1


@pytest.mark.parametrize("version, name", [p for v in VERSIONS for p in _witnessable(v, Verdict.PROVED)])
def test_safe_scenarios_never_show_a_stale_read(version, name):
    hb = analyze(run_scenario(CATALOGS[version][name]))
    rng = random.Random(name)
    for _ in range(50):
        assert not stale_reads(hb, random_schedule(hb, rng))


#: The catalogs' dishonest declarations: (version, scenario, phase, backend, declared, site). Each is a backend that
#: reads after its marker while declaring IN_REPLAY; the fence still holds under force-coarse (the coarse wait covers
#: it), without a marker (POST_REPLAY fallback), on eager paths (no publish) and in the loops that never apply it.
DISHONEST = {
    (PR_ERA, "breakable-graph-in-replay", "verify", "segmented", "IN_REPLAY", "in_graph_after_marker"),
    (PR_ERA, "force-coarse", "decode", "flashinfer", "IN_REPLAY", "in_graph_after_marker"),
    (RELEASE, "race-qsa-sparse-decode", "decode", "attn", "IN_REPLAY", "in_graph_after_marker"),
    (RELEASE, "race-minimax-sparse-decode", "decode", "minimax_sparse", "IN_REPLAY", "in_graph_after_marker"),
    (RELEASE, "force-coarse-qsa", "decode", "attn", "IN_REPLAY", "in_graph_after_marker"),
    (RELEASE, "loop-normal", "decode", "attn", "IN_REPLAY", "in_graph_after_marker"),
    (RELEASE, "loop-pp", "decode", "attn", "IN_REPLAY", "in_graph_after_marker"),
    (RELEASE, "deepseek-v4-dspark-breakable-verify", "verify", "dsv4", "IN_REPLAY", "in_graph_after_marker"),
    (RELEASE, "decode-hip-barrier-off", "decode", "attn", "IN_REPLAY", "in_graph_after_marker"),
    (RELEASE, "decode-hip-barrier-forced", "decode", "attn", "IN_REPLAY", "in_graph_after_marker"),
    (RELEASE, "decode-eager", "decode", "attn", "IN_REPLAY", "in_graph_after_marker"),
}


def test_the_catalogs_dishonest_declarations():
    from fencecheck.reference.honesty import honesty_findings

    found = {(v, name, f.phase, f.backend, f.declared, f.site) for v, name in ALL
             for f in honesty_findings(CATALOGS[v][name])}
    assert found == DISHONEST
    # a dishonest declaration is a finding, not a race: force-coarse stays proved
    assert check_scenario(SCENARIOS["force-coarse"]).verdict is Verdict.PROVED
    assert check_scenario(RELEASED["force-coarse-qsa"]).verdict is Verdict.PROVED


def test_release_runners_publish_as_the_release_does():
    """The draft-extend runner clears and resolves, the prefill paths publish by the prefill rule, draft graph runners
    never publish: no release scenario uses the PR era's always-publish policy or a mailbox clear by the worker."""
    for s in RELEASED.values():
        assert all(r.publish is not PublishPolicy.ALWAYS_PRE_REPLAY for r in s.runners.values()), s.name
        assert not any(p.clear_mailbox_after or p.consume_mailbox_before
                       for phases in s.algorithm.steps.values() for p in phases), s.name
