"""Read an SGLang source tree statically (Python's ``ast``; SGLang is never imported) and extract the shared-read
fence's facts with file:line: backends and their declarations per forward mode, read sites, workers' publishers,
the barrier's call sites, runners' publish behaviour; and the findings (docs/sglang-reader.md)."""

from __future__ import annotations

from .extract import Extraction, read_tree
from .tree import NotSGLang, Tree, find_installed, find_package_root


def read_path(path: str | None, installed: bool = False) -> Extraction:
    """The extraction of the tree at ``path`` (a checkout root, its ``python/`` folder or a ``sglang`` package
    folder), or of the installed ``sglang`` when ``installed``."""
    import gc

    root = find_installed() if installed else find_package_root(path)
    enabled = gc.isenabled()
    gc.disable()  # the syntax trees are many small acyclic objects: the cyclic collector only costs time here
    try:
        return read_tree(Tree(root))
    finally:
        if enabled:
            gc.enable()


__all__ = ["Extraction", "NotSGLang", "Tree", "find_installed", "find_package_root", "read_path", "read_tree"]
