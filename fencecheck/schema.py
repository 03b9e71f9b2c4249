"""The JSON Schema of scenario files (the TOML form, after parsing). docs/scenario.schema.json is generated from it."""

from __future__ import annotations

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


def _enum(values, description: str = "") -> dict:
    out = {"type": "string", "enum": [v for v in values]}
    if description:
        out["description"] = description
    return out


_MODES = [m.value for m in ForwardMode]
_ENDS = [e.name for e in SharedReadEnds]
_NAME = {"type": "string", "minLength": 1}
_LOCATIONS = {"type": "array", "items": _NAME, "uniqueItems": True}

_SITE_READS = {
    "type": "object",
    "description": "shared locations read at each site",
    "properties": {site.value: _LOCATIONS for site in ReadSite},
    "additionalProperties": False,
}

_BACKEND = {
    "type": "object",
    "properties": {
        "declares": {
            "type": "object",
            "description": "SharedReadEnds per forward mode, overriding the base rule",
            "properties": {m: _enum(_ENDS) for m in _MODES},
            "additionalProperties": False,
        },
        "reads": {
            "type": "object",
            "description": "per forward mode (or '*' for all others): the locations each site reads",
            "properties": {**{m: _SITE_READS for m in _MODES}, "*": _SITE_READS},
            "additionalProperties": False,
        },
        "children": {"type": "array", "items": _NAME, "description": "composite: declares max_of children"},
        "delegate": {
            "type": "object",
            "description": "hybrid wrapper: the child backend that runs each mode",
            "properties": {m: _NAME for m in _MODES},
            "additionalProperties": False,
        },
        "note": {"type": "string"},
    },
    "additionalProperties": False,
}

_RUNNER = {
    "type": "object",
    "properties": {
        "marker": {"type": "boolean", "description": "has its in-graph marker event"},
        "ring_depth": {"type": "integer", "minimum": 1},
        "publish": _enum([p.value for p in PublishPolicy]),
        "mailbox": {"type": "string", "description": "runner whose mailbox this one publishes into"},
    },
    "additionalProperties": False,
}

_PHASE = {
    "type": "object",
    "required": ["name", "runner", "mode", "backend"],
    "properties": {
        "name": _NAME,
        "runner": _NAME,
        "mode": _enum(_MODES),
        "backend": _NAME,
        "execution": _enum([e.value for e in Execution]),
        "prep_stream": _enum([p.value for p in PrepStream]),
        "plan_join": _enum([j.value for j in PlanJoin]),
        "worker_reads_after": _LOCATIONS,
        "clear_mailbox_after": {"type": "boolean"},
        "consume_mailbox_before": {"type": "boolean"},
        "segments": {"type": "integer", "minimum": 1},
    },
    "additionalProperties": False,
}

_KINDS = [k.value for k in StepKind]

SCENARIO_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://fencecheck.dev/scenario.schema.json",
    "title": "fencecheck scenario",
    "type": "object",
    "required": ["name", "backends", "runners", "algorithm"],
    "properties": {
        "name": _NAME,
        "description": {"type": "string"},
        "cites": {"type": "array", "items": {"type": "string"}},
        "resolution": _enum([r.value for r in ResolutionRule]),
        "steps": {"type": "integer", "minimum": 1},
        "step_kinds": {"type": "array", "items": _enum(_KINDS), "minItems": 1},
        "backends": {"type": "object", "minProperties": 1, "additionalProperties": _BACKEND},
        "runners": {"type": "object", "minProperties": 1, "additionalProperties": _RUNNER},
        "algorithm": {
            "type": "object",
            "required": ["name", "steps", "publisher"],
            "properties": {
                "name": _NAME,
                "publisher": {
                    "description": "last_shared_read_runner: one runner, or one per step kind",
                    "oneOf": [
                        _NAME,
                        {
                            "type": "object",
                            "properties": {k: _NAME for k in _KINDS},
                            "additionalProperties": False,
                            "minProperties": 1,
                        },
                    ],
                },
                "last_shared_read_modes": {"type": "array", "items": _enum(_MODES)},
                "steps": {
                    "type": "object",
                    "properties": {k: {"type": "array", "items": _PHASE, "minItems": 1} for k in _KINDS},
                    "additionalProperties": False,
                    "minProperties": 1,
                },
            },
            "additionalProperties": False,
        },
        "scheduler": {
            "type": "object",
            "properties": {
                "barrier": {"type": "boolean"},
                "placement": _enum([p.value for p in BarrierPlacement]),
                "force_coarse": {"type": "boolean"},
                "writes": _LOCATIONS,
            },
            "additionalProperties": False,
        },
        "expect": {
            "type": "object",
            "required": ["verdict"],
            "properties": {
                "verdict": _enum(["proved", "counterexample"]),
                "races": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["location", "phase", "site"],
                        "properties": {
                            "location": _NAME,
                            "phase": _NAME,
                            "site": _enum([s.value for s in ReadSite] + ["worker_after"]),
                            "step": {"type": "integer", "minimum": 0},
                        },
                        "additionalProperties": False,
                    },
                },
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}


#: A backend file for ``fencecheck verify``: one backend, no children or delegates (those need their siblings).
BACKEND_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "fencecheck backend",
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": _NAME,
        "declares": _BACKEND["properties"]["declares"],
        "reads": _BACKEND["properties"]["reads"],
        "note": {"type": "string"},
    },
    "additionalProperties": False,
}
