"""Small valid inputs made by the product itself, for the bad-input and corpus tests to mutate.

A corpus of one record and a trace file, written by the same code as ``fencecheck traces`` and ``fencecheck trace``,
so they follow the product's formats."""

from __future__ import annotations

import json
from pathlib import Path

from fencecheck.files.corpus_io import FILENAME, render


def one_record_corpus(folder: Path, scenario: str = "plain-decode") -> Path:
    """``folder/corpus.jsonl`` with the one record of the catalog scenario ``scenario``, as ``traces`` writes it."""
    import fencecheck.files.catalog as catalog
    from fencecheck.commands.traces import build_and_write
    from fencecheck.model import corpus as C

    real_catalog, real_families = catalog.load_catalog, C.FAMILIES
    catalog.load_catalog = lambda version=catalog.PR_ERA: [s for s in real_catalog(version) if s.name == scenario]
    C.FAMILIES = {}
    try:
        target, _, _ = build_and_write(folder)
    finally:
        catalog.load_catalog, C.FAMILIES = real_catalog, real_families
    return target


def rewrite_records(path: Path, edit) -> None:
    """Apply ``edit(record dict) -> record dict`` to every record of the corpus file at ``path``, keeping its hash
    valid (so what is tested is the record, not the hash)."""
    lines = path.read_text().splitlines()
    header = {k: v for k, v in json.loads(lines[0]).items() if k not in ("format", "records", "content_sha256")}
    body = [json.dumps(edit(json.loads(line)), sort_keys=True, separators=(",", ":")) for line in lines[1:]]
    path.write_text(render(header, body))


def trace_dict(scenario: str = "plain-decode", steps: int = 3) -> dict:
    """The reference's trace of a catalog scenario, as its JSON object."""
    from fencecheck.files.catalog import PR_ERA, load_catalog
    from fencecheck.reference.run import run_scenario

    return run_scenario(next(s for s in load_catalog(PR_ERA) if s.name == scenario), steps).to_dict()


__all__ = ["FILENAME", "one_record_corpus", "rewrite_records", "trace_dict"]
