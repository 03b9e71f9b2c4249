"""The CPU side of gpu/: delays, observations, manifestation counts, and the CUDA device's plumbing on a CPU
stand-in for torch.cuda (no GPU needed; the GPU run is gpu/check.sh)."""

from __future__ import annotations

import io

import pytest

import fake_torch
from fencecheck.cli import main
from fencecheck.gpu.device import CudaDevice
from fencecheck.gpu.plan import DelayPolicy, TraceOnGpu
from fencecheck.reference.sim.interleave import Observation
from fencecheck.gpu.replay import locations, select
from fencecheck.model.traces import generate
from fencecheck.corpus_io import CorpusRecord
from fencecheck.reference.run import drive, run_scenario


def _record(s):
    mt = generate(s)
    return CorpusRecord(f"catalog/{s.name}", "catalog", 1, s, mt.trace, mt.verdict, mt.races, mt.witness)


def test_delay_policy_follows_the_witness_or_delays_everything(catalog):
    race = _record(catalog["ngram-no-clear"])
    p = DelayPolicy.for_record(race.races, race.witness)
    assert p.delays("verify", "worker_after", "req_to_token") and not p.delays("verify", "pre_replay", "req_to_token")
    safe = _record(catalog["eagle-v2"])
    assert DelayPolicy.for_record(safe.races, safe.witness).delays("draft", "pre_replay", "x")


def test_manifestation_counting():
    want = frozenset({("x", "p", "s", 1)})
    res = TraceOnGpu("t", want)
    for i in range(100):
        res.add([Observation(0, 1, "p", "s", "x", 2 if i else 1)], True)
    assert res.rate == 0.99 and res.ok
    res.add([Observation(0, 1, "p", "s", "x", 1)], True)
    assert not res.ok  # 99/101 < 99%
    safe = TraceOnGpu("u", frozenset())
    safe.add([Observation(0, 1, "p", "s", "x", 1)], True)
    assert safe.ok
    safe.add([Observation(0, 1, "q", "s", "x", 2)], True)
    assert not safe.ok and safe.unexpected == 1


@pytest.mark.parametrize("name", ["plain-decode", "eagle-v2", "deepseek-v4-verify", "ngram-no-clear", "uno-linear",
                                  "plan-stream-unjoined", "dspark"])
def test_cuda_device_issues_the_reference_trace_and_maps_every_read(catalog, name):
    s = catalog[name]
    dev = CudaDevice(locations(_record(s)), DelayPolicy(all_reads=True), torch=fake_torch)
    steps = drive(dev, s, s.steps)
    assert dev.trace(s.name, steps, {"resolution": s.resolution.value}) == run_scenario(s)
    obs = dev.observations()
    reads = run_scenario(s)
    from fencecheck.reference.sim.hb import analyze

    kernels = [k for k in analyze(reads).kernels if not k.is_write]
    assert [(o.step, o.phase, o.site, o.location) for o in obs] == [(k.step, k.phase, k.site, k.location) for k in kernels]
    # Host order runs every kernel at once: each read sees its own step's stamp, never a stale one.
    assert all(o.seen == o.step for o in obs)


def test_selection_keeps_the_catalog_and_is_deterministic(catalog):
    recs = [_record(s) for s in catalog.values()]
    assert select(recs, 5, 0) == select(recs, 5, 0)
    assert len(select(recs, 5, 0)) == len(recs)


def test_replay_on_cuda_without_a_gpu_is_one_line(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    (tmp_path / "corpus.jsonl").write_text("")
    err = io.StringIO()
    assert main(["replay", str(tmp_path), "--device", "cuda"], io.StringIO(), err) == 2
    assert err.getvalue().count("\n") == 1 and "no CUDA device" in err.getvalue()
