"""Scenario files: load/dump round trip, the JSON Schema, and one-line errors for bad files."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from fencecheck.files.catalog import PR_ERA, VERSIONS, catalog_paths
from fencecheck.errors import ScenarioError
from fencecheck.files.scenario_io import dumps, load, loads, scenario_to_dict
from fencecheck.schema import SCENARIO_SCHEMA

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", [p for v in VERSIONS for p in catalog_paths(v)],
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_round_trip(path):
    s = load(path)
    text = dumps(s)
    again = loads(text, "dumped")
    assert again == s
    assert dumps(again) == text


def test_docs_schema_is_the_one_in_code():
    assert json.loads((ROOT / "docs" / "scenario.schema.json").read_text()) == SCENARIO_SCHEMA


def test_documented_examples_load():
    text = (ROOT / "docs" / "scenarios.md").read_text()
    blocks = text.split("```toml\n")[1:]
    from fencecheck.reference.check import check_scenario

    verdicts = [check_scenario(loads(b.split("```")[0], "docs/scenarios.md")).safe for b in blocks]
    assert verdicts == [False, True, False, True]  # what the prose around each example says


GOOD = next(p for p in catalog_paths(PR_ERA) if p.stem == "plain-decode").read_text()


def _mutate(edit):
    data = tomllib.loads(GOOD)
    edit(data)
    import tomli_w

    return tomli_w.dumps(data)


BAD = [
    (lambda d: d.pop("name"), "name", "missing required key"),
    (lambda d: d.update(steps=0), "steps", "minimum"),
    (lambda d: d.update(resolution="newest"), "resolution", "expected one of"),
    (lambda d: d.update(colour="blue"), "colour", "unknown key"),
    (lambda d: d["runners"]["target"].update(ring_depth="two"), "runners.target.ring_depth", "expected integer"),
    (lambda d: d["algorithm"]["steps"]["normal"][0].update(mode="PREFILL"), "algorithm.steps.normal[0].mode", "DECODE"),
    (lambda d: d["algorithm"]["steps"]["normal"][0].update(runner="ghost"), "algorithm.steps.normal[0].runner", "ghost"),
    (lambda d: d["algorithm"].update(publisher="ghost"), "algorithm.publisher.normal", "ghost"),
    (lambda d: d["backends"]["flashinfer"].update(children=["flashinfer"]), "backends.flashinfer.children", "another backend"),
    (lambda d: d["backends"]["flashinfer"]["reads"]["DECODE"].update(mid_replay=["x"]), "backends.flashinfer.reads.DECODE.mid_replay", "unknown key"),
    (lambda d: d.update(step_kinds=["idle"]), "step_kinds", "idle"),
    (lambda d: d["algorithm"]["steps"]["normal"].append(dict(d["algorithm"]["steps"]["normal"][0])), "algorithm.steps.normal[1].name", "unique"),
    # Limits and strict types: each a one-line error naming the key.
    (lambda d: d.update(steps=3.0), "steps", "expected integer, got float 3.0"),
    (lambda d: d.update(steps=True), "steps", "expected integer, got bool True"),
    (lambda d: d.update(steps=1_000_000_000), "steps", "expected maximum 1,000, got 1,000,000,000"),
    (lambda d: d["runners"]["target"].update(ring_depth=2**31), "runners.target.ring_depth", "expected maximum 64"),
    (lambda d: d["algorithm"]["steps"]["normal"][0].update(segments=10**9), "algorithm.steps.normal[0].segments", "maximum 64"),
    (lambda d: d["algorithm"]["steps"]["normal"][0].update(segments=2.5), "algorithm.steps.normal[0].segments", "expected integer"),
    (lambda d: d.update(name="two\nlines"), "name", "expected one line of printable text, got 'two\\nlines'"),
    (lambda d: d.update(name="x" * 5_000_000), "name", "expected maxLength 200, got 5,000,000 long"),
    (lambda d: d["algorithm"]["steps"]["normal"][0].update(name="y" * 300), "algorithm.steps.normal[0].name", "maxLength 200"),
    (lambda d: d["algorithm"]["steps"].update(normal=[dict(d["algorithm"]["steps"]["normal"][0], name=f"p{i}")
                                                      for i in range(10_001)]),
     "algorithm.steps.normal", "expected maxItems 10,000, got 10,001 long"),
    (lambda d: (d.update(steps=1000), d["algorithm"]["steps"].update(normal=[
        dict(d["algorithm"]["steps"]["normal"][0], name=f"p{i}") for i in range(300)])),
     "steps", "expected a run of at most 200,000 phase launches (steps x phases x segments), got 300,000"),
]


@pytest.mark.parametrize("edit, key, words", BAD, ids=[b[1] for b in BAD])
def test_bad_file_names_file_key_and_expectation(tmp_path, edit, key, words):
    path = tmp_path / "bad.toml"
    path.write_text(_mutate(edit))
    with pytest.raises(ScenarioError) as info:
        load(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: {key}: ")
    assert words in message


def test_an_error_line_is_bounded():
    path_text = _mutate(lambda d: d.update(resolution="z" * 1_000_000))
    with pytest.raises(ScenarioError) as info:
        loads(path_text, "big.toml")
    assert len(str(info.value)) < 400 and "\n" not in str(info.value)


@pytest.mark.parametrize("text, words", [
    ("steps = " + "9" * 5000 + "\n", "not valid TOML"),
    ("x = " + "[" * 2000 + "]" * 2000 + "\n", "nested too deeply"),
])
def test_parser_limits_are_one_line(text, words):
    with pytest.raises(ScenarioError) as info:
        loads(text, "odd.toml")
    assert str(info.value).startswith("odd.toml: ") and words in str(info.value) and "\n" not in str(info.value)


def test_a_file_given_to_the_wrong_command_says_which_command_it_belongs_to(tmp_path):
    from fencecheck.files.scenario_io import load_backend

    backend = ROOT / "examples" / "honest-backend.toml"
    with pytest.raises(ScenarioError, match="this is a backend file, not a scenario: give it to `fencecheck verify`"):
        load(backend)
    with pytest.raises(ScenarioError, match="this is a scenario file, not a backend: give it to `fencecheck check`"):
        load_backend(catalog_paths(PR_ERA)[0])


def test_docs_tables_are_derived_from_the_declarations():
    from fencecheck.schema import docs_tables

    text = (ROOT / "docs" / "scenarios.md").read_text()
    assert "<!-- fields:phase -->" in text
    assert text == docs_tables(text), "run: python3 -m fencecheck.schema docs"


def test_not_toml_and_missing_file(tmp_path):
    p = tmp_path / "x.toml"
    p.write_text("name = [\n")
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load(p)
    with pytest.raises(ScenarioError, match="no such file"):
        load(tmp_path / "missing.toml")


def test_dump_spells_out_defaults():
    s = load(catalog_paths(PR_ERA)[0])
    d = scenario_to_dict(s)
    assert d["scheduler"]["placement"] == "after_run_batch"
    assert all("execution" in p for p in d["algorithm"]["steps"]["normal"])
