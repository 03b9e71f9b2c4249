"""The progress bar every long command shows on stderr (on a terminal, or with ``--progress``)."""

from __future__ import annotations

import sys
from typing import TextIO


def progress_bar(total: int, desc: str, enabled: bool, stream: TextIO | None = None, unit: str = "trace"):
    """A tqdm bar on ``stream`` (stderr) when asked for (``--progress``) or when it is a terminal; a no-op otherwise.
    Never on stdout, so ``--json`` output stays clean."""
    from tqdm import tqdm

    stream = stream or sys.stderr
    tty = getattr(stream, "isatty", lambda: False)()
    return tqdm(total=total, desc=desc, unit=unit, disable=not (enabled or tty), leave=False, file=stream)
