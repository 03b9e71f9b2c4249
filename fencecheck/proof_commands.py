"""The proving commands of ``fencecheck``: ``prove`` and ``verify`` (plain functions of (args, out))."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from .errors import EXIT_OK, EXIT_RACE, EXIT_UNKNOWN
from .report import Verdict


def cmd_prove(args, out: TextIO) -> int:
    """Parse -> ``prove_all`` -> render -> exit code: 0 all as expected, 1 a verdict differs, 3 only unknowns."""
    import json

    from .atomic import write_text_atomic, write_tree
    from .proofs.report import table
    from .proofs.suite import document_files, prove_all, timings_text

    def progress(r) -> None:
        args.err.write(f"  {r.obligation.name}: {r.verdict.value} ({r.seconds:.2f} s)\n")

    results = prove_all(args.only, progress if args.progress else None)
    if args.json:
        json.dump([{"obligation": r.obligation.name, "verdict": r.verdict.value, "expected": r.obligation.expected.value,
                    "as_expected": r.ok, "seconds": round(r.seconds, 3), "rlimit": r.obligation.rlimit,
                    "rlimit_used": r.rlimit_used, "size": r.size, "reason": r.reason, "nonvacuity": r.nonvacuity,
                    "notes": r.notes} for r in results], out, indent=2)
        out.write("\n")
    else:
        out.write(table(results))
    if args.docs:
        files = document_files(results)
        if args.only:  # a subset: its own files, each replaced; the rest of the set stays as it was
            for rel, text in files.items():
                write_text_atomic(Path(args.docs) / rel, text)
        else:  # the whole set, swapped in whole (no counterexample file of an earlier run is left behind)
            write_tree(args.docs, files, names=("proofs.md", "counterexamples"))
    if getattr(args, "timings", None):
        write_text_atomic(Path(args.timings), timings_text(results))
    if any(not r.ok and r.verdict is not Verdict.UNKNOWN for r in results):
        return EXIT_RACE
    if any(not r.ok for r in results):
        return EXIT_UNKNOWN
    return EXIT_OK


def cmd_verify(args, out: TextIO) -> int:
    from .catalog import load_catalog
    from .model.verify import BOUNDS, verify
    from .scenario_io import dump, load_backend

    backend = load_backend(args.backend)
    report = verify(backend, load_catalog())
    out.write(f"backend {report.backend}\n")
    for f in report.modes:
        sites = ", ".join(f"{s.value}: {'/'.join(locs)}" for s, locs in f.sites.items()) or "no reads"
        out.write(f"  {f.mode.value}: declares {f.declared.name}; reads {sites}; "
                  f"{'within' if f.honest else 'OUTSIDE'} what {f.declared.name} covers\n")
    out.write(f"symbolic contexts ({BOUNDS.text()}; the main theorem's other assumptions): ")
    if report.verdict is Verdict.PROVED:
        out.write("proved race-free\n")
    elif report.verdict is Verdict.UNKNOWN:
        out.write(f"UNKNOWN ({report.reason})\n")
    else:
        ce = report.counterexample
        loc, phase, site = ce.race_key()
        out.write(f"COUNTEREXAMPLE: the read of {loc} by {phase} at {site} in step {ce.race.step} races "
                  f"({ce.bounds.phases} phase(s), {ce.bounds.steps} step(s))\n")
        if args.out:
            dump(ce.scenario, args.out)
            out.write(f"  scenario written to {args.out}; replay: fencecheck check {args.out} --witness\n")
    out.write(f"catalog contexts: {len(report.contexts)} race-free scenarios with a phase in a mode it covers\n")
    for c in report.contexts:
        status = c.verdict.text
        keys = sorted({r.place() for r in c.races})
        detail = "" if c.safe else "  " + "; ".join(k.text() for k in keys)
        out.write(f"  {c.scenario}: {status}{detail}\n")
    for line in report.advice:
        out.write(f"advice: {line}\n")
    if report.safe:
        return EXIT_OK
    if report.verdict is Verdict.UNKNOWN or any(c.verdict is Verdict.UNKNOWN for c in report.contexts):
        if report.verdict is not Verdict.COUNTEREXAMPLE and all(c.verdict is not Verdict.COUNTEREXAMPLE for c in report.contexts):
            return EXIT_UNKNOWN
    return EXIT_RACE
