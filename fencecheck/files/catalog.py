"""The built-in catalog, by SGLang version: each version's real configurations (and known hazards) as scenario files.

A version is a folder of this package: ``sglang-<version>`` is SGLang as released (the newest is the default; its
facts cite the release's ``path:function:line``), ``pr-35059`` SGLang at PR #35059 (the PR's claims, which the proof
obligations refer to; docs/sglang-mechanism.md).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fencecheck.errors import InputError
from fencecheck.scenario import Scenario
from fencecheck.files.scenario_io import loads

#: SGLang at PR #35059: the configurations the proof obligations about the PR's claims refer to.
PR_ERA = "pr-35059"
#: The prefix of a released SGLang's catalog folder (``sglang-<version>``).
RELEASE_PREFIX = "sglang-"


def _version_key(name: str) -> tuple:
    return tuple(int(x) if x.isdigit() else x for x in name[len(RELEASE_PREFIX):].replace("-", ".").split("."))


def _release_folders() -> tuple[str, ...]:
    root = Path(str(resources.files("fencecheck.catalog")))
    return tuple(sorted((p.name for p in root.iterdir() if p.is_dir() and p.name.startswith(RELEASE_PREFIX)),
                        key=_version_key))


#: The released SGLang versions with a catalog, oldest first (the catalog's ``sglang-<version>`` folders).
RELEASES: tuple[str, ...] = _release_folders()
#: The newest released SGLang with a catalog.
RELEASE = RELEASES[-1]
#: Every catalog version, oldest first.
VERSIONS: tuple[str, ...] = (PR_ERA, *RELEASES)
#: The version ``catalog_paths``, ``load_catalog`` and ``fencecheck check --catalog`` use when none is named.
DEFAULT_VERSION = RELEASE


def catalog_of(version: str | None) -> str | None:
    """The release catalog of an SGLang version (``sglang-<version>``) when the catalog has one, else None."""
    name = f"{RELEASE_PREFIX}{version}" if version else None
    return name if name in RELEASES else None


def release_version(catalog: str = RELEASE) -> str:
    """The SGLang version of a release catalog (``sglang-X.Y.Z`` -> ``X.Y.Z``)."""
    return catalog[len(RELEASE_PREFIX):]


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
