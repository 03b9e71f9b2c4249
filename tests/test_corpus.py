"""The model-generated corpus: deterministic, deduplicated, atomic, and replayed without disagreement."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

import pytest

from corpus_samples import one_record_corpus, rewrite_records
from fencecheck.commands.main import main
from fencecheck.files.corpus_io import FILENAME, read, render
from fencecheck.errors import InputError
from fencecheck.model import corpus as C


@pytest.fixture
def small_families(monkeypatch):
    monkeypatch.setattr(C, "FAMILIES", {
        "one-phase": lambda: itertools.islice(C.one_phase(), 0, 2304, 7),
        "two-phase": lambda: itertools.islice(C.two_phase(), 0, 10368, 97),
        "three-phase": lambda: C.three_phase(count=20),
    })


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_same_inputs_give_a_byte_identical_corpus(tmp_path, small_families):
    assert run("traces", "--out", str(tmp_path / "a"))[0] == 0
    assert run("traces", "--out", str(tmp_path / "b"))[0] == 0
    a = (tmp_path / "a" / FILENAME).read_bytes()
    assert a == (tmp_path / "b" / FILENAME).read_bytes()
    header = json.loads(a.splitlines()[0])
    for key in ("fencecheck", "model", "seed", "solver", "content_sha256", "statistics"):
        assert key in header
    for fam, st in header["statistics"].items():
        assert 0 < st["behaviours"] <= st["configurations"], fam


@pytest.mark.slow
def test_records_carry_expected_verdicts_and_witnesses(tmp_path, small_families):
    run("traces", "--out", str(tmp_path))
    header, records = read(tmp_path)
    assert sum(r.configurations for r in records) == sum(st["configurations"] for st in header["statistics"].values())
    races = [r for r in records if r.races]
    assert races and all(r.witness and r.witness["schedule"] for r in races)
    assert all(r.witness is None for r in records if not r.races)
    keys = [json.dumps({k: v for k, v in r.trace.to_dict().items() if k not in ("scenario", "meta")}, sort_keys=True)
            for r in records if r.family == "one-phase"]
    assert len(keys) == len(set(keys))  # deduplicated by behaviour (streams, events, graphs, ops)


def test_an_interrupted_run_leaves_no_file(tmp_path, small_families, monkeypatch):
    calls = itertools.count()
    real = C.generate

    def flaky(s, steps=None):
        if next(calls) == 100:
            raise KeyboardInterrupt
        return real(s, steps)

    monkeypatch.setattr(C, "generate", flaky)
    assert run("traces", "--out", str(tmp_path)) == (130, "", "fencecheck: interrupted\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_changed_corpus_is_rejected_in_one_line(tmp_path, small_families):
    run("traces", "--out", str(tmp_path))
    path = tmp_path / FILENAME
    lines = path.read_text().splitlines()
    changed = lines[3].replace('"family":"catalog"', '"family":"changed"')
    assert changed != lines[3]
    lines[3] = changed
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="content_sha256"):
        read(tmp_path)
    code, out, err = run("replay", str(tmp_path))
    assert code == 2 and err.count("\n") == 1


@pytest.mark.slow
def test_full_corpus_replays_in_full_agreement(tmp_path):
    code, out, _ = run("traces", "--out", str(tmp_path))
    assert code == 0 and "one-phase: 2304 configurations -> " in out
    code, out, _ = run("replay", str(tmp_path))
    assert code == 0, out
    assert "in full agreement" in out
    total = [line for line in out.splitlines() if line.startswith("total")][0].split()
    assert total[1] == total[2] == total[3]  # every trace conformant and every verdict agreeing


@pytest.mark.slow
def test_a_disagreement_fails_replay(tmp_path, small_families):
    run("traces", "--out", str(tmp_path))
    path = tmp_path / FILENAME
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    rec = json.loads(lines[1])
    rec["expected"] = "counterexample" if rec["expected"] == "proved" else "proved"
    body = [json.dumps(rec, sort_keys=True, separators=(",", ":"))] + lines[2:]
    path.write_text(render({k: v for k, v in header.items() if k not in ("records", "content_sha256")}, body))
    code, out, _ = run("replay", str(tmp_path))
    assert code == 1 and f"DISAGREEMENT {rec['id']}: verdict" in out


@pytest.mark.slow
def test_an_interrupted_write_leaves_no_file(tmp_path, small_families, monkeypatch):
    from fencecheck.files import outputs

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(outputs.os, "fsync", interrupted)
    assert run("traces", "--out", str(tmp_path))[0] == 130
    assert list(tmp_path.iterdir()) == []


def test_an_empty_corpus_is_bad_input(tmp_path):
    (tmp_path / FILENAME).write_text(render({"seed": 7}, []))
    code, out, err = run("replay", str(tmp_path))
    assert (code, out) == (2, "")
    assert err == (f"fencecheck: error: {tmp_path / FILENAME}: line 1: records: expected at least one trace record, "
                   "got an empty corpus\n")


@pytest.mark.parametrize("key, value, expected", [
    ("configurations", 2.5, "expected a positive integer, got float 2.5"),
    ("configurations", True, "expected a positive integer, got bool True"),
    ("configurations", 0, "expected a positive integer, got int 0"),
    ("family", None, "expected a string, got NoneType None"),
    ("races", "req_to_token", "expected a list of [location, phase, site, step], got str 'req_to_token'"),
    ("witness", {"race": {}, "schedule": [0]},
     "expected null or {race: {location, phase, site, step}, schedule: [op indices]}, got dict {'race': {}, "
     "'schedule': [0]}"),
])
def test_a_wrong_typed_record_field_is_one_line(tmp_path, key, value, expected):
    path = one_record_corpus(tmp_path)
    rewrite_records(path, lambda rec: {**rec, key: value})
    code, out, err = run("regress", str(tmp_path), "--out", str(tmp_path / "t.py"))
    assert (code, out) == (2, "")
    assert err == f"fencecheck: error: {path}:2: {key}: {expected}\n"


def test_replay_on_cuda_hands_the_records_to_the_gpu_replay(tmp_path, monkeypatch):
    """``replay --device cuda`` is parse -> ``fencecheck.gpu.replay.run_cuda_replay(records, seed, out, as_json)``
    -> its exit code (the GPU itself is not needed to check the call)."""
    import sys
    import types

    one_record_corpus(tmp_path)
    calls = []
    fake = types.ModuleType("fencecheck.gpu.replay")
    fake.run_cuda_replay = lambda records, seed, out, as_json: calls.append((records, seed, out, as_json)) or 3
    monkeypatch.setitem(sys.modules, "fencecheck.gpu.replay", fake)
    out, err = io.StringIO(), io.StringIO()
    assert main(["replay", str(tmp_path), "--device", "cuda", "--seed", "5", "--json"], out, err) == 3
    [(records, seed, stream, as_json)] = calls
    assert [r.id for r in records] == ["catalog/plain-decode"] and (seed, stream, as_json) == (5, out, True)


def _imports(module_path: Path) -> set[str]:
    """Every module a file imports, at any depth of its code, as absolute names."""
    import ast

    names = set()
    for node in ast.walk(ast.parse(module_path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = "fencecheck." * (node.level > 0) + (node.module or "")
            names |= {base} | {f"{base}.{a.name}".replace("..", ".") for a in node.names}
    return names


def test_traces_and_audit_build_the_corpus_through_one_function():
    """``commands.traces.build_and_write`` assembles the corpus (``traces`` calls it, and so does ``audit``); the file
    format (``corpus_io``) stays in the files layer, free of the model."""
    import fencecheck

    root = Path(fencecheck.__file__).parent
    audit = _imports(root / "commands" / "audit.py")
    assert "fencecheck.commands.traces.build_and_write" in audit and "fencecheck.model.corpus.build_corpus" not in audit
    assert not {n for n in _imports(root / "files" / "corpus_io.py")
                if n.startswith(("fencecheck.model", "fencecheck.reference"))}
