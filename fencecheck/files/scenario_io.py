"""Scenario files: TOML in, TOML out, validated against ``schema.SCENARIO_SCHEMA`` then ``Scenario.validate``.

Every failure is a ``ScenarioError`` whose message is one line: ``FILE: KEY: what was expected``.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import jsonschema
import tomli_w

from fencecheck.errors import ScenarioError, quote
from fencecheck.fields import from_table, to_table
from fencecheck.files.inputs import read_input
from fencecheck.files.outputs import write_text_atomic
from fencecheck.scenario import (
    AlgorithmSpec,
    BackendSpec,
    PhaseSpec,
    RunnerSpec,
    Scenario,
    SchedulerSpec,
)
from fencecheck.schema import BACKEND_SCHEMA, SCENARIO_SCHEMA, VALIDATOR_CLASS
from fencecheck.verdict import Expectation, RaceId, Verdict
from fencecheck.vocab import ForwardMode, ReadSite, SharedReadEnds, StepKind

_VALIDATOR = VALIDATOR_CLASS(SCENARIO_SCHEMA)
_BACKEND_VALIDATOR = VALIDATOR_CLASS(BACKEND_SCHEMA)


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
        return key, f"expected one of {', '.join(map(str, error.validator_value))}, got {quote(error.instance, 60)}"
    if v == "type":
        return key, f"expected {error.validator_value}, got {type(error.instance).__name__} {quote(error.instance, 60)}"
    if v in ("minimum", "minLength", "minItems", "minProperties"):
        return key, f"expected {v} {error.validator_value}, got {quote(error.instance, 60)}"
    if v in ("maximum", "maxLength", "maxItems", "maxProperties"):
        size = error.instance if v == "maximum" else len(error.instance)
        return key, f"expected {v} {error.validator_value:,}, got {size:,}" + ("" if v == "maximum" else " long")
    if v == "pattern":
        return key, f"expected one line of printable text, got {quote(error.instance, 60)}"
    if v == "propertyNames":
        return key, "expected names of one line of printable text, at most 200 characters"
    if v == "oneOf":
        # The branch of the instance's own shape says best what is wrong with it.
        same = [e for e in error.context if isinstance(error.instance, str) == (e.schema.get("type") == "string")]
        if same:
            return _explain(max(same, key=lambda e: len(e.absolute_path)))
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


def scenario_from_dict(data: dict[str, Any], source: str = "<scenario>", validate: bool = True) -> Scenario:
    """Build a ``Scenario`` from the parsed TOML form; raises ``ScenarioError`` with ``source`` in its message.
    ``validate=False`` skips the JSON Schema for tables fencecheck itself generated (the static reader's
    configurations, whose generator the tests hold to the schema)."""
    if isinstance(data, dict) and "algorithm" not in data and "runners" not in data and any(
            k in data for k in ("declares", "reads", "children", "delegate", "declares_when", "delegate_when")):
        raise ScenarioError(source, "", "this is a backend file, not a scenario: give it to `fencecheck verify`")
    try:
        if validate:
            _validate(_VALIDATOR, data, source)
    except RecursionError:
        raise ScenarioError(source, "", "nested too deeply") from None
    try:
        return _build(data)
    except ScenarioError as err:
        raise ScenarioError(source, err.key, err.expected) from None


def _backend(name: str, b: dict[str, Any]) -> BackendSpec:
    return from_table(
        BackendSpec, b,
        name=name,
        declares={ForwardMode(m): SharedReadEnds[e] for m, e in b.get("declares", {}).items()},
        reads={mode: {ReadSite(s): tuple(locs) for s, locs in sites.items()} for mode, sites in b.get("reads", {}).items()},
        delegate={ForwardMode(m): c for m, c in b.get("delegate", {}).items()},
        declares_when={cond: {ForwardMode(m): SharedReadEnds[e] for m, e in rows.items()}
                       for cond, rows in b.get("declares_when", {}).items()},
        delegate_when={cond: {ForwardMode(m): c for m, c in rows.items()}
                       for cond, rows in b.get("delegate_when", {}).items()},
    )


def _phase(p: dict[str, Any]) -> PhaseSpec:
    return from_table(PhaseSpec, p, other_reads={ReadSite(site): tuple(locs)
                                                 for site, locs in p.get("other_reads", {}).items()})


@dataclass(frozen=True)
class BackendFile:
    """A backend file: the backend under test (``root``) and every backend of the file by name (the root and its
    ``[backends.NAME]`` children)."""

    root: BackendSpec
    backends: Mapping[str, BackendSpec]

    @property
    def name(self) -> str:
        return self.root.name


def backend_from_dict(data: dict[str, Any], source: str = "<backend>") -> BackendFile:
    """Build a ``BackendFile`` from the parsed TOML form; raises ``ScenarioError`` with ``source`` in its message."""
    if isinstance(data, dict) and ("algorithm" in data or "runners" in data):
        raise ScenarioError(source, "", "this is a scenario file, not a backend: give it to `fencecheck check`")
    try:
        _validate(_BACKEND_VALIDATOR, data, source)
    except RecursionError:
        raise ScenarioError(source, "", "nested too deeply") from None
    root_name = data["name"]
    tables = data.get("backends", {})
    if root_name in tables:
        raise ScenarioError(source, f"backends.{root_name}", f"expected a child's name, got the backend's own name")
    backends = {root_name: _backend(root_name, data), **{n: _backend(n, b) for n, b in tables.items()}}
    for name, b in backends.items():
        at = "" if name == root_name else f"backends.{name}."
        for i, child in enumerate(b.children):
            if child not in tables or child == name:
                raise ScenarioError(source, f"{at}children[{i}]",
                                    f"expected the name of a [backends.NAME] table of this file, got {child!r}")
        for mode, child in b.delegate.items():
            if child not in tables or child == name:
                raise ScenarioError(source, f"{at}delegate.{mode.value}",
                                    f"expected the name of a [backends.NAME] table of this file, got {child!r}")
        for cond, rows in b.delegate_when.items():
            for mode, child in rows.items():
                if child not in tables or child == name:
                    raise ScenarioError(source, f"{at}delegate_when.{cond}.{mode.value}",
                                        f"expected the name of a [backends.NAME] table of this file, got {child!r}")
        if b.children and b.delegate:
            raise ScenarioError(source, at.rstrip(".") or "children",
                                "expected either children (composite) or delegate (hybrid), not both")
    state: dict[str, int] = {}

    def visit(name: str) -> None:
        if state.get(name) == 1:
            raise ScenarioError(source, f"backends.{name}", "expected no cycle through children/delegate")
        if state.get(name) != 2:
            state[name] = 1
            conditional = [c for rows in backends[name].delegate_when.values() for c in rows.values()]
            for child in (*backends[name].children, *backends[name].delegate.values(), *conditional):
                visit(child)
            state[name] = 2

    visit(root_name)
    for name in tables:
        if name not in state:
            raise ScenarioError(source, f"backends.{name}", "expected a backend that children or delegate names")
    return BackendFile(backends[root_name], backends)


def load_backend(path: str | os.PathLike) -> BackendFile:
    """Read a backend file (``fencecheck verify``; docs/verify.md): a plain backend, a composite or a hybrid."""
    path = Path(path)
    return backend_from_dict(_parse(read_input(path, ScenarioError), str(path)), str(path))


def _build(d: dict[str, Any]) -> Scenario:
    a = d["algorithm"]
    steps = {StepKind(k): tuple(_phase(p) for p in phases) for k, phases in a["steps"].items()}
    publisher = a["publisher"]
    if isinstance(publisher, str):
        publisher = {k.value: publisher for k in steps}
    expect = None
    if "expect" in d:
        e = d["expect"]
        expect = Expectation(
            verdict=Verdict(e["verdict"]),
            races=tuple(RaceId(r["location"], r["phase"], r["site"], r.get("step", 0)) for r in e.get("races", ())),
        )
    return from_table(
        Scenario, d,
        backends={name: _backend(name, b) for name, b in d["backends"].items()},
        runners={name: from_table(RunnerSpec, r, name=name) for name, r in d["runners"].items()},
        algorithm=from_table(AlgorithmSpec, a, steps=steps, publisher={StepKind(k): v for k, v in publisher.items()}),
        scheduler=from_table(SchedulerSpec, d.get("scheduler", {})),
        settings=dict(d.get("settings", {})),
        expect=expect,
    )


def scenario_to_dict(s: Scenario) -> dict[str, Any]:
    """The TOML form of ``s``, every field spelled out (so a dump documents the defaults)."""
    backends = {
        name: to_table(
            b,
            declares={m.value: e.name for m, e in b.declares.items()} or None,
            reads={mode: {site.value: list(locs) for site, locs in sites.items()} for mode, sites in b.reads.items()}
            or None,
            delegate={m.value: c for m, c in b.delegate.items()} or None,
            declares_when={cond: {m.value: e.name for m, e in rows.items()} for cond, rows in b.declares_when.items()}
            or None,
            delegate_when={cond: {m.value: c for m, c in rows.items()} for cond, rows in b.delegate_when.items()}
            or None,
        )
        for name, b in s.backends.items()
    }
    a = s.algorithm
    algorithm = to_table(
        a,
        publisher={k.value: v for k, v in a.publisher.items()},
        steps={k.value: [to_table(p, other_reads={site.value: list(locs) for site, locs in p.other_reads.items()}
                                  or None) for p in phases] for k, phases in a.steps.items()},
    )
    expect = None
    if s.expect is not None:
        expect = {"verdict": s.expect.verdict.value}
        if s.expect.races:
            expect["races"] = [r.to_dict() for r in s.expect.races]
    return to_table(
        s,
        backends=backends,
        runners={name: to_table(r) for name, r in s.runners.items()},
        algorithm=algorithm,
        scheduler=to_table(s.scheduler),
        settings=dict(s.settings) or None,
        step_kinds=[k.value for k in s.step_kinds],
        expect=expect,
    )


def dumps(s: Scenario) -> str:
    return tomli_w.dumps(scenario_to_dict(s))


def _parse(text: str, source: str) -> dict[str, Any]:
    """Parsed TOML, or one line saying why not (malformed, an integer too long to convert, nested too deeply)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(source, "", f"not valid TOML ({err})") from None
    except ValueError as err:  # Python's limit on converting very long integers
        raise ScenarioError(source, "", f"not valid TOML ({str(err).splitlines()[0][:80]})") from None
    except RecursionError:
        raise ScenarioError(source, "", "nested too deeply") from None


def loads(text: str, source: str = "<scenario>") -> Scenario:
    return scenario_from_dict(_parse(text, source), source)


def load(path: str | os.PathLike) -> Scenario:
    """Read one scenario file."""
    path = Path(path)
    return loads(read_input(path, ScenarioError), str(path))


def dump(s: Scenario, path: str | os.PathLike) -> None:
    """Write ``s`` to ``path`` atomically (no partial file on failure)."""
    write_text_atomic(Path(path), dumps(s))


def is_scenario_file(path) -> bool:
    """Whether the file at ``path`` is a scenario as ``dumps`` writes it (TOML that validates as a scenario): what
    ``--scenarios DIR`` may replace; anything else there is not the tool's."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
        scenario_from_dict(data, str(path))
    except (OSError, ValueError, KeyError, TypeError, ScenarioError):  # not TOML, not a scenario: not one of ours
        return False
    return True
