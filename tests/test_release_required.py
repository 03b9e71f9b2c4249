"""A test that needs the released SGLang sources and cannot find them is skipped, except under CI, where it fails.

``sglang_release.require_release`` is the one place that decides (the ``release_root`` fixture uses it)."""

from __future__ import annotations

import pytest
import sglang_release


@pytest.fixture
def no_release(monkeypatch, tmp_path):
    """The release is nowhere: the variable names a missing folder (which ``release_tree`` takes as no release)."""
    monkeypatch.setenv(sglang_release.ENV, str(tmp_path / "missing"))
    assert sglang_release.release_tree() is None


@pytest.mark.parametrize("value", ["true", "1", "yes"])
def test_without_the_release_a_ci_run_fails(no_release, monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="CI is set, so the tests that need the release must run"):
        sglang_release.require_release()


@pytest.mark.parametrize("value", [None, "", "0", "false"])
def test_without_the_release_elsewhere_the_test_is_skipped(no_release, monkeypatch, value):
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.skip.Exception, match="the sglang 0.5.23 sources are not here"):
        sglang_release.require_release()


def test_with_the_release_it_is_returned_under_ci_too(monkeypatch, tmp_path):
    (tmp_path / "sglang").mkdir()
    monkeypatch.setenv(sglang_release.ENV, str(tmp_path))
    monkeypatch.setenv("CI", "true")
    assert sglang_release.require_release() == tmp_path / "sglang"


def test_every_test_needing_the_release_goes_through_the_helper():
    """No test decides on its own to skip for a missing release (a ``skipif`` on ``release_tree()`` would skip
    under CI too)."""
    from pathlib import Path

    here = Path(__file__).resolve().parent
    offenders = []
    for path in sorted(here.glob("*.py")):
        if path.name in ("sglang_release.py", Path(__file__).name):
            continue
        text = path.read_text(encoding="utf-8")
        for n, line in enumerate(text.splitlines(), 1):
            if ("skipif" in line or "pytest.skip(" in line) and ("release" in line.lower() or "WHY" in line):
                offenders.append(f"{path.name}:{n}: {line.strip()}")
    assert offenders == [], offenders


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_another_release_whose_fetch_fails_follows_the_same_rule(monkeypatch, tmp_path, ci, outcome):
    monkeypatch.setenv("CI", ci)
    monkeypatch.setenv(sglang_release.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(sglang_release.env_name("0.0.1"), raising=False)
    fetched = []
    monkeypatch.setattr(sglang_release, "fetch", fetched.append)  # as when pip download fails: None
    with pytest.raises(outcome, match="the sglang 0.0.1 sources are not here"):
        sglang_release.require_tree("0.0.1", fetching=True)
    assert fetched == ["0.0.1"]
