"""The ``fencecheck`` command. Each subcommand is a plain function of (args, out) returning the exit code.

Exit codes: 0 safe / all as expected, 1 race / a verdict differs from its expectation, 2 bad input,
3 unknown (a solver ran out of budget; never reported as proved).
Bad input is one line on stderr naming the file, the key and what was expected; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence, TextIO

from .corpus_commands import cmd_regress, cmd_replay, cmd_traces
from .errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_RACE, FencecheckError, InputError
from .proof_commands import cmd_prove, cmd_verify
from .report import agreement



class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line and exits 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise InputError("<flags>", "", message)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _load_targets(paths: Sequence[str], use_catalog: bool):
    """Scenarios from files (``.toml``) plus the catalog; traces (``.json``) come back separately."""
    from .atomic import read_input
    from .catalog import load_catalog
    from .scenario_io import load
    from .trace import Trace

    scenarios, traces = [], []
    for p in paths:
        if p.endswith(".json"):
            traces.append(Trace.from_json(read_input(Path(p)), p))
        else:
            scenarios.append(load(p))
    if use_catalog:
        scenarios.extend(load_catalog())
    return scenarios, traces


def _witness_lines(trace, report) -> list[str]:
    from fencecheck.reference.sim.hb import analyze
    from fencecheck.reference.sim.interleave import stale_reads, witness_schedule

    hb = analyze(trace)
    lines = []
    for race in report.distinct():
        schedule = witness_schedule(hb, race)
        stale = [o for o in stale_reads(hb, schedule) if o.key() == race.key()]
        if stale:
            o = stale[0]
            lines.append(
                f"  witness: running the write (and what precedes it) first, the step {o.step} read of {o.location} "
                f"at {o.site} saw step {o.seen}'s data (stale)"
            )
        else:  # a disagreement between the race check and the executor is a bug to chase, so say it loudly
            lines.append(f"  witness: NOT REPRODUCED for {race.key().text()} (simulator inconsistency)")
    return lines


def cmd_check(args, out: TextIO) -> int:
    from .reference.run import run_scenario
    from .reference.sim.races import check_trace

    scenarios, traces = _load_targets(args.targets, args.catalog)
    if not scenarios and not traces:
        raise InputError("<flags>", "SCENARIO", "expected at least one scenario or trace file, or --catalog")
    runs = [(run_scenario(s, args.steps), s) for s in scenarios] + [(t, None) for t in traces]
    reports = []
    for trace, _ in runs:
        reports.append(check_trace(trace))
    if args.json:
        json.dump([r.to_dict() for r in reports], out, indent=2)
        out.write("\n")
    else:
        for (trace, _), report in zip(runs, reports):
            head = f"{report.scenario}: {report.verdict.text}  ({report.steps} steps, {report.ops} ops)"
            out.write(head + "\n")
            for race in report.distinct():
                steps = sorted({r.step for r in report.races if r.key() == race.key()})
                out.write("\n".join("  " + line for line in race.explain().splitlines()) + "\n")
                out.write(f"    (in steps {', '.join(map(str, steps))})\n")
            if args.witness and not report.safe:
                out.write("\n".join(_witness_lines(trace, report)) + "\n")
    return EXIT_OK if all(r.safe for r in reports) else EXIT_RACE


def cmd_catalog(args, out: TextIO) -> int:
    from .catalog import load_catalog
    from .reference.check import check_scenario

    rows, ok = [], True
    for s in load_catalog():
        report = check_scenario(s, args.steps)
        got = report.verdict.value
        want = s.expect.verdict.value if s.expect else "-"
        agree = s.expect is None or agreement(s.expect, report.verdict, [r.id for r in report.races])[0]
        ok &= agree
        races = "; ".join(k.text() for k in sorted({r.key() for r in report.races})) or "-"
        rows.append((s.name, got, want, "yes" if agree else "NO", races))
    if args.json:
        keys = ("scenario", "verdict", "expected", "agrees", "races")
        json.dump([dict(zip(keys, r)) for r in rows], out, indent=2)
        out.write("\n")
    else:
        widths = [max(len(str(r[i])) for r in rows + [("scenario", "verdict", "expected", "agrees", "")]) for i in range(4)]
        header = ("scenario", "verdict", "expected", "agrees", "races (location@phase/site)")
        for r in [header] + rows:
            out.write("  ".join(str(c).ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4] + "\n")
        out.write(f"{len(rows)} scenarios, {sum(r[3] == 'yes' for r in rows)} as expected\n")
    return EXIT_OK if ok else EXIT_RACE


def cmd_trace(args, out: TextIO) -> int:
    from .atomic import write_text_atomic
    from .reference.run import run_scenario
    from .scenario_io import load

    trace = run_scenario(load(args.scenario), args.steps)
    text = trace.to_json(indent=1) + "\n"
    if args.out:
        write_text_atomic(Path(args.out), text)
    else:
        out.write(text)
    return EXIT_OK


def cmd_audit(args, out: TextIO) -> int:
    from .audit import exit_code, run_audit

    parts = run_audit(Path(args.docs), Path(args.corpus), args.err, args.progress)
    width = max(len(p.name) for p in parts)
    for p in parts:
        status = "ok" if p.ok else ("unknown" if p.unknown else "FAILED")
        out.write(f"{p.name.ljust(width)}  {status:7}  {p.summary}  ({p.seconds:.1f} s)\n")
    out.write(f"audit {'passed' if exit_code(parts) == 0 else 'FAILED'} in {sum(p.seconds for p in parts):.1f} s; "
              f"documents in {Path(args.docs) / 'audit'}\n")
    return exit_code(parts)


def cmd_schema(args, out: TextIO) -> int:
    from .schema import SCENARIO_SCHEMA

    json.dump(SCENARIO_SCHEMA, out, indent=2)
    out.write("\n")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fencecheck", description="Prove SGLang's shared-read fence safe, or show the race.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("check", help="check scenario files (.toml) or traces (.json) for write-after-read races")
    p.add_argument("targets", nargs="*", metavar="SCENARIO")
    p.add_argument("--catalog", action="store_true", help="also check every scenario of the built-in catalog")
    p.add_argument("--steps", type=_positive, default=None, help="steps to run (default: each scenario's own)")
    p.add_argument("--json", action="store_true", help="machine-readable reports")
    p.add_argument("--witness", action="store_true", help="replay each race under its witness interleaving")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("catalog", help="check the built-in catalog against its expected verdicts")
    p.add_argument("--steps", type=_positive, default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_catalog)

    p = sub.add_parser("trace", help="write the reference's host-ordered trace of a scenario (JSON)")
    p.add_argument("scenario")
    p.add_argument("--steps", type=_positive, default=None)
    p.add_argument("--out", "-o", default=None, help="file to write (default: stdout)")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("prove", help="run the proof obligations; exit 0 all as expected, 1 one differs, 3 unknown")
    p.add_argument("--only", nargs="+", metavar="GLOB", help="only obligations whose name matches (fnmatch)")
    p.add_argument("--docs", default=None, metavar="DIR", help="write DIR/proofs.md and DIR/counterexamples/")
    p.add_argument("--json", action="store_true")
    p.add_argument("--progress", action="store_true", help="print each obligation as it finishes (stderr)")
    p.add_argument("--timings", default=None, metavar="FILE", help="write the run's times and rlimits here (JSON)")
    p.set_defaults(func=cmd_prove)

    p = sub.add_parser("verify", help="prove one backend (a backend file) safe in every context, or show the race")
    p.add_argument("backend", metavar="BACKEND.toml")
    p.add_argument("--out", "-o", default=None, help="write the counterexample scenario here, if there is one")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("traces", help="generate the model's trace corpus (DIR/corpus.jsonl)")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--progress", action="store_true", help="show a progress bar even when stderr is not a terminal")
    p.set_defaults(func=cmd_traces)

    p = sub.add_parser("replay", help="replay a trace corpus: conformance, verdicts, witnesses, second oracle")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--device", choices=["sim", "cuda"], default="sim")
    p.add_argument("--seed", type=int, default=0, help="seed of the random interleavings")
    p.add_argument("--json", action="store_true")
    p.add_argument("--progress", action="store_true")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("regress", help="write a pytest module with one regression test per corpus trace")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--out", required=True, metavar="FILE.py")
    p.add_argument("--only", nargs="+", metavar="GLOB", help="only traces whose id matches (e.g. 'catalog/*')")
    p.set_defaults(func=cmd_regress)

    p = sub.add_parser("audit", help="prove, check the catalog, generate and replay the corpus, write docs/audit/")
    p.add_argument("--docs", default="docs", metavar="DIR")
    p.add_argument("--corpus", default="build/corpus", metavar="DIR", help="where the corpus is written")
    p.add_argument("--progress", action="store_true")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("schema", help="print the JSON Schema of scenario files")
    p.set_defaults(func=cmd_schema)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = build_parser().parse_args(argv)
        args.err = err
        return args.func(args, out)
    except InputError as e:
        err.write(f"fencecheck: error: {e}\n")
        return EXIT_BAD_INPUT
    except FencecheckError as e:
        err.write(f"fencecheck: error: {e}\n")
        return EXIT_BAD_INPUT
    except OSError as e:  # an output that cannot be written: say which and why, in one line
        err.write(f"fencecheck: error: {e.filename or ''}: {e.strerror or e}\n")
        return EXIT_BAD_INPUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
