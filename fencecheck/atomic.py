"""Files in and out: reading an input file with a one-line error, and atomic writes (an output file is either
complete or absent, never partial)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def read_input(path: Path, error=None, missing: str = "no such file") -> str:
    """The text of an input file, or ``error(path, "", why)`` raised (default ``InputError``) naming what is wrong."""
    from .errors import InputError

    error = error or InputError
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(str(path), "", missing) from None
    except (OSError, UnicodeDecodeError) as err:
        raise error(str(path), "", f"cannot be read ({err.__class__.__name__})") from None


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
