from __future__ import annotations

import io
import itertools

import pytest

from fencecheck.cli import main
from fencecheck.model import corpus as C
from fencecheck.proofs import obligations as O


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(C, "FAMILIES", {"one-phase": lambda: itertools.islice(C.one_phase(), 0, 2304, 11)})
    keep = {"ngram_without_clear", "ngram_with_clear", "needs/barrier_on"}
    monkeypatch.setattr(O, "OBLIGATIONS", [o for o in O.OBLIGATIONS if o.name in keep])
    monkeypatch.setattr(O, "catalog_obligations", lambda: [])


def test_audit_writes_the_documents(tmp_path, small):
    out, err = io.StringIO(), io.StringIO()
    code = main(["audit", "--docs", str(tmp_path / "docs"), "--corpus", str(tmp_path / "corpus")], out, err)
    assert code == 0, out.getvalue()
    audit = tmp_path / "docs" / "audit"
    for name in ("README.md", "obligations.md", "counterexamples.md", "catalog.md", "corpus.md", "versions.md"):
        assert (audit / name).exists(), name
    assert "```mermaid" in (audit / "counterexamples.md").read_text()
    assert "missing edge" in (audit / "counterexamples.md").read_text()
    readme = (audit / "README.md").read_text()
    assert "| replay | ok |" in readme and "| corpus | ok |" in readme
    assert "[4/4] replay" in err.getvalue()  # progress is shown


def test_a_failing_part_fails_the_audit_and_is_reported(tmp_path, small, monkeypatch):
    from fencecheck.reference import replay as R

    real = R.replay

    def wrong(record, **kw):
        res = real(record, **kw)
        res.stale_seen = 1 if res.schedules else res.stale_seen
        return res

    monkeypatch.setattr(R, "replay", wrong)
    out = io.StringIO()
    code = main(["audit", "--docs", str(tmp_path / "docs"), "--corpus", str(tmp_path / "corpus")], out, io.StringIO())
    assert code == 1
    assert "replay             FAILED" in out.getvalue()
    assert "| replay | FAILED |" in (tmp_path / "docs" / "audit" / "README.md").read_text()
