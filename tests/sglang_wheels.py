"""Any SGLang release's sources for the tests, fetched once as a wheel (``pip download --no-deps sglang==V``) and cached.

In order: ``FENCECHECK_SGLANG_<V>`` (``.`` as ``_``: a folder holding the unpacked ``sglang`` package, or the package
itself); for 0.5.23, where ``sglang_release`` finds it; ``/tmp/sglang-<V>/sglang``; the cache
(``FENCECHECK_RELEASE_CACHE``, by default ``~/.cache/fencecheck/releases``), filled on first use by ``pip download``
and unpacking the wheel's Python files (read statically, never imported or installed). None: the tests that need
it are skipped, or fail where ``CI`` is set (``sglang_release.in_ci``), as for the release.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
import sglang_release
from sglang_release import in_ci

CACHE_ENV = "FENCECHECK_RELEASE_CACHE"


def _env(version: str) -> Path | None:
    v = os.environ.get("FENCECHECK_SGLANG_" + version.replace(".", "_"))
    if not v:
        return None
    p = Path(v)
    p = p / "sglang" if (p / "sglang").is_dir() else p
    return p if p.is_dir() else None


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "fencecheck" / "releases")


def _fetch(version: str, dest: Path) -> str | None:
    """Downloads the wheel of ``version`` and unpacks its ``sglang`` Python files into ``dest`` (whole or not at
    all); returns why not when it cannot."""
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp,
                            f"sglang=={version}"], capture_output=True, text=True, timeout=600, check=False)
        wheels = sorted(Path(tmp).glob("sglang-*.whl"))
        if r.returncode != 0 or not wheels:
            return f"pip download sglang=={version} failed: {(r.stderr.strip().splitlines() or ['no wheel'])[-1]}"
        part = Path(tmp) / "unpacked"
        with zipfile.ZipFile(wheels[0]) as z:
            for name in z.namelist():
                if name.startswith("sglang/") and name.endswith(".py"):
                    z.extract(name, part)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(part, dest)  # atomic: a concurrent run either sees the whole tree or none
        except OSError:
            if not (dest / "sglang").is_dir():
                raise
    return None


def release_package(version: str) -> tuple[Path | None, str]:
    """The ``sglang`` package folder of ``version`` (fetching it into the cache when needed), or None and why."""
    found = _env(version)
    if found is None and version == sglang_release.VERSION:
        found = sglang_release.release_tree()
    if found is None and Path(f"/tmp/sglang-{version}/sglang").is_dir():
        found = Path(f"/tmp/sglang-{version}/sglang")
    if found is not None:
        return found, ""
    dest = cache_dir() / f"sglang-{version}"
    if not (dest / "sglang").is_dir():
        if dest.exists():
            shutil.rmtree(dest, ignore_errors=True)
        try:
            why = _fetch(version, dest)
        except (OSError, subprocess.SubprocessError, zipfile.BadZipFile) as e:
            why = f"fetching sglang=={version}: {e}"
        if why:
            return None, why
    return dest / "sglang", ""


def require(version: str) -> Path:
    """The ``sglang`` package folder of ``version``; without it the calling test is skipped, or fails under CI."""
    root, why = release_package(version)
    if root is None:
        msg = f"the sglang {version} sources are not here ({why}); set FENCECHECK_SGLANG_{version.replace('.', '_')}"
        if in_ci():
            pytest.fail(f"{sglang_release.CI} is set, so the tests that need the release must run: {msg}",
                        pytrace=False)
        pytest.skip(msg)
    return root
