"""The product speaks of itself only, in its docs, docstrings, comments and benchmarks.

They name no working session, no "these machines" and no tracker issue number (SGLang's own pull requests, ``PR
#35059``, are facts of SGLang and fine). Generated documents are held to it too: they are made from the code's
text."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What the product never says of itself.
WORDS = re.compile(r"\bsessions?\b|\bthese machines\b|\bissues? #?\d+\b|\bround \d+\b", re.IGNORECASE)
FOLDERS = ("fencecheck", "model", "reference", "gpu", "proofs", "benchmarks", "tests", "examples", "docs", ".ci")


def _texts(path: Path) -> list[tuple[int, str]]:
    """(line, text) of what a reader of ``path`` reads as prose: a Markdown, TOML, YAML or shell file whole; a Python
    file's comments and string literals (not its code, where pytest's ``scope="session"`` is an API name)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".py":
        return list(enumerate(text.splitlines(), 1))
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and tok.string.strip("\"'") != "session"):
            out += [(tok.start[0] + i, line) for i, line in enumerate(tok.string.splitlines())]
    return out


def _files() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for folder in FOLDERS:
        found += [p for p in sorted((ROOT / folder).rglob("*")) if p.is_file()
                  and p.suffix in (".py", ".md", ".toml", ".yaml", ".yml", ".sh", "")
                  and "__pycache__" not in p.parts and p.name != "run" or p == ROOT / ".ci" / "run"]
    return [p for p in found if p.is_file() and p != Path(__file__)]


def test_no_file_speaks_of_how_it_was_made():
    bad = [f"{p.relative_to(ROOT)}:{n}: {m.group(0)!r}" for p in _files() for n, line in _texts(p)
           for m in WORDS.finditer(line)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("line", ["measured in one session", "on these machines", "closes issue 22",
                                  "see issues #45", "in round 3"])
def test_each_phrase_is_caught(line):
    assert WORDS.search(line)


@pytest.mark.parametrize("line", ["SGLang PR #35059", "a question names the issue", "an issue's number"])
def test_what_is_not_caught(line):
    assert not WORDS.search(line)


def test_pytest_scope_names_are_code_not_prose(tmp_path):
    path = tmp_path / "conftest.py"
    path.write_text('@pytest.fixture(scope="session")\ndef f():\n    """Made once per session."""\n')
    assert [line for _, line in _texts(path)] == ['"""Made once per session."""']
