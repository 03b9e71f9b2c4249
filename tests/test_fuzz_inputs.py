"""Fuzzed input files give exit 0, 1 or 2 and at most one stderr line, never a traceback or exit 70.

Catalog scenarios and traces are mutated (keys dropped, list entries duplicated, values retyped, huge numbers, long
strings, deep nesting, lines duplicated, text cut, bytes that are not UTF-8) and run through the command's entry
point (``fencecheck.commands.main.main``).

The work is bounded by the inputs, not by time: mutated files stay within the file-level limits' order of size, and
a run that reaches the simulator with more steps, ring slots or graph segments than ``MAX_AT_TEST`` is reported as a
failure (the scenario limits must refuse such a file before running it).
"""

from __future__ import annotations

import copy
import io
import json
import tomllib

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from fencecheck.files.catalog import PR_ERA, catalog_paths
from fencecheck.commands.main import main

MAX_AT_TEST = 1000
HUGE, DEEP = "@@HUGE@@", "@@DEEP@@"  # placeholders for what the serializers cannot write



def _scenarios() -> list[dict]:
    """Each catalog file as written, and as ``scenario_to_dict`` spells it out (every default written, so every
    integer and flag of the format is there to mutate)."""
    from fencecheck.files.scenario_io import load, scenario_to_dict

    paths = sorted(catalog_paths(PR_ERA))
    return [tomllib.loads(p.read_text()) for p in paths] + [scenario_to_dict(load(p)) for p in paths]


SCENARIOS = _scenarios()


def _traces() -> list[dict]:
    from fencecheck.files.catalog import PR_ERA, load_catalog
    from fencecheck.reference.run import run_scenario

    chosen = {"plain-decode", "ngram-no-clear", "eagle-v2", "restored-graph-no-marker"}
    return [run_scenario(s, 2).to_dict() for s in load_catalog(PR_ERA) if s.name in chosen]


TRACES = _traces()

# Values a mutation puts in place of another: other types, edge numbers, what only the file-level limits stop.
OTHER_VALUES = ["x", "", [], {}, True, -1, 0, 10**12, ["a", 1], {"k": "v"}]
FILE_LEVEL_VALUES = [HUGE, DEEP, "x" * 100_000, "line\nbreak\x1b[2J\u2028", "\udcff"]


def confusions(value) -> list:
    """What a person (or a tool) might write instead of ``value``: the same thing in another type first."""
    if isinstance(value, bool):
        near = [int(value), str(value).lower(), [value]]
    elif isinstance(value, int):
        near = [float(value), value + 0.5, str(value), [value], -value - 1, 10**12]
    elif isinstance(value, str):
        near = [[value], value.upper(), value + "\n", 1, ""]
    elif isinstance(value, list):
        near = [value[0] if value else "", {str(i): v for i, v in enumerate(value)}, [value]]
    elif isinstance(value, dict):
        near = [list(value.values()), list(value), str(value)]
    else:
        near = []
    return near


def _paths(obj, prefix=()):
    """Every (container, key) pair of a parsed document, outermost first."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


def _parent(doc, path):
    for k in path[:-1]:
        doc = doc[k]
    return doc


@st.composite
def mutated(draw, bases, values, text_mutations: bool):
    """One base document with 1-2 mutations (half of them of a scalar), as (document, text mutation or None)."""
    doc = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(1, 2))):
        paths = list(_paths(doc))
        leaves = [p for p in paths if not isinstance(_parent(doc, p)[p[-1]], (dict, list))]
        if not paths:
            break
        path = draw(st.sampled_from(leaves if leaves and draw(st.booleans()) else paths))
        parent, key = _parent(doc, path), path[-1]
        op = draw(st.sampled_from(["drop", "duplicate", "retype"]))
        if op == "drop":
            del parent[key]
        elif op == "duplicate" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        else:
            near = confusions(parent[key])
            pick = draw(st.sampled_from(near + values if near else values)) if draw(st.booleans()) or not near \
                else draw(st.sampled_from(near))
            parent[key] = copy.deepcopy(pick)
    text_op = None
    if text_mutations and draw(st.integers(0, 3)) == 0:
        text_op = draw(st.tuples(st.sampled_from(["cut", "duplicate line", "bad byte"]), st.floats(0, 1)))
    return doc, text_op


@st.composite
def file_level(draw, bases):
    """A base document with one value replaced by what only the file-level limits stop, or a text mutation."""
    doc = copy.deepcopy(draw(st.sampled_from(bases)))
    path = draw(st.sampled_from(list(_paths(doc))))
    _parent(doc, path)[path[-1]] = draw(st.sampled_from(FILE_LEVEL_VALUES))
    text_op = draw(st.one_of(st.none(), st.tuples(st.sampled_from(["cut", "duplicate line", "bad byte"]),
                                                  st.floats(0, 1))))
    return doc, text_op


def _render(doc, fmt: str, text_op, depth: int = 600) -> bytes:
    if fmt == "toml":
        import tomli_w

        text = tomli_w.dumps(_no_none(doc))
    else:
        text = json.dumps(doc, indent=1)
    text = text.replace(f'"{HUGE}"', "9" * 5000).replace(f'"{DEEP}"', "[" * depth + "]" * depth)
    data = text.encode("utf-8", "surrogateescape")
    if text_op is not None:
        op, where = text_op
        at = int(where * len(data))
        if op == "cut":
            data = data[:at]
        elif op == "bad byte":
            data = data[:at] + b"\xff\x00" + data[at:]
        else:
            lines = data.split(b"\n")
            i = int(where * (len(lines) - 1))
            data = b"\n".join(lines[: i + 1] + lines[i:])
    return data


def _no_none(obj):
    if isinstance(obj, dict):
        return {k: _no_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_no_none(v) for v in obj if v is not None]
    return obj


@pytest.fixture(scope="module")
def bounded_work():
    """The simulator refuses work past ``MAX_AT_TEST`` (a bug report, exit 70) instead of running on."""
    from fencecheck.reference import run as R

    real = R.run_scenario

    def bounded(scenario, steps=None, *args, **kwargs):
        sizes = [steps or scenario.steps] + [r.ring_depth for r in scenario.runners.values()]
        sizes += [p.segments for phases in scenario.algorithm.steps.values() for p in phases]
        if max(sizes) > MAX_AT_TEST:
            raise RuntimeError(f"a size of {max(sizes)} reached the simulator")
        return real(scenario, steps, *args, **kwargs)

    R.run_scenario = bounded
    yield
    R.run_scenario = real


def _check(tmp_path_factory, data: bytes, suffix: str) -> None:
    path = tmp_path_factory.mktemp("fuzz") / f"input{suffix}"
    path.write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    code = main(["check", str(path)], out, err)
    text = err.getvalue()
    assert code in (0, 1, 2), text
    assert text.count("\n") <= 1 and "Traceback" not in text
    assert (code == 2) == bool(text), text
    if code == 2:
        assert text.startswith(f"fencecheck: error: {path}")


FUZZ = settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                         HealthCheck.data_too_large])


@pytest.mark.slow
@FUZZ
@given(case=file_level(SCENARIOS))
def test_scenario_files_past_the_file_level_limits(case, tmp_path_factory, bounded_work):
    doc, text_op = case
    _check(tmp_path_factory, _render(doc, "toml", text_op), ".toml")


@pytest.mark.slow
@FUZZ
@given(case=file_level(TRACES))
def test_trace_files_past_the_file_level_limits(case, tmp_path_factory, bounded_work):
    doc, text_op = case
    _check(tmp_path_factory, _render(doc, "json", text_op), ".json")


@pytest.mark.slow
@FUZZ
@given(case=mutated(SCENARIOS, OTHER_VALUES + FILE_LEVEL_VALUES, True))
@example(case=({**SCENARIOS[0], "steps": 3.0}, None))
@example(case=({**SCENARIOS[0], "steps": 10**12}, None))
def test_mutated_scenario_files(case, tmp_path_factory, bounded_work):
    doc, text_op = case
    _check(tmp_path_factory, _render(doc, "toml", text_op), ".toml")


@pytest.mark.slow
@FUZZ
@given(case=mutated(TRACES, OTHER_VALUES + [None] + FILE_LEVEL_VALUES, True))
@example(case=({**TRACES[0], "streams": [["S"], "F"]}, None))
def test_mutated_trace_files(case, tmp_path_factory, bounded_work):
    doc, text_op = case
    _check(tmp_path_factory, _render(doc, "json", text_op), ".json")
