"""The ``fencecheck`` command. Each subcommand is a plain function of (args, out) returning the exit code: it parses
its inputs, calls the library, renders the result and maps it to an exit code.

Exit codes (``fencecheck.errors``; in every command's ``--help``): 0 safe / all as expected, 1 race / a verdict
differs from its expectation, 2 bad input, 3 unknown (a solver ran out of budget; never reported as proved), 4 I/O
failure, 70 a bug in fencecheck, 130 interrupted, 141 stdout closed by its reader (quietly). Every error is one line
on stderr (bad input names the file, the key and what was expected); never a traceback. Outputs are checked for
writability before the work starts.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from pathlib import Path
from typing import Sequence, TextIO

from . import __version__
from .corpus_commands import cmd_regress, cmd_replay, cmd_traces
from .errors import (
    EXIT_BROKEN_PIPE,
    EXIT_BUG,
    EXIT_CODES_HELP,
    EXIT_INTERRUPTED,
    EXIT_IO,
    EXIT_OK,
    EXIT_RACE,
    FencecheckError,
    InputError,
    TraceError,
    ScenarioError,
    one_line,
    os_reason,
    quote,
)
from .proof_commands import cmd_prove, cmd_verify
from .report import agreement

#: Set to see the traceback of an unexpected exception (a bug) after its one-line report.
TRACEBACK_ENV = "FENCECHECK_TRACEBACK"


class _Exit(Exception):
    """argparse asked to exit (``--help``, ``--version``) with this status."""

    def __init__(self, status: int):
        self.status = status


class _Parser(argparse.ArgumentParser):
    """argparse that prints help to the command's ``out``, reports a bad flag in one line (exit 2) and never calls
    ``sys.exit`` itself."""

    def __init__(self, *args, out: TextIO | None = None, **kwargs):
        kwargs.setdefault("epilog", EXIT_CODES_HELP)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self._out = out

    def _print_message(self, message: str, file=None) -> None:
        if message:
            (self._out or sys.stdout).write(message)

    def exit(self, status: int = 0, message: str | None = None):
        raise _Exit(status)

    def error(self, message: str):  # noqa: D401 - argparse API
        raise InputError("<flags>", "", message)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {quote(text)}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {quote(text)}")
    return value


def _steps(text: str) -> int:
    from .scenario import MAX_STEPS

    value = _positive(text)
    if value > MAX_STEPS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_STEPS:,} steps, got {value:,}")
    return value


def _run(s, steps: int | None):
    """The reference's trace of ``s`` for ``steps`` steps (its own when None), within the scenario's limits."""
    from .reference.run import run_scenario

    if steps is not None:
        try:
            s = s.replace(steps=steps)
        except ScenarioError as err:
            raise InputError("<flags>", "--steps", f"{s.name}: {err.expected}") from None
    return run_scenario(s, steps)


def _load_targets(paths: Sequence[str], catalog: str | None, err: TextIO | None = None):
    """Scenarios from files (``.toml``) plus the catalog of version ``catalog`` (none: no catalog), each with its
    file (None for the catalog's); traces
    (``.json``) come back separately. A scenario file naming an unknown shared location gets a warning on ``err``."""
    from .atomic import read_input
    from .catalog import load_catalog
    from .scenario_io import load
    from .trace_json import parse_json

    scenarios, traces = [], []
    for p in paths:
        if p.endswith(".json"):
            traces.append(parse_json(read_input(Path(p), TraceError), p))
        else:
            s = load(p)
            _warn_unknown_locations(s, p, err)
            scenarios.append((s, p))
    if catalog is not None:
        scenarios.extend((s, None) for s in load_catalog(catalog))
    return scenarios, traces


def _location_keys(s):
    """(key, location) of every shared location a scenario names, keys spelled as in its file."""
    for name, b in s.backends.items():
        for mode, sites in b.reads.items():
            for site, locs in sites.items():
                site_text = getattr(site, "value", site)
                for loc in locs:
                    yield f"backends.{name}.reads.{mode}.{site_text}", loc
    for kind, phases in s.algorithm.steps.items():
        for i, phase in enumerate(phases):
            for loc in phase.worker_reads_after:
                yield f"algorithm.steps.{kind.value}[{i}].worker_reads_after", loc
    for loc in s.scheduler.writes:
        yield "scheduler.writes", loc


def _warn_unknown_locations(s, path: str, err: TextIO | None) -> None:
    """One warning line per (key, location) outside ``vocab.SHARED_LOCATIONS``: the file, the key, the closest known
    names. A warning only: a scenario may model a location fencecheck does not know; the exit code is unchanged."""
    from .vocab import SHARED_LOCATIONS, closest_locations

    if err is None:
        return
    for key, loc in _location_keys(s):
        if loc in SHARED_LOCATIONS:
            continue
        close = closest_locations(loc)
        hint = f"did you mean {', '.join(map(repr, close))}?" if close else \
            f"known: {', '.join(sorted(SHARED_LOCATIONS))}"
        _say(err, f"fencecheck: warning: {path}: {key}: unknown shared location {loc!r} ({hint})")


def _witnesses(trace, report) -> list[tuple]:
    """Per distinct race: (race, witness schedule as kernel indices, the first stale read of the race's place under
    it, or None when the schedule shows none). Steps are 1-based, as in ``RaceId``; ``seen`` 0 is the initial data."""
    from fencecheck.reference.sim.hb import analyze
    from fencecheck.reference.sim.interleave import witnesses

    races = report.distinct()
    return [(race, schedule, o) for race, (schedule, o) in zip(races, witnesses(analyze(trace), races))]


def _witness_lines(witnesses) -> list[str]:
    lines = []
    for race, _, o in witnesses:
        if o is not None:
            lines.append(
                f"  witness: running the write (and what precedes it) first, the step {o.step} read of {o.location} "
                f"at {o.site} saw step {o.seen}'s data (stale)"
            )
        else:  # a disagreement between the race check and the executor is a bug to chase, so say it loudly
            lines.append(f"  witness: NOT REPRODUCED for {race.key().text()} (simulator inconsistency)")
    return lines


def _witness_json(witnesses) -> list[dict]:
    """Per distinct race: its place, the racing write's host op, the witness ``schedule`` (indices into the trace's
    kernels in host order, 0-based: the order the device runs them) and the ``stale_read`` it shows (its step and
    the step whose data it saw, 1-based as in ``RaceId``), or None with ``reproduced`` false."""
    out = []
    for race, schedule, o in witnesses:
        stale = None if o is None else {"kernel_index": o.kernel, "step": o.step, "phase": o.phase, "site": o.site,
                                        "location": o.location, "seen": o.seen}
        out.append({"race": race.key().to_dict(), "write_op": race.write_op, "schedule": schedule,
                    "stale_read": stale, "reproduced": o is not None})
    return out


def _expect_line(s, report) -> tuple[bool, str]:
    """Whether the run meets the scenario's ``[expect]`` (``agreement``), and the one line saying so."""
    ok, why = agreement(s.expect, report.verdict, [r.id for r in report.races])
    races = "; ".join(r.text() for r in s.expect.races)
    want = s.expect.verdict.value + (f" ({races})" if races else "")
    return ok, (f"  expect: as expected: {want}" if ok else f"  expect: DIFFERS from [expect]: {why}")


def _catalog_flag(targets: list[str], value: str | None) -> tuple[list[str], str | None]:
    """``--catalog [VERSION]``: the targets and the catalog version to add (None: no catalog). A file name right
    after a bare ``--catalog`` is a target, not a version."""
    from .catalog import DEFAULT_VERSION, VERSIONS

    if value is None or value in VERSIONS:
        return targets, value
    if value.endswith((".toml", ".json")):
        return [value, *targets], DEFAULT_VERSION
    raise InputError("<flags>", "--catalog", f"expected a catalog version ({', '.join(VERSIONS)}), got {value!r}")


def cmd_check(args, out: TextIO) -> int:
    import dataclasses

    from .corpus_commands import progress_bar
    from .reference.honesty import honesty_findings, readers
    from .reference.sim.races import check_trace

    targets, catalog = _catalog_flag(list(args.targets), args.catalog)
    scenarios, traces = _load_targets(targets, catalog, args.err)
    if not scenarios and not traces:
        raise InputError("<flags>", "SCENARIO", "expected at least one scenario or trace file, or --catalog")
    bar = progress_bar(len(scenarios) + len(traces), "checking", args.progress, args.err)
    results = []  # (trace, scenario or None, report, expectation line or None, agrees)
    try:
        for s, _ in scenarios:
            trace = _run(s, args.steps)
            report = dataclasses.replace(check_trace(trace), findings=honesty_findings(s))
            agrees, line = _expect_line(s, report) if s.expect is not None else (True, None)
            results.append((trace, s, report, line, agrees))
            bar.update(1)
        for t in traces:
            results.append((t, None, check_trace(t), None, True))
            bar.update(1)
    finally:
        bar.close()

    def read_by(s, race) -> tuple[str, ...]:
        return readers(s, race.step, race.phase, race.site, race.location) if s is not None else ()

    if args.json:
        docs = []
        for trace, s, report, line, agrees in results:
            d = report.to_dict()
            for entry, race in zip(d["distinct_races"], report.distinct()):
                entry["read_by"] = list(read_by(s, race))
            if s is not None and s.expect is not None:
                d["expect"] = {"verdict": s.expect.verdict.value, "races": [r.to_dict() for r in s.expect.races],
                               "agrees": agrees, "line": line.strip()}
            if args.witness:
                d["witness"] = _witness_json(_witnesses(trace, report)) if not report.safe else []
            docs.append(d)
        json.dump(docs, out, indent=2)
        out.write("\n")
    else:
        for trace, s, report, line, agrees in results:
            head = f"{report.scenario}: {report.verdict.text}  ({report.steps} steps, {report.ops} ops)"
            if report.findings:
                head += f"; {len(report.findings)} dishonest declaration{'s' if len(report.findings) > 1 else ''}"
            out.write(head + "\n")
            for f in report.findings:
                out.write(f"  {f.text()}\n")
            steps_of: dict = {}
            for r in report.races:
                steps_of.setdefault(r.key(), set()).add(r.step)
            for race in report.distinct():
                steps = sorted(steps_of[race.key()])
                out.write("\n".join("  " + line for line in race.explain().splitlines()) + "\n")
                by = read_by(s, race)
                if by:
                    out.write(f"    read by backend {', '.join(by)} (the child of the phase's backend that reads)\n")
                out.write(f"    (in steps {', '.join(map(str, steps))})\n")
            if args.witness and not report.safe:
                out.write("\n".join(_witness_lines(_witnesses(trace, report))) + "\n")
            if line is not None:
                out.write(line + "\n")
    ok = all(report.clean and agrees for _, _, report, _, agrees in results)
    return EXIT_OK if ok else EXIT_RACE


def cmd_catalog(args, out: TextIO) -> int:
    from .catalog import load_catalog
    from .reference.sim.races import check_trace

    rows, ok = [], True
    for s in load_catalog(args.catalog_version):
        report = check_trace(_run(s, args.steps))
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
    from .scenario_io import load

    s = load(args.scenario)
    _warn_unknown_locations(s, args.scenario, args.err)
    trace = _run(s, args.steps)
    text = trace.to_json(indent=1) + "\n"
    if args.out:
        write_text_atomic(Path(args.out), text)
    else:
        out.write(text)
    return EXIT_OK


def check_witness_text(path: Path) -> tuple[str, int]:
    """What ``fencecheck check PATH --witness`` prints on stdout, and its exit status (the audit's release document
    quotes it)."""
    import io

    out = io.StringIO()
    code = main(["check", str(path), "--witness"], out, io.StringIO())
    return out.getvalue(), code


def cmd_audit(args, out: TextIO) -> int:
    from .audit import exit_code, run_audit

    parts = run_audit(Path(args.docs), Path(args.corpus), args.err, args.progress, Path(args.timings),
                      check_text=check_witness_text)
    if args.json:
        json.dump({"passed": exit_code(parts) == 0, "exit_code": exit_code(parts),
                   "documents": str(Path(args.docs) / "audit"),
                   "parts": [{"name": p.name, "status": "ok" if p.ok else ("unknown" if p.unknown else "failed"),
                              "summary": p.summary, "seconds": round(p.seconds, 3)} for p in parts]}, out, indent=2)
        out.write("\n")
        return exit_code(parts)
    width = max(len(p.name) for p in parts)
    for p in parts:
        status = "ok" if p.ok else ("unknown" if p.unknown else "FAILED")
        out.write(f"{p.name.ljust(width)}  {status:7}  {p.summary}  ({p.seconds:.1f} s)\n")
    out.write(f"audit {'passed' if exit_code(parts) == 0 else 'FAILED'} in {sum(p.seconds for p in parts):.1f} s; "
              f"documents in {Path(args.docs) / 'audit'}\n")
    return exit_code(parts)


def cmd_schema(args, out: TextIO) -> int:
    from .schema import SCHEMAS

    json.dump(SCHEMAS[getattr(args, "kind", "scenario")], out, indent=2)
    out.write("\n")
    return EXIT_OK


PROGRESS_HELP = "show a progress bar on stderr even when stderr is not a terminal (it shows on a terminal anyway)"

CHECK_HELP = """Check scenarios (and traces) for write-after-read races, and each backend's declaration for honesty.

A scenario with an [expect] table is compared with its expectation (one line: as expected, or how it differs). A
backend that reads outside what its declaration for a mode covers is a finding (DISHONEST ...), naming the backend
at fault (the child, when the phase's backend is a composite or hybrid wrapper). Exit 0 only when every run is
race-free, every declaration honest and every expectation met; a race, a finding or a differing expectation is
exit 1. A shared location fencecheck does not know is a warning on stderr (the exit code is unchanged)."""


CHECK_EXIT_CODES = EXIT_CODES_HELP.replace(
    "  1  race / counterexample / a verdict differs from its expectation",
    "  1  race / counterexample / a verdict differs from its expectation / a dishonest declaration (a finding)")


VERIFY_HELP = """Check one attention backend's SharedReadEnds declarations against its reads in every context: the
symbolic family (any configuration within the bounds, under the main theorem's assumptions) and every catalog
scenario with the backend swapped in. Every race is explained and every proposed change (a declaration, a read moved
out of the graph, or a change outside the backend where no backend change fixes it) is verified over the same
contexts before it is printed. A context where every backend that reads the same locations races is reported as
racing with any backend, with the component that must change."""

VERIFY_EXIT_CODES = EXIT_CODES_HELP.replace(
    "  0  safe / proved / all as expected",
    "  0  safe / proved in every context (a context's own races, where any backend races too, do not count)").replace(
    "  1  race / counterexample / a verdict differs from its expectation",
    "  1  race / counterexample the backend brings (in the symbolic family or a catalog context)").replace(
    "  2  bad input (one line naming the file, the key and what was expected)",
    "  2  bad input (one line naming the file, the key and what was expected; a backend that speaks for no mode)")


def _outputs(*specs: tuple[str, bool]) -> dict:
    """``set_defaults`` for a command that writes: (attribute, is a folder) of each output, checked before the work."""
    return {"outputs": specs}


def build_parser(out: TextIO | None = None) -> argparse.ArgumentParser:
    from .catalog import DEFAULT_VERSION as CATALOG_DEFAULT, VERSIONS as CATALOG_VERSIONS

    parser = _Parser(prog="fencecheck", description="Prove SGLang's shared-read fence safe, or show the race.", out=out)
    parser.add_argument("--version", action="version", version=f"fencecheck {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=functools.partial(_Parser, out=out))

    p = sub.add_parser("check", help="check scenario files (.toml) or traces (.json) for write-after-read races",
                       description=CHECK_HELP, epilog=CHECK_EXIT_CODES)
    p.add_argument("targets", nargs="*", metavar="SCENARIO", help="scenario files (.toml) and trace files (.json)")
    p.add_argument("--catalog", nargs="?", const=CATALOG_DEFAULT, default=None, metavar="VERSION",
                   help=f"also check every scenario of the built-in catalog of VERSION ({', '.join(CATALOG_VERSIONS)}; "
                        f"default {CATALOG_DEFAULT}, SGLang as released)")
    p.add_argument("--steps", type=_steps, default=None, help="steps to run (default: each scenario's own)")
    p.add_argument("--json", action="store_true", help="machine-readable reports (one object per scenario or trace)")
    p.add_argument("--witness", action="store_true",
                   help="replay each race under its witness interleaving (with --json: the schedule and the stale read)")
    p.add_argument("--progress", action="store_true", help=PROGRESS_HELP)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("catalog", help="check the built-in catalog against its expected verdicts")
    p.add_argument("catalog_version", nargs="?", default=CATALOG_DEFAULT, choices=CATALOG_VERSIONS, metavar="VERSION",
                   help=f"the catalog's version ({', '.join(CATALOG_VERSIONS)}; default {CATALOG_DEFAULT})")
    p.add_argument("--steps", type=_steps, default=None, help="steps to run (default: each scenario's own)")
    p.add_argument("--json", action="store_true", help="machine-readable rows (scenario, verdict, expected, agrees)")
    p.set_defaults(func=cmd_catalog)

    p = sub.add_parser("trace", help="write the reference's host-ordered trace of a scenario (JSON)")
    p.add_argument("scenario", metavar="SCENARIO", help="the scenario file (.toml)")
    p.add_argument("--steps", type=_steps, default=None, help="steps to run (default: the scenario's own)")
    p.add_argument("--out", "-o", default=None, help="file to write (default: stdout)")
    p.set_defaults(func=cmd_trace, **_outputs(("out", False)))

    p = sub.add_parser("prove", help="run the proof obligations, each against its expected verdict")
    p.add_argument("--only", nargs="+", metavar="GLOB", help="only obligations whose name matches (fnmatch)")
    p.add_argument("--docs", default=None, metavar="DIR", help="write DIR/proofs.md and DIR/counterexamples/")
    p.add_argument("--json", action="store_true", help="machine-readable results, one object per obligation")
    p.add_argument("--progress", action="store_true", help="print each obligation as it finishes (stderr)")
    p.add_argument("--timings", default=None, metavar="FILE", help="write the run's times and rlimits here (JSON)")
    p.add_argument("--jobs", "-j", type=_positive, default=None, metavar="N",
                   help="worker processes (default: 2, or 1 on one core); the results and documents are the same "
                        "for any N")
    p.set_defaults(func=cmd_prove, **_outputs(("docs", True), ("timings", False)))

    p = sub.add_parser("verify", help="prove one backend (a backend file) safe in every context, or show the race",
                       description=VERIFY_HELP, epilog=VERIFY_EXIT_CODES)
    p.add_argument("backend", metavar="BACKEND.toml",
                   help="the backend file: plain, composite or hybrid (docs/verify.md; fencecheck schema --kind backend)")
    p.add_argument("--out", "-o", default=None, metavar="FILE.toml",
                   help="write the symbolic counterexample as a scenario here, if there is one (replay it with "
                        "fencecheck check FILE.toml --witness)")
    p.add_argument("--json", action="store_true", help="machine-readable report (docs/verify.md)")
    p.add_argument("--jobs", "-j", type=_positive, default=None, metavar="N",
                   help="worker processes for the symbolic checks of the proposed changes (default: 1; more help "
                        "only where cores are free); the report is the same for any N")
    p.add_argument("--progress", action="store_true", help=PROGRESS_HELP)
    p.set_defaults(func=cmd_verify, **_outputs(("out", False)))

    p = sub.add_parser("traces", help="generate the model's trace corpus (DIR/corpus.jsonl)")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write corpus.jsonl into")
    p.add_argument("--json", action="store_true", help="machine-readable summary (families, counts, the file)")
    p.add_argument("--progress", action="store_true", help=PROGRESS_HELP)
    p.set_defaults(func=cmd_traces, **_outputs(("out", True)))

    p = sub.add_parser("replay", help="replay a trace corpus: conformance, verdicts, witnesses, second oracle")
    p.add_argument("dir", metavar="DIR", help="the corpus folder (DIR/corpus.jsonl, as written by traces)")
    p.add_argument("--device", choices=["sim", "cuda"], default="sim",
                   help="replay on the CPU simulator (sim, default) or a CUDA device (cuda)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random interleavings")
    p.add_argument("--json", action="store_true", help="machine-readable rows per family and disagreements")
    p.add_argument("--progress", action="store_true", help=PROGRESS_HELP)
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("regress", help="write a short pytest module that replays the corpus traces through an adapter")
    p.add_argument("dir", metavar="DIR", help="the corpus folder (DIR/corpus.jsonl, as written by traces)")
    p.add_argument("--out", required=True, metavar="FILE.py", help="the pytest module to write")
    p.add_argument("--only", nargs="+", metavar="GLOB",
                   help="only traces whose id matches (e.g. 'catalog/*'); recorded in the module")
    p.set_defaults(func=cmd_regress, **_outputs(("out", False)))

    p = sub.add_parser("audit", help="prove, check the catalog, generate and replay the corpus, write docs/audit/")
    p.add_argument("--docs", default="docs", metavar="DIR", help="where the documents go (default: docs)")
    p.add_argument("--corpus", default="build/corpus", metavar="DIR", help="where the corpus is written")
    p.add_argument("--timings", default="build/timings.json", metavar="FILE",
                   help="where the run's times, rates and machine facts go (JSON; not a document)")
    p.add_argument("--json", action="store_true", help="machine-readable parts (name, status, summary, seconds)")
    p.add_argument("--progress", action="store_true", help=PROGRESS_HELP)
    p.set_defaults(func=cmd_audit, **_outputs(("docs", True), ("corpus", True), ("timings", False)))

    from .sglang_source.command import add_parser as add_sglang_parser

    add_sglang_parser(sub)

    p = sub.add_parser("schema", help="print the JSON Schema of scenario files or backend files")
    p.add_argument("--kind", choices=["scenario", "backend"], default="scenario",
                   help="which file kind (default: scenario)")
    p.set_defaults(func=cmd_schema)
    return parser


def _say(err: TextIO, line: str) -> None:
    """One line on stderr; a stderr that cannot take it is not worth a second error."""
    try:
        err.write(one_line(line, 2000) + "\n")
        err.flush()
    except (OSError, ValueError):
        pass


def _silence(stream: TextIO) -> None:
    """Point ``stream``'s descriptor at /dev/null, so what is left in its buffer is dropped quietly at exit."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run one command; returns its exit code. Never raises (but ``SystemExit``) and never prints a traceback: an
    unexpected exception is reported in one line as a bug (exit 70), Ctrl-C in one line (exit 130), and a stdout
    closed by its reader ends the run quietly (exit 141)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        try:
            args = build_parser(out).parse_args(argv)
        except _Exit as e:
            out.flush()
            return e.status
        args.err = err
        from .atomic import check_output

        for attr, folder in getattr(args, "outputs", ()):
            if getattr(args, attr, None):
                check_output(getattr(args, attr), folder=folder)
        code = args.func(args, out)
        out.flush()
        return code
    except FencecheckError as e:
        _say(err, f"fencecheck: error: {e}")
        return e.exit_code
    except BrokenPipeError:
        _silence(out)
        return EXIT_BROKEN_PIPE
    except OSError as e:  # a read or write outside fencecheck's own files: still one line, naming the file if known
        where = f"{one_line(e.filename)}: " if e.filename else ""
        _say(err, f"fencecheck: error: {where}{os_reason(e)}")
        return EXIT_IO
    except KeyboardInterrupt:
        _say(err, "fencecheck: interrupted")
        return EXIT_INTERRUPTED
    except Exception as e:  # a bug: one line, never a traceback unless asked for
        if os.environ.get(TRACEBACK_ENV):
            import traceback

            traceback.print_exc(file=err)
        _say(err, f"fencecheck: internal error, a bug in fencecheck: {type(e).__name__}: {one_line(e, 300)} "
                  f"(set {TRACEBACK_ENV}=1 for the traceback)")
        return EXIT_BUG


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
