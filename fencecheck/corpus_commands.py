"""The corpus commands of ``fencecheck``: ``traces``, ``replay``, ``regress`` (plain functions of (args, out)), and
``build_and_write``, the model's corpus assembled and written (``traces`` and ``audit`` call it)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, TextIO

from .errors import EXIT_OK, EXIT_RACE, InputError


def progress_bar(total: int, desc: str, enabled: bool, stream: TextIO | None = None, unit: str = "trace"):
    """A tqdm bar on ``stream`` (stderr) when asked for (``--progress``) or when it is a terminal; a no-op otherwise.
    Never on stdout, so ``--json`` output stays clean."""
    from tqdm import tqdm

    stream = stream or sys.stderr
    tty = getattr(stream, "isatty", lambda: False)()
    return tqdm(total=total, desc=desc, unit=unit, disable=not (enabled or tty), leave=False, file=stream)


def corpus_size() -> int:
    """How many configurations ``build_and_write`` runs (the catalog and every family), for a progress bar."""
    from .catalog import PR_ERA, load_catalog
    from .model.corpus import total_configurations

    return total_configurations(len(load_catalog(PR_ERA)))


def build_and_write(directory: str | Path, progress: Callable[[int], None] | None = None) -> tuple[Path, dict, int]:
    """Generate the model's corpus (``fencecheck.model.corpus``) and write ``directory/corpus.jsonl`` atomically
    (``fencecheck.corpus_io.write``); ``progress(n)`` is called as configurations are run. Returns the file, the
    per-family statistics and the number of records. What ``fencecheck traces`` and ``fencecheck audit`` call."""
    from . import __version__
    from .catalog import PR_ERA, load_catalog
    from .corpus_io import write
    from .model.corpus import FAMILIES, SEED, THREE_PHASE_SAMPLE, build_corpus
    from .model.solver import version
    from .scenario_io import scenario_to_dict

    records, stats = build_corpus(load_catalog(PR_ERA), progress)
    header = {
        "fencecheck": __version__,
        "model": {"steps": 2, "locations": 1, "families": {name: " ".join((make.__doc__ or name).split())
                                                            for name, make in FAMILIES.items()},
                  "three_phase_sample": THREE_PHASE_SAMPLE},
        "seed": SEED,
        "solver": f"z3 {version()} (traces are the model's program run concretely)",
        "statistics": stats,
    }
    target = write(directory, header, [
        {
            "id": r.id, "family": r.family, "configurations": r.configurations,
            "scenario": scenario_to_dict(r.model.scenario), "trace": r.model.trace.to_dict(),
            "expected": r.model.verdict.value, "races": [list(x) for x in r.model.races], "witness": r.model.witness,
        }
        for r in records
    ])
    return target, stats, len(records)


def cmd_traces(args, out: TextIO) -> int:
    bar = progress_bar(corpus_size(), "generating", args.progress, args.err)
    try:
        target, stats, count = build_and_write(Path(args.out), bar.update)
    finally:
        bar.close()
    if args.json:
        import json

        json.dump({"file": str(target), "traces": count,
                   "families": [{"family": family, "configurations": st["configurations"],
                                 "behaviours": st["behaviours"]} for family, st in stats.items()]}, out, indent=2)
        out.write("\n")
        return EXIT_OK
    for family, st in stats.items():
        out.write(f"{family}: {st['configurations']} configurations -> {st['behaviours']} behaviours\n")
    out.write(f"{count} traces written to {target}\n")
    return EXIT_OK


def replay_summary(results) -> tuple[list[tuple], list[str]]:
    """Rows per family (and a total) and a line per disagreement."""
    from collections import defaultdict

    groups = defaultdict(list)
    for r in results:
        groups[r.family].append(r)
    rows = []
    for family, rs in list(groups.items()) + [("total", results)]:
        races = [r for r in rs if r.expected.value == "counterexample"]
        csan = [r for r in rs if r.csan != "n/a"]
        rows.append((
            family, len(rs), sum(r.conformance.ok for r in rs), sum(r.verdict is r.expected and r.races_agree for r in rs),
            f"{sum(r.witness_shown is True for r in races)}/{len(races)}",
            f"{sum(r.schedules for r in rs)}/{sum(r.stale_seen for r in rs)}",
            f"{sum(r.csan == 'agree' for r in csan)}/{len(csan)}",
        ))
    problems = []
    for r in results:
        if r.ok:
            continue
        c = r.conformance
        if not c.ok:
            problems.append(f"{r.id}: conformance: matched {c.matched} of {c.total} ops; first divergence: expected "
                            f"{c.expected} got {c.actual} {c.detail}".rstrip())
        if r.verdict is not r.expected or not r.races_agree:
            problems.append(f"{r.id}: verdict {r.verdict.value}, expected {r.expected.value} (races agree: {r.races_agree})")
        if r.witness_shown is False:
            problems.append(f"{r.id}: the witness interleaving did not show the stale read {r.notes}")
        if r.stale_seen:
            problems.append(f"{r.id}: {r.stale_seen} of {r.schedules} adversarial interleavings showed a stale read")
        if r.csan.startswith("DISAGREE"):
            problems.append(f"{r.id}: {r.csan}")
    return rows, problems


def cmd_replay(args, out: TextIO) -> int:
    import json as _json

    from .corpus_io import read

    _, records = read(args.dir)
    if args.device == "cuda":
        from .gpu.replay import run_cuda_replay

        return run_cuda_replay(records, args.seed, out, args.json)
    from .reference.replay import replay

    bar = progress_bar(len(records), "replaying", args.progress, args.err)
    results = []
    try:
        for rec in records:
            results.append(replay(rec, seed=args.seed))
            bar.update(1)
    finally:
        bar.close()
    rows, problems = replay_summary(results)
    if args.json:
        _json.dump({"rows": [dict(zip(("family", "traces", "conformant", "verdicts_agree", "races_shown",
                                       "schedules_stale", "csan_agree"), r)) for r in rows],
                    "problems": problems}, out, indent=2)
        out.write("\n")
    else:
        header = ("family", "traces", "conformant", "verdicts agree", "races shown", "safe: schedules/stale",
                  "sanitizer agree")
        widths = [max(len(str(x[i])) for x in rows + [header]) for i in range(len(header))]
        for row in [header] + rows:
            out.write("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
        for line in problems:
            out.write(f"DISAGREEMENT {line}\n")
        out.write(f"{len(results)} traces replayed on the simulator, {len(results) - len(set(p.split(':')[0] for p in problems))} "
                  f"in full agreement\n")
    return EXIT_OK if not problems else EXIT_RACE


def cmd_regress(args, out: TextIO) -> int:
    from .atomic import write_text_atomic
    from .corpus_io import FILENAME
    from .regress import read_selected, render

    only = args.only or ["*"]
    header, records = read_selected(args.dir, only)  # checked now; the module reads the corpus at test time
    module = render(Path(args.dir), Path(args.out), only, len(records), header["content_sha256"])
    write_text_atomic(Path(args.out), module)
    out.write(f"{len(records)} test cases written to {args.out} (they read {Path(args.dir) / FILENAME} at test time)\n")
    return EXIT_OK
