"""The proving commands of ``fencecheck``: ``prove`` and ``verify`` (plain functions of (args, out))."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from .errors import EXIT_OK, EXIT_RACE, EXIT_UNKNOWN
from .report import RaceId, Verdict
from .vocab import SharedReadEnds


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


def _race_text(c, r) -> str:
    """A race of a catalog context in SGLang's terms: the read, the write, the edge that is missing."""
    ph = c.phase_of(r)
    if ph is None:
        return r.text()
    if ph.resolved is None:
        pub = "its runner does not resolve a declaration"
    elif ph.resolved is SharedReadEnds.UNKNOWN:
        pub = "it resolves UNKNOWN and publishes nothing"
    else:
        pub = f"it resolves {ph.resolved.name} and publishes at that point"
    stale = (f"; the barrier after step {r.step} waits on runner {ph.publisher}'s mailbox, which holds no event "
             f"recorded after this read (an event left from an earlier step, or none)") if (
        ph.resolved in (None, SharedReadEnds.UNKNOWN) or ph.publisher != ph.runner) else (
        f"; the barrier after step {r.step} waits on runner {ph.publisher}'s event, recorded before the read")
    return (f"{r.text()}: {ph.phase} ({ph.mode.value} on runner {ph.runner}, backend {ph.backend}, {ph.kind} step, "
            f"publisher {ph.publisher}) reads {r.location} at {r.site}; {pub}{stale}; the scheduler's write of "
            f"{r.location} after step {r.step} is not ordered after the read (missing edge: read -> write)")


def verify_json(report) -> dict:
    """The documented ``verify --json`` shape (docs/verify.md)."""
    from .model.verify import ASSUMED, RULE

    ce = report.counterexample
    return {
        "backend": report.backend,
        "modes": [{"mode": f.mode.value, "declares": f.declared.name, "declared_by": f.declared_by,
                   "reads": {s.value: list(locs) for s, locs in f.sites.items()},
                   "readers": [{"site": s.value, "location": loc, "backends": list(who)}
                               for (s, loc), who in sorted(f.readers.items(), key=lambda kv: (kv[0][0].value, kv[0][1]))],
                   "honest": f.honest} for f in report.modes],
        "symbolic": {"verdict": report.verdict.value, "rule": RULE.value, "assumptions": list(ASSUMED),
                     "bounds": {"steps": report.bounds.steps, "phases": report.bounds.phases,
                                "runners": report.bounds.runners},
                     "reason": report.reason,
                     "races": [] if ce is None else [RaceId(*r).to_dict() for r in ce.races]},
        "contexts": [{"scenario": c.scenario, "verdict": c.report.verdict.value, "safe": c.safe,
                      "own_verdict": c.own_verdict.value, "failed_assumptions": c.failed,
                      "races": [r.to_dict() for r in c.report.races],
                      "brought": [r.to_dict() for r in c.brought],
                      "own_races": [r.to_dict() for r in c.own_races]} for c in report.contexts],
        "findings": list(report.findings),
        "advice": [{"change": a.change, "why": a.why,
                    "verification": None if a.check is None else {
                        "safe": a.check.safe, "symbolic": a.check.symbolic.value,
                        "contexts": len(a.check.contexts) + 1,
                        "racing": [c.scenario for c in a.check.contexts if not c.safe],
                        "text": a.check.text()}} for a in report.advice],
        "safe": report.safe,
    }


def cmd_verify(args, out: TextIO) -> int:
    """Parse the backend file -> ``model.verify.verify`` -> text or JSON -> exit code: 0 safe everywhere, 1 a race
    the backend brings, 3 only unknowns."""
    import json
    import sys

    from .catalog import load_catalog
    from .model.verify import ASSUMED, RULE, verify
    from .report import Expectation
    from .scenario_io import dump, load_backend

    backend = load_backend(args.backend)
    catalog = load_catalog()
    bar = None
    err = getattr(args, "err", sys.stderr)
    if getattr(args, "progress", False) or (hasattr(err, "isatty") and err.isatty()):
        from tqdm import tqdm

        bar = tqdm(desc=f"verify {backend.name}", unit="check", file=err, leave=False)
    tick = (lambda label: (bar.set_postfix_str(label[:40]), bar.update(1))) if bar is not None else None
    try:
        report = verify(backend, catalog, tick=tick)
    finally:
        if bar is not None:
            bar.close()
    ce = report.counterexample
    if ce is not None and args.out:
        races = tuple(RaceId(*r) for r in ce.races)
        dump(ce.scenario.replace(expect=Expectation(Verdict.COUNTEREXAMPLE, races)), args.out)
    if args.json:
        json.dump(verify_json(report), out, indent=2)
        out.write("\n")
    else:
        _verify_text(args, report, out, RULE, ASSUMED)
    if report.safe:
        return EXIT_OK
    brought = report.verdict is Verdict.COUNTEREXAMPLE or any(c.brought for c in report.contexts)
    return EXIT_RACE if brought else EXIT_UNKNOWN


def _verify_text(args, report, out: TextIO, rule, assumed) -> None:
    out.write(f"backend {report.backend}\n")
    for f in report.modes:
        sites = ", ".join(f"{s.value}: {'/'.join(locs)}" for s, locs in f.sites.items()) or "no reads"
        by = "" if f.declared_by == report.backend else f" (from {f.declared_by})"
        out.write(f"  {f.mode.value}: declares {f.declared.name}{by}; reads {sites}; "
                  f"{'within' if f.honest else 'OUTSIDE'} what {f.declared.name} covers\n")
    for line in report.findings:
        out.write(f"finding: {line}\n")
    under = f"under resolution {rule.value} and the assumptions {', '.join(assumed)}"
    out.write(f"symbolic contexts ({report.bounds.text()}): ")
    if report.verdict is Verdict.PROVED:
        out.write(f"proved race-free {under}\n")
    elif report.verdict is Verdict.UNKNOWN:
        out.write(f"UNKNOWN ({report.reason})\n")
    else:
        ce = report.counterexample
        loc, phase, site = ce.race_key()
        out.write(f"COUNTEREXAMPLE {under}: the read of {loc} by {phase} at {site} in step {ce.race.step} races "
                  f"({ce.bounds.phases} phase(s), {ce.bounds.steps} step(s))\n")
        if args.out:
            out.write(f"  scenario written to {args.out}; replay: fencecheck check {args.out} --witness\n")
    out.write(f"catalog contexts: {len(report.contexts)} scenarios with a phase in a mode it covers\n")
    for c in report.contexts:
        own = c.own_verdict is not Verdict.PROVED
        status = c.report.verdict.text if not own else ("safe here" if c.safe else "COUNTEREXAMPLE")
        out.write(f"  {c.scenario}: {status}")
        if c.failed:
            out.write(f"  [outside the symbolic proof: fails {', '.join(c.failed)}]")
        out.write("\n")
        if own:
            out.write(f"    races on its own, not through this backend: "
                      f"{'; '.join(r.text() for r in c.own_races) or 'yes'}\n")
        first: dict = {}
        for r in sorted(set(c.brought), key=lambda r: (r.step, r.phase, r.site, r.location)):
            first.setdefault(r.place(), []).append(r)
        for place, rs in first.items():
            more = f" (also in step {', '.join(str(r.step) for r in rs[1:])})" if len(rs) > 1 else ""
            out.write(f"    race: {_race_text(c, rs[0])}{more}\n")
    for a in report.advice:
        out.write(f"advice: {a.text()}\n")
