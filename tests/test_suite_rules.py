"""The test suite keeps its own rules: tests/README.md maps it, each module says what it tests, fixtures cite the release.

tests/README.md names every module, data file and data folder of tests/ (and nothing that is not there), and each
test module's row says what the module's source does: whether its tests are marked ``slow`` (all, some or none) and
what some of them are skipped without (``release``, ``torch``, ``cvc5``, ``gpu``), read from the syntax tree. Every
module of tests/ opens with a docstring whose first line is one sentence. The bad-input fixtures cite the released
SGLang as the release catalog does (``srt/...py:function:lines``, each inside the function it names where the release
is here), never a document outside the repository.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest


HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GUIDE = (HERE / "README.md").read_text(encoding="utf-8")
#: What a table row of the guide is about: the name in backticks in its first cell.
FIRST_CELL = re.compile(r"^\| `([^`]+)` \|", re.MULTILINE)


def _present() -> set[str]:
    """The modules, data files and data folders of tests/ (folders with a trailing ``/``), this page aside."""
    return {p.name + ("/" if p.is_dir() else "") for p in HERE.iterdir()
            if not p.name.startswith((".", "__")) and p.name != "README.md"}


def test_the_guide_names_every_module_and_data_file_and_nothing_else():
    named = FIRST_CELL.findall(GUIDE)
    assert len(named) == len(set(named)), sorted(n for n in set(named) if named.count(n) > 1)
    missing, extra = _present() - set(named), set(named) - _present()
    assert not missing and not extra, f"tests/README.md: add a row for {sorted(missing)}, drop {sorted(extra)}"


# -- what a module's source says -----------------------------------------------------------------------------------

def _mark(node: ast.AST) -> str | None:
    """``slow`` for ``pytest.mark.slow`` (any ``X.mark.NAME`` attribute), else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "mark":
        return node.attr
    return None


def _marks(node: ast.AST) -> set[str]:
    return {m for n in ast.walk(node) if (m := _mark(n))}


def _slow(tree: ast.Module) -> str:
    """``all``: the module's ``pytestmark`` is slow, or every test function is decorated ``@pytest.mark.slow``;
    ``some``: a slow mark elsewhere (a test, a parameter); ``-``: none."""
    module = set().union(*(_marks(s.value) for s in tree.body if isinstance(s, ast.Assign)
                           and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in s.targets)))
    tests = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name.startswith("test_")]
    if "slow" in module or (tests and all(any(_mark(d) == "slow" for d in t.decorator_list) for t in tests)):
        return "all"
    return "some" if "slow" in _marks(tree) else "-"


def _dependencies() -> set[str]:
    """The import names of the package's own dependencies (pyproject.toml), which every test run has."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    return {re.match(r"[\w.-]+", d).group().lower().replace("-", "_") for d in deps}


def _needs(tree: ast.Module) -> set[str]:
    """What some of the module's tests are skipped without: each ``pytest.importorskip`` of a module that is not a
    dependency of the package, ``release`` (the module imports ``sglang_release`` or takes the
    ``release_extraction`` or ``release_root`` fixture), ``wheels`` (it imports ``sglang_wheels``: releases fetched
    as wheels), ``gpu`` (the ``gpu`` mark)."""
    deps, needs = _dependencies(), set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "importorskip"
                and node.args and isinstance(node.args[0], ast.Constant)):
            top = node.args[0].value.split(".")[0]
            if top not in deps:
                needs.add(top)
        elif isinstance(node, ast.ImportFrom) and node.module == "sglang_release":
            needs.add("release")
        elif isinstance(node, ast.ImportFrom) and node.module == "sglang_wheels":
            needs.add("wheels")
        elif isinstance(node, ast.FunctionDef) and any(a.arg in ("release_extraction", "release_root")
                                                        for a in node.args.args):
            needs.add("release")
    return needs | ({"gpu"} & _marks(tree))


def _rows() -> dict[str, tuple[str, set[str]]]:
    """Each test module's row of the guide: (slow, needs)."""
    rows = {}
    for line in GUIDE.splitlines():
        if line.startswith("| `test_"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            needs = set() if cells[-1] == "-" else {n.strip() for n in cells[-1].split(",")}
            rows[cells[0].strip("`")] = (cells[-2], needs)
    return rows


def test_each_test_modules_row_gives_its_slow_tests_and_what_it_needs_as_its_source_says():
    rows, wrong = _rows(), []
    for path in sorted(HERE.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        want = (_slow(tree), _needs(tree))
        got = rows.get(path.name)
        if got != want:
            wrong.append(f"{path.name}: the guide says slow {got and got[0]!r}, needs {got and sorted(got[1])}; "
                         f"the source: slow {want[0]!r}, needs {sorted(want[1])}")
    assert not wrong, "tests/README.md:\n" + "\n".join(wrong)


def test_the_readers_of_the_source_tell_the_cases_apart():
    """The two readers above on small sources: each answer they can give, so the check above can fail."""
    def parse(text):
        return ast.parse(text)

    assert _slow(parse("import pytest\npytestmark = [pytest.mark.slow]\ndef test_a(): pass\n")) == "all"
    assert _slow(parse("@pytest.mark.slow\ndef test_a(): pass\n@pytest.mark.slow\ndef test_b(): pass\n")) == "all"
    assert _slow(parse("@pytest.mark.slow\ndef test_a(): pass\ndef test_b(): pass\n")) == "some"
    assert _slow(parse("@pytest.mark.parametrize('x', [pytest.param(1, marks=pytest.mark.slow), 2])\n"
                       "def test_a(x): pass\n")) == "some"
    assert _slow(parse("def test_a(): pass\n")) == "-"
    gpu = "torch = pytest.importorskip('torch.cuda')\npytestmark = [pytest.mark.gpu]\n"
    assert _needs(parse(gpu)) == {"torch", "gpu"}
    assert _needs(parse("def test_a():\n    pytest.importorskip('jsonschema')\n")) == set()  # a dependency
    assert _needs(parse("from sglang_release import WHY\n")) == {"release"}
    assert _needs(parse("def test_a(release_extraction): pass\n")) == {"release"}


# -- docstrings ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", sorted(HERE.glob("*.py")), ids=lambda p: p.name)
def test_every_module_opens_with_a_one_sentence_line_saying_what_it_tests(path):
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
    assert doc, f"{path.name}: no module docstring"
    lines = doc.split("\n")
    first = lines[0].strip()
    assert first.endswith(".") and not re.search(r"\.\s+[A-Z]", first), f"{path.name}: first line not one sentence"
    assert len(lines) == 1 or not lines[1].strip(), f"{path.name}: the first sentence goes on past the first line"


# -- the bad-input fixtures' citations ---------------------------------------------------------------------------------

BAD_INPUTS = sorted(p for p in (HERE / "bad_inputs").rglob("*") if p.is_file())
#: A release cite, as the release catalog writes it: ``path:function:lines: `` (the path under the wheel's sglang/).
RELEASE_CITE = re.compile(rb"((?:srt|kernels)/[\w/]+\.py):([\w.]+):(\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*): ")
#: A cite of something outside this repository: the background notes.
OUTSIDE_CITE = re.compile(rb"sglang-fence\.md|\.\./shared/|/work/shared|shared/docs/|anchors\.md")


@pytest.mark.parametrize("path", BAD_INPUTS, ids=lambda p: p.relative_to(HERE).as_posix())
def test_a_bad_input_cites_the_release_not_an_outside_note(path):
    data = path.read_bytes()
    assert not OUTSIDE_CITE.search(data), OUTSIDE_CITE.search(data).group().decode()
    if b"cites" in data:
        assert RELEASE_CITE.search(data), "cites, but none of the release"


def _spans(path: Path) -> dict[str, list[tuple[int, int]]]:
    """Each (qualified) function and class of a source file: its lines, decorators included."""
    out: dict[str, list[tuple[int, int]]] = {}

    def walk(node, prefix):
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.setdefault(prefix + ch.name, []).append((ch.lineno - len(ch.decorator_list), ch.end_lineno))
                walk(ch, prefix + ch.name + ".")
            else:
                walk(ch, prefix)

    walk(ast.parse(path.read_text(encoding="utf-8")), "")
    return out


def test_the_bad_inputs_release_cites_lie_inside_the_functions_they_name(release_root):
    root = release_root
    cites = {m.groups() for p in BAD_INPUTS for m in RELEASE_CITE.finditer(p.read_bytes())}
    assert cites
    bad, parsed = [], {}
    for path, func, lines in sorted(cites):
        file = path.decode()
        if file not in parsed:
            parsed[file] = _spans(root / file)
        spans = parsed[file].get(func.decode(), [])
        for part in lines.decode().split(","):
            a, _, b = part.partition("-")
            if not any(lo <= int(a) and int(b or a) <= hi for lo, hi in spans):
                bad.append(f"{file}:{func.decode()}:{part}")
    assert not bad, bad
