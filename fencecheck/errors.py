"""fencecheck's one error hierarchy and its exit codes. Races are values, never exceptions: these are for bad input,
failed reads and writes, and misuse.

Every error is one line. What an error quotes from the user (a file name, a key, a value) goes through ``one_line``:
control characters (newlines included) are escaped and anything longer than ``MAX_QUOTED`` characters is cut in the
middle, so a name holding a newline cannot make a two-line error and a 5 MB string cannot make a 5 MB error line.
"""

from __future__ import annotations

import contextlib

#: Exit codes of every command (also in each command's ``--help``; README "Exit codes").
EXIT_OK = 0  # safe / proved / all as expected
EXIT_RACE = 1  # a race / a counterexample / a verdict that differs from its expectation
EXIT_BAD_INPUT = 2  # bad input: a file's content, a flag, a missing input file
EXIT_UNKNOWN = 3  # a solver ran out of budget (never reported as proved)
EXIT_IO = 4  # the operating system refused or failed a read or write (unwritable or full output, ...)
EXIT_OLDER_FENCE = 5  # fencecheck sglang: a tree with a fence older than the SharedReadEnds declarations (reported)
EXIT_NO_FENCE = 6  # fencecheck sglang: a tree without a shared-read fence (no barrier, no declarations)
EXIT_BUG = 70  # an unexpected exception: a bug in fencecheck (sysexits' EX_SOFTWARE)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
EXIT_BROKEN_PIPE = 141  # stdout closed by its reader, e.g. ``| head -1`` (128 + SIGPIPE); nothing is printed
EXIT_TERMINATED = 143  # SIGTERM or SIGHUP (128 + SIGTERM): ended as Ctrl-C ends a run, one line

#: The exit codes as every command's ``--help`` shows them.
EXIT_CODES_HELP = """\
exit codes:
  0  safe / proved / all as expected
  1  race / counterexample / a verdict differs from its expectation
  2  bad input (one line naming the file, the key and what was expected)
  3  unknown (a solver ran out of budget; never reported as proved)
  4  I/O failure (an output that cannot be written, a disk full, an unreadable input)
  5  fencecheck sglang: an SGLang tree with a fence older than the SharedReadEnds
     declarations (its barrier and read-done event reported, nothing decided)
  6  fencecheck sglang: an SGLang tree without a shared-read fence
  70 a bug in fencecheck (an unexpected exception; one line, please report it)
  130 interrupted (Ctrl-C)
  141 stdout closed by its reader (| head): ends quietly
  143 terminated (SIGTERM or SIGHUP), one line; nothing left behind"""

#: At most this many characters of one quoted part (a file name, a key, a message) appear in an error line.
MAX_QUOTED = 400

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(text: object, limit: int = MAX_QUOTED) -> str:
    """``text`` as one printable line of at most about ``limit`` characters: control characters and Unicode line
    separators escaped (``\\n``, ``\\x1b``, ``\\u2028``), the middle of a longer text replaced by a count."""
    text = str(text)
    if len(text) > limit:  # cut before escaping so the work is bounded by ``limit``, not by the input
        head, tail = text[: limit * 3 // 4], text[-(limit // 4):]
        text = f"{head}...[{len(text) - len(head) - len(tail)} characters]...{tail}"
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == " " else _escape(ch) for ch in text)


def quote(value: object, limit: int = MAX_QUOTED) -> str:
    """``repr(value)`` for an error line: one line, at most about ``limit`` characters (a huge value is cut before
    ``repr`` sees it)."""
    if isinstance(value, str) and len(value) > limit:
        value = value[: limit * 3 // 4] + value[-(limit // 4):]
        return one_line(repr(value), limit * 2)
    if isinstance(value, (list, tuple, dict, set)) and len(value) > limit:
        return f"<{type(value).__name__} of {len(value)} items>"
    try:
        text = repr(value)
    except (RecursionError, ValueError):  # a too deep structure, an int past the conversion limit
        return f"<{type(value).__name__}>"
    return one_line(text, limit)


class FencecheckError(Exception):
    """Base of every error fencecheck raises on purpose. ``exit_code`` is what the command exits with."""

    exit_code = EXIT_BAD_INPUT


class InputError(FencecheckError):
    """Bad user input (a scenario file, a trace, a flag). ``str(err)`` is one line naming where and what.

    ``source`` is the file (or ``<flags>``), ``key`` the dotted path inside it, ``expected`` what was wanted. The
    attributes keep what was given; the message is made of their ``one_line`` forms.
    """

    exit_code = EXIT_BAD_INPUT

    def __init__(self, source: str, key: str, expected: str):
        self.source, self.key, self.expected = source, key, expected
        where = f"{one_line(source)}: {one_line(key)}" if key else one_line(source)
        super().__init__(f"{where}: {one_line(expected)}")


class ScenarioError(InputError):
    """A scenario file or object that does not describe a valid configuration."""


class TraceError(InputError):
    """A trace file that is not a valid fencecheck trace."""


class IOFailure(FencecheckError):
    """A read or write the operating system refused or failed. ``path`` is the path as the user gave it (never a
    temporary file), ``why`` the reason (``No space left on device``)."""

    exit_code = EXIT_IO

    def __init__(self, path: str, why: str):
        self.path, self.why = str(path), why
        super().__init__(f"{one_line(self.path)}: {one_line(why)}")


def os_reason(err: OSError) -> str:
    """The reason of an ``OSError`` in words (``No space left on device``), never empty."""
    return err.strerror or str(err) or err.__class__.__name__


class ScheduleError(FencecheckError):
    """A device interleaving that breaks the trace's happens-before order."""


def worker_ignores_interrupts() -> None:
    """A worker process's initializer: Ctrl-C is the parent's to handle (one line, exit 130), which ends the
    workers; a worker that also took it would print its own traceback. z3 is told not to take it either (it would
    install its own handler during each check, cancel the search and answer unknown). SIGTERM and SIGHUP end a
    worker at once, as they do a process that installs nothing (a forked worker would otherwise run the handler it
    inherited from its parent, ``ending_signals``): the parent ends its workers that way."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in _ENDING:
        signal.signal(sig, signal.SIG_DFL)
    z3_leaves_interrupts_to_python()


def z3_leaves_interrupts_to_python() -> None:
    """z3 takes SIGINT for itself during a check when let: it cancels the search and answers unknown, reason
    ``canceled``, the same words as a spent rlimit, and the run would go on with an unknown verdict that is no
    verdict, or (the reader's feasibility checks) with a path kept as feasible. Told not to, z3 leaves SIGINT to
    Python, which raises KeyboardInterrupt when the running check returns (its rlimit bounds how long that takes)."""
    try:
        import z3
    except ImportError:  # pragma: no cover - z3 is a dependency
        return
    z3.set_param("ctrl_c", False)


#: Set once a Ctrl-C reached this process (the SIGINT handler ``quiet_interrupted_finalizers`` installs): the run is
#: ending, even where the KeyboardInterrupt itself was swallowed (``raise_if_interrupted``).
INTERRUPTED: list[bool] = []


def _interrupted(signum, frame) -> None:
    INTERRUPTED.append(True)
    raise KeyboardInterrupt


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt when a Ctrl-C came and was swallowed on its way (``quiet_interrupted_finalizers``): the
    model's checks and the command's end call it (``Terminated`` when it was SIGTERM or SIGHUP)."""
    if TERMINATED:
        raise Terminated
    if INTERRUPTED:
        raise KeyboardInterrupt


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where it arrives as Ctrl-C is (``ending_signals``): every ``finally`` and ``with``
    block of the run runs on the way out (forked processes ended and waited for, temporary folders removed), and the
    command ends with one line, exit 143. A KeyboardInterrupt, so that every place that lets Ctrl-C through lets it
    through too."""


#: Set once SIGTERM or SIGHUP reached this process (``ending_signals``), as ``INTERRUPTED`` for Ctrl-C.
TERMINATED: list[bool] = []


def _ending_signals():
    import signal

    return tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


_ENDING = _ending_signals()


def _terminated(signum, frame) -> None:
    INTERRUPTED.append(True)
    TERMINATED.append(True)
    raise Terminated


@contextlib.contextmanager
def ending_signals():
    """SIGTERM and SIGHUP end the run as Ctrl-C does (``Terminated``) where they would end the process at once (their
    handler is the default): a process killed that way leaves its forked workers blocked on their pipes and its
    temporary folders behind. The handlers are put back when the block ends; off the main thread nothing changes."""
    import signal

    TERMINATED.clear()
    old = {}
    try:
        for sig in _ENDING:
            if signal.getsignal(sig) is signal.SIG_DFL:
                old[sig] = signal.signal(sig, _terminated)
    except ValueError:  # not the main thread: its signals are not this command's
        pass
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def signals_held():
    """Ctrl-C, SIGTERM and SIGHUP held back while the block runs (a cleanup that must finish: a temporary folder's
    removal), and delivered once it ends."""
    import signal

    held = {signal.SIGINT, *_ENDING}
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, ValueError, OSError):  # no signal masks here: the block runs as it is
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def quiet_interrupted_finalizers() -> None:
    """A Ctrl-C is noted where it arrives (a SIGINT handler in place of Python's own, which raises KeyboardInterrupt
    just the same), so that it is not lost where Python cannot raise it: a KeyboardInterrupt inside a finalizer (z3's
    ``__del__``) would be printed as "Exception ignored in ..." and the run would go to its end. The hook drops that
    report, and the next ``raise_if_interrupted`` (each model check, the command's end) raises it again, where the
    command reports it once, as one line. Once a Ctrl-C has come, a finalizer's failure is its consequence and is not
    reported either: an object whose ``__init__`` the interrupt cut short finalizes half made (z3's
    ``Context.__del__``: "no attribute 'owner'"). Every other unraisable error is reported as before."""
    import signal
    import sys

    default = sys.__unraisablehook__

    def hook(unraisable) -> None:
        if issubclass(unraisable.exc_type, KeyboardInterrupt):
            INTERRUPTED.append(True)  # also when it did not come through the handler
        elif not (INTERRUPTED and getattr(unraisable.object, "__name__", None) == "__del__"):
            default(unraisable)

    sys.unraisablehook = hook
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _interrupted)
    except ValueError:  # not the main thread: its signals are not this command's
        pass


def ended(err) -> int:
    """The one line and the status of a run ended by Ctrl-C (130) or by SIGTERM or SIGHUP (143)."""
    if TERMINATED:
        say(err, "fencecheck: terminated")
        return EXIT_TERMINATED
    say(err, "fencecheck: interrupted")
    return EXIT_INTERRUPTED


def say(err, line: str) -> None:
    """One line on stderr; a stderr that cannot take it is not worth a second error."""
    try:
        err.write(one_line(line, 2000) + "\n")
        err.flush()
    except (OSError, ValueError):
        pass
