"""The corpus file: JSON Lines, a header line then one record per trace.

Header: ``format``, ``fencecheck`` version, ``model`` (families and their bounds), ``seed``, ``solver``, per-family
statistics (configurations and behaviours), ``records`` and ``content_sha256`` (of the record lines). A record:
``id``, ``family``, ``configurations`` (how many configurations share this behaviour), ``scenario`` (the TOML form),
``trace`` (the shared trace format), ``expected`` (``proved`` or ``counterexample``), ``races``
([location, phase, site, step]) and ``witness`` (for a race: the racing read and the interleaving that shows it).
Lines are written with sorted keys and no spaces, so equal inputs give a byte-identical file.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from .atomic import read_input
from .errors import InputError, ScenarioError, TraceError
from .report import Verdict
from .scenario import Scenario
from .scenario_io import scenario_from_dict
from .trace import Trace

FORMAT = "fencecheck-corpus/1"
FILENAME = "corpus.jsonl"


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


def read(directory: str | Path) -> tuple[dict, list[CorpusRecord]]:
    """Header and records of ``directory/corpus.jsonl``; a malformed file raises ``InputError`` naming the line."""
    path = Path(directory) / FILENAME
    text = read_input(path, missing="no such file (run fencecheck traces --out DIR first)")
    lines = text.splitlines()
    if not lines:
        raise InputError(str(path), "line 1", "expected a header line")
    header = _json(path, 1, lines[0])
    if header.get("format") != FORMAT:
        raise InputError(str(path), "line 1: format", f"expected {FORMAT!r}, got {header.get('format')!r}")
    body = lines[1:]
    digest = hashlib.sha256("\n".join(body).encode()).hexdigest()
    if header.get("content_sha256") != digest or header.get("records") != len(body):
        raise InputError(str(path), "line 1: content_sha256", "expected the hash of the records (file changed or cut)")
    records = []
    for n, line in enumerate(body, start=2):
        d = _json(path, n, line)
        where = f"{path}:{n}"
        try:
            records.append(CorpusRecord(
                id=d["id"], family=d["family"], configurations=int(d["configurations"]),
                scenario=scenario_from_dict(d["scenario"], f"{where} scenario"),
                trace=Trace.from_dict(d["trace"], f"{where} trace"),
                expected=Verdict(d["expected"]),
                races=tuple(tuple(r) for r in d["races"]),
                witness=d.get("witness"),
            ))
        except (ScenarioError, TraceError):
            raise
        except (KeyError, ValueError, TypeError) as err:
            raise InputError(where, "", f"malformed record ({err.__class__.__name__}: {err})") from None
    return header, records


def _json(path: Path, n: int, line: str) -> dict:
    try:
        d = json.loads(line)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}:{n}", "", f"not valid JSON ({err.msg})") from None
    if not isinstance(d, dict):
        raise InputError(f"{path}:{n}", "", "expected a JSON object")
    return d
