"""The releases page (docs/sglang-releases.md) is generated from the recorded releases and cannot drift from them."""

from __future__ import annotations

from sglang_releases_page import PAGE, records, render


def test_the_releases_page_is_generated_from_the_records():
    """docs/sglang-releases.md is what tests/sglang_releases_page.py renders from the records, and shows each one."""
    text = PAGE.read_text("utf-8")
    assert text == render()
    for r in records():
        assert f"## {r['sglang_version']}\n" in text
