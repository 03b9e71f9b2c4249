"""Which races of the release catalog the reader finds on the release's own sources, and which not yet.

The catalog's races are ``fencecheck/catalog/sglang-0.5.23/race-*``. A race of a backend's or a worker's reads is one of the reader's findings; a race of the configuration itself (an
eager phase after another phase's publish, a deferred barrier) shows in the configurations the release's facts
generate, decided here with an honest backend (the base rule, reading at every site its declaration covers). The
post-verify mamba commit is a finding of NGRAM's worker: its commit reads the row map through the pool's
``get_mamba_indices`` (``pool_reads``)."""

from __future__ import annotations

import pytest

from fencecheck.vocab import COVERED_SITES, ForwardMode, base_shared_read_ends

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("release_root")]

#: Catalog race -> the finding that is it: (kind, subject, mode, a condition text it carries or None).
AS_FINDINGS = {
    "race-minimax-sparse-decode": ("read_outside_declaration", "MiniMaxSparseAttnBackend", "DECODE", None),
    "race-qsa-sparse-decode": ("read_outside_declaration", "QwenSparseAttnBackend", "DECODE", None),
    # the verify epilogue's commit, read in the capture tail hook (before the reader followed hooks, a DeepSeek-V4
    # finding under its is_dspark() row stood in for it, whose reads are the SWA store's, judged false)
    "race-dspark-commit-in-graph": ("worker_read_after_publish", "DSparkWorkerV2", "TARGET_VERIFY", "self.folds_commit"),
    "race-dspark-commit-after-verify": ("worker_read_after_publish", "DSparkWorkerV2", "TARGET_VERIFY", None),
    "race-mamba-commit-after-verify": ("worker_read_after_publish", "NGRAMWorker", "TARGET_VERIFY",
                                       "replayssm"),
}
#: Catalog race -> the stem of the generated configurations that race with an honest backend.
AS_CONFIGURATIONS = {
    "race-uno-tree-eager-verify": "uno-cuda-overlap",
    "race-disagg-prefill-claim-fails": "no-speculation-prefill-cuda-disagg-prefill",
}
NOT_FOUND: set[str] = set()


@pytest.fixture(scope="module")
def decided(release_extraction):
    from fencecheck.decision.findings import decide
    from fencecheck.decision.platform import demote_platform_bound
    from fencecheck.decision.replay import demote_never_replayed
    from fencecheck.decision.workers import decide_worker_reads

    ex, _ = demote_platform_bound(demote_never_replayed(release_extraction)[0])
    ex, _ = decide(ex, contexts=False)
    return decide_worker_reads(ex)[0]


def test_every_catalog_race_is_accounted_for():
    from fencecheck.files.catalog import RELEASE, load_catalog

    races = {s.name for s in load_catalog(RELEASE) if s.name.startswith("race-")}
    assert races == set(AS_FINDINGS) | set(AS_CONFIGURATIONS) | NOT_FOUND


@pytest.mark.parametrize("race", sorted(AS_FINDINGS))
def test_a_catalog_race_of_reads_is_a_finding(decided, race):
    kind, subject, mode, condition = AS_FINDINGS[race]
    hits = [f for f in decided.findings if (f.kind, f.subject, f.mode) == (kind, subject, mode)
            and (condition is None or condition in (f.condition or ""))]
    assert hits, race
    assert all(f.status in ("confirmed", "plausible") and f.decision and f.decision.verdict == "counterexample"
               for f in hits), race


def _honest(ctx: dict) -> dict:
    modes = {ph["mode"] for v in ctx["algorithm"]["steps"].values() for ph in v}
    ends = {m: base_shared_read_ends(ForwardMode[m]) for m in modes}
    reads = {m: {s.value: ["req_to_token"] for s in COVERED_SITES[e] if s.value != "worker_after"}
             for m, e in ends.items()}
    return {**ctx, "backends": {"attn": {"declares": {m: e.name for m, e in ends.items()}, "reads": reads}}}


@pytest.mark.parametrize("race", sorted(AS_CONFIGURATIONS))
def test_a_catalog_race_of_the_configuration_races_with_an_honest_backend(release_extraction, race):
    from fencecheck.decision.findings import generated_contexts
    from fencecheck.files.scenario_io import scenario_from_dict
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace

    stem = AS_CONFIGURATIONS[race]
    contexts = [(n, c) for n, c in generated_contexts(release_extraction) if n.rsplit("-", 1)[0] == stem]
    assert contexts, stem
    verdicts = {n: check_trace(run_scenario(scenario_from_dict(_honest(c), n, validate=False))).verdict.value
                for n, c in contexts}
    assert "counterexample" in verdicts.values(), verdicts
