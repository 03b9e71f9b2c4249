"""What the subcommands share: argument types, help texts and the outputs a command checks before its work."""

from __future__ import annotations

import argparse

from fencecheck.errors import quote


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


def outputs(*specs: tuple[str, bool], inputs: tuple[tuple[str, str], ...] = ()) -> dict:
    """``set_defaults`` for a command that writes: (attribute, is a folder) of each output, checked before the work,
    and (attribute, kind) of each input it reads, so that no output replaces an input: kind ``file`` (a file, or
    several), ``corpus`` (a corpus folder: its corpus file is read) or ``tree`` (a source tree: its modules)."""
    return {"outputs": specs, "inputs": inputs}
