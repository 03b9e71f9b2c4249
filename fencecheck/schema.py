"""The JSON Schemas of fencecheck's input files (the TOML form, after parsing), derived from the field declarations
of ``fencecheck.scenario`` (``fields.table_schema``); only the structural tables are assembled here.
docs/scenario.schema.json is generated from ``SCENARIO_SCHEMA``, docs/backend.schema.json from ``BACKEND_SCHEMA``.

Integers are strict: a TOML float (``3.0``) is not an integer, whatever JSON Schema's number model says
(``VALIDATOR_CLASS``).
"""

from __future__ import annotations

import jsonschema

from .fields import LIST_MAX, entries, name_schema, table_schema, tokens, value_schema
from .scenario import (
    MAX_PHASES,
    MAX_TABLE,
    AlgorithmSpec,
    BackendSpec,
    PhaseSpec,
    RunnerSpec,
    Scenario,
    SchedulerSpec,
)
from .vocab import WORKER_SITE, ForwardMode, ReadSite, SharedReadEnds, StepKind

_MODES = tokens(ForwardMode)
_NAME = name_schema()
_LOCATIONS = {"type": "array", "items": _NAME, "uniqueItems": True, "maxItems": LIST_MAX}

_SITE_READS = {
    "type": "object",
    "description": "shared locations read at each site",
    "properties": {site.value: _LOCATIONS for site in ReadSite},
    "additionalProperties": False,
}

_BACKEND_PARTS = {
    "declares": {
        "type": "object",
        "properties": {m: {"type": "string", "enum": tokens(SharedReadEnds)} for m in _MODES},
        "additionalProperties": False,
    },
    "reads": {
        "type": "object",
        "properties": {**{m: _SITE_READS for m in _MODES}, "*": _SITE_READS},
        "additionalProperties": False,
    },
    "delegate": {"type": "object", "properties": {m: _NAME for m in _MODES}, "additionalProperties": False},
}
_CONDITIONS = {"type": "object", "maxProperties": LIST_MAX, "propertyNames": {**_NAME, "pattern": "^[^=\\x00-\\x1f]+=[^=\\x00-\\x1f]+$"}}
_BACKEND_PARTS["declares_when"] = {**_CONDITIONS, "additionalProperties": _BACKEND_PARTS["declares"]}
_BACKEND_PARTS["delegate_when"] = {**_CONDITIONS, "additionalProperties": _BACKEND_PARTS["delegate"]}

_BACKEND = table_schema(BackendSpec, **_BACKEND_PARTS)
_RUNNER = table_schema(RunnerSpec)
_PHASE = table_schema(PhaseSpec, other_reads=_SITE_READS)
_KINDS = tokens(StepKind)

_ALGORITHM = table_schema(
    AlgorithmSpec,
    steps={
        "type": "object",
        "properties": {k: {"type": "array", "items": _PHASE, "minItems": 1, "maxItems": MAX_PHASES} for k in _KINDS},
        "additionalProperties": False,
        "minProperties": 1,
    },
    publisher={
        "oneOf": [
            _NAME,
            {"type": "object", "properties": {k: _NAME for k in _KINDS}, "additionalProperties": False,
             "minProperties": 1},
        ],
    },
)

_EXPECT = {
    "type": "object",
    "required": ["verdict"],
    "properties": {
        "verdict": {"type": "string", "enum": ["proved", "counterexample"]},
        "races": {
            "type": "array",
            "maxItems": LIST_MAX,
            "items": {
                "type": "object",
                "required": ["location", "phase", "site"],
                "properties": {
                    "location": _NAME,
                    "phase": _NAME,
                    "site": {"type": "string", "enum": [s.value for s in ReadSite] + [WORKER_SITE]},
                    "step": {"type": "integer", "minimum": 0, "maximum": value_schema(
                        next(e for e in entries(Scenario) if e.name == "steps"))["maximum"]},
                },
                "additionalProperties": False,
            },
        },
    },
    "additionalProperties": False,
}


def _tables(item: dict) -> dict:
    return {"type": "object", "minProperties": 1, "maxProperties": MAX_TABLE,
            "propertyNames": _NAME, "additionalProperties": item}


SCENARIO_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://fencecheck.dev/scenario.schema.json",
    "title": "fencecheck scenario",
    **table_schema(
        Scenario,
        backends=_tables(_BACKEND),
        runners=_tables(_RUNNER),
        algorithm=_ALGORITHM,
        scheduler=table_schema(SchedulerSpec),
        settings={"type": "object", "maxProperties": LIST_MAX, "propertyNames": _NAME,
                  "additionalProperties": _NAME},
        expect=_EXPECT,
    ),
}


#: A backend file for ``fencecheck verify`` (docs/verify.md): the backend under test at the top level, and the child
#: backends its ``children`` (a composite) or ``delegate`` (a hybrid) name as ``[backends.NAME]`` tables of the same
#: file, each in the scenario file's backend form (so a child may itself be a composite or a hybrid).
BACKEND_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://fencecheck.dev/backend.schema.json",
    "title": "fencecheck backend",
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {**_NAME, "description": "the backend's name"},
        **{k: _BACKEND["properties"][k] for k in ("declares", "reads", "children", "delegate", "declares_when",
                                                   "delegate_when", "note")},
        "backends": {**_tables(_BACKEND), "description": "`[backends.NAME]`: the child backends that `children` and "
                     "`delegate` name (each in the scenario file's backend form)"},
    },
    "additionalProperties": False,
}

#: The schemas ``fencecheck schema --kind`` prints, by kind.
SCHEMAS = {"scenario": SCENARIO_SCHEMA, "backend": BACKEND_SCHEMA}


def _strict_int(checker, instance) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


#: Draft 2020-12 with integers that are Python ints only (no ``3.0``, no ``True``).
VALIDATOR_CLASS = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_int),
)


# -- the generated parts of the docs ------------------------------------------------------------------------------

#: The scenario classes whose field tables docs/scenarios.md shows, by the name its markers use.
DOC_TABLES = {"scenario": Scenario, "runner": RunnerSpec, "backend": BackendSpec, "algorithm": AlgorithmSpec,
              "phase": PhaseSpec, "scheduler": SchedulerSpec}


def docs_tables(text: str) -> str:
    """``text`` with each block between ``<!-- fields:NAME -->`` and ``<!-- /fields -->`` replaced by the field
    table of ``DOC_TABLES[NAME]`` (``fields.markdown_table``), and the list between ``<!-- keys:backend-file -->``
    and ``<!-- /keys -->`` by the keys of a backend file (the backend schema's)."""
    import re

    from .fields import markdown_table

    def table(m: re.Match) -> str:
        return f"<!-- fields:{m.group(1)} -->\n{markdown_table(DOC_TABLES[m.group(1)])}\n<!-- /fields -->"

    keys = ", ".join(f"`{k}`" for k in BACKEND_SCHEMA["properties"])
    text = re.sub(r"<!-- keys:backend-file -->.*?<!-- /keys -->",
                  lambda m: f"<!-- keys:backend-file -->{keys}<!-- /keys -->", text, flags=re.S)
    return re.sub(r"<!-- fields:(\w+) -->.*?<!-- /fields -->", table, text, flags=re.S)


def main() -> None:  # pragma: no cover - exercised by the docs tests through docs_tables and SCENARIO_SCHEMA
    """Regenerate docs/scenario.schema.json and the field tables of docs/scenarios.md in a checkout."""
    import json
    import sys
    from pathlib import Path

    docs = Path(sys.argv[1] if len(sys.argv) > 1 else "docs")
    (docs / "scenario.schema.json").write_text(json.dumps(SCENARIO_SCHEMA, indent=2) + "\n", encoding="utf-8")
    (docs / "backend.schema.json").write_text(json.dumps(BACKEND_SCHEMA, indent=2) + "\n", encoding="utf-8")
    page = docs / "scenarios.md"
    page.write_text(docs_tables(page.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover
    main()
