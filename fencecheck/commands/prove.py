"""``fencecheck prove``: every proof obligation against its expected verdict, with its table, documents and timings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

from fencecheck.commands.common import outputs, positive
from fencecheck.errors import EXIT_OK, EXIT_RACE, EXIT_UNKNOWN
from fencecheck.verdict import Verdict


def cmd_prove(args, out: TextIO) -> int:
    """Parse -> ``prove_all`` -> render -> exit code: 0 all as expected, 1 a verdict differs, 3 only unknowns."""
    import json
    import time

    from fencecheck.files.outputs import write_text_atomic, write_tree
    from fencecheck.proofs.documents import table
    from fencecheck.proofs.suite import document_files, prove_all, timings_text

    from fencecheck.commands.progress import progress_bar
    from fencecheck.proofs.suite import select

    bar = progress_bar(len(select(args.only)), "proving", args.progress, args.err, unit="obligation")

    def progress(r) -> None:
        if args.progress:
            bar.write(f"  {r.obligation.name}: {r.verdict.value} ({r.seconds:.2f} s)", file=args.err)
        bar.update(1)

    jobs = getattr(args, "jobs", None) or min(2, os.cpu_count() or 1)
    start = time.perf_counter()
    try:
        results = prove_all(args.only, progress, jobs)
    finally:
        bar.close()
    wall = time.perf_counter() - start
    if args.json:
        json.dump([{"obligation": r.obligation.name, "verdict": r.verdict.value, "expected": r.obligation.expected.value,
                    "as_expected": r.ok, "seconds": round(r.seconds, 3), "rlimit": r.obligation.rlimit,
                    "rlimit_used": r.rlimit_used, "size": r.size, "reason": r.reason, "nonvacuity": r.nonvacuity,
                    "notes": r.notes} for r in results], out, indent=2)
        out.write("\n")
    else:
        out.write(table(results, wall))
    if args.docs:
        files = document_files(results)
        if args.only:  # a subset: its own files, each replaced; the rest of the set stays as it was
            for rel, text in files.items():
                write_text_atomic(Path(args.docs) / rel, text)
        else:  # the whole set, swapped in whole (no counterexample file of an earlier run is left behind)
            write_tree(args.docs, files, names=("proofs.md", "counterexamples"))
    if getattr(args, "timings", None):
        write_text_atomic(Path(args.timings), timings_text(results, wall, jobs))
    if any(not r.ok and r.verdict is not Verdict.UNKNOWN for r in results):
        return EXIT_RACE
    if any(not r.ok for r in results):
        return EXIT_UNKNOWN
    return EXIT_OK


def add_parser(sub) -> None:
    """The ``prove`` subcommand's arguments."""
    p = sub.add_parser("prove", help="run the proof obligations, each against its expected verdict")
    p.add_argument("--only", nargs="+", metavar="GLOB", help="only obligations whose name matches (fnmatch)")
    p.add_argument("--docs", default=None, metavar="DIR", help="write DIR/proofs.md and DIR/counterexamples/")
    p.add_argument("--json", action="store_true", help="machine-readable results, one object per obligation")
    p.add_argument("--progress", action="store_true", help="print each obligation as it finishes, with a progress bar (stderr; the bar shows on a "
                        "terminal anyway)")
    p.add_argument("--timings", default=None, metavar="FILE", help="write the run's times and rlimits here (JSON)")
    p.add_argument("--jobs", "-j", type=positive, default=None, metavar="N",
                   help="worker processes (default: 2, or 1 on one core); the results and documents are the same "
                        "for any N")
    p.set_defaults(func=cmd_prove, **outputs(("docs", True), ("timings", False)))
