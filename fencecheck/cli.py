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

from .errors import FencecheckError, InputError

EXIT_OK, EXIT_RACE, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3


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
        stale = [o for o in stale_reads(hb, schedule) if (o.location, o.phase, o.site) == race.key()]
        if stale:
            o = stale[0]
            lines.append(
                f"  witness: running the write (and what precedes it) first, the step {o.step} read of {o.location} "
                f"at {o.site} saw step {o.seen}'s data (stale)"
            )
        else:  # a disagreement between the race check and the executor is a bug to chase, so say it loudly
            lines.append(f"  witness: NOT REPRODUCED for {race.key()} (simulator inconsistency)")
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
            head = f"{report.scenario}: {'safe' if report.safe else 'RACE'}  ({report.steps} steps, {report.ops} ops)"
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
        got = "safe" if report.safe else "race"
        want = s.expect.verdict if s.expect else "-"
        got_keys = sorted({r.key() for r in report.races})
        want_keys = sorted({(e.location, e.phase, e.site) for e in s.expect.races}) if s.expect else got_keys
        agree = s.expect is None or (got == want and got_keys == want_keys)
        ok &= agree
        races = "; ".join(f"{loc}@{phase}/{site}" for loc, phase, site in got_keys) or "-"
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


def cmd_prove(args, out: TextIO) -> int:
    import fnmatch
    import json as _json

    from .proofs.obligations import OBLIGATIONS, catalog_obligations
    from .proofs.report import markdown, table, write_counterexample
    from .proofs.runner import evaluate

    obligations = OBLIGATIONS + catalog_obligations()
    if args.only:
        obligations = [o for o in obligations if any(fnmatch.fnmatch(o.name, pat) for pat in args.only)]
        if not obligations:
            raise InputError("<flags>", "--only", f"no obligation matches {' '.join(args.only)!r}")
    results = []
    for ob in obligations:
        results.append(evaluate(ob))
        if args.progress:
            r = results[-1]
            args.err.write(f"  {ob.name}: {r.verdict.value} ({r.seconds:.2f} s)\n")
    if args.json:
        _json.dump([{"obligation": r.obligation.name, "verdict": r.verdict.value, "expected": r.obligation.expected.value,
                     "as_expected": r.ok, "seconds": round(r.seconds, 3), "size": r.size, "reason": r.reason,
                     "nonvacuity": r.nonvacuity, "notes": r.notes} for r in results], out, indent=2)
        out.write("\n")
    else:
        out.write(table(results))
    if args.docs:
        docs = Path(args.docs)
        ce_dir = docs / "counterexamples"
        paths = {r.obligation.name: write_counterexample(r, ce_dir) for r in results if r.counterexample is not None}
        from .atomic import write_text_atomic

        write_text_atomic(docs / "proofs.md", markdown(results, paths, docs))
    if any(not r.ok and r.verdict.value != "unknown" for r in results):
        return EXIT_RACE
    if any(not r.ok for r in results):
        return EXIT_UNKNOWN
    return EXIT_OK


def cmd_verify(args, out: TextIO) -> int:
    from .catalog import load_catalog
    from .model.verify import BOUNDS, verify
    from .report import Verdict
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
        status = "safe" if c.safe else ("UNKNOWN" if c.verdict is Verdict.UNKNOWN else "RACE")
        keys = sorted({r.key() for r in c.races})
        detail = "" if c.safe else "  " + "; ".join(f"{loc}@{ph}/{site}" for loc, ph, site in keys)
        out.write(f"  {c.scenario}: {status}{detail}\n")
    for line in report.advice:
        out.write(f"advice: {line}\n")
    if report.safe:
        return EXIT_OK
    if report.verdict is Verdict.UNKNOWN or any(c.verdict is Verdict.UNKNOWN for c in report.contexts):
        if report.verdict is not Verdict.COUNTEREXAMPLE and all(c.verdict is not Verdict.COUNTEREXAMPLE for c in report.contexts):
            return EXIT_UNKNOWN
    return EXIT_RACE


def _progress(total: int, desc: str, enabled: bool):
    """A tqdm bar on stderr when asked for or when stderr is a terminal; a no-op otherwise."""
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="trace", disable=not (enabled or sys.stderr.isatty()), leave=False)
    return bar


def cmd_traces(args, out: TextIO) -> int:
    from . import __version__
    from .atomic import write_text_atomic
    from .catalog import load_catalog
    from .corpus_io import FILENAME, record_lines, render
    from .model.corpus import FAMILIES, SEED, THREE_PHASE_SAMPLE, build_corpus, total_configurations
    from .model.solver import version
    from .scenario_io import scenario_to_dict

    catalog = load_catalog()
    bar = _progress(total_configurations(len(catalog)), "generating", args.progress)
    records, stats = build_corpus(catalog, bar.update)
    bar.close()
    lines = record_lines([
        {
            "id": r.id, "family": r.family, "configurations": r.configurations,
            "scenario": scenario_to_dict(r.model.scenario), "trace": r.model.trace.to_dict(),
            "expected": r.model.verdict.value, "races": [list(x) for x in r.model.races], "witness": r.model.witness,
        }
        for r in records
    ])
    header = {
        "fencecheck": __version__,
        "model": {"steps": 2, "locations": 1, "families": {name: " ".join((make.__doc__ or name).split())
                                                            for name, make in FAMILIES.items()},
                  "three_phase_sample": THREE_PHASE_SAMPLE},
        "seed": SEED,
        "solver": f"z3 {version()} (traces are the model's program run concretely)",
        "statistics": stats,
    }
    target = Path(args.out) / FILENAME
    write_text_atomic(target, render(header, lines))
    for family, st in stats.items():
        out.write(f"{family}: {st['configurations']} configurations -> {st['behaviours']} behaviours\n")
    out.write(f"{len(lines)} traces written to {target}\n")
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

    if args.device == "cuda":
        from .gpu.replay import replay_corpus_cuda

        return replay_corpus_cuda(args, out)
    from .reference.replay import replay

    _, records = read(args.dir)
    bar = _progress(len(records), "replaying", args.progress)
    results = []
    for rec in records:
        results.append(replay(rec, seed=args.seed))
        bar.update(1)
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
    import fnmatch

    from .atomic import write_text_atomic
    from .corpus_io import read
    from .regress import render

    header, records = read(args.dir)
    if args.only:
        records = [r for r in records if any(fnmatch.fnmatch(r.id, pat) for pat in args.only)]
        if not records:
            raise InputError("<flags>", "--only", f"no trace matches {' '.join(args.only)!r}")
    source = f"{len(records)} traces, corpus sha256 {header['content_sha256'][:16]}"
    write_text_atomic(Path(args.out), render(records, source))
    out.write(f"{len(records)} tests written to {args.out}\n")
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
