"""``fencecheck audit``: its documents, a failing part, and the document set swapped in whole."""

from __future__ import annotations

import io
import itertools
import os
import signal
from pathlib import Path

import pytest

from fencecheck import atomic
from fencecheck.atomic import write_tree
from fencecheck.audit import DOCUMENT_SET
from fencecheck.cli import main
from fencecheck.errors import IOFailure
from fencecheck.model import corpus as C
from fencecheck.proofs import obligations as O


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(C, "FAMILIES", {"one-phase": lambda: itertools.islice(C.one_phase(), 0, 2304, 11)})
    keep = {"ngram_without_clear", "ngram_with_clear", "needs/barrier_on"}
    monkeypatch.setattr(O, "OBLIGATIONS", [o for o in O.OBLIGATIONS if o.name in keep])
    monkeypatch.setattr(O, "catalog_obligations", lambda: [])


@pytest.mark.slow
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


@pytest.mark.slow
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


# -- the document set is swapped in whole ---------------------------------------------------------------------------


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


OLD = {"audit/README.md": "old\n", "audit/stale.md": "old\n", "proofs.md": "old\n", "counterexamples/a.toml": "old\n"}
NEW = {"audit/README.md": "new\n", "proofs.md": "new\n", "counterexamples/b.toml": "new\n"}


@pytest.fixture
def docs(tmp_path):
    root = tmp_path / "docs"
    write_tree(root, OLD)
    (root / "keep.md").write_text("not part of the set\n")
    return root


def test_the_new_set_replaces_the_old_one_whole(docs):
    write_tree(docs, NEW, names=DOCUMENT_SET)
    assert _tree(docs) == {**NEW, "keep.md": "not part of the set\n"}  # stale files gone, others kept
    assert sorted(p.name for p in docs.iterdir()) == ["audit", "counterexamples", "keep.md", "proofs.md"]


def test_an_owned_entry_missing_from_the_new_set_is_removed(docs):
    write_tree(docs, {"audit/README.md": "new\n"}, names=DOCUMENT_SET)
    assert _tree(docs) == {"audit/README.md": "new\n", "keep.md": "not part of the set\n"}


def test_an_interrupted_write_leaves_the_old_set_and_no_temporary_folder(docs, monkeypatch):
    calls = []

    def interrupt_on_second(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "fsync", interrupt_on_second)
    with pytest.raises(KeyboardInterrupt):
        write_tree(docs, NEW, names=DOCUMENT_SET)
    assert _tree(docs) == {**OLD, "keep.md": "not part of the set\n"}
    assert sorted(p.name for p in docs.iterdir()) == ["audit", "counterexamples", "keep.md", "proofs.md"]


def test_a_failure_during_the_swap_is_undone(docs, monkeypatch):
    real = os.rename
    calls = []

    def fail_on_fifth(src, dst):
        calls.append((src, dst))
        if len(calls) == 5:  # three moved out, one moved in: fail moving the second in
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(atomic.os, "rename", fail_on_fifth)
    with pytest.raises(IOFailure, match="No space left on device"):
        write_tree(docs, NEW, names=DOCUMENT_SET)
    assert _tree(docs) == {**OLD, "keep.md": "not part of the set\n"}
    assert sorted(p.name for p in docs.iterdir()) == ["audit", "counterexamples", "keep.md", "proofs.md"]


def test_ctrl_c_during_the_swap_waits_for_the_swap(docs, monkeypatch):
    real = os.rename
    calls = []

    def interrupted_rename(src, dst):
        calls.append(src)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # delivered while the first rename is under way
        real(src, dst)

    monkeypatch.setattr(atomic.os, "rename", interrupted_rename)
    with pytest.raises(KeyboardInterrupt):
        write_tree(docs, NEW, names=DOCUMENT_SET)
    assert len(calls) == 6  # every rename done before the interrupt is honoured
    assert _tree(docs) == {**NEW, "keep.md": "not part of the set\n"}
    assert sorted(p.name for p in docs.iterdir()) == ["audit", "counterexamples", "keep.md", "proofs.md"]


def test_an_interrupted_audit_leaves_the_old_documents(tmp_path, monkeypatch):
    """Ctrl-C in the middle of the work: nothing of the new set is written, exit 130."""
    import fencecheck.proofs.suite as suite

    root = tmp_path / "docs"
    write_tree(root, OLD)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(suite, "prove_all", interrupted)
    out, err = io.StringIO(), io.StringIO()
    code = main(["audit", "--docs", str(root), "--corpus", str(tmp_path / "corpus")], out, err)
    assert code == 130 and err.getvalue().endswith("fencecheck: interrupted\n")
    assert _tree(root) == OLD and not (tmp_path / "corpus").exists()


def test_audit_documents_hold_no_time_nor_machine():
    """The same audit on another machine, or slower, writes the same bytes: times and machine facts go to the
    timings file only."""
    import platform

    from fencecheck.audit import Part, audit_documents, timings_text

    parts = [Part("catalog", True, "26 of 26 scenarios", 12.345, lines=[]), Part("replay", True, "1 trace", 6.789,
                                                                              lines=[])]
    state = {"replay_rate": 493.21}
    files = audit_documents(parts, state)
    text = "\n".join(files.values())
    for fact in ("12.3", "6.8", "493", platform.python_version(), platform.platform()):
        assert fact not in text, fact
    timings = timings_text(parts, state)
    assert "12.345" in timings and "493.2" in timings and platform.python_version() in timings
