"""The built-in catalog, by SGLang version: each version's real configurations (and known hazards) as scenario files.

A version is a folder of this package: ``sglang-0.5.23`` is SGLang as released (the default; its facts cite the
release's ``path:function:line``, docs/sglang-0.5.23.md), ``pr-35059`` SGLang at PR #35059 (the PR's claims, which
the proof obligations refer to; docs/sglang-mechanism.md).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fencecheck.errors import InputError
from fencecheck.scenario import Scenario
from fencecheck.files.scenario_io import loads

#: SGLang at PR #35059: the configurations the proof obligations about the PR's claims refer to.
PR_ERA = "pr-35059"
#: SGLang as released on the package registry.
RELEASE = "sglang-0.5.23"
#: Every catalog version, oldest first.
VERSIONS: tuple[str, ...] = (PR_ERA, RELEASE)
#: The version ``catalog_paths``, ``load_catalog`` and ``fencecheck check --catalog`` use when none is named.
DEFAULT_VERSION = RELEASE


def _folder(version: str) -> Path:
    if version not in VERSIONS:
        raise InputError("<catalog>", "version", f"expected one of {', '.join(VERSIONS)}, got {version!r}")
    return Path(str(resources.files("fencecheck.catalog") / version))


def catalog_paths(version: str = DEFAULT_VERSION) -> list[Path]:
    """The scenario files of the catalog of ``version``, sorted by name."""
    return sorted((p for p in _folder(version).iterdir() if p.name.endswith(".toml")), key=lambda p: p.name)


def load_catalog(version: str = DEFAULT_VERSION) -> list[Scenario]:
    """The scenarios of the catalog of ``version``, sorted by file name."""
    return [loads(p.read_text(encoding="utf-8"), f"catalog/{version}/{p.name}") for p in catalog_paths(version)]


def catalog_file(version: str, name: str) -> str:
    """The repository-relative path of a catalog scenario's file (as the documents and commands name it)."""
    return f"fencecheck/catalog/{version}/{name}.toml"
