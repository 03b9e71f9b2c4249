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
import os
import sys
from pathlib import Path
from typing import Sequence, TextIO

from fencecheck import __version__
from fencecheck.commands import (
    audit,
    catalog,
    check,
    prove,
    regress,
    replay,
    schema,
    sglang,
    trace,
    traces,
    verify,
)
from fencecheck.errors import say
from fencecheck.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_BUG,
    EXIT_CODES_HELP,
    EXIT_IO,
    INTERRUPTED,
    FencecheckError,
    InputError,
    ended,
    ending_signals,
    one_line,
    os_reason,
    quiet_interrupted_finalizers,
    raise_if_interrupted,
    z3_leaves_interrupts_to_python,
)

#: The subcommands, in the order ``--help`` lists them; each module's ``add_parser`` declares its arguments.
COMMANDS = (check, catalog, trace, prove, verify, traces, replay, regress, audit, sglang, schema)

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


def build_parser(out: TextIO | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog="fencecheck", description="Prove SGLang's shared-read fence safe, or show the race.", out=out)
    parser.add_argument("--version", action="version", version=f"fencecheck {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=functools.partial(_Parser, out=out))
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def _silence(stream: TextIO) -> None:
    """Point ``stream``'s descriptor at /dev/null, so what is left in its buffer is dropped quietly at exit."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _inputs(args) -> tuple[list[Path], list[Path]]:
    """The files and the source trees a command's run reads, from its declared inputs (``common.outputs``)."""
    from fencecheck.files.corpus_io import FILENAME

    files, trees = [], []
    for attr, kind in getattr(args, "inputs", ()):
        value = getattr(args, attr, None)
        for v in (value if isinstance(value, list) else [value] if value else []):
            if kind == "tree":
                trees.append(Path(v))
            else:
                files.append(Path(v) / FILENAME if kind == "corpus" else Path(v))
    return files, trees


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run one command; returns its exit code. Never raises (but ``SystemExit``) and never prints a traceback: an
    unexpected exception is reported in one line as a bug (exit 70), Ctrl-C in one line (exit 130), SIGTERM or
    SIGHUP in one line (exit 143, after every ``finally`` of the run: ``errors.ending_signals``), and a stdout closed
    by its reader ends the run quietly (exit 141)."""
    out = out or sys.stdout
    err = err or sys.stderr
    INTERRUPTED.clear()  # this run's Ctrl-C only
    quiet_interrupted_finalizers()
    z3_leaves_interrupts_to_python()
    with ending_signals():
        return _run(argv, out, err)


def _run(argv, out: TextIO, err: TextIO) -> int:
    try:
        try:
            args = build_parser(out).parse_args(argv)
        except _Exit as e:
            out.flush()
            return e.status
        args.err = err
        from fencecheck.files.outputs import check_not_an_input, check_output

        files, trees = _inputs(args)
        for attr, folder in getattr(args, "outputs", ()):
            if getattr(args, attr, None):
                check_not_an_input(getattr(args, attr), f"--{attr}", files, trees, folder=folder)
                check_output(getattr(args, attr), folder=folder)
        code = args.func(args, out)
        raise_if_interrupted()  # a Ctrl-C swallowed on its way ends the run as one
        out.flush()
        return code
    except FencecheckError as e:
        say(err, f"fencecheck: error: {e}")
        return e.exit_code
    except BrokenPipeError:
        _silence(out)
        return EXIT_BROKEN_PIPE
    except OSError as e:  # a read or write outside fencecheck's own files: still one line, naming the file if known
        where = f"{one_line(e.filename)}: " if e.filename else ""
        say(err, f"fencecheck: error: {where}{os_reason(e)}")
        return EXIT_IO
    except KeyboardInterrupt:
        return ended(err)
    except Exception as e:  # a bug: one line, never a traceback unless asked for
        if INTERRUPTED:  # what a Ctrl-C caused on its way (ctypes wraps one raised in an argument's conversion)
            return ended(err)
        if os.environ.get(TRACEBACK_ENV):
            import traceback

            traceback.print_exc(file=err)
        say(err, f"fencecheck: internal error, a bug in fencecheck: {type(e).__name__}: {one_line(e, 300)} "
                  f"(set {TRACEBACK_ENV}=1 for the traceback)")
        return EXIT_BUG


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
