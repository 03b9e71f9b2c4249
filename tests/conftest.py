"""Shared test set-up: Hypothesis profiles and a guard that the installed package (not the checkout) is imported."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# One fixed profile: derandomized, so CI runs the same examples every time; no deadline (noisy machines).
settings.register_profile(
    "ci", derandomize=True, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
# Every pull-request check of the suite reads its baseline: none is kept between runs (tests/test_sglang_cache.py
# turns the cache on in a temporary folder).
os.environ.setdefault("FENCECHECK_CACHE", "off")

try:
    import fencecheck.model  # noqa: F401
    import fencecheck.reference  # noqa: F401
except ImportError as err:  # pragma: no cover - guards a mis-set environment
    raise pytest.UsageError(
        f"fencecheck is not installed as a package ({err}); run: python3 -m pip install '.[test]' && pytest"
    )


@pytest.fixture(scope="session")
def catalog():
    from fencecheck.files.catalog import PR_ERA, load_catalog

    return {s.name: s for s in load_catalog(PR_ERA)}


@pytest.fixture(scope="session")
def release_root():
    """The released SGLang 0.5.23's ``sglang`` folder; without it a test is skipped, or fails when ``CI`` is set
    (``sglang_release.require_release``)."""
    from sglang_release import require_release

    return require_release()


@pytest.fixture(scope="session")
def release_extraction(release_root):
    """The static reader's extraction of the released SGLang 0.5.23 sources, read once for the whole run (reading
    takes tens of seconds); its records are frozen, and ``to_json`` builds a new document each call. Without the
    sources: as ``release_root``."""
    from fencecheck.sglang_source import read_path

    return read_path(release_root)
