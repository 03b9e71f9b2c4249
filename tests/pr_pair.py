"""The synthetic pull-request pair (``sglang_trees/pr_base``, ``pr_head``) laid out as folders or as a git repository.

Both sides lay ``common`` and ``after_marker`` first. The change (base -> head) makes ``PagedBackend``
gather ``req_to_token`` inside ``forward_decode`` (one finding added) and moves ``LateReadBackend``'s lines down by
three (its finding keeps its identity).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

TREES = Path(__file__).resolve().parent / "sglang_trees"
#: The root cause the change adds: (kind, subject, mode, site, location, function).
ADDED = ("read_outside_declaration", "PagedBackend", "DECODE", "in_graph_after_marker", "req_to_token",
         "PagedBackend.forward_decode")


def lay(dest: Path, side: str) -> Path:
    """The ``side`` (``base`` or ``head``) of the pair laid out at ``dest`` (a folder holding ``sglang/``)."""
    for case in ("common", "after_marker", f"pr_{side}"):
        shutil.copytree(TREES / case, dest, dirs_exist_ok=True)
    return dest


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def repository(repo: Path, sides=("base", "head"), inside: str = "python") -> Path:
    """A git repository at ``repo`` with one commit per side, in order (the package at ``inside/sglang``)."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q")
    for side in sides:
        lay(repo / inside if inside else repo, side)
        commit_all(repo, side)
    return repo
