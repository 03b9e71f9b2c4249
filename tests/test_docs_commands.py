"""Every command shown in README.md and the hand-written docs runs as written.

Each ``fencecheck ...`` line of a shell block (also after ``&&``) is run through the command's entry point, in order
per document, in a folder where the repository's inputs (``fencecheck/``, ``examples/``) are at hand and outputs
land in a scratch folder; none may end as bad input, an I/O failure or a bug. Set-up lines (``pip``, ``pytest``) are
what ``.ci/run`` runs; GPU lines need a lent GPU (gpu/check.sh is tested on its CPU stand-in, tests/test_gpu_plan.py).
"""

from __future__ import annotations

import io
import re
import shlex
from pathlib import Path

import pytest

from fencecheck.commands.main import main
from fencecheck.errors import EXIT_BAD_INPUT, EXIT_BUG, EXIT_IO

ROOT = Path(__file__).resolve().parents[1]
GENERATED = {"docs/proofs.md"}
DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")
                             if str(p.relative_to(ROOT)) not in GENERATED)]
#: Lines that are not fencecheck commands, each with why the suite does not run it.
NOT_RUN = {
    "python3 -m pip": "the set-up of README.md's two commands, which .ci/run runs",
    "pytest": "the test suite itself",
}
#: GPU scripts (run on a lent GPU; tests/test_gpu_check.py holds them to the code on the CPU stand-in).
GPU_LINE = re.compile(r"^(\w+=\S+ )*bash gpu/(check|fetch_wheels)\.sh\b")


def commands(doc: str) -> list[str]:
    """The ``fencecheck`` command lines of ``doc``'s shell blocks, comments cut, ``&&`` chains split."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```(?:sh|bash|shell)\n(.*?)```", text, re.S):
        for line in block.splitlines():
            for part in re.split(r"\s&&\s", re.sub(r"\s+#.*$", "", line).strip()):
                part = part.strip()
                if not part:
                    continue
                if part.startswith("fencecheck "):
                    out.append(part)
                else:
                    assert any(part.startswith(k) for k in NOT_RUN) or GPU_LINE.match(part), \
                        f"{doc}: a command line the suite does not know: {part}"
    return out


def test_every_document_with_commands_is_found():
    found = {d for d in DOCS if commands(d)}
    assert "README.md" in found and len(commands("README.md")) >= 14


@pytest.fixture
def workdir(tmp_path):
    for name in ("fencecheck", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("doc", [d for d in DOCS if commands(d)])
def test_the_commands_of_a_document_run_as_written(doc, workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    for line in commands(doc):
        out, err = io.StringIO(), io.StringIO()
        code = main(shlex.split(line)[1:], out, err)
        assert code not in (EXIT_BAD_INPUT, EXIT_IO, EXIT_BUG), f"{doc}: {line}: exit {code}: {err.getvalue()}"
