"""``fencecheck replay DIR --device cuda``: corpus traces on the GPU, the same report as the simulator's plus how
often each race manifested. Each replay drives the reference on a fresh ``CudaDevice``; conformance compares its
recorded trace with the corpus trace; the observations say which reads were stale."""

from __future__ import annotations

import json
import random
import time
from typing import TextIO

from fencecheck.corpus_io import CorpusRecord, read
from fencecheck.reference.replay import conformance
from fencecheck.reference.run import drive

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
    from .device import CudaDevice

    policy = DelayPolicy.for_record(record.races, record.witness)
    if cycles is not None:
        policy = DelayPolicy(policy.keys, policy.all_reads, cycles)
    result = TraceOnGpu(record.id, frozenset(tuple(r) for r in record.races))
    for _ in range(replays):
        dev = CudaDevice(locations(record), policy, torch)
        steps = drive(dev, record.scenario, record.trace.steps)
        ok = conformance(record.trace, dev.trace(record.scenario.name, steps, dict(record.trace.meta))).ok
        result.add(dev.observations(), ok)
    return result


def sanitizer_alongside(record: CorpusRecord) -> str:
    """Run once under PyTorch's CUDA sanitizer (traces without graph replays only) and say what it saw."""
    from fencecheck.reference.sim.csan import applicable

    if not applicable(record.trace):
        return "n/a"
    import torch.cuda._sanitizer as csan

    from .device import CudaDevice

    dev = CudaDevice(locations(record), DelayPolicy())
    try:
        with csan.CUDASanitizerDispatchMode():
            drive(dev, record.scenario, record.trace.steps)
        saw = "nothing"
    except csan.CUDASanitizerErrors as err:
        saw = f"{len(err.errors)} unsynchronized access(es)"
    dev.torch.cuda.synchronize()
    expected = "race" if record.races else "nothing"
    agree = (saw == "nothing") == (expected == "nothing")
    return f"{'agree' if agree else 'DISAGREE'}: saw {saw}, expected {expected}"


def replay_corpus_cuda(args, out: TextIO) -> int:
    import torch

    if not torch.cuda.is_available():
        from fencecheck.errors import InputError

        raise InputError("<flags>", "--device cuda", "no CUDA device here (use --device sim)")
    _, records = read(args.dir)
    chosen = select(records, getattr(args, "sample", SAMPLE) or SAMPLE, args.seed)
    results = []
    t = time.perf_counter()
    for rec in chosen:
        res = replay_on_gpu(rec, RACE_REPLAYS if rec.races else SAFE_REPLAYS)
        res.csan = sanitizer_alongside(rec)
        results.append(res)
    seconds = time.perf_counter() - t
    races = [r for r in results if r.expected_races]
    safe = [r for r in results if not r.expected_races]
    report = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__, "seconds": round(seconds, 1),
        "traces": len(results), "replays": sum(r.replays for r in results),
        "conformant": sum(r.conformant == r.replays for r in results),
        "race_traces": len(races), "races_manifesting_99": sum(r.rate >= 0.99 for r in races),
        "min_manifestation": min((r.rate for r in races), default=None),
        "safe_traces": len(safe), "safe_with_stale": sum(bool(r.stale_keys) for r in safe),
        "sanitizer": [f"{r.id}: {r.csan}" for r in results if r.csan != "n/a"],
        "failures": [{"id": r.id, "rate": r.rate, "replays": r.replays, "conformant": r.conformant,
                      "unexpected": r.unexpected, "stale": sorted(map(list, r.stale_keys))}
                     for r in results if not r.ok],
    }
    if args.json:
        json.dump(report, out, indent=2)
        out.write("\n")
    else:
        out.write(f"{report['traces']} traces, {report['replays']} replays on {report['device']} in {seconds:.1f} s\n")
        out.write(f"conformant: {report['conformant']}/{report['traces']}\n")
        out.write(f"races manifesting in >= 99% of replays: {report['races_manifesting_99']}/{len(races)} "
                  f"(lowest rate {report['min_manifestation']})\n")
        out.write(f"race-free traces with a stale read: {report['safe_with_stale']}/{len(safe)}\n")
        for line in report["sanitizer"]:
            out.write(f"sanitizer: {line}\n")
        for f in report["failures"]:
            out.write(f"DISAGREEMENT {f}\n")
    return 0 if not report["failures"] and not any("DISAGREE" in s for s in report["sanitizer"]) else 1
