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


#: A command as a page shows it: a line of a shell block, or of an output excerpt after its prompt (``$ ``).
_SHOWN = re.compile(r"^(?:\$ )?((?:python3 -m )?fencecheck(?: .*)?)$")


def shown_commands(text: str) -> list[str]:
    """Every ``fencecheck ...`` and ``python3 -m fencecheck ...`` line of a page's shell blocks and of its text
    blocks' ``$ `` lines, comments cut, ``&&`` chains split."""
    out = []
    for lang, block in re.findall(r"```(sh|bash|shell|text|console)\n(.*?)```", text, re.S):
        for line in block.splitlines():
            if lang in ("text", "console") and not line.startswith("$ "):
                continue
            for part in re.split(r"\s&&\s", re.sub(r"\s+#.*$", "", line.removeprefix("$ ")).strip()):
                m = _SHOWN.match(part.strip())
                if m:
                    out.append(m.group(1))
    return out


def test_shown_commands_finds_both_spellings_in_every_kind_of_block():
    page = ("```sh\npip x && fencecheck check a.toml  # why\npython3 -m fencecheck prove\n```\n"
            "```text\n$ fencecheck sglang T --details   # exit 1\n  fencecheck is not a command here\n```\n")
    assert shown_commands(page) == ["fencecheck check a.toml", "python3 -m fencecheck prove",
                                    "fencecheck sglang T --details"]
    assert len(shown_commands((ROOT / "README.md").read_text(encoding="utf-8"))) >= 16


@pytest.mark.parametrize("doc", DOCS)
def test_every_command_a_page_shows_parses_as_the_cli_accepts_it(doc):
    from fencecheck.commands.main import build_parser
    from fencecheck.errors import InputError

    bad = []
    for line in shown_commands((ROOT / doc).read_text(encoding="utf-8")):
        argv = shlex.split(line)[(3 if line.startswith("python3 -m ") else 1):]
        try:
            build_parser(io.StringIO()).parse_args(argv)
        except InputError as e:  # an unknown command or flag, a value not among a flag's choices, one missing
            bad.append(f"{line}: {e}")
        except Exception as e:  # noqa: BLE001 - --help and --version end the parse: they are known
            if type(e).__name__ != "_Exit":
                raise
    assert not bad, f"{doc}:\n" + "\n".join(bad)


def test_a_flag_the_cli_does_not_have_is_told():
    from fencecheck.commands.main import build_parser
    from fencecheck.errors import InputError

    with pytest.raises(InputError):
        build_parser(io.StringIO()).parse_args(shlex.split("sglang . --baseline HEAD --paths everywhere"))
    with pytest.raises(InputError):
        build_parser(io.StringIO()).parse_args(shlex.split("check a.toml --no-such-flag"))
