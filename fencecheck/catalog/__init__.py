"""The built-in catalog: SGLang's real configurations (and the known hazards) as scenario files."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ..scenario import Scenario
from ..scenario_io import loads


def catalog_paths() -> list[Path]:
    """The catalog's scenario files, sorted by name."""
    root = resources.files(__name__)
    return sorted((Path(str(p)) for p in root.iterdir() if p.name.endswith(".toml")), key=lambda p: p.name)


def load_catalog() -> list[Scenario]:
    return [loads(p.read_text(encoding="utf-8"), f"catalog/{p.name}") for p in catalog_paths()]
