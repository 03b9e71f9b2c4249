"""The CPU side of gpu/: delays, judging observations, manifestation counts, the CUDA device on a CPU stand-in.

The stand-in for torch.cuda (tests/fake_torch.py) enforces the CUDA semantics the GPU checks rely on. Each fault
a device could have (a marker without external=True, a wait that does nothing, a kernel on the wrong stream,
buffers used before their initialization is ordered) is applied here and must be caught."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess

import pytest
from corpus_samples import one_record_corpus
from eager_scenarios import EAGER_DECODE

import fake_torch
from fencecheck.commands.main import main
from fencecheck.files.corpus_io import CorpusRecord
from fencecheck.gpu.device import CudaDevice, missing_features
from fencecheck.gpu.litmus import tests as litmus_tests
from fencecheck.gpu.observe import INITIAL, UNSET, Expected, judge
from fencecheck.gpu.plan import DelayPolicy, TraceOnGpu
from fencecheck.gpu.replay import locations, replay_on_gpu, run_cuda_replay, select
from fencecheck.model.traces import generate
from fencecheck.reference.run import drive, run_scenario
from fencecheck.reference.sim.hb import analyze
from fencecheck.reference.sim.interleave import Observation, execute, host_order
from fencecheck.verdict import RaceId
from fencecheck.files.scenario_io import loads

CATALOG_SAMPLE = ["plain-decode", "eagle-v2", "deepseek-v4-verify", "ngram-no-clear", "uno-linear",
                  "plan-stream-unjoined", "dspark", "restored-graph-no-marker", "barrier-disabled"]


def _record(s):
    mt = generate(s)
    return CorpusRecord(f"catalog/{s.name}", "catalog", 1, s, mt.trace, mt.verdict, mt.races, mt.witness)


@pytest.fixture(scope="module")
def records(catalog):
    return {name: _record(s) for name, s in catalog.items()}


# -- delays and counting ------------------------------------------------------------------------------------------


def test_delay_policy_follows_the_witness_or_delays_everything(records):
    race = records["ngram-no-clear"]
    p = DelayPolicy.for_record(race.races, race.witness)
    assert p.delays("verify", "worker_after", "req_to_token") and not p.delays("verify", "pre_replay", "req_to_token")
    safe = records["eagle-v2"]
    assert DelayPolicy.for_record(safe.races, safe.witness).delays("draft", "pre_replay", "x")


def _judged(stale: set):
    from fencecheck.gpu.observe import Judgement

    return Judgement("", 0, frozenset(stale))


def test_manifestation_counting():
    race = RaceId("x", "p", "s", 1)
    res = TraceOnGpu("t", frozenset({race}))
    for i in range(100):
        res.add(_judged({race} if i else set()))
    assert res.rate == 0.99 and res.ok
    res.add(_judged(set()))
    assert not res.ok  # 99/101 < 99%
    safe = TraceOnGpu("u", frozenset())
    safe.add(_judged(set()))
    assert safe.ok
    safe.add(_judged({RaceId("x", "q", "s", 1)}))
    assert not safe.ok and safe.unexpected == 1


def test_a_replay_that_does_not_fit_the_trace_or_is_refused_fails_the_trace():
    from fencecheck.gpu.observe import Judgement

    res = TraceOnGpu("t", frozenset())
    res.add(Judgement("read 0: ...", 1, frozenset()))
    assert not res.ok and res.problem == "read 0: ..."
    refused = TraceOnGpu("u", frozenset())
    refused.refused("RuntimeError: CUDA error")
    assert not refused.ok and refused.errors == 1


# -- judging observations against the trace -----------------------------------------------------------------------


def _host_observations(trace):
    hb = analyze(trace)
    return [Observation(i, o.step, o.phase, o.site, o.location, o.seen)
            for i, o in enumerate(execute(hb, host_order(hb)))]


def test_observations_of_an_allowed_execution_fit_the_trace(catalog):
    trace = run_scenario(catalog["plain-decode"])
    obs = _host_observations(trace)
    j = judge(Expected.of(trace), obs)
    assert j.ok and not j.stale


def test_a_stamp_happens_before_forbids_is_caught(catalog):
    trace = run_scenario(catalog["plain-decode"])
    obs = _host_observations(trace)
    exp = Expected.of(trace)
    assert exp.allowed[0] == frozenset({1})  # step 1's first read is ordered after step 1's write and before step 2's
    wrong = [dataclasses.replace(obs[0], seen=INITIAL)] + obs[1:]  # a missed write (the read ran too early)
    j = judge(exp, wrong)
    assert not j.ok and j.impossible == 1 and "saw 0, allowed [1]" in j.problem
    late = [dataclasses.replace(obs[0], seen=2)] + obs[1:]  # overtaken by a write ordered after it
    j = judge(exp, late)
    assert not j.ok and RaceId("req_to_token", "decode", "pre_replay", 1) in j.stale


def test_a_read_that_never_ran_or_is_missing_is_caught(catalog):
    trace = run_scenario(catalog["plain-decode"])
    obs = _host_observations(trace)
    exp = Expected.of(trace)
    j = judge(exp, obs[:-1])
    assert not j.ok and "<no more observations>" in j.problem
    j = judge(exp, [dataclasses.replace(obs[0], seen=UNSET)] + obs[1:])
    assert not j.ok and "never ran" in j.problem


def test_a_racy_read_may_see_the_overtaking_write(records):
    rec = records["ngram-no-clear"]
    exp = Expected.of(rec.trace)
    w = rec.witness["race"]
    i = exp.reads.index((w["step"], w["phase"], w["site"], w["location"]))
    assert w["step"] + 1 in exp.allowed[i]


# -- the stand-in enforces CUDA's rules ---------------------------------------------------------------------------


def test_stand_in_work_waits_for_the_snapshot_it_was_bound_to():
    t = fake_torch.new()
    s, f = t.cuda.Stream(), t.cuda.Stream()
    x, out = t.zeros(1), t.zeros(2)
    t.cuda.synchronize()
    e = t.cuda.Event()
    with t.cuda.stream(f):
        out[0:1].copy_(x)
    e.record(f)  # R1
    with t.cuda.stream(f):
        out[1:2].copy_(x)
    s.wait_event(e)  # R2, R3
    with t.cuda.stream(s):
        x.fill_(7)
    t.cuda.synchronize()
    assert out.tolist() == [0, 7]  # ordered before the write; overtaken by it


def test_stand_in_wait_on_a_never_recorded_event_is_a_no_op():
    t = fake_torch.new()
    s, f = t.cuda.Stream(), t.cuda.Stream()
    x, out = t.zeros(1), t.zeros(1)
    t.cuda.synchronize()
    with t.cuda.stream(f):
        out.copy_(x)
    s.wait_event(t.cuda.Event())  # R2
    with t.cuda.stream(s):
        x.fill_(7)
    t.cuda.synchronize()
    assert out.tolist() == [7]


def test_stand_in_refuses_a_wait_on_an_event_recorded_with_default_flags_during_capture():
    t = fake_torch.new()
    s, f = t.cuda.Stream(), t.cuda.Stream()
    internal, external = t.cuda.Event(), t.cuda.Event(external=True)
    g = t.cuda.CUDAGraph()
    with t.cuda.graph(g, stream=f):
        internal.record(f)  # R4: an internal edge
        external.record(f)  # R4: an event-record node
    with t.cuda.stream(f):
        g.replay()
    s.wait_event(external)
    with pytest.raises(RuntimeError, match="last recorded in a capturing stream"):
        s.wait_event(internal)


def test_stand_in_does_not_order_user_streams_after_the_default_stream():
    t = fake_torch.new()
    s = t.cuda.Stream()
    x = t.zeros(1)  # its zero fill is queued on the default stream
    with t.cuda.stream(s):
        x.fill_(5)
    t.cuda.synchronize()
    assert x.tolist() == [0]  # the fill issued first ran last: nothing orders s after it


def test_stand_in_refuses_to_synchronize_during_capture():
    t = fake_torch.new()
    with pytest.raises(RuntimeError, match="capturing"):
        with t.cuda.graph(t.cuda.CUDAGraph(), stream=t.cuda.Stream()):
            t.cuda.synchronize()


def test_litmus_rules_hold_on_the_stand_in():
    bad = [lit.text() for lit in litmus_tests(fake_torch.new(), trials=5) if not lit.ok]
    assert not bad


def test_litmus_tests_fail_on_a_device_without_reordering_or_without_waits(monkeypatch):
    # In issue order no window ever opens: every "mostly stale" expectation fails.
    failed = {lit.rule for lit in litmus_tests(fake_torch.new(order="host"), trials=3) if not lit.ok}
    assert failed == {"R1", "R2", "R3", "R5", "R7", "R8"}
    monkeypatch.setattr(fake_torch.Stream, "wait_event", lambda self, event: None)
    failed = {lit.rule for lit in litmus_tests(fake_torch.new(), trials=3) if not lit.ok}
    assert {"R1", "R2", "R4", "R5", "R7"} <= failed  # "never stale" reads go stale; R4's wait is not refused


# -- the CUDA device on the stand-in -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CATALOG_SAMPLE)
def test_cuda_device_issues_the_reference_trace_and_maps_every_read(catalog, name):
    s = catalog[name]
    dev = CudaDevice(locations(_record(s)), DelayPolicy(all_reads=True), torch=fake_torch.new(order="host"))
    steps = drive(dev, s, s.steps)
    assert dev.trace(s.name, steps, {"resolution": s.resolution.value}) == run_scenario(s)
    obs = dev.observations()
    kernels = [k for k in analyze(run_scenario(s)).kernels if not k.is_write]
    assert [(o.step, o.phase, o.site, o.location) for o in obs] == [(k.step, k.phase, k.site, k.location) for k in kernels]
    # In issue order each read sees its own step's stamp, never a stale one.
    assert all(o.seen == o.step for o in obs)


def test_every_catalog_race_manifests_and_no_race_free_trace_shows_a_stale_read(records):
    for name, rec in records.items():
        res = replay_on_gpu(rec, 2, fake_torch.new())
        assert res.ok, (name, res)
        assert res.conformant == 2
        assert (res.rate == 1.0) if rec.races else not res.stale_keys, name


@pytest.mark.parametrize("seed", range(3))
def test_random_device_orders_fit_every_catalog_trace(records, seed):
    for name, rec in records.items():
        res = replay_on_gpu(rec, 1, fake_torch.new(order="random", seed=seed))
        assert res.conformant == 1 and not res.unexpected and not res.errors, (name, res.problem)


class _MarkerWithoutExternal(CudaDevice):
    def event(self, name, external=False):
        eid = self.rec.event(name, external)
        self.events[name] = self.torch.cuda.Event()
        return eid


class _WaitDoesNothing(CudaDevice):
    def wait_event(self, stream, event, *, by=""):
        self.rec.wait_event(stream, event, by=by)


class _WaitStreamDoesNothing(CudaDevice):
    def wait_stream(self, stream, other, *, by=""):
        self.rec.wait_stream(stream, other, by=by)


def _on_wrong_stream(op: str, wrong: str):
    """A device that issues ``op`` kernels on stream ``wrong`` while recording the right one."""

    class Wrong(CudaDevice):
        pass

    def issue(self, stream, location, **kw):
        real = self.streams[stream]
        self.streams[stream] = self.streams.get(wrong) or self.torch.cuda.current_stream()
        try:
            getattr(CudaDevice, op)(self, stream, location, **kw)
        finally:
            self.streams[stream] = real

    setattr(Wrong, op, issue)
    return Wrong


class _AllocNotOrdered(CudaDevice):
    def _alloc(self, n, value):
        t = self.torch.zeros(n, dtype=self.torch.int64, device="cuda")
        if value:
            t.fill_(value)
        return t


FAULTS = {
    "marker created without external=True": (_MarkerWithoutExternal, "last recorded in a capturing stream"),
    "wait_event does nothing": (_WaitDoesNothing, "happens-before forbids"),
    "wait_stream does nothing": (_WaitStreamDoesNothing, "happens-before forbids"),
    "reads on the scheduler's stream": (_on_wrong_stream("read", "S"), "happens-before forbids"),
    "reads on the forward stream": (_on_wrong_stream("read", "F"), ""),
    "reads on the default stream": (_on_wrong_stream("read", "<default>"), "happens-before forbids"),
    "writes on the forward stream": (_on_wrong_stream("write", "F"), ""),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_each_device_fault_fails_a_catalog_trace(records, monkeypatch, fault):
    import fencecheck.gpu.device as device

    faulty, says = FAULTS[fault]
    monkeypatch.setattr(device, "CudaDevice", faulty)
    failed = {}
    for name in CATALOG_SAMPLE:
        res = replay_on_gpu(records[name], 1, fake_torch.new())
        if not res.ok:
            failed[name] = res.problem or f"manifestation rate {res.rate}"
    assert failed, fault
    assert any(says in p for p in failed.values()), failed


def test_buffers_used_before_their_initialization_is_ordered_are_caught(monkeypatch):
    import fencecheck.gpu.device as device

    rec = _record(loads(EAGER_DECODE))
    assert replay_on_gpu(rec, 1, fake_torch.new()).ok
    monkeypatch.setattr(device, "CudaDevice", _AllocNotOrdered)
    res = replay_on_gpu(rec, 1, fake_torch.new())
    assert not res.ok and "happens-before forbids" in res.problem


# -- the replay command ---------------------------------------------------------------------------------------------


def test_run_cuda_replay_reports_agreement_and_exit_0(records):
    out = io.StringIO()
    chosen = [records[n] for n in ("plain-decode", "ngram-no-clear")]
    assert run_cuda_replay(chosen, 0, out, True, torch=fake_torch.new(), race_replays=2, safe_replays=2,
                           sanitizer=False) == 0
    report = json.loads(out.getvalue())
    assert report["traces"] == 2 and report["conformant"] == 2 and report["races_manifesting_99"] == 1
    assert report["failures"] == [] and report["ok"]


def test_run_cuda_replay_names_the_disagreement_and_exits_1(records, monkeypatch):
    import fencecheck.gpu.device as device

    monkeypatch.setattr(device, "CudaDevice", _WaitDoesNothing)
    out = io.StringIO()
    assert run_cuda_replay([records["plain-decode"]], 0, out, False, torch=fake_torch.new(), safe_replays=1,
                           sanitizer=False) == 1
    text = out.getvalue()
    assert "DISAGREEMENT catalog/plain-decode: " in text and "happens-before forbids" in text


def test_run_cuda_replay_reports_progress_after_each_trace(records):
    seen = []
    chosen = [records[n] for n in ("plain-decode", "ngram-no-clear", "eagle-v2")]
    run_cuda_replay(chosen, 0, io.StringIO(), False, torch=fake_torch.new(), race_replays=1, safe_replays=1,
                    sanitizer=False, progress=seen.append)
    assert [(r["traces"], r["complete"]) for r in seen] == [(1, False), (2, False), (3, False), (3, True)]


def test_the_replay_module_without_a_gpu_says_so_in_one_line(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    from fencecheck.gpu.replay import main as replay_main

    one_record_corpus(tmp_path)
    assert replay_main([str(tmp_path), "--json", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no CUDA device" in err
    assert not (tmp_path / "r.json").exists()


def test_selection_keeps_the_catalog_and_is_deterministic(records):
    recs = list(records.values())
    assert select(recs, 5, 0) == select(recs, 5, 0)
    assert len(select(recs, 5, 0)) == len(recs)


def test_a_torch_without_external_events_is_named():
    t = fake_torch.new()
    t.cuda.Event = lambda enable_timing=False, blocking=False, interprocess=False: None
    assert "torch >= 2.8" in missing_features(t)
    assert missing_features(fake_torch.new()) == ""


def test_replay_on_cuda_without_a_gpu_is_one_line(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    one_record_corpus(tmp_path)
    err = io.StringIO()
    assert main(["replay", str(tmp_path), "--device", "cuda"], io.StringIO(), err) == 2
    assert err.getvalue().count("\n") == 1 and "no CUDA device" in err.getvalue()


def test_the_sanitizer_mode_removes_its_callbacks():
    pytest.importorskip("torch")
    import torch.cuda._sanitizer as csan

    from fencecheck.gpu.replay import sanitizer_mode

    registries = [r for r in vars(csan.gpu_trace).values() if hasattr(r, "callback_list")]
    assert registries
    before = [list(r.callback_list) for r in registries]
    with sanitizer_mode(csan):
        assert all(len(r.callback_list) == len(b) + 1 for r, b in zip(registries, before))
    assert [r.callback_list for r in registries] == before
    with pytest.raises(ValueError):
        with sanitizer_mode(csan):
            raise ValueError
    assert [r.callback_list for r in registries] == before


def test_the_gpu_check_script_parses():
    assert subprocess.run(["bash", "-n", "gpu/check.sh"]).returncode == 0
    assert subprocess.run(["bash", "-n", "gpu/fetch_wheels.sh"]).returncode == 0


@pytest.mark.slow
def test_the_gpu_check_without_a_gpu_exits_2_with_one_report(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    out = tmp_path / "report"
    run = subprocess.run(["bash", "gpu/check.sh", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr
    assert sorted(p.name for p in out.iterdir()) == ["check.log", "report.json"]
    report = json.loads((out / "report.json").read_text())
    assert report["setup"] == "no CUDA device here" and report["checks"] == {} and not report["ok"]
    assert report["machine"]["torch"] == torch.__version__
