"""``fencecheck audit``: its documents, a failing part, and the document set swapped in whole."""

from __future__ import annotations

import io
import itertools
import os
import re
import signal
from pathlib import Path

import pytest

from fencecheck.files import outputs
from fencecheck.commands import audit_release as A
from fencecheck.files.outputs import write_tree
from fencecheck.files.catalog import RELEASE, load_catalog
from fencecheck.commands.audit import DOCUMENT_SET
from fencecheck.commands.check import check_witness_text
from fencecheck.commands.main import main
from fencecheck.errors import IOFailure
from fencecheck.model import corpus as C
from fencecheck.proofs import obligations as O


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(C, "FAMILIES", {"one-phase": lambda: itertools.islice(C.one_phase(), 0, 2304, 11)})
    keep = {"ngram_without_clear", "ngram_with_clear", "needs/barrier_on"}
    monkeypatch.setattr(O, "OBLIGATIONS", [o for o in O.OBLIGATIONS if o.name in keep])
    monkeypatch.setattr(O, "catalog_obligations", lambda: [])
    keep_release = {"decode-flashinfer", "race-qsa-sparse-decode"}
    release = [s for s in A.release_catalog() if s.name in keep_release]
    monkeypatch.setattr(A, "release_catalog", lambda: release)
    from fencecheck.decision import findings as D

    generated = D.generated_contexts
    keep_generated = {"no-speculation-decode-cuda-overlap-0", "no-speculation-decode-cuda-overlap-1"}
    monkeypatch.setattr(D, "generated_contexts", lambda ex: [c for c in generated(ex) if c[0] in keep_generated])
    # the reader part: two generated configurations (plain decode as a graph and eagerly)


@pytest.mark.slow
def test_audit_writes_the_documents(tmp_path, small):
    out, err = io.StringIO(), io.StringIO()
    code = main(["audit", "--docs", str(tmp_path / "docs"), "--corpus", str(tmp_path / "corpus")], out, err)
    assert code == 0, out.getvalue()
    audit = tmp_path / "docs" / "audit"
    for name in ("README.md", "obligations.md", "counterexamples.md", "catalog.md", "corpus.md", "versions.md",
                 "sglang-0.5.23.md"):
        assert (audit / name).exists(), name
    release = (audit / "sglang-0.5.23.md").read_text()
    assert "### Race: race-qsa-sparse-decode" in release and "**Fix.** Declare DECODE" in release
    assert "| [decode-flashinfer](#decode-flashinfer) | proved | proved | proved | yes | - |" in release
    assert "```mermaid" in (audit / "counterexamples.md").read_text()
    assert "missing edge" in (audit / "counterexamples.md").read_text()
    readme = (audit / "README.md").read_text()
    assert "| replay | ok |" in readme and "| corpus | ok |" in readme
    assert "[5/6] replay" in err.getvalue() and "[6/6] sglang-0.5.23 sources" in err.getvalue()  # progress is shown


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
    assert re.search(r"^replay +FAILED ", out.getvalue(), re.M)
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

    monkeypatch.setattr(outputs.os, "fsync", interrupt_on_second)
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

    monkeypatch.setattr(outputs.os, "rename", fail_on_fifth)
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

    monkeypatch.setattr(outputs.os, "rename", interrupted_rename)
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

    from fencecheck.commands.audit import audit_documents, timings_text
    from fencecheck.commands.audit_parts import Part

    parts = [Part("catalog", True, "26 of 26 scenarios", 12.345, lines=[]), Part("replay", True, "1 trace", 6.789,
                                                                              lines=[])]
    state = {"replay_rate": 493.21}
    files = audit_documents(parts, state)
    text = "\n".join(files.values())
    for fact in ("12.3", "6.8", "493", platform.python_version(), platform.platform()):
        assert fact not in text, fact
    timings = timings_text(parts, state)
    assert "12.345" in timings and "493.2" in timings and platform.python_version() in timings


# -- the generated pages: commands, headings, diagrams ---------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "docs" / "proofs.md"] + sorted((ROOT / "docs" / "audit").glob("*.md"))
#: Commands that regenerate the documents or the corpus (minutes; tests of prove, audit and traces run them): the
#: pages' copies are parsed, not run.
GENERATORS = {"prove", "audit", "traces"}


def _page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _commands(text: str) -> list[tuple[str, int]]:
    """Every `fencecheck ...` span of a page with the exit status it documents ("(exit status N" right after it;
    0 when none is given)."""
    found = []
    for m in re.finditer(r"`(fencecheck [^`]*)`( \(exit status (\d+))?", text):
        found.append((m.group(1), int(m.group(3) or 0)))
    return found


def test_the_pages_print_commands():
    """The command tests below see the replay commands of both proof pages (the regex finds them)."""
    proofs = _commands((ROOT / "docs" / "proofs.md").read_text())
    audit = _commands((ROOT / "docs" / "audit" / "counterexamples.md").read_text())
    assert ("fencecheck check docs/counterexamples/needs__barrier_on.toml --witness", 1) in proofs
    assert ("fencecheck check docs/counterexamples/needs__barrier_on.toml --witness", 1) in audit
    assert ("fencecheck check fencecheck/catalog/pr-35059/barrier-disabled.toml", 1) in audit
    release = _commands((ROOT / "docs" / "audit" / "sglang-0.5.23.md").read_text())
    assert ("fencecheck check fencecheck/catalog/sglang-0.5.23/race-qsa-sparse-decode.toml --witness", 1) in release
    assert ("fencecheck check fencecheck/catalog/sglang-0.5.23/decode-flashinfer.toml", 0) in release


@pytest.mark.parametrize("page", [pytest.param(p, marks=pytest.mark.slow) if p.name == "sglang-0.5.23.md" else p
                                  for p in PAGES], ids=_page_id)  # the release page runs the reader (tens of s)
def test_every_command_a_page_prints_runs_from_the_repository_root(page, monkeypatch):
    import shlex

    from fencecheck.commands.main import build_parser

    monkeypatch.chdir(ROOT)
    bad = []
    for command, status in _commands(page.read_text()):
        argv = shlex.split(command)[1:]
        build_parser().parse_args(argv)  # a flag the CLI does not have fails here
        if argv[0] in GENERATORS:
            continue
        out, err = io.StringIO(), io.StringIO()
        code = main(argv, out, err)
        if code != status:
            bad.append(f"{command}: exit {code}, documented {status}: {err.getvalue().strip()}")
        elif argv[0] == "check" and status == 1 and not {"RACE read of", "DISHONEST "} & set(
                re.findall(r"RACE read of|DISHONEST ", out.getvalue())):
            bad.append(f"{command}: exit 1 without a race or a finding")
    assert not bad, "\n".join(bad)


def _headings(text: str) -> list[str]:
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_no_page_repeats_a_heading_or_its_anchor(page):
    heads = _headings(page.read_text())
    anchors = [re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads]
    assert heads and len(set(heads)) == len(heads), sorted(h for h in heads if heads.count(h) > 1)
    assert len(set(anchors)) == len(anchors), sorted(a for a in anchors if anchors.count(a) > 1)


_NAMED = {"quot": '"', "lt": "<", "gt": ">", "amp": "&"}


def _unquote(label: str) -> str:
    """A quoted Mermaid label as Mermaid renders it: ``#NN;`` and ``#name;`` entity codes decoded."""
    assert label.startswith('"') and label.endswith('"') and '"' not in label[1:-1], label
    inner = label[1:-1]
    assert re.fullmatch(r"(?:[^#;<>&]|#(?:\d+|quot|lt|gt|amp);)*", inner), f"unescaped character in {label}"
    return re.sub(r"#(\d+|\w+);", lambda m: chr(int(m[1])) if m[1].isdigit() else _NAMED[m[1]], inner)


def _diagrams(text: str) -> list[tuple[dict[str, str], dict[str, str]]]:
    """For each Mermaid block: its node labels as rendered, and the node texts listed just above it."""
    out = []
    for m in re.finditer(r"((?:^- \w, [^\n]*\n)+)\n```mermaid\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
        listed = dict(re.findall(r"^- (\w), [^`\n]*: `([^`]*)`$", m.group(1), flags=re.MULTILINE))
        labels = {node: _unquote(label) for node, label in re.findall(r"^  (\w)\[(\"[^\n]*\")\]$", m.group(2),
                                                                       flags=re.MULTILINE)}
        out.append((labels, listed))
    return out


def test_each_diagram_label_reads_as_the_text_beside_it():
    text = (ROOT / "docs" / "audit" / "counterexamples.md").read_text()
    diagrams = _diagrams(text)
    assert len(diagrams) == text.count("```mermaid") > 0
    for labels, listed in diagrams:
        assert labels == listed and {"R", "W"} <= set(labels)
    assert any("flashinfer#0 node 0" in label for labels, _ in diagrams for label in labels.values())


def test_a_label_holds_its_text_whole_whatever_the_characters():
    from fencecheck.commands.audit_parts import mermaid, race_nodes
    from fencecheck.verdict import Race

    race = Race(location="req_to_token", step=1, phase='ph"a;se', site="pre_replay", read_stream="F", read_op=4,
                read_node=0, read_graph="target/decode/DECODE/flashinfer#0", write_op=9, write_stream="S",
                write_step=2, write_by="scheduler", synced_up_to="F kernel #1 <pre> & more", via="S.wait_event(x) -> y",
                missing_edge="F kernel #2 -> S op 9", barrier="fine: S waits on r0.marker")
    block = mermaid(race)
    labels = {node: _unquote(label) for node, label in re.findall(r"^  (\w)\[(\"[^\n]*\")\]$", block, re.MULTILINE)}
    assert labels == {node: text for node, _, text in race_nodes(race)}
    assert labels["R"] == race.read_text() and "graph target/decode/DECODE/flashinfer#0 node 0" in labels["R"]
    assert labels["W"] == race.write_text() and labels["K"] == race.synced_up_to and labels["V"] == race.via


# -- the released SGLang ----------------------------------------------------------------------------------------------


def test_the_release_document_gives_each_race_its_chain_condition_witness_and_fix(monkeypatch):
    """A race the tools agree on: the chain of source locations by role, the condition and the default, the witness
    as ``check --witness`` prints it, the fix; a configuration they disagree on is said to disagree, and fails the
    part. The same state writes the same bytes."""
    from fencecheck.verdict import Expectation, Verdict

    keep = {"race-mamba-commit-after-verify", "loop-normal", "decode-triton"}
    wrong = Expectation(Verdict.COUNTEREXAMPLE, ())  # loop-normal is safe: an expectation the tools must refute

    def catalog():
        return [s.replace(expect=wrong) if s.name == "loop-normal" else s
                for s in load_catalog(RELEASE) if s.name in keep]

    monkeypatch.setattr(A, "release_catalog", catalog)
    state: dict = {}
    part = A.release_part(state, check_witness_text)
    assert not part.ok and part.summary.startswith("2 of 3 configurations")
    doc = A.release_document(part, state)
    assert doc == A.release_document(part, state)
    race = doc[doc.index("### Race: race-mamba-commit-after-verify"):]
    race = race[:race.index("\n### ")]
    for text in ("**Runtime condition.** A mamba-style model", "**Default configuration.** Meets it",
                 "- **declaration**: `srt/layers/attention/hybrid_linear_attn_backend.py:",
                 "- **read**: `srt/speculative/spec_utils.py:commit_mamba_states_after_verify:1058,1098,1179`",
                 "- **publish**: `srt/model_executor/runner/decode_cuda_graph_runner.py:DecodeCudaGraphRunner.execute:",
                 "- **barrier**: `srt/managers/scheduler.py:Scheduler._apply_war_barrier:2017-2023`",
                 "RACE read of req_index_to_mamba_index_mapping by step 1 phase 'verify' at worker_after",
                 "```mermaid", "**Fix.** Read the mamba row map"):
        assert text in race, text
    assert race.index("**declaration**") < race.index("**read**") < race.index("**publish**") < race.index("**barrier**")
    assert "| [loop-normal](#loop-normal) | counterexample | proved | proved | NO |" in doc
    assert "**1 disagree**" in doc and "Expected counterexample; the simulator gives proved" in doc
    assert "`fencecheck check fencecheck/catalog/sglang-0.5.23/loop-normal.toml`" not in doc  # no command to mislead


def _documents(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_the_committed_documents_are_what_the_audit_writes(tmp_path):
    """README's first command, ``fencecheck audit --docs docs``, rewrites nothing: every document the audit writes is
    byte for byte the one committed under docs/, and the audit writes no document docs/ lacks. Run
    ``fencecheck audit --docs docs`` and commit the diff when a change of the code changes a document."""
    from sglang_release import require_release

    require_release()  # the reader's part needs the release's sources; without them the document would differ
    written = tmp_path / "docs"
    code = main(["audit", "--docs", str(written), "--corpus", str(tmp_path / "corpus")], io.StringIO(), io.StringIO())
    assert code == 0
    new = _documents(written)
    assert new, "the audit wrote no document"
    stale = [name for name, data in new.items()
             if not (ROOT / "docs" / name).is_file() or (ROOT / "docs" / name).read_bytes() != data]
    assert not stale, f"`fencecheck audit --docs docs` would change {stale}: run it and commit the result"
    owned = {name.split("/")[0] for name in new}
    gone = [p.relative_to(ROOT / "docs").as_posix() for top in owned if (ROOT / "docs" / top).is_dir()
            for p in (ROOT / "docs" / top).rglob("*") if p.is_file()
            and p.relative_to(ROOT / "docs").as_posix() not in new]
    assert not gone, f"committed documents the audit no longer writes: {gone}"


def test_a_not_finding_row_names_its_backend_and_mode_and_no_two_rows_are_the_same():
    """The release document's not-findings table: one row per backend, mode and read, none repeated (the call chains
    that reach a read differ only in ``--json``)."""
    text = (ROOT / "docs" / "audit" / "sglang-0.5.23.md").read_text(encoding="utf-8")
    table = text.split("### Not findings", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    assert rows[0].startswith("| backend | mode | file:line |"), rows[0]
    body = rows[1:]
    assert body and len(body) == len(set(body))
    assert all(row.split(" | ")[1] for row in body)


def test_a_part_that_did_not_run_is_reported_skipped_not_ok(tmp_path, monkeypatch):
    """The reader's part without the release's sources installed: ``skipped`` in the progress, the table, the JSON
    and the documents' summary, never ``ok``; it fails nothing."""
    import importlib.metadata
    import json

    from fencecheck.commands import audit as AU
    from fencecheck.commands.audit_parts import Part

    real = importlib.metadata.version

    def version(name):
        if name == "sglang":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    part = A.reader_part({})
    assert part.skipped and part.status() == "skipped" and part.summary.startswith("not run: sglang is not installed")
    parts = [Part("catalog", True, "1 of 1", 0.0), part]
    assert f"| {A.READER_PART} | skipped | not run:" in AU.audit_documents(parts, {})["audit/README.md"]
    assert AU.exit_code(parts) == 0
    monkeypatch.setattr(AU, "run_audit", lambda *a, **k: parts)
    out = io.StringIO()
    assert main(["audit", "--docs", str(tmp_path / "docs"), "--corpus", str(tmp_path / "c")], out, io.StringIO()) == 0
    assert re.search(rf"^{re.escape(A.READER_PART)} +skipped +not run:", out.getvalue(), re.M)
    assert re.search(r"^catalog +ok ", out.getvalue(), re.M)
    out = io.StringIO()
    assert main(["audit", "--json", "--docs", str(tmp_path / "docs"), "--corpus", str(tmp_path / "c")], out,
                io.StringIO()) == 0
    assert [p["status"] for p in json.loads(out.getvalue())["parts"]] == ["ok", "skipped"]
