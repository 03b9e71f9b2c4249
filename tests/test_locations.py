"""Shared locations by identity, from one list.

An alias is its canonical location in every input (scenario, backend and trace files) and to both engines; the
vocabulary's ``SHARED_LOCATIONS`` is the only list of them."""

from __future__ import annotations

import ast
import io
import json
from pathlib import Path

import pytest
from fencecheck.model.check import model_check
from fencecheck.reference.check import check_scenario
from fencecheck.reference.run import run_scenario
from fencecheck.reference.sim.races import check_trace

from fencecheck.files.catalog import VERSIONS, catalog_paths, load_catalog
from fencecheck.commands.main import main
from fencecheck.verdict import RaceId, Verdict, agreement
from fencecheck.files.scenario_io import load_backend, loads
from fencecheck.sglang_source import reads
from fencecheck.trace_json import parse_json
from fencecheck.vocab import LOCATION_ALIASES, SHARED_LOCATIONS, canonical_location

ROOT = Path(__file__).resolve().parent.parent
#: Each alias with its canonical name, both ways round: (the name read, the name written).
PAIRS = [pair for alias, full in sorted(LOCATION_ALIASES.items()) for pair in ((alias, full), (full, alias))]

UNFENCED = """name = "alias-{read}-{write}"
steps = 2

[backends.b]
reads.DECODE = {{ pre_replay = ["{read}"] }}

[runners.target]

[algorithm]
name = "none"
publisher = "target"

[[algorithm.steps.normal]]
name = "decode"
runner = "target"
mode = "DECODE"
backend = "b"

[scheduler]
barrier = false
writes = ["{write}"]
"""


def test_every_alias_names_a_known_location_and_is_not_one_itself():
    assert LOCATION_ALIASES, "no alias: drop this file's alias tests with the table"
    for alias, full in LOCATION_ALIASES.items():
        assert full in SHARED_LOCATIONS and alias not in SHARED_LOCATIONS
        assert canonical_location(alias) == full and canonical_location(full) == full


@pytest.mark.parametrize("read,write", PAIRS)
def test_a_read_of_one_name_races_a_write_of_the_other_in_both_engines(read, write):
    s = loads(UNFENCED.format(read=read, write=write), "alias.toml")
    full = canonical_location(read)
    assert s.locations() == (full,) and s.written_locations() == (full,)
    expected = {RaceId(full, "decode", "pre_replay", step) for step in (1, 2)}
    sim = check_scenario(s)
    assert sim.verdict is Verdict.COUNTEREXAMPLE and {r.id for r in sim.races} == expected
    model = model_check(s)
    assert model.verdict is Verdict.COUNTEREXAMPLE and set(model.races) == expected


@pytest.mark.parametrize("read,write", PAIRS)
def test_a_trace_file_reading_one_name_and_writing_the_other_races(read, write):
    full = canonical_location(read)
    doc = json.loads(run_scenario(loads(UNFENCED.format(read=full, write=full), "alias.toml")).to_json())
    for op in doc["ops"]:
        if op.get("op") in ("read", "write"):
            op["location"] = read if op["op"] == "read" else write
    report = check_trace(parse_json(json.dumps(doc), "alias.json"))
    assert report.verdict is Verdict.COUNTEREXAMPLE and {r.location for r in report.races} == {full}


@pytest.mark.parametrize("read,write", PAIRS)
def test_an_expected_race_named_by_either_name_is_met(read, write):
    s = loads(UNFENCED.format(read=read, write=write) + f"""
[expect]
verdict = "counterexample"
races = [{{ location = "{write}", phase = "decode", site = "pre_replay" }}]
""", "alias.toml")
    assert s.expect.races == (RaceId(canonical_location(write), "decode", "pre_replay"),)
    report = check_scenario(s)
    assert agreement(s.expect, report.verdict, [r.id for r in report.races]) == (True, "")


def test_a_backend_file_naming_an_alias_reads_the_canonical_location(tmp_path):
    (alias, full), = list(LOCATION_ALIASES.items())[:1]
    path = tmp_path / "b.toml"
    path.write_text(f'name = "b"\nreads.DECODE = {{ in_graph_after_marker = ["{alias}", "{full}"] }}\n')
    (_, locs), = load_backend(path).root.reads["DECODE"].items()
    assert locs == (full,)  # one location, named twice


def test_the_pr_era_catalog_reads_the_canonical_sliding_window_map():
    """The PR-era catalog spells the map by its short name; loaded, it is SGLang's one map."""
    named = {s.name: s for s in load_catalog("pr-35059")}
    for name in ("composite-backend", "deepseek-v4-verify"):
        text = (ROOT / "fencecheck" / "catalog" / "pr-35059" / f"{name}.toml").read_text()
        assert '"swa_index_map"' in text
        assert "full_to_swa_index_mapping" in named[name].locations()
        assert "swa_index_map" not in named[name].locations()


# -- one list --------------------------------------------------------------------------------------------------


def test_the_static_reader_reads_the_vocabularys_list():
    assert reads.SHARED_ATTRS is SHARED_LOCATIONS
    assert set(reads.TRANSLATOR_READS.values()) <= SHARED_LOCATIONS


def _restated_lists(root: Path) -> list[str]:
    """Collection literals (tuple, list, set, dict keys) naming two or more known locations or aliases, outside the
    vocabulary: a second list of the scheduler-shared locations."""
    names = SHARED_LOCATIONS | set(LOCATION_ALIASES)
    found = []
    for folder in ("fencecheck", "model", "reference", "gpu", "proofs"):
        for path in sorted((root / folder).rglob("*.py")):
            if path.relative_to(root).as_posix() == "fencecheck/vocab.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                    items = node.elts
                elif isinstance(node, ast.Dict):
                    items = [k for k in node.keys if k is not None]
                else:
                    continue
                named = {i.value for i in items if isinstance(i, ast.Constant) and i.value in names}
                if len(named) >= 2:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {sorted(named)}")
    return found


def test_no_second_list_of_shared_locations():
    assert _restated_lists(ROOT) == []


def test_a_second_list_is_found(tmp_path):
    """The scan can fail: a module restating the list (as reads.py once did) is reported."""
    (tmp_path / "fencecheck").mkdir()
    (tmp_path / "fencecheck" / "x.py").write_text('ATTRS = ("req_to_token", "full_to_swa_index_mapping")\n')
    assert _restated_lists(tmp_path) == ["fencecheck/x.py:1: ['full_to_swa_index_mapping', 'req_to_token']"]


def test_no_catalog_file_of_any_version_names_an_unknown_location():
    paths = [str(p) for v in VERSIONS for p in catalog_paths(v)]
    assert len(paths) == 80
    err = io.StringIO()
    main(["check", *paths], io.StringIO(), err)
    assert "unknown shared location" not in err.getvalue(), err.getvalue()
    assert err.getvalue() == ""
