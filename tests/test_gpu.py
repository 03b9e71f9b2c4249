"""GPU tests: they skip only when no CUDA device exists (CPU tests never skip for lack of one)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]


def test_litmus_rules_hold_on_the_gpu():
    from fencecheck.gpu.litmus import tests

    results = tests(torch, trials=100)
    bad = [(x.rule, x.name, x.stale, x.trials, x.error) for x in results if not x.ok]
    assert not bad


def test_catalog_races_manifest_and_safe_scenarios_do_not(catalog):
    from fencecheck.corpus_io import CorpusRecord
    from fencecheck.gpu.replay import replay_on_gpu
    from fencecheck.model.traces import generate

    for s in catalog.values():
        mt = generate(s)
        rec = CorpusRecord(f"catalog/{s.name}", "catalog", 1, s, mt.trace, mt.verdict, mt.races, mt.witness)
        res = replay_on_gpu(rec, 50 if mt.races else 10)
        assert res.conformant == res.replays, s.name
        if mt.races:
            assert res.rate >= 0.99, (s.name, res.rate)
        else:
            assert not res.stale_keys, (s.name, res.stale_keys)
