"""Scenario files: TOML in, TOML out, validated against ``schema.SCENARIO_SCHEMA`` then ``Scenario.validate``.

Every failure is a ``ScenarioError`` whose message is one line: ``FILE: KEY: what was expected``.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import tomli_w

from .atomic import read_input, write_text_atomic
from .errors import ScenarioError
from .scenario import (
    AlgorithmSpec,
    BackendSpec,
    PhaseSpec,
    RunnerSpec,
    Scenario,
    SchedulerSpec,
)
from .report import Expectation, RaceId, Verdict
from .schema import BACKEND_SCHEMA, SCENARIO_SCHEMA
from .vocab import (
    BarrierPlacement,
    Execution,
    ForwardMode,
    PlanJoin,
    PrepStream,
    PublishPolicy,
    ReadSite,
    ResolutionRule,
    SharedReadEnds,
    StepKind,
)

_VALIDATOR = jsonschema.Draft202012Validator(SCENARIO_SCHEMA)
_BACKEND_VALIDATOR = jsonschema.Draft202012Validator(BACKEND_SCHEMA)


def _key(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _explain(error: jsonschema.ValidationError) -> tuple[str, str]:
    """The key and the expectation of one schema error, worded for a person."""
    key = _key(error.absolute_path)
    v = error.validator
    if v == "required":
        missing = [r for r in error.validator_value if r not in error.instance]
        return (f"{key}.{missing[0]}" if key else missing[0]), "missing required key"
    if v == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        name = extra[0] if extra else "?"
        allowed = ", ".join(sorted(error.schema.get("properties", {}))) or "none"
        return (f"{key}.{name}" if key else name), f"unknown key (expected one of: {allowed})"
    if v == "enum":
        return key, f"expected one of {', '.join(map(str, error.validator_value))}, got {error.instance!r}"
    if v == "type":
        return key, f"expected {error.validator_value}, got {type(error.instance).__name__} {error.instance!r}"
    if v in ("minimum", "minLength", "minItems", "minProperties"):
        return key, f"expected {v} {error.validator_value}, got {error.instance!r}"
    if v == "oneOf":
        return key, "expected a runner name or a table of runner names per step kind"
    if v == "uniqueItems":
        return key, "expected no repeated entries"
    return key, error.message.splitlines()[0]


def _validate(validator, data, source: str) -> None:
    errors = list(validator.iter_errors(data))
    if errors:
        # The deepest error is the most specific; oneOf wrappers report themselves at a shallower path.
        best = max(errors, key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
        key, expected = _explain(best)
        raise ScenarioError(source, key, expected)


def scenario_from_dict(data: dict[str, Any], source: str = "<scenario>") -> Scenario:
    """Build a ``Scenario`` from the parsed TOML form; raises ``ScenarioError`` with ``source`` in its message."""
    _validate(_VALIDATOR, data, source)
    try:
        return _build(data)
    except ScenarioError as err:
        raise ScenarioError(source, err.key, err.expected) from None


def _backend(name: str, b: dict[str, Any]) -> BackendSpec:
    return BackendSpec(
        name=name,
        declares={ForwardMode(m): SharedReadEnds[e] for m, e in b.get("declares", {}).items()},
        reads={mode: {ReadSite(s): tuple(locs) for s, locs in sites.items()} for mode, sites in b.get("reads", {}).items()},
        children=tuple(b.get("children", ())),
        delegate={ForwardMode(m): c for m, c in b.get("delegate", {}).items()},
        note=b.get("note", ""),
    )


def load_backend(path: str | os.PathLike) -> BackendSpec:
    """Read a backend file (``fencecheck verify``): ``name``, ``declares``, ``reads``, ``note``."""
    path = Path(path)
    try:
        data = tomllib.loads(read_input(path, ScenarioError))
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(str(path), "", f"not valid TOML ({err})") from None
    _validate(_BACKEND_VALIDATOR, data, str(path))
    return _backend(data["name"], data)


def _build(d: dict[str, Any]) -> Scenario:
    backends = {name: _backend(name, b) for name, b in d["backends"].items()}
    runners = {
        name: RunnerSpec(
            name=name,
            marker=r.get("marker", True),
            ring_depth=r.get("ring_depth", 2),
            publish=PublishPolicy(r.get("publish", PublishPolicy.RESOLVE.value)),
            mailbox=r.get("mailbox", ""),
        )
        for name, r in d["runners"].items()
    }
    a = d["algorithm"]
    publisher = a["publisher"]
    steps = {StepKind(k): tuple(_phase(p) for p in phases) for k, phases in a["steps"].items()}
    if isinstance(publisher, str):
        publisher = {k: publisher for k in steps}
    algorithm = AlgorithmSpec(
        name=a["name"],
        steps=steps,
        publisher={StepKind(k): v for k, v in publisher.items()},
        last_shared_read_modes=frozenset(ForwardMode(m) for m in a.get("last_shared_read_modes", ())),
    )
    s = d.get("scheduler", {})
    scheduler = SchedulerSpec(
        barrier=s.get("barrier", True),
        placement=BarrierPlacement(s.get("placement", BarrierPlacement.AFTER_RUN_BATCH.value)),
        force_coarse=s.get("force_coarse", False),
        writes=tuple(s.get("writes", ())),
    )
    expect = None
    if "expect" in d:
        e = d["expect"]
        expect = Expectation(
            verdict=Verdict(e["verdict"]),
            races=tuple(RaceId(r["location"], r["phase"], r["site"], r.get("step", 0)) for r in e.get("races", ())),
        )
    return Scenario(
        name=d["name"],
        description=d.get("description", ""),
        cites=tuple(d.get("cites", ())),
        resolution=ResolutionRule(d.get("resolution", ResolutionRule.DECLARATION_ONLY.value)),
        steps=d.get("steps", 3),
        step_kinds=tuple(StepKind(k) for k in d.get("step_kinds", [StepKind.NORMAL.value])),
        backends=backends,
        runners=runners,
        algorithm=algorithm,
        scheduler=scheduler,
        expect=expect,
    )


def _phase(p: dict[str, Any]) -> PhaseSpec:
    return PhaseSpec(
        name=p["name"],
        runner=p["runner"],
        mode=ForwardMode(p["mode"]),
        backend=p["backend"],
        execution=Execution(p.get("execution", Execution.GRAPH.value)),
        prep_stream=PrepStream(p.get("prep_stream", PrepStream.FORWARD.value)),
        plan_join=PlanJoin(p.get("plan_join", PlanJoin.BEFORE_REPLAY.value)),
        worker_reads_after=tuple(p.get("worker_reads_after", ())),
        clear_mailbox_after=p.get("clear_mailbox_after", False),
        consume_mailbox_before=p.get("consume_mailbox_before", False),
        segments=p.get("segments", 2),
    )


def scenario_to_dict(s: Scenario) -> dict[str, Any]:
    """The TOML form of ``s``, every field spelled out (so a dump documents the defaults)."""
    out: dict[str, Any] = {"name": s.name}
    if s.description:
        out["description"] = s.description
    if s.cites:
        out["cites"] = list(s.cites)
    out["resolution"] = s.resolution.value
    out["steps"] = s.steps
    out["step_kinds"] = [k.value for k in s.step_kinds]
    out["scheduler"] = {
        "barrier": s.scheduler.barrier,
        "placement": s.scheduler.placement.value,
        "force_coarse": s.scheduler.force_coarse,
        "writes": list(s.scheduler.writes),
    }
    out["backends"] = {}
    for name, b in s.backends.items():
        bd: dict[str, Any] = {}
        if b.declares:
            bd["declares"] = {m.value: e.name for m, e in b.declares.items()}
        if b.reads:
            bd["reads"] = {mode: {site.value: list(locs) for site, locs in sites.items()} for mode, sites in b.reads.items()}
        if b.children:
            bd["children"] = list(b.children)
        if b.delegate:
            bd["delegate"] = {m.value: c for m, c in b.delegate.items()}
        if b.note:
            bd["note"] = b.note
        out["backends"][name] = bd
    out["runners"] = {
        name: {"marker": r.marker, "ring_depth": r.ring_depth, "publish": r.publish.value, "mailbox": r.mailbox}
        for name, r in s.runners.items()
    }
    a = s.algorithm
    out["algorithm"] = {
        "name": a.name,
        "publisher": {k.value: v for k, v in a.publisher.items()},
        "last_shared_read_modes": sorted(m.value for m in a.last_shared_read_modes),
        "steps": {
            k.value: [
                {
                    "name": p.name,
                    "runner": p.runner,
                    "mode": p.mode.value,
                    "backend": p.backend,
                    "execution": p.execution.value,
                    "prep_stream": p.prep_stream.value,
                    "plan_join": p.plan_join.value,
                    "worker_reads_after": list(p.worker_reads_after),
                    "clear_mailbox_after": p.clear_mailbox_after,
                    "consume_mailbox_before": p.consume_mailbox_before,
                    "segments": p.segments,
                }
                for p in phases
            ]
            for k, phases in a.steps.items()
        },
    }
    if s.expect is not None:
        e: dict[str, Any] = {"verdict": s.expect.verdict.value}
        if s.expect.races:
            e["races"] = [
                {"location": r.location, "phase": r.phase, "site": r.site, "step": r.step} for r in s.expect.races
            ]
        out["expect"] = e
    return out


def dumps(s: Scenario) -> str:
    return tomli_w.dumps(scenario_to_dict(s))


def loads(text: str, source: str = "<scenario>") -> Scenario:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(source, "", f"not valid TOML ({err})") from None
    return scenario_from_dict(data, source)


def load(path: str | os.PathLike) -> Scenario:
    """Read one scenario file."""
    path = Path(path)
    return loads(read_input(path, ScenarioError), str(path))


def dump(s: Scenario, path: str | os.PathLike) -> None:
    """Write ``s`` to ``path`` atomically (no partial file on failure)."""
    write_text_atomic(Path(path), dumps(s))
