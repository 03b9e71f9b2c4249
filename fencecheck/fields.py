"""One declaration per scenario field, and everything derived from it.

Each field of the scenario dataclasses (``fencecheck.scenario``) is declared once, with ``spec(...)``: its type (the
annotation), default, bounds, meaning and, for a knob of the SMT model, how the model encodes it. From that one
entry come the JSON Schema of the TOML form (``fencecheck.schema``), the TOML reader and writer
(``fencecheck.files.scenario_io``), the tables of docs/scenarios.md (``markdown_table``) and the model's symbolic variables,
concrete assignment and decoding of a solution back into a scenario (``encode`` / ``decode`` here, the z3 side in
``fencecheck.model.symconfig``).

A field is one of: a plain value (bool, int, a name or free text), a member of a closed vocabulary (an enum of
``fencecheck.vocab``), a tuple of names or of members; or a *structural* field (tables of backends, runners, phases,
...) whose schema and reading are written by hand because their shape is not a single value.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import typing
from dataclasses import MISSING, dataclass
from typing import Any

#: Longest name (of a scenario, backend, runner, phase, location) and longest free text.
NAME_MAX = 200
TEXT_MAX = 4000
#: Names are one line of printable text: no control characters (a newline would split an error line).
NAME_PATTERN = "^[^\\x00-\\x1f\\x7f]+$"
#: Most entries in a list of names (locations read or written, cites).
LIST_MAX = 256
#: The ``schema`` of a structural field: its real schema is assembled by ``fencecheck.schema``.
STRUCTURAL: dict = {"structural": True}


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: ``FieldInfo.plain`` when the preferred value is the default.
UNSET = _Unset()


@dataclass(frozen=True)
class FieldInfo:
    """What the scenario language says about one field.

    ``meaning``: one line for the docs tables and the schema's description. ``minimum``/``maximum``: bounds of an
    integer (the maximum is a documented input limit). ``model``: the field is a knob of the SMT model (one variable
    per instance, encoded by ``encode``). ``model_bound``: for an integer knob, the ``Bounds`` attribute that caps it
    in the model. ``plain``: the value a counterexample prefers (default: the field's default). ``key``: the field
    is the name its table is filed under (``[runners.NAME]``), not a key inside it. ``text``: free text, not a name.
    ``omit_empty``: the writer leaves the key out when the value is empty. ``schema``: a structural field's schema.
    """

    meaning: str
    minimum: int | None = None
    maximum: int | None = None
    model: bool = False
    model_bound: str | None = None
    plain: Any = UNSET
    key: bool = False
    text: bool = False
    omit_empty: bool = False
    schema: dict | None = None


def spec(default: Any = MISSING, meaning: str = "", **info) -> Any:
    """A dataclass field with its ``FieldInfo`` (use in place of ``dataclasses.field``)."""
    md = {"fencecheck": FieldInfo(meaning, **info)}
    if isinstance(default, (dict, list, set)):
        factory = type(default)
        return dataclasses.field(default_factory=factory, metadata=md)
    if default is MISSING:
        return dataclasses.field(metadata=md)
    return dataclasses.field(default=default, metadata=md)


@dataclass(frozen=True)
class Entry:
    """One declared field: its name, resolved type, default and ``FieldInfo``."""

    name: str
    type: Any
    default: Any
    info: FieldInfo

    @property
    def required(self) -> bool:
        return self.default is MISSING

    @property
    def plain(self) -> Any:
        return self.default if self.info.plain is UNSET else self.info.plain

    @property
    def enum(self) -> type[enum.Enum] | None:
        """The closed vocabulary of a field (or of its items), if it has one."""
        t = self.type
        if typing.get_origin(t) in (tuple, frozenset):
            t = typing.get_args(t)[0]
        return t if isinstance(t, type) and issubclass(t, enum.Enum) else None


@functools.cache
def entries(cls: type) -> tuple[Entry, ...]:
    """The declared fields of a scenario dataclass, in declaration order."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        info = f.metadata.get("fencecheck")
        if info is None:
            raise TypeError(f"{cls.__name__}.{f.name} is not declared with fields.spec")
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else MISSING)
        out.append(Entry(f.name, hints[f.name], default, info))
    return tuple(out)


def model_knobs(cls: type) -> tuple[Entry, ...]:
    """The fields of ``cls`` that are knobs of the SMT model."""
    return tuple(e for e in entries(cls) if e.info.model)


# -- tokens of a closed vocabulary -------------------------------------------------------------------------------


def token(member: enum.Enum) -> str:
    """How a member is spelled in a file: ``SharedReadEnds`` (an int enum) by name, the others by value."""
    return member.name if isinstance(member, int) else member.value


def from_token(cls: type[enum.Enum], text: str) -> enum.Enum:
    return cls[text] if issubclass(cls, int) else cls(text)


def tokens(cls: type[enum.Enum]) -> list[str]:
    return [token(m) for m in cls]


# -- the TOML form ----------------------------------------------------------------------------------------------


def read_value(e: Entry, raw: Any) -> Any:
    """A schema-valid TOML value of field ``e`` as the dataclass holds it."""
    cls = e.enum
    origin = typing.get_origin(e.type)
    if origin is tuple:
        return tuple(from_token(cls, x) for x in raw) if cls else tuple(raw)
    if origin is frozenset:
        return frozenset(from_token(cls, x) for x in raw) if cls else frozenset(raw)
    if cls is not None:
        return from_token(cls, raw)
    return raw


def write_value(e: Entry, value: Any) -> Any:
    """The TOML form of ``value`` of field ``e`` (lists for tuples, sorted lists for sets, tokens for members)."""
    cls = e.enum
    origin = typing.get_origin(e.type)
    if origin is tuple:
        return [token(x) for x in value] if cls else list(value)
    if origin is frozenset:
        return sorted(token(x) for x in value) if cls else sorted(value)
    if cls is not None:
        return token(value)
    return value


def from_table(cls: type, table: dict, **structural) -> Any:
    """Build ``cls`` from a schema-valid TOML table; structural fields are passed in already built."""
    kwargs = dict(structural)
    for e in entries(cls):
        if e.name in kwargs or e.info.schema is STRUCTURAL:
            continue
        if e.name in table:
            kwargs[e.name] = read_value(e, table[e.name])
    return cls(**kwargs)


def to_table(obj: Any, **structural) -> dict:
    """The TOML table of ``obj``, every plain field spelled out (so a dump documents the defaults), except empty
    ones marked ``omit_empty`` and table keys; structural fields are passed in already written (None: left out)."""
    out: dict = {}
    for e in entries(type(obj)):
        if e.info.key:
            continue
        if e.name in structural:
            if structural[e.name] is not None:
                out[e.name] = structural[e.name]
            continue
        value = getattr(obj, e.name)
        if e.info.omit_empty and not value:
            continue
        out[e.name] = write_value(e, value)
    return out


# -- the JSON Schema --------------------------------------------------------------------------------------------


def name_schema() -> dict:
    return {"type": "string", "minLength": 1, "maxLength": NAME_MAX, "pattern": NAME_PATTERN}


def _items_schema(e: Entry) -> dict:
    cls = e.enum
    return {"type": "string", "enum": tokens(cls)} if cls else name_schema()


def value_schema(e: Entry) -> dict:
    """The schema of one field, derived from its type and bounds (structural fields bring their own)."""
    if e.info.schema is STRUCTURAL:
        raise TypeError(f"field {e.name} is structural: its schema must be given to table_schema")
    if e.info.schema is not None:
        out = dict(e.info.schema)
    elif typing.get_origin(e.type) in (tuple, frozenset):
        out = {"type": "array", "items": _items_schema(e), "uniqueItems": True, "maxItems": LIST_MAX}
    elif e.enum is not None:
        out = {"type": "string", "enum": tokens(e.enum)}
    elif e.type is bool:
        out = {"type": "boolean"}
    elif e.type is int:
        out = {"type": "integer"}
        if e.info.minimum is not None:
            out["minimum"] = e.info.minimum
        if e.info.maximum is not None:
            out["maximum"] = e.info.maximum
    elif e.type is str:
        out = {"type": "string", "maxLength": TEXT_MAX} if e.info.text else name_schema()
    else:  # pragma: no cover - a declaration error caught by the tests of every scenario class
        raise TypeError(f"field {e.name}: no schema for {e.type!r}; declare it structural")
    if e.info.meaning:
        out["description"] = e.info.meaning
    return out


def table_schema(cls: type, **override) -> dict:
    """The schema of a TOML table holding ``cls``: one property per field (``override`` replaces some)."""
    props, required = {}, []
    for e in entries(cls):
        if e.info.key:
            continue
        if e.name in override:
            props[e.name] = {**override[e.name], **({"description": e.info.meaning} if e.info.meaning else {})}
        else:
            props[e.name] = value_schema(e)
        if e.required:
            required.append(e.name)
    out: dict = {"type": "object"}
    if required:
        out["required"] = required
    out["properties"] = props
    out["additionalProperties"] = False
    return out


# -- the SMT model's encoding -------------------------------------------------------------------------------------


def encode(e: Entry, value: Any) -> int | bool:
    """A knob's value as the model holds it: a member by its index in the vocabulary, bools and ints as they are."""
    if e.enum is not None:
        return list(e.enum).index(value)
    return value


def decode(e: Entry, value: int | bool) -> Any:
    """The inverse of ``encode``."""
    if e.enum is not None:
        return list(e.enum)[value]
    return value


def domain(e: Entry, bounds: Any) -> tuple[int, int] | None:
    """The integer range of a knob in the model (None for a Boolean)."""
    if e.type is bool:
        return None
    if e.enum is not None:
        return 0, len(e.enum) - 1
    hi = getattr(bounds, e.info.model_bound) if e.info.model_bound else e.info.maximum
    return e.info.minimum or 0, hi


# -- the docs ---------------------------------------------------------------------------------------------------


def _shown(value: Any) -> str:
    if value is MISSING:
        return "required"
    if value is None:
        return "none"
    if dataclasses.is_dataclass(value):
        return "its defaults"
    if isinstance(value, enum.Enum):
        return f"`{token(value)}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (tuple, frozenset, dict, list, str)) and not value:
        return "empty"
    if isinstance(value, (tuple, frozenset)):
        return "`[" + ", ".join(f'"{token(v)}"' if isinstance(v, enum.Enum) else repr(v) for v in value) + "]`"
    return f"`{value}`"


def _kind(e: Entry) -> str:
    if e.info.schema is STRUCTURAL:
        return "table"
    many = typing.get_origin(e.type) in (tuple, frozenset)
    if e.enum is not None:
        one = " / ".join(f"`{t}`" for t in tokens(e.enum))
        return f"list of {one}" if many else one
    if many:
        return "list of texts" if e.info.schema is not None else "list of names"
    if e.type is int:
        lo = e.info.minimum
        hi = e.info.maximum
        return f"integer {lo}..{hi:,}" if hi is not None else f"integer >= {lo}"
    if e.type is bool:
        return "boolean"
    return "text" if e.info.text else "name"


def markdown_table(cls: type) -> str:
    """The docs table of ``cls``'s fields: key, values, default, meaning."""
    rows = ["| key | values | default | meaning |", "| --- | --- | --- | --- |"]
    for e in entries(cls):
        if e.info.key:
            continue
        rows.append(f"| `{e.name}` | {_kind(e)} | {_shown(e.default)} | {e.info.meaning} |")
    return "\n".join(rows)
