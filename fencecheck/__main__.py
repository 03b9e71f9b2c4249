"""The command's entry point (``fencecheck``, ``python -m fencecheck``): the command line is imported inside
``run``, so that Ctrl-C, SIGTERM or SIGHUP while its modules load (about a second) ends the run with the one line and
status it gets later (``commands.main``), never a traceback."""

import sys


def run() -> int:
    from fencecheck.errors import ended, ending_signals

    try:
        with ending_signals():
            from fencecheck.commands.main import main
    except KeyboardInterrupt:
        return ended(sys.stderr)
    return main()


if __name__ == "__main__":
    sys.exit(run())
