"""What the subcommands share: argument types, help texts, the outputs a command checks before its work, and the
one line on stderr every message is."""

from __future__ import annotations

import argparse
from typing import TextIO

from fencecheck.errors import one_line, quote


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {quote(text)}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {quote(text)}")
    return value


def steps(text: str) -> int:
    from fencecheck.scenario import MAX_STEPS

    value = positive(text)
    if value > MAX_STEPS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_STEPS:,} steps, got {value:,}")
    return value


PROGRESS_HELP = "show a progress bar on stderr even when stderr is not a terminal (it shows on a terminal anyway)"


def outputs(*specs: tuple[str, bool]) -> dict:
    """``set_defaults`` for a command that writes: (attribute, is a folder) of each output, checked before the work."""
    return {"outputs": specs}


def say(err: TextIO, line: str) -> None:
    """One line on stderr; a stderr that cannot take it is not worth a second error."""
    try:
        err.write(one_line(line, 2000) + "\n")
        err.flush()
    except (OSError, ValueError):
        pass
