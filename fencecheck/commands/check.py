"""``fencecheck check``: scenario and trace files (and a catalog) checked for write-after-read races, each
backend's declaration for honesty, each ``[expect]`` compared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence, TextIO

from fencecheck.commands.common import PROGRESS_HELP, outputs, steps
from fencecheck.errors import say
from fencecheck.errors import (
    EXIT_CODES_HELP,
    EXIT_OK,
    EXIT_RACE,
    InputError,
    ScenarioError,
    TraceError,
)
from fencecheck.verdict import agreement


def run_steps(s, steps: int | None):
    """The reference's trace of ``s`` for ``steps`` steps (its own when None), within the scenario's limits."""
    from fencecheck.reference.run import run_scenario

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
    from fencecheck.files.catalog import load_catalog
    from fencecheck.files.inputs import read_input
    from fencecheck.files.scenario_io import load
    from fencecheck.trace_json import parse_json

    scenarios, traces = [], []
    for p in paths:
        if p.endswith(".json"):
            traces.append(parse_json(read_input(Path(p), TraceError), p))
        else:
            s = load(p)
            warn_unknown_locations(s, p, err)
            scenarios.append((s, p))
    if catalog is not None:
        scenarios.extend((s, None) for s in load_catalog(catalog))
    return scenarios, traces


def _backend_location_keys(bf):
    """(key, location) of every shared location a backend file's backends read, keys spelled as in the file (the
    root backend's at the top, the others under ``backends.NAME``)."""
    for name, b in bf.backends.items():
        prefix = "" if name == bf.root.name else f"backends.{name}."
        for mode, sites in b.reads.items():
            for site, locs in sites.items():
                site_text = getattr(site, "value", site)
                for loc in locs:
                    yield f"{prefix}reads.{mode}.{site_text}", loc


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


def warn_unknown_locations(s, path: str, err: TextIO | None) -> None:
    """One warning line per (key, location) of a scenario or a backend file (``s``) outside
    ``vocab.SHARED_LOCATIONS``: the file, the key, the closest known names. A warning only: a scenario may model a location fencecheck does not know; the exit code is unchanged."""
    from fencecheck.vocab import SHARED_LOCATIONS, closest_locations

    if err is None:
        return
    keys = _location_keys(s) if hasattr(s, "algorithm") else _backend_location_keys(s)
    for key, loc in keys:
        if loc in SHARED_LOCATIONS:
            continue
        close = closest_locations(loc)
        hint = f"did you mean {', '.join(map(repr, close))}?" if close else \
            f"known: {', '.join(sorted(SHARED_LOCATIONS))}"
        say(err, f"fencecheck: warning: {path}: {key}: unknown shared location {loc!r} ({hint})")


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
    from fencecheck.files.catalog import DEFAULT_VERSION, VERSIONS

    if value is None or value in VERSIONS:
        return targets, value
    if value.endswith((".toml", ".json")):
        return [value, *targets], DEFAULT_VERSION
    raise InputError("<flags>", "--catalog", f"expected a catalog version ({', '.join(VERSIONS)}), got {value!r}")


def cmd_check(args, out: TextIO) -> int:
    import dataclasses

    from fencecheck.commands.progress import progress_bar
    from fencecheck.reference.honesty import honesty_findings, readers
    from fencecheck.reference.sim.races import check_trace

    targets, catalog = _catalog_flag(list(args.targets), args.catalog)
    scenarios, traces = _load_targets(targets, catalog, args.err)
    if not scenarios and not traces:
        raise InputError("<flags>", "SCENARIO", "expected at least one scenario or trace file, or --catalog")
    bar = progress_bar(len(scenarios) + len(traces), "checking", args.progress, args.err)
    results = []  # (trace, scenario or None, report, expectation line or None, agrees)
    try:
        for s, _ in scenarios:
            trace = run_steps(s, args.steps)
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
    if not args.json:
        out.write(verdict_line([(report, agrees) for _, _, report, _, agrees in results]) + "\n")
    return EXIT_OK if ok else EXIT_RACE


def verdict_line(results: list) -> str:
    """The last line of ``check``'s text: the verdict over every scenario and trace checked ((report, agrees)
    each), naming those that race, are dishonest, are unknown or differ from their expectation."""
    def names(pick) -> str:
        picked = [r.scenario for r, a in results if pick(r, a)]
        return f" ({', '.join(picked[:6])}{', ...' if len(picked) > 6 else ''})" if picked else ""

    parts = []
    racing = sum(1 for r, _ in results if not r.safe and r.verdict.value == "counterexample")
    unknown = sum(1 for r, _ in results if r.verdict.value == "unknown")
    dishonest = sum(1 for r, _ in results if r.findings)
    differ = sum(1 for _, a in results if not a)
    if racing:
        parts.append(f"{racing} with a race{names(lambda r, a: r.verdict.value == 'counterexample')}")
    if unknown:
        parts.append(f"{unknown} unknown{names(lambda r, a: r.verdict.value == 'unknown')}")
    if dishonest:
        parts.append(f"{dishonest} with a dishonest declaration{names(lambda r, a: bool(r.findings))}")
    if differ:
        parts.append(f"{differ} differing from their expectation{names(lambda r, a: not a)}")
    n = f"{len(results)} run{'s' if len(results) != 1 else ''}"
    if not parts:
        return f"check: {n}: {'all ' if len(results) > 1 else ''}race-free, honest and as expected"
    return f"check: {n}: " + "; ".join(parts)


def check_witness_text(path: Path) -> tuple[str, int]:
    """What ``fencecheck check PATH --witness`` prints on stdout, and its exit status (the audit's release document
    quotes it)."""
    import argparse
    import io

    parser = argparse.ArgumentParser(prog="fencecheck")
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["check", str(path), "--witness"])
    args.err = io.StringIO()
    out = io.StringIO()
    code = cmd_check(args, out)
    return out.getvalue(), code


CHECK_HELP = """Check scenarios (and traces) for write-after-read races, and each backend's declaration for honesty.

A scenario with an [expect] table is compared with its expectation (one line: as expected, or how it differs). A
backend that reads outside what its declaration for a mode covers is a finding (DISHONEST ...), naming the backend
at fault (the child, when the phase's backend is a composite or hybrid wrapper). Exit 0 only when every run is
race-free, every declaration honest and every expectation met; a race, a finding or a differing expectation is
exit 1. A shared location fencecheck does not know is a warning on stderr (the exit code is unchanged)."""


CHECK_EXIT_CODES = EXIT_CODES_HELP.replace(
    "  1  race / counterexample / a verdict differs from its expectation",
    "  1  race / counterexample / a verdict differs from its expectation / a dishonest declaration (a finding)")


def add_parser(sub) -> None:
    """The ``check`` subcommand's arguments."""
    from fencecheck.files.catalog import DEFAULT_VERSION as CATALOG_DEFAULT
    from fencecheck.files.catalog import VERSIONS as CATALOG_VERSIONS

    p = sub.add_parser("check", help="check scenario files (.toml) or traces (.json) for write-after-read races",
                       description=CHECK_HELP, epilog=CHECK_EXIT_CODES)
    p.add_argument("targets", nargs="*", metavar="SCENARIO", help="scenario files (.toml) and trace files (.json)")
    p.add_argument("--catalog", nargs="?", const=CATALOG_DEFAULT, default=None, metavar="VERSION",
                   help=f"also check every scenario of the built-in catalog of VERSION ({', '.join(CATALOG_VERSIONS)}; "
                        f"default {CATALOG_DEFAULT}, SGLang as released)")
    p.add_argument("--steps", type=steps, default=None, help="steps to run (default: each scenario's own)")
    p.add_argument("--json", action="store_true", help="machine-readable reports (one object per scenario or trace)")
    p.add_argument("--witness", action="store_true",
                   help="replay each race under its witness interleaving (with --json: the schedule and the stale read)")
    p.add_argument("--progress", action="store_true", help=PROGRESS_HELP)
    p.set_defaults(func=cmd_check, **outputs(inputs=(("targets", "file"),)))
