"""One declaration per scenario field, and every consumer derived from it.

The schema, the TOML reader and writer, the docs, and the model's encoding and decoding all come from the
declaration, so a knob declared once is read, written, documented, encoded and decoded."""

from __future__ import annotations

import dataclasses

import pytest
import z3

from fencecheck import fields as F
from fencecheck.files.catalog import PR_ERA, VERSIONS, load_catalog
from fencecheck.model.concrete import assignment, layout
from fencecheck.model.counterexample import to_scenario
from fencecheck.model.program import build
from fencecheck.model.solver import make_solver
from fencecheck.model.symconfig import GLOBAL_KNOBS, PHASE_KNOBS, RUNNER_KNOBS, Bounds, make_config
from fencecheck.scenario import AlgorithmSpec, BackendSpec, PhaseSpec, RunnerSpec, Scenario, SchedulerSpec
from fencecheck.schema import SCENARIO_SCHEMA
from fencecheck.files.scenario_io import scenario_to_dict

CLASSES = (BackendSpec, RunnerSpec, PhaseSpec, AlgorithmSpec, SchedulerSpec, Scenario)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_field_is_declared_once_with_a_meaning(cls):
    entries = F.entries(cls)
    assert [e.name for e in entries] == [f.name for f in dataclasses.fields(cls)]
    assert all(e.info.meaning for e in entries)


def _schema_props(cls):
    s = SCENARIO_SCHEMA["properties"]
    return {
        Scenario: SCENARIO_SCHEMA["properties"],
        BackendSpec: s["backends"]["additionalProperties"]["properties"],
        RunnerSpec: s["runners"]["additionalProperties"]["properties"],
        AlgorithmSpec: s["algorithm"]["properties"],
        PhaseSpec: s["algorithm"]["properties"]["steps"]["properties"]["normal"]["items"]["properties"],
        SchedulerSpec: s["scheduler"]["properties"],
    }[cls]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_schema_has_exactly_the_declared_keys(cls):
    assert set(_schema_props(cls)) == {e.name for e in F.entries(cls) if not e.info.key}


def test_writer_spells_every_plain_field():
    s = next(x for x in load_catalog(PR_ERA) if x.name == "dspark")
    d = scenario_to_dict(s)
    phase = d["algorithm"]["steps"]["normal"][0]
    assert set(phase) == {e.name for e in F.entries(PhaseSpec) if not e.info.omit_empty}
    assert set(d["runners"]["target"]) == {e.name for e in F.entries(RunnerSpec)
                                           if not e.info.key and not e.info.omit_empty}
    assert set(d["scheduler"]) == {e.name for e in F.entries(SchedulerSpec)}


@pytest.mark.parametrize("knob", PHASE_KNOBS + RUNNER_KNOBS + GLOBAL_KNOBS, ids=lambda k: k.name)
def test_encode_decode_round_trip(knob):
    if knob.enum is not None:
        values = list(knob.enum)
    elif knob.type is bool:
        values = [False, True]
    else:
        values = list(range(knob.info.minimum, Bounds().segments + 1))
    assert [F.decode(knob, F.encode(knob, v)) for v in values] == values
    cfg = make_config(Bounds(steps=1, phases=1, runners=1))
    var = {**cfg.phases[0][0].knobs, **cfg.runners[0].knobs, **cfg.knobs}[knob.name]
    assert var.decl().name().endswith(knob.name)


@pytest.mark.slow
def test_pinning_sets_every_knob_and_decoding_gives_the_scenario_back():
    """Pin a catalog scenario, solve, decode: every model knob of every phase, runner and the scheduler round-trips."""
    for s in (s for v in VERSIONS for s in load_catalog(v)):
        lay = layout(s, 1)
        cfg = make_config(lay.bounds(s))
        pinned = {var.get_id() for var, _ in assignment(cfg, s, lay)}
        assert {v.get_id() for v in cfg.all_vars()} <= pinned, s.name
        solver = make_solver()
        prog = build(cfg)
        solver.add(*cfg.domain, *prog.constraints, *[var == value for var, value in assignment(cfg, s, lay)])
        assert solver.check() == z3.sat
        back, _ = to_scenario(cfg, prog, solver.model(), "back")
        kind = s.step_kind(1)
        for got, want in zip(back.algorithm.steps[back.step_kind(1)], s.algorithm.steps[kind]):
            for k in PHASE_KNOBS:
                assert getattr(got, k.name) == getattr(want, k.name), (s.name, k.name)
        for k in GLOBAL_KNOBS:
            holder_got = next(h for h in (back, back.algorithm, back.scheduler) if hasattr(h, k.name))
            holder_want = next(h for h in (s, s.algorithm, s.scheduler) if hasattr(h, k.name))
            assert getattr(holder_got, k.name) == getattr(holder_want, k.name), (s.name, k.name)
