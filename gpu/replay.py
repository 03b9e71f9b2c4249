"""``fencecheck replay DIR --device cuda``: corpus traces on the GPU, judged by what the device really did.

Each replay drives the reference on a fresh ``CudaDevice``; a replay conforms when the reference issued the trace's
calls and every observation read back after the synchronize fits the trace's happens-before (``observe``). Over
the replays of one trace, each expected race must show as a stale read in at least 99% of them, a race-free trace
never, and no replay may show a stale read the model did not expect. A call CUDA refuses is counted as an error
of that trace. PyTorch's CUDA sanitizer runs alongside on traces without graph replays.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from typing import TextIO

from fencecheck.files.corpus_io import CorpusRecord
from fencecheck.errors import EXIT_OK, EXIT_RACE, InputError
from fencecheck.reference.replay import conformance
from fencecheck.reference.run import drive
from fencecheck.verdict import RaceId

from .observe import Expected, judge
from .plan import DelayPolicy, TraceOnGpu

RACE_REPLAYS, SAFE_REPLAYS, SAMPLE = 100, 20, 150


def select(records: list[CorpusRecord], sample: int, seed: int = 0) -> list[CorpusRecord]:
    """Every catalog trace plus a seeded sample of the rest, races and race-free alike (deterministic)."""
    catalog = [r for r in records if r.family == "catalog"]
    rest = [r for r in records if r.family != "catalog"]
    rng = random.Random(seed)
    return catalog + (rng.sample(rest, sample) if sample < len(rest) else rest)


def locations(record: CorpusRecord) -> list[str]:
    return sorted(set(record.scenario.locations()) | set(record.scenario.written_locations()))


def replay_on_gpu(record: CorpusRecord, replays: int, torch=None, cycles: int | None = None) -> TraceOnGpu:
    """``replays`` runs of ``record`` on fresh devices, each judged against the record's trace."""
    from .device import CudaDevice

    policy = DelayPolicy.for_record(record.races, record.witness)
    if cycles is not None:
        policy = DelayPolicy(policy.keys, policy.all_reads, cycles)
    expected = Expected.of(record.trace)
    result = TraceOnGpu(record.id, frozenset(RaceId(*r) for r in record.races))
    for _ in range(replays):
        dev = CudaDevice(locations(record), policy, torch)
        try:
            steps = drive(dev, record.scenario, record.trace.steps)
            observations = dev.observations()
        except RuntimeError as err:  # CUDA refused a call (torch raises its CUDA errors as RuntimeError)
            dev.abort(err)
            result.refused(f"{type(err).__name__}: {err}")
            continue
        calls = conformance(record.trace, dev.trace(record.scenario.name, steps, dict(record.trace.meta)))
        where = "" if calls.ok else f"call {calls.matched}: expected {calls.expected or calls.detail}, got {calls.actual}"
        result.add(judge(expected, observations), calls.ok, where)
    return result


@contextlib.contextmanager
def sanitizer_mode(csan):
    """PyTorch's CUDA sanitizer dispatch mode, entered; on leaving, the trace callbacks it registered are removed
    (the mode registers them when created and never removes them)."""
    registries = [r for r in vars(csan.gpu_trace).values() if hasattr(r, "callback_list")]
    before = [list(r.callback_list) for r in registries]
    try:
        with csan.CUDASanitizerDispatchMode():
            yield
    finally:
        for r, callbacks in zip(registries, before):
            r.callback_list[:] = callbacks


def sanitizer_alongside(record: CorpusRecord, torch=None) -> str:
    """Run once under PyTorch's CUDA sanitizer (traces without graph replays only) and say what it saw."""
    from fencecheck.reference.sim.csan import applicable

    if not applicable(record.trace):
        return "n/a"
    import torch.cuda._sanitizer as csan

    from .device import CudaDevice

    dev = CudaDevice(locations(record), DelayPolicy(), torch)
    try:
        with sanitizer_mode(csan):
            drive(dev, record.scenario, record.trace.steps)
        saw = "nothing"
    except csan.CUDASanitizerErrors as err:
        saw = f"{len(err.errors)} unsynchronized access(es)"
    dev.torch.cuda.synchronize()
    expected = "race" if record.races else "nothing"
    agree = (saw == "nothing") == (expected == "nothing")
    return f"{'agree' if agree else 'DISAGREE'}: saw {saw}, expected {expected}"


def run_cuda_replay(records: list[CorpusRecord], seed: int, out: TextIO, as_json: bool, *, torch=None,
                    sample: int = SAMPLE, race_replays: int = RACE_REPLAYS, safe_replays: int = SAFE_REPLAYS,
                    sanitizer: bool = True, progress=None) -> int:
    """Replay every catalog trace of ``records`` and a ``seed``-chosen sample of the rest on the GPU; write the
    report to ``out`` (text, or JSON with ``as_json``). Returns 0 when every trace is as expected, 1 otherwise.
    Raises ``InputError`` when this machine cannot run it (no CUDA device, a torch without what the device needs).
    ``torch`` replaces the torch module (a stand-in in tests); ``progress``, when given, is called with the report
    so far after each trace (``complete`` false) and with the whole report at the end."""
    from .device import missing_features

    if torch is None:
        try:
            import torch
        except ImportError:
            raise InputError("<flags>", "--device cuda", "PyTorch is not installed (use --device sim)") from None
    missing = missing_features(torch)
    if missing:
        raise InputError("<flags>", "--device cuda", f"{missing} (use --device sim)")
    chosen = select(records, sample, seed)
    results = []
    t = time.perf_counter()

    def current(complete: bool) -> dict:
        return {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                "seconds": round(time.perf_counter() - t, 1), "seed": seed, "selected": len(chosen),
                "complete": complete, **summary(results)}

    for rec in chosen:
        res = replay_on_gpu(rec, race_replays if rec.races else safe_replays, torch)
        if sanitizer:
            res.csan = sanitizer_alongside(rec, torch)
        results.append(res)
        if progress is not None:
            progress(current(False))
    report = current(True)
    if progress is not None:
        progress(report)
    if as_json:
        json.dump(report, out, indent=2)
        out.write("\n")
    else:
        write_text(report, out)
    return EXIT_OK if report["ok"] else EXIT_RACE


def summary(results: list[TraceOnGpu]) -> dict:
    """The replay report's figures (everything but the machine and the time)."""
    races = [r for r in results if r.expected_races]
    safe = [r for r in results if not r.expected_races]
    sanitizer = [f"{r.id}: {r.csan}" for r in results if r.csan != "n/a"]
    failures = [{"id": r.id, "replays": r.replays, "conformant": r.conformant, "errors": r.errors,
                 "rate": r.rate, "unexpected": r.unexpected, "problem": r.problem,
                 "stale": sorted(k.text() for k in r.stale_keys)}
                for r in results if not r.ok]
    return {
        "traces": len(results), "replays": sum(r.replays for r in results),
        "conformant": sum(r.conformant == r.replays and not r.errors for r in results),
        "errors": sum(r.errors for r in results),
        "race_traces": len(races), "races_manifesting_99": sum(r.rate >= 0.99 for r in races),
        "min_manifestation": min((r.rate for r in races), default=None),
        "safe_traces": len(safe), "safe_with_stale": sum(bool(r.stale_keys) for r in safe),
        "sanitizer": sanitizer, "failures": failures,
        "ok": not failures and not any("DISAGREE" in s for s in sanitizer),
    }


def write_text(report: dict, out: TextIO) -> None:
    out.write(f"{report['traces']} traces, {report['replays']} replays on {report['device']} in "
              f"{report['seconds']:.1f} s\n")
    out.write(f"conformant (observations fit the trace in every replay): {report['conformant']}/{report['traces']}"
              f"; refused by CUDA: {report['errors']} replay(s)\n")
    out.write(f"races manifesting in >= 99% of replays: {report['races_manifesting_99']}/{report['race_traces']} "
              f"(lowest rate {report['min_manifestation']})\n")
    out.write(f"race-free traces with a stale read: {report['safe_with_stale']}/{report['safe_traces']}\n")
    for line in report["sanitizer"]:
        out.write(f"sanitizer: {line}\n")
    for f in report["failures"]:
        out.write(f"DISAGREEMENT {f['id']}: {f['problem'] or 'manifestation rate ' + str(f['rate'])} "
                  f"({f['conformant']}/{f['replays']} conformant, {f['errors']} refused, stale {f['stale']})\n")


def main(argv=None) -> int:
    """``python3 -m fencecheck.gpu.replay DIR [--seed N] [--sample N] [--json FILE]``: as ``fencecheck replay DIR
    --device cuda``; with ``--json`` the report file is rewritten after every trace, so a run cut short leaves the
    traces done so far (``complete`` false)."""
    import argparse
    import os
    import sys

    from fencecheck.files.corpus_io import read
    from fencecheck.errors import EXIT_BAD_INPUT, FencecheckError

    p = argparse.ArgumentParser(prog="fencecheck.gpu.replay")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample", type=int, default=SAMPLE, help="corpus traces besides the catalog's")
    p.add_argument("--json", metavar="FILE", default=None)
    args = p.parse_args(argv)

    def save(report: dict) -> None:
        tmp = f"{args.json}.tmp"
        with open(tmp, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
        os.replace(tmp, args.json)

    try:
        _, records = read(args.dir)
        return run_cuda_replay(records, args.seed, sys.stdout, False, sample=args.sample,
                               progress=save if args.json else None)
    except FencecheckError as err:
        print(f"fencecheck.gpu.replay: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    import sys

    sys.exit(main())
