"""Where the tests find the released SGLang sources (read statically, never imported): 0.5.23, and the other releases.

In order: ``FENCECHECK_SGLANG_0_5_23`` (a folder holding the unpacked ``sglang`` package, or the package itself); the
installed ``sglang`` distribution when it is version 0.5.23 (the test command installs it with ``--no-deps``: sources
only); ``/tmp/sglang-0.5.23/sglang`` (``sh tests/sglang_trees/fetch_release.sh /tmp/sglang-0.5.23``). None: the tests
that need it are skipped with ``WHY``, except where the environment variable ``CI`` is set: there they fail
(``require_release``), so a CI job without the release cannot pass with its release tests switched off.

Another release V (``tree_of``): ``FENCECHECK_SGLANG_<V>`` (dots as underscores), else ``sglang-V/sglang`` in the
cache folder (``FENCECHECK_SGLANG_CACHE``, else ``~/.cache/fencecheck``), which ``fetch`` fills from the wheel
(``pip download --no-deps``); ``require_tree`` skips or, under ``CI``, fails as ``require_release`` does.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
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


#: Where ``fetch`` unpacks other releases: ``FENCECHECK_SGLANG_CACHE``, else ``~/.cache/fencecheck``.
CACHE_ENV = "FENCECHECK_SGLANG_CACHE"


def env_name(version: str) -> str:
    """The variable that names a release's sources: ``FENCECHECK_SGLANG_0_5_22`` for 0.5.22."""
    return "FENCECHECK_SGLANG_" + version.replace(".", "_")


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "fencecheck")


def _package(path: Path) -> Path | None:
    if (path / "sglang").is_dir():
        path = path / "sglang"
    return path if (path / "srt").is_dir() else None


def tree_of(version: str) -> Path | None:
    """The ``sglang`` package folder of release ``version`` already on this machine, or None (nothing is fetched)."""
    if version == VERSION:
        return release_tree()
    env = os.environ.get(env_name(version))
    if env:
        return _package(Path(env))
    return _package(cache_dir() / f"sglang-{version}")


def fetch(version: str) -> Path | None:
    """Download the release's wheel without dependencies and unpack its ``sglang`` package into the cache folder
    (whole or not at all); None when pip or the wheel fails."""
    target = cache_dir() / f"sglang-{version}"
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp) / "wheels"
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", f"sglang=={version}", "--no-deps", "--only-binary=:all:",
             "--python-version", "3.11", "--platform", "manylinux_2_34_x86_64", "-d", str(wheels), "-q"],
            capture_output=True, text=True)
        found = sorted(wheels.glob(f"sglang-{version}-*.whl")) if done.returncode == 0 else []
        if not found:
            return None
        part = Path(tmp) / "unpacked"
        with zipfile.ZipFile(found[0]) as whl:
            whl.extractall(part, [n for n in whl.namelist() if n.startswith("sglang/")])
        if _package(part) is None:
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(part), str(target))
    return _package(target)


def require_tree(version: str, *, fetching: bool = False) -> Path:
    """The ``sglang`` package folder of release ``version`` (fetched first when ``fetching``); without it the calling
    test is skipped, or fails when ``CI`` is set."""
    root = tree_of(version)
    if root is None and fetching:
        root = fetch(version)
    if root is None:
        why = (f"the sglang {version} sources are not here: set {env_name(version)} to the unpacked wheel, or let the "
               f"slow tests fetch it (`pip download --no-deps sglang=={version}`) into {cache_dir()}")
        if in_ci():
            pytest.fail(f"{CI} is set, so the tests that need the release must run: {why}", pytrace=False)
        pytest.skip(why)
    return root
