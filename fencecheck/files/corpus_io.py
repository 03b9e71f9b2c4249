"""The corpus file: JSON Lines, a header line then one record per trace.

Header: ``format``, ``fencecheck`` version, ``model`` (families and their bounds), ``seed``, ``solver``, per-family
statistics (configurations and behaviours), ``records`` and ``content_sha256`` (of the record lines). A record:
``id``, ``family``, ``configurations`` (how many configurations share this behaviour), ``scenario`` (the TOML form),
``trace`` (the shared trace format), ``expected`` (``proved`` or ``counterexample``), ``races``
([location, phase, site, step]) and ``witness`` (for a race: the racing read and the interleaving that shows it).
Lines are written with sorted keys and no spaces, so equal inputs give a byte-identical file.

``write`` writes the file (``fencecheck.commands.traces.build_and_write`` assembles the model's corpus for it, for
``fencecheck traces`` and ``fencecheck audit``); ``read`` reads it back (``replay``, ``regress``, ``audit``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from fencecheck.errors import InputError, quote
from fencecheck.files.inputs import read_input
from fencecheck.files.outputs import write_text_atomic
from fencecheck.files.scenario_io import scenario_from_dict
from fencecheck.scenario import Scenario
from fencecheck.trace import Trace
from fencecheck.trace_json import parse as parse_trace
from fencecheck.verdict import Verdict

FORMAT = "fencecheck-corpus/1"
FILENAME = "corpus.jsonl"
#: A corpus file is at most this many bytes (the model's corpus is about 7 MiB).
MAX_CORPUS_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class CorpusRecord:
    id: str
    family: str
    configurations: int
    scenario: Scenario
    trace: Trace
    expected: Verdict
    races: tuple[tuple[str, str, str, int], ...]
    witness: dict | None


def _line(obj: dict) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def record_lines(records: list[dict]) -> list[str]:
    return [_line(r) for r in records]


def render(header: dict, lines: list[str]) -> str:
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    head = {**header, "format": FORMAT, "records": len(lines), "content_sha256": digest}
    return "\n".join([_line(head), *lines]) + "\n"


def read(directory: str | Path, select: Callable[[str], bool] | None = None,
         missing: str = "no such file (run fencecheck traces --out DIR first)") -> tuple[dict, list[CorpusRecord]]:
    """Header and records of ``directory/corpus.jsonl`` (with ``select``: only the records whose id it accepts, the
    others not parsed past their id). A malformed file raises ``InputError`` in one line naming the line and the key:
    no header, a changed or cut file (hash), no record, a field of the wrong type."""
    folder = Path(directory)
    if folder.is_file():
        raise InputError(str(folder), "", "expected a corpus folder (written by fencecheck traces --out DIR)")
    path = folder / FILENAME
    text = read_input(path, missing=missing, limit=MAX_CORPUS_BYTES)
    lines = text.splitlines()
    if not lines:
        raise InputError(str(path), "line 1", "expected a header line")
    header = _json(path, 1, lines[0])
    if header.get("format") != FORMAT:
        raise InputError(str(path), "line 1: format", f"expected {FORMAT!r}, got {quote(header.get('format'))}")
    body = lines[1:]
    digest = hashlib.sha256("\n".join(body).encode()).hexdigest()
    if header.get("content_sha256") != digest or header.get("records") != len(body):
        raise InputError(str(path), "line 1: content_sha256", "expected the hash of the records (file changed or cut)")
    if not body:
        raise InputError(str(path), "line 1: records", "expected at least one trace record, got an empty corpus")
    records = []
    for n, line in enumerate(body, start=2):
        d = _json(path, n, line)
        if select is None or not isinstance(d.get("id"), str) or select(d["id"]):
            records.append(_record(path, n, d))  # a record without a string id raises there, naming the key
    return header, records


def _field(where: str, d: dict, key: str, check, expected: str):
    if key not in d:
        raise InputError(where, key, "missing required key")
    value = d[key]
    if not check(value):
        raise InputError(where, key, f"expected {expected}, got {type(value).__name__} {quote(value)}")
    return value


def _is_str(v) -> bool:
    return isinstance(v, str)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_race(v) -> bool:
    return isinstance(v, list) and len(v) == 4 and all(map(_is_str, v[:3])) and _is_int(v[3])


def _is_witness(v) -> bool:
    if v is None:
        return True
    if not (isinstance(v, dict) and isinstance(v.get("race"), dict) and isinstance(v.get("schedule"), list)):
        return False
    race = v["race"]
    return (all(_is_str(race.get(k)) for k in ("location", "phase", "site")) and _is_int(race.get("step"))
            and all(map(_is_int, v["schedule"])))


_VERDICTS = (Verdict.PROVED.value, Verdict.COUNTEREXAMPLE.value)


def _record(path: Path, n: int, d: dict) -> CorpusRecord:
    where = f"{path}:{n}"  # the plain fields first, then the scenario and the trace (the costly ones)
    rid = _field(where, d, "id", _is_str, "a string")
    family = _field(where, d, "family", _is_str, "a string")
    configurations = _field(where, d, "configurations", lambda v: _is_int(v) and v >= 1, "a positive integer")
    expected = _field(where, d, "expected", lambda v: v in _VERDICTS, f"one of {', '.join(_VERDICTS)}")
    races = _field(where, d, "races", lambda v: isinstance(v, list) and all(map(_is_race, v)),
                   "a list of [location, phase, site, step]")
    witness = _field(where, d, "witness", _is_witness,
                     "null or {race: {location, phase, site, step}, schedule: [op indices]}") if "witness" in d else None
    scenario = _field(where, d, "scenario", lambda v: isinstance(v, dict), "a table")
    trace = _field(where, d, "trace", lambda v: isinstance(v, dict), "an object")
    return CorpusRecord(
        id=rid, family=family, configurations=configurations,
        scenario=scenario_from_dict(scenario, f"{where} scenario"),
        trace=parse_trace(trace, f"{where} trace"),
        expected=Verdict(expected), races=tuple(tuple(r) for r in races), witness=witness,
    )


def _json(path: Path, n: int, line: str) -> dict:
    try:
        d = json.loads(line)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}:{n}", "", f"not valid JSON ({err.msg})") from None
    if not isinstance(d, dict):
        raise InputError(f"{path}:{n}", "", "expected a JSON object")
    return d


def write(directory: str | Path, header: dict, records: list[dict]) -> Path:
    """Write ``directory/corpus.jsonl`` atomically: ``header`` (completed with ``format``, ``records`` and
    ``content_sha256``) and one line per record (the dicts described above). Returns the file."""
    target = Path(directory) / FILENAME
    write_text_atomic(target, render(header, record_lines(records)))
    return target
