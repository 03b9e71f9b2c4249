"""docs/guide.md's output excerpts are what the commands print, on the synthetic pull-request pair.

Each ```text block of the guide that starts ``$ fencecheck ...`` is run through the command's entry point from the
repository root (``# exit N`` on that line: the exit code it must end with); every other line of the block must be a
line of its output (stdout and stderr, the repository root's path replaced by ``...``). ``COPY`` is a copy of
examples/sglang-pr/head with the guide's suppression comment on the line it names. The fix the guide describes (an
override declaring POST_REPLAY for DECODE) is checked the same way.
"""

from __future__ import annotations

import io
import re
import shlex
import shutil
from pathlib import Path

import pytest

from fencecheck.commands.main import main

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
HEAD = ROOT / "examples" / "sglang-pr" / "head"
PAGED = "sglang/srt/layers/attention/paged_backend.py"


def _excerpts() -> list[tuple[str, int | None, list[str]]]:
    """(command, exit code or None, shown lines) of each ``$ fencecheck`` text block."""
    out = []
    for block in re.findall(r"```text\n(.*?)```", GUIDE, re.S):
        first, *lines = block.splitlines()
        if not first.startswith("$ fencecheck "):
            continue
        code = re.search(r"#\s*exit (\d+)\s*$", first)
        command = re.sub(r"\s+#.*$", "", first[2:]).strip()
        out.append((command, int(code[1]) if code else None, lines))
    return out


EXCERPTS = _excerpts()


def _run(argv: list[str]) -> tuple[int, list[str]]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out, err)
    return code, (out.getvalue() + err.getvalue()).replace(str(ROOT), "...").splitlines()


def _copy_with_suppression(tmp_path: Path) -> Path:
    """examples/sglang-pr/head copied, with the guide's ``python`` block as the line it replaces."""
    (shown,) = [b for b in re.findall(r"```python\n(.*?)```", GUIDE, re.S) if "# fencecheck: ignore[" in b]
    shown = shown.rstrip("\n")
    copy = tmp_path / "head"
    shutil.copytree(HEAD, copy)
    module = copy / PAGED
    lines = module.read_text(encoding="utf-8").splitlines()
    assert "line 16 of" in GUIDE and lines[15] == shown.split("  # fencecheck:")[0], "the guide's line is line 16"
    lines[15] = shown
    module.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return copy


def test_the_guide_has_its_excerpts():
    commands = [c for c, _, _ in EXCERPTS]
    assert len(commands) >= 5 and any("--baseline" in c for c in commands) and any("COPY" in c for c in commands)
    assert all(lines for _, _, lines in EXCERPTS)


@pytest.mark.parametrize("command,code,shown", EXCERPTS, ids=[c for c, _, _ in EXCERPTS])
def test_an_excerpt_is_what_the_command_prints(command, code, shown, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    argv = shlex.split(command)[1:]
    if "COPY" in argv:
        copy = _copy_with_suppression(tmp_path)
        argv = [str(copy) if a == "COPY" else a for a in argv]
    got, printed = _run(argv)
    if code is not None:
        assert got == code, f"{command}: exit {got}, the guide says {code}"
    missing = [line for line in shown if line.strip() and line not in printed]
    assert not missing, f"{command}: not printed: {missing}"


def test_the_fix_the_guide_describes(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    copy = tmp_path / "head"
    shutil.copytree(HEAD, copy)
    module = copy / PAGED
    text = module.read_text(encoding="utf-8")
    text = text.replace("import AttentionBackend\n", "import AttentionBackend, SharedReadEnds\n")
    text = text.replace("    def forward_decode", "    def shared_read_ends(self, fm):\n        if fm.is_decode():\n"
                        "            return SharedReadEnds.POST_REPLAY\n        return super().shared_read_ends(fm)\n\n"
                        "    def forward_decode")
    module.write_text(text, encoding="utf-8")
    code, printed = _run(["sglang", str(copy), "--baseline", "examples/sglang-pr/base"])
    assert code == 0
    assert "findings: 0 added, 0 fixed, 1 unchanged, 0 suppressed" in printed
    shown = "declarations: PagedBackend: DECODE: IN_REPLAY -> POST_REPLAY"
    assert f"`{shown}`" in GUIDE and f"  {shown}" in printed
