"""The command's entry point (``fencecheck``, ``python -m fencecheck``): the command line is imported inside
``run``, so that Ctrl-C, SIGTERM or SIGHUP while its modules load (about a second) ends the run with the one line and
status it gets later (``commands.main``), never a traceback."""

import sys


def _interrupted() -> int:
    """Ctrl-C before the command's own handling is loaded: its one line and status (``errors.ended``'s)."""
    try:
        sys.stderr.write("fencecheck: interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return 130


def run() -> int:
    try:
        from fencecheck.errors import ended, ending_signals
    except KeyboardInterrupt:  # Ctrl-C while the first module loads (a loaded machine: found by the signal tests)
        return _interrupted()
    try:
        with ending_signals():
            from fencecheck.commands.main import main
    except KeyboardInterrupt:
        return ended(sys.stderr)
    return main()


if __name__ == "__main__":
    try:
        code = run()
    except KeyboardInterrupt:
        code = _interrupted()
    sys.exit(code)
