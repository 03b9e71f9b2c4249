"""Where the tests find the released SGLang 0.5.23 sources (read statically, never imported).

In order: ``FENCECHECK_SGLANG_0_5_23`` (a folder holding the unpacked ``sglang`` package, or the package itself); the
installed ``sglang`` distribution when it is version 0.5.23 (the test command installs it with ``--no-deps``: sources
only); ``/tmp/sglang-0.5.23/sglang`` (``sh tests/sglang_trees/fetch_release.sh /tmp/sglang-0.5.23``). None: the tests
that need it are skipped with ``WHY``, except where the environment variable ``CI`` is set: there they fail
(``require_release``), so a CI job without the release cannot pass with its release tests switched off.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from pathlib import Path

import pytest

ENV = "FENCECHECK_SGLANG_0_5_23"
#: Set (to anything but empty, ``0`` or ``false``) by continuous integration: a missing release is a failure there.
CI = "CI"
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


def in_ci() -> bool:
    return os.environ.get(CI, "").strip().lower() not in ("", "0", "false")


def require_release() -> Path:
    """The ``sglang`` package folder of the release; without it the calling test is skipped with ``WHY``, or fails
    when ``CI`` is set. Every test that needs the release goes through this (the ``release_root`` fixture)."""
    root = release_tree()
    if root is None:
        if in_ci():
            pytest.fail(f"{CI} is set, so the tests that need the release must run: {WHY}", pytrace=False)
        pytest.skip(WHY)
    return root
