"""Every package folder is packaged, the built wheel imports from outside the checkout, one name per module file.

Each module file has exactly one module name, from a source checkout and from the wheel (no second copy such as
``fencecheck.fencecheck.vocab``)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("fencecheck", "model", "reference", "gpu", "proofs")
#: Folders of the checkout that hold Python files but are no part of the package.
OUTSIDE = ("tests", "benchmarks")

#: Run in a subprocess: for each expected name and each alias, the file ``importlib`` finds for it (None: not
#: importable), and every module name ``pkgutil`` finds under ``fencecheck`` and its subpackages with its file.
PROBE = r"""
import importlib, importlib.util, json, pkgutil, sys

wanted = json.loads(sys.argv[-1])


def origin(name):
    try:
        spec = importlib.util.find_spec(name)
    except ImportError:  # a parent that does not exist
        return None
    return spec.origin if spec is not None else None


import fencecheck

roots = [("fencecheck", fencecheck.__path__)]
for sub in fencecheck.SUBPACKAGES:
    module = importlib.import_module("fencecheck." + sub)
    roots.append((module.__name__, module.__path__))
walked = {}


def walk(path, prefix, depth):
    # Bounded: a package that finds itself again (fencecheck.fencecheck...) must not recurse for ever.
    for info in pkgutil.iter_modules(path, prefix):
        walked[info.name] = origin(info.name)
        if info.ispkg and depth < 4:
            try:
                module = importlib.import_module(info.name)
            except Exception:
                continue
            walk(getattr(module, "__path__", []), info.name + ".", depth + 1)


for package, path in roots:
    walked[package] = origin(package)
    walk(path, package + ".", 1)
print(json.dumps({
    "package_file": fencecheck.__file__,
    "expected": {name: origin(name) for name in wanted["expected"]},
    "aliases": {name: origin(name) for name in wanted["aliases"]},
    "walked": walked,
}))
"""


def _folders() -> dict[str, str]:
    """Every folder with an __init__.py under the architecture folders -> its dotted package name."""
    out = {}
    for top in TOP:
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT)
            parts = rel.parts if top == "fencecheck" else ("fencecheck", *rel.parts)
            out[rel.as_posix()] = ".".join(parts)
    return out


def _dotted(path: Path, base: Path) -> tuple[str, ...]:
    parts = path.relative_to(base).with_suffix("").parts
    return parts[:-1] if parts and parts[-1] == "__init__" else parts


def _aliases(path: Path, root: Path, expected: str | None) -> set[str]:
    """Names under ``fencecheck`` a file could wrongly be importable by: its path relative to the root and to each
    folder between, with ``fencecheck.`` in front (``fencecheck.fencecheck.vocab``, ``fencecheck.sim.hb``,
    ``fencecheck.tests.conftest``), other than its one expected name."""
    bases = [root, *(root / Path(*path.parent.relative_to(root).parts[:i])
                     for i in range(1, len(path.parent.relative_to(root).parts) + 1))]
    names = {".".join(("fencecheck", *parts)) for base in bases if (parts := _dotted(path, base))}
    return names - {expected}


def _checkout_modules() -> dict[str, Path]:
    """Expected module name -> file, for every module file of the source tree."""
    out = {}
    for top in TOP:
        package = ("fencecheck",) if top == "fencecheck" else ("fencecheck", top)
        for path in sorted((ROOT / top).rglob("*.py")):
            out[".".join((*package, *_dotted(path, ROOT / top)))] = path
    return out


def _probe(modules: dict[str, Path], root: Path, outside: list[Path], argv: list[str], cwd: Path) -> dict:
    aliases = set()
    for name, path in modules.items():
        aliases |= _aliases(path, root, name)
    for path in outside:
        aliases |= _aliases(path, root, None)
    aliases -= set(modules)  # another file's own name (proofs/documents.py relative to proofs/ would be fencecheck.documents)
    wanted = json.dumps({"expected": sorted(modules), "aliases": sorted(aliases)})
    proc = subprocess.run([*argv, PROBE, wanted], capture_output=True, text=True, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _assert_one_name_per_file(result: dict, modules: dict[str, Path]) -> None:
    files = {name: str(path.resolve()) for name, path in modules.items()}
    wrong = {n: o for n, o in result["expected"].items() if o is None or str(Path(o).resolve()) != files[n]}
    assert not wrong, f"modules not found at their files: {wrong}"
    importable = {n: o for n, o in result["aliases"].items() if o is not None}
    assert not importable, f"second names for module files: {importable}"
    by_file: dict[str, list[str]] = {}
    for name, o in result["walked"].items():
        if o is not None:
            by_file.setdefault(str(Path(o).resolve()), []).append(name)
    several = {f: names for f, names in by_file.items() if len(names) > 1}
    assert not several, f"files with more than one module name: {several}"
    assert set(by_file) == set(files.values()), set(by_file) ^ set(files.values())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, list[str]]:
    """The wheel built from a clean copy of the checkout (no stale build/ folder), unpacked: (folder, names)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis", ".whl"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp), str(src)],
        check=True,
        capture_output=True,
    )
    (built,) = tmp.glob("fencecheck-*.whl")
    site = tmp / "site"
    with zipfile.ZipFile(built) as zf:
        zf.extractall(site)
        return site, zf.namelist()


def _isolated(site: Path) -> list[str]:
    """Python in isolated mode (neither the checkout nor the working directory on sys.path) with the unpacked wheel
    first, then the interpreter's site-packages for the dependencies."""
    return [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r})\nexec(sys.argv[1])"]


def test_every_package_folder_is_listed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    mapping = config["package-dir"]
    for folder, package in _folders().items():
        assert package in listed, f"{folder} is not packaged as {package}"
        owner = max((p for p in mapping if package == p or package.startswith(p + ".")), key=len)
        expected = Path(mapping[owner], *package.split(".")[len(owner.split(".")):]).as_posix()
        assert expected == folder, f"{package} maps to {expected}, not {folder}"


def test_checkout_layout_maps_exactly_the_subpackages():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    mapped = {p.split(".")[1] for p, folder in config.items() if p.count(".") == 1 and "/" not in folder}
    import fencecheck

    assert set(fencecheck.SUBPACKAGES) == mapped


def test_checkout_has_one_name_per_module_file():
    """From a source checkout (cwd at the checkout, which Python puts first on sys.path): every module file of the
    architecture folders is importable under its one name and under no other."""
    modules = _checkout_modules()
    outside = [p for folder in OUTSIDE for p in sorted((ROOT / folder).rglob("*.py"))]
    result = _probe(modules, ROOT, outside, [sys.executable, "-c", "import sys\nexec(sys.argv[1])"], ROOT)
    assert Path(result["package_file"]).resolve() == (ROOT / "fencecheck" / "__init__.py").resolve()
    _assert_one_name_per_file(result, modules)


def test_the_probe_sees_a_second_name(tmp_path):
    """The check above fails when a file has two names: a checkout whose ``fencecheck`` package also finds the
    checkout root (as a naive ``__path__`` extension would) exposes ``fencecheck.fencecheck.vocab``."""
    root = tmp_path / "checkout"
    (root / "fencecheck").mkdir(parents=True)
    (root / "fencecheck" / "__init__.py").write_text(
        "import os\nSUBPACKAGES = ()\n__path__.append(os.path.dirname(os.path.dirname(__file__)))\n")
    (root / "fencecheck" / "vocab.py").write_text("")
    modules = {"fencecheck": root / "fencecheck" / "__init__.py", "fencecheck.vocab": root / "fencecheck" / "vocab.py"}
    result = _probe(modules, root, [], [sys.executable, "-I", "-c",
                                        f"import sys; sys.path.insert(0, {str(root)!r})\nexec(sys.argv[1])"], root)
    assert result["aliases"]["fencecheck.fencecheck.vocab"] is not None
    with pytest.raises(AssertionError, match="second names"):
        _assert_one_name_per_file(result, modules)


@pytest.mark.slow
def test_built_wheel_imports_from_outside_the_checkout(wheel, tmp_path):
    site, names = wheel
    from fencecheck.files.catalog import VERSIONS, catalog_paths

    for version in VERSIONS:  # every version's scenario files ship in the wheel
        assert {f"fencecheck/catalog/{version}/{p.name}" for p in catalog_paths(version)} <= set(names), version
    modules = sorted(set(_folders().values()))
    code = (
        "import importlib\n"
        f"for m in {modules!r}:\n"
        "    mod = importlib.import_module(m)\n"
        f"    assert mod.__file__.startswith({str(site)!r}), (m, mod.__file__)\n"
        "from fencecheck.files.catalog import load_catalog\n"
        "from fencecheck.reference import check_scenario\n"
        "from fencecheck.files.catalog import VERSIONS\n"
        "assert all(load_catalog(v) for v in VERSIONS)\n"
        "print(len(load_catalog()), check_scenario(load_catalog()[0]).verdict.value)\n"
    )
    proc = subprocess.run([*_isolated(site), code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[1] in ("proved", "counterexample")


@pytest.mark.slow
def test_built_wheel_has_one_name_per_module_file(wheel, tmp_path):
    site, _ = wheel
    package = site / "fencecheck"
    modules = {".".join(("fencecheck", *_dotted(p, package))): p for p in sorted(package.rglob("*.py"))}
    assert set(modules) == set(_checkout_modules())  # the wheel holds exactly the checkout's modules
    result = _probe(modules, site, [], _isolated(site), tmp_path)
    _assert_one_name_per_file(result, modules)
    bare = subprocess.run([*_isolated(site), "import importlib.util\n"
                           "print([m for m in ('model', 'reference', 'gpu', 'proofs') if importlib.util.find_spec(m)])"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert bare.stdout.strip() == "[]", bare.stdout + bare.stderr


def test_architecture_map_names_every_module():
    text = (ROOT / "docs" / "architecture.md").read_text()
    missing = []
    for top in TOP:
        for path in (ROOT / top).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if path.name == "__init__.py" and rel not in text:
                continue  # a package's __init__ is covered by its folder's line
            if rel not in text:
                missing.append(rel)
    assert not missing


def _readme_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", readme, re.S)
            if "pip install" in b]


def test_the_readme_commands_install_fencecheck_without_checking_the_sources_only_sglang():
    # the second command runs after the first: `sglang` is then installed with --no-deps, and an install that brings a
    # package it depends on (the test extra's `requests`, `packaging`) would print pip's resolver ERROR block listing
    # every dependency it lacks by design
    audit, tests = _readme_commands()
    for command in (audit, tests):
        installs = [c.strip() for c in command.split("&&") if "pip install" in c]
        assert [c for c in installs if "sglang==" in c] == ["python3 -m pip install -q --no-deps sglang==0.5.23"]
        project = [c for c in installs if "'." in c]
        assert project and all("--no-warn-conflicts" in c for c in project), command
        assert installs.index(project[0]) < installs.index("python3 -m pip install -q --no-deps sglang==0.5.23")


def test_ci_runs_the_readmes_test_command():
    tests = _readme_commands()[1]
    run = (ROOT / ".ci" / "run").read_text().splitlines()[-1]
    assert run.replace(" --disable-pip-version-check", "") == tests
