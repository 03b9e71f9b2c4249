"""fencecheck's one error hierarchy. Races are values, never exceptions: these are for bad input and misuse."""

from __future__ import annotations


#: Exit codes of every command: safe / all as expected, race / a verdict differs, bad input, unknown verdict.
EXIT_OK, EXIT_RACE, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3


class FencecheckError(Exception):
    """Base of every error fencecheck raises on purpose."""


class InputError(FencecheckError):
    """Bad user input (a scenario file, a trace, a flag). ``str(err)`` is one line naming where and what.

    ``source`` is the file (or ``<flag>``), ``key`` the dotted path inside it, ``expected`` what was wanted.
    """

    def __init__(self, source: str, key: str, expected: str):
        self.source, self.key, self.expected = source, key, expected
        where = f"{source}: {key}" if key else source
        super().__init__(f"{where}: {expected}")


class ScenarioError(InputError):
    """A scenario file or object that does not describe a valid configuration."""


class TraceError(InputError):
    """A trace file that is not a valid fencecheck trace."""


class ScheduleError(FencecheckError):
    """A device interleaving that breaks the trace's happens-before order."""
