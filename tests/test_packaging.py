"""Every package folder is packaged, and the built wheel imports from outside the checkout."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = ("fencecheck", "model", "reference", "gpu", "proofs")


def _folders() -> dict[str, str]:
    """Every folder with an __init__.py under the architecture folders -> its dotted package name."""
    out = {}
    for top in TOP:
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT)
            parts = rel.parts if top == "fencecheck" else ("fencecheck", *rel.parts)
            out[rel.as_posix()] = ".".join(parts)
    return out


def test_every_package_folder_is_listed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    mapping = config["package-dir"]
    for folder, package in _folders().items():
        assert package in listed, f"{folder} is not packaged as {package}"
        owner = max((p for p in mapping if package == p or package.startswith(p + ".")), key=len)
        expected = Path(mapping[owner], *package.split(".")[len(owner.split(".")):]).as_posix()
        assert expected == folder, f"{package} maps to {expected}, not {folder}"


def test_built_wheel_imports_from_outside_the_checkout(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("fencecheck-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
        names = zf.namelist()
    assert any(n.startswith("fencecheck/catalog/") and n.endswith(".toml") for n in names)
    modules = sorted(set(_folders().values()))
    code = (
        "import importlib\n"
        f"for m in {modules!r}:\n"
        "    mod = importlib.import_module(m)\n"
        f"    assert mod.__file__.startswith({str(site)!r}), (m, mod.__file__)\n"
        "from fencecheck.catalog import load_catalog\n"
        "from fencecheck.reference import check_scenario\n"
        "print(len(load_catalog()), check_scenario(load_catalog()[0]).verdict.value)\n"
    )
    # -I: isolated mode, neither the checkout nor the working directory is on sys.path; only the unpacked wheel
    # (put first) and the interpreter's site-packages for the dependencies.
    code = f"import sys; sys.path.insert(0, {str(site)!r})\n" + code
    proc = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[1] in ("proved", "counterexample")


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
