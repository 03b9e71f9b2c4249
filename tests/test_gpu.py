"""GPU tests: they skip only when no CUDA device exists (CPU tests never skip for lack of one)."""

from __future__ import annotations

import io
import json

import pytest
from eager_scenarios import EAGER_DECODE, EAGER_DECODE_UNFENCED

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]


def _record(s):
    from fencecheck.files.corpus_io import CorpusRecord
    from fencecheck.model.traces import generate

    mt = generate(s)
    return CorpusRecord(f"catalog/{s.name}", "catalog", 1, s, mt.trace, mt.verdict, mt.races, mt.witness)


def test_this_torch_has_what_the_cuda_device_needs():
    from fencecheck.gpu.device import missing_features

    assert missing_features(torch) == ""


def test_litmus_rules_hold_on_the_gpu():
    from fencecheck.gpu.litmus import tests

    results = tests(torch, trials=100)
    bad = [x.text() for x in results if not x.ok]
    assert not bad


def test_catalog_races_manifest_and_safe_scenarios_do_not(catalog):
    from fencecheck.gpu.replay import replay_on_gpu

    for s in catalog.values():
        rec = _record(s)
        res = replay_on_gpu(rec, 50 if rec.races else 10)
        assert res.ok, (s.name, res.problem, res.rate, sorted(k.text() for k in res.stale_keys))


def test_a_marker_without_external_is_refused_by_cuda(catalog, monkeypatch):
    import fencecheck.gpu.device as device
    from fencecheck.gpu.replay import replay_on_gpu

    class MarkerWithoutExternal(device.CudaDevice):
        def event(self, name, external=False):
            eid = self.rec.event(name, external)
            self.events[name] = self.torch.cuda.Event()
            return eid

    monkeypatch.setattr(device, "CudaDevice", MarkerWithoutExternal)
    res = replay_on_gpu(_record(catalog["plain-decode"]), 1)
    assert res.errors == 1 and not res.ok, res.problem


@pytest.mark.parametrize("text", [EAGER_DECODE, EAGER_DECODE_UNFENCED], ids=["race-free", "race"])
def test_the_sanitizer_alongside_agrees_and_leaves_no_callbacks_behind(text):
    """The catalog's traces all replay graphs, which the sanitizer does not follow: it is checked on these two."""
    if torch.__version__ == "stand-in":
        pytest.skip("the CPU stand-in runs no kernels for PyTorch's sanitizer to watch")
    import torch.cuda._sanitizer as csan

    from fencecheck.gpu.replay import sanitizer_alongside
    from fencecheck.files.scenario_io import loads

    rec = _record(loads(text))
    assert bool(rec.races) == (text is EAGER_DECODE_UNFENCED)
    registries = [r for r in vars(csan.gpu_trace).values() if hasattr(r, "callback_list")]
    before = [len(r.callback_list) for r in registries]
    said = sanitizer_alongside(rec)
    assert said.startswith("agree: ") and ("saw nothing" in said) == (not rec.races), said
    assert [len(r.callback_list) for r in registries] == before


@pytest.mark.parametrize("text", [EAGER_DECODE, EAGER_DECODE_UNFENCED], ids=["race-free", "race"])
def test_eager_decoding_races_only_without_the_barrier(text):
    from fencecheck.gpu.replay import replay_on_gpu
    from fencecheck.files.scenario_io import loads

    rec = _record(loads(text))
    res = replay_on_gpu(rec, 50 if rec.races else 10)
    assert res.ok, (res.problem, res.rate, sorted(k.text() for k in res.stale_keys))
    assert (res.rate >= 0.99) if rec.races else not res.stale_keys


def test_cuda_replay_of_two_catalog_traces_agrees(catalog):
    from fencecheck.gpu.replay import run_cuda_replay

    out = io.StringIO()
    recs = [_record(catalog["plain-decode"]), _record(catalog["ngram-no-clear"])]
    assert run_cuda_replay(recs, 0, out, True, race_replays=20, safe_replays=5) == 0, out.getvalue()
    assert json.loads(out.getvalue())["conformant"] == 2
