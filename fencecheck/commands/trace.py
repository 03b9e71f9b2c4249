"""``fencecheck trace``: the reference's host-ordered trace of a scenario, as a trace file."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from fencecheck.commands.check import run_steps, warn_unknown_locations
from fencecheck.commands.common import outputs, steps
from fencecheck.errors import EXIT_OK


def cmd_trace(args, out: TextIO) -> int:
    from fencecheck.files.outputs import write_text_atomic
    from fencecheck.files.scenario_io import load

    s = load(args.scenario)
    warn_unknown_locations(s, args.scenario, args.err)
    trace = run_steps(s, args.steps)
    text = trace.to_json(indent=1) + "\n"
    if args.out:
        write_text_atomic(Path(args.out), text)
        out.write(f"trace {trace.scenario}: {trace.steps} steps, {len(trace.ops)} ops written to {args.out} "
                  f"(check it: fencecheck check {args.out})\n")
    else:
        out.write(text)
    return EXIT_OK


def add_parser(sub) -> None:
    """The ``trace`` subcommand's arguments."""
    p = sub.add_parser("trace", help="write the reference's host-ordered trace of a scenario (JSON)")
    p.add_argument("scenario", metavar="SCENARIO", help="the scenario file (.toml)")
    p.add_argument("--steps", type=steps, default=None, help="steps to run (default: the scenario's own)")
    p.add_argument("--out", "-o", default=None, help="file to write (default: stdout)")
    p.set_defaults(func=cmd_trace, **outputs(("out", False), inputs=(("scenario", "file"),)))
