"""The regression corpus of bad inputs: each gives its exact exit code and one error line.

One input per defect class, run through the command's entry point (``fencecheck.commands.main.main``).

Inputs that fail before their format matters (size, nesting, digits, encoding, syntax, a corpus record's plain fields)
are files in tests/bad_inputs/. Inputs whose defect sits inside a format that grows with the product (trace files),
or that are too large to keep (16 MiB, a 5 MB string) or cannot be a file name in git (a newline), are made here by
a recipe from what the product writes (``corpus_samples``).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from corpus_samples import one_record_corpus, trace_dict
from fencecheck.commands.main import main

HERE = Path(__file__).parent / "bad_inputs"
MAX_STEPS_AT_TEST = 1000  # more steps than this is a bound the scenario limits must refuse before running


@dataclass(frozen=True)
class Case:
    name: str  # a file or folder of tests/bad_inputs/, or the name of what ``make`` writes
    command: str  # check (scenario or trace file) or replay (corpus folder)
    code: int
    line: str  # after "fencecheck: error: "; {path} is the file (or corpus.jsonl) as given
    xfail: str = ""
    make: Callable[[dict], None] | None = None  # a recipe: edits a fresh trace (``trace_dict``) in place


def _ops(d: dict) -> list:
    return d["ops"]


def _drop_run_batch_return(d: dict) -> None:
    d["ops"] = [o for o in d["ops"] if not (o.get("op") == "mark" and "run_batch_return" in (o.get("what"), o.get("mark")))]


CASES = [
    # file-level limits: size, nesting depth, digits of a number, encoding
    Case("scenario-deep-array.toml", "check", 2, "{path}: line 3: nested deeper than 32 levels"),
    Case("scenario-deep-dotted-key.toml", "check", 2, "{path}: line 31: nested deeper than 32 levels"),
    Case("scenario-huge-integer.toml", "check", 2, "{path}: line 9: a number of more than 4300 digits"),
    Case("scenario-not-utf8.toml", "check", 2, "{path}: not UTF-8 text (byte 44)"),
    Case("scenario-not-toml.toml", "check", 2,
         "{path}: not valid TOML (Illegal character '\\n' (at line 1, column 21))"),
    Case("trace-deep-nesting.json", "check", 2, "{path}: line 314: nested deeper than 32 levels"),
    Case("trace-huge-integer.json", "check", 2, "{path}: line 4: a number of more than 4300 digits"),
    # what an error quotes is escaped: a key holding a newline stays on one line
    Case("scenario-newline-in-key.toml", "check", 2,
         "{path}: runners.target.mark\\ner: unknown key (expected one of: fresh_events, mailbox, marker, publish, ring_depth)"),
    # scenario values: limits and strict types
    Case("scenario-float-steps.toml", "check", 2, "{path}: steps: expected integer, got float 3.0"),
    Case("scenario-float-ring-depth.toml", "check", 2,
         "{path}: runners.target.ring_depth: expected integer, got float 2.0"),
    Case("scenario-too-many-steps.toml", "check", 2, "{path}: steps: expected maximum 1,000, got 1,000,000,000,000"),
    # trace files: strict keys, types, uniqueness and run_batch marks
    Case("trace-float-steps.json", "check", 2, "{path}: steps: expected an integer, got a number 3.0",
         make=lambda d: d.update(steps=3.0)),
    Case("trace-op-is-a-list.json", "check", 2, "{path}: ops[0]: expected an object, got an array",
         make=lambda d: _ops(d).__setitem__(0, list(_ops(d)[0].values()))),
    Case("trace-op-kind-is-a-list.json", "check", 2,
         "{path}: ops[0].op: expected one of record, wait_event, wait_stream, host_sync, read, write, replay, mark, "
         "got an array",
         make=lambda d: _ops(d)[0].update(op=[_ops(d)[0]["op"]])),
    Case("trace-stream-is-a-list.json", "check", 2, "{path}: streams[0]: expected one of S, F, P, got an array",
         make=lambda d: d["streams"].__setitem__(0, [d["streams"][0]])),
    Case("trace-duplicate-stream.json", "check", 2, "{path}: streams[2]: duplicate stream 'S'",
         make=lambda d: d["streams"].append(d["streams"][0])),
    Case("trace-external-not-a-bool.json", "check", 2,
         "{path}: events[0].external: expected true or false, got a string \"yes\"",
         make=lambda d: d["events"][0].update(external="yes")),
    Case("trace-missing-run-batch-return.json", "check", 2,
         "{path}: ops[11].mark: expected run_batch_return of step 1, got run_batch_begin of step 2",
         make=_drop_run_batch_return),
    # corpus files
    Case("corpus-no-records", "replay", 2,
         "{path}: line 1: records: expected at least one trace record, got an empty corpus"),
    Case("corpus-changed", "replay", 2,
         "{path}: line 1: content_sha256: expected the hash of the records (file changed or cut)"),
    Case("corpus-record-not-an-object", "replay", 2, "{path}:2: expected a JSON object"),
    Case("corpus-configurations-a-string", "replay", 2,
         "{path}:2: configurations: expected a positive integer, got str '1'"),
    Case("corpus-id-a-number", "replay", 2, "{path}:2: id: expected a string, got int 7"),
    Case("corpus-expected-unknown-word", "replay", 2,
         "{path}:2: expected: expected one of proved, counterexample, got str 'safe'"),
    Case("corpus-races-wrong-shape", "replay", 2,
         "{path}:2: races: expected a list of [location, phase, site, step], got list [['req_to_token', 'decode', 1]]"),
    Case("corpus-witness-a-string", "replay", 2,
         "{path}:2: witness: expected null or {race: {location, phase, site, step}, schedule: [op indices]}, "
         "got str 'schedule 0 1 2'"),
    Case("corpus-deep-nesting", "replay", 2, "{path}: line 2: nested deeper than 32 levels"),
    Case("corpus-huge-integer", "replay", 2, "{path}: line 2: a number of more than 4300 digits"),
]


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def bounded_work(monkeypatch):
    """Runs refuse more than ``MAX_STEPS_AT_TEST`` steps (a bug report, exit 70), so an unbounded input fails the
    test instead of running on."""
    from fencecheck.reference import run as R

    real = R.run_scenario

    def bounded(scenario, steps=None, *args, **kwargs):
        if (steps or scenario.steps) > MAX_STEPS_AT_TEST:
            raise RuntimeError(f"{steps or scenario.steps} steps reached the simulator")
        return real(scenario, steps, *args, **kwargs)

    monkeypatch.setattr(R, "run_scenario", bounded)


def _param(case: Case):
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_bad_input_gives_its_exit_code_and_line(case: Case, bounded_work, tmp_path):
    if case.make is None:
        target = str(HERE / case.name)
    else:
        d = trace_dict()
        case.make(d)
        target = str(tmp_path / case.name)
        Path(target).write_text(json.dumps(d, indent=1) + "\n")
    path = target if case.command == "check" else f"{target}/corpus.jsonl"
    code, out, err = run(case.command, target)
    assert (code, out) == (case.code, "")
    assert err == "fencecheck: error: " + case.line.replace("{path}", path) + "\n"


def test_every_file_of_the_corpus_has_a_case():
    assert {p.name for p in HERE.iterdir()} == {c.name for c in CASES if c.make is None}


def test_the_recipes_start_from_good_input(tmp_path):
    one_record_corpus(tmp_path)
    assert run("replay", str(tmp_path))[0] == 0
    (tmp_path / "t.json").write_text(json.dumps(trace_dict()))
    assert run("check", str(tmp_path / "t.json"))[0] == 0


def test_a_file_larger_than_the_limit(tmp_path):
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (16 * 1024 * 1024) + b"\n")
    code, _, err = run("check", str(big))
    assert (code, err) == (2, f"fencecheck: error: {big}: larger than 16 MiB (the limit for this input)\n")


@pytest.mark.slow
def test_a_5_mb_string_makes_a_short_error_line(tmp_path):
    text = (HERE.parent.parent / "fencecheck" / "catalog" / "pr-35059" / "plain-decode.toml").read_text()
    bad = tmp_path / "long.toml"
    bad.write_text(text.replace('publisher = "target"', f'publisher = "{"x" * 5_000_000}"'))
    code, _, err = run("check", str(bad))
    assert (code, err) == (2, f"fencecheck: error: {bad}: algorithm.publisher: expected maxLength 200, got 5,000,000 "
                              "long\n")


def test_a_file_name_with_a_newline_stays_one_line(tmp_path):
    name = tmp_path / "two\nlines.toml"
    code, _, err = run("check", str(name))
    assert (code, err) == (2, f"fencecheck: error: {tmp_path}/two\\nlines.toml: no such file\n")


def test_a_folder_given_as_an_input_file(tmp_path):
    folder = tmp_path / "scenario.toml"
    folder.mkdir()
    code, _, err = run("check", str(folder))
    assert (code, err) == (2, f"fencecheck: error: {folder}: is a folder, expected a file\n")


def test_a_corpus_file_given_for_its_folder(tmp_path):
    target = one_record_corpus(tmp_path)
    code, _, err = run("replay", str(target))
    assert (code, err) == (2, f"fencecheck: error: {target}: expected a corpus folder (written by fencecheck "
                              "traces --out DIR)\n")
