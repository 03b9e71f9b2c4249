"""``fencecheck traces``: the model's trace corpus, built from its families and written as one corpus file."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, TextIO

from fencecheck.commands.common import PROGRESS_HELP, outputs
from fencecheck.commands.progress import progress_bar
from fencecheck.errors import EXIT_OK


def corpus_size() -> int:
    """How many configurations ``build_and_write`` runs (the catalog and every family), for a progress bar."""
    from fencecheck.files.catalog import PR_ERA, load_catalog
    from fencecheck.model.corpus import total_configurations

    return total_configurations(len(load_catalog(PR_ERA)))


def build_and_write(directory: str | Path, progress: Callable[[int], None] | None = None) -> tuple[Path, dict, int]:
    """Generate the model's corpus (``fencecheck.model.corpus``) and write ``directory/corpus.jsonl`` atomically
    (``fencecheck.files.corpus_io.write``); ``progress(n)`` is called as configurations are run. Returns the file, the
    per-family statistics and the number of records. What ``fencecheck traces`` and ``fencecheck audit`` call."""
    from fencecheck import __version__
    from fencecheck.files.catalog import PR_ERA, load_catalog
    from fencecheck.files.corpus_io import write
    from fencecheck.files.scenario_io import scenario_to_dict
    from fencecheck.model.corpus import FAMILIES, SEED, THREE_PHASE_SAMPLE, build_corpus
    from fencecheck.model.solver import version

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


def add_parser(sub) -> None:
    """The ``traces`` subcommand's arguments."""
    p = sub.add_parser("traces", help="generate the model's trace corpus (DIR/corpus.jsonl)")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write corpus.jsonl into")
    p.add_argument("--json", action="store_true", help="machine-readable summary (families, counts, the file)")
    p.add_argument("--progress", action="store_true", help=PROGRESS_HELP)
    p.set_defaults(func=cmd_traces, **outputs(("out", True)))
