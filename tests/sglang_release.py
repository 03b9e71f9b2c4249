"""Where the tests find the released SGLang 0.5.23 sources (read statically, never imported).

In order: ``FENCECHECK_SGLANG_0_5_23`` (a folder holding the unpacked ``sglang`` package, or the package itself); the
installed ``sglang`` distribution when it is version 0.5.23 (the test command installs it with ``--no-deps``: sources
only); ``/tmp/sglang-0.5.23/sglang`` (``sh tests/sglang_trees/fetch_release.sh /tmp/sglang-0.5.23``). None: the tests
that need it are skipped with ``WHY``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from pathlib import Path

ENV = "FENCECHECK_SGLANG_0_5_23"
VERSION = "0.5.23"
WHY = (f"the sglang {VERSION} sources are not here: install them with `pip install --no-deps sglang=={VERSION}`, "
       f"set {ENV}, or run tests/sglang_trees/fetch_release.sh")


def _installed() -> Path | None:
    try:
        if importlib.metadata.version("sglang") != VERSION:
            return None
        spec = importlib.util.find_spec("sglang")  # a top-level package: located, not imported
    except (importlib.metadata.PackageNotFoundError, ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def release_tree() -> Path | None:
    """The ``sglang`` package folder of the release, or None."""
    env = os.environ.get(ENV)
    if env:
        p = Path(env)
        if (p / "sglang").is_dir():
            p = p / "sglang"
        return p if p.is_dir() else None
    found = _installed()
    if found is not None:
        return found
    tmp = Path("/tmp/sglang-0.5.23/sglang")
    return tmp if tmp.is_dir() else None
