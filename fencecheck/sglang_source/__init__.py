"""Read an SGLang source tree statically (Python's ``ast``; SGLang is never imported) and extract the shared-read
fence's facts with file:line: backends and their declarations per forward mode, read sites, workers' publishers,
the barrier's call sites, runners' publish behaviour; and the findings (docs/sglang-reader.md)."""

from __future__ import annotations

import contextlib
import sys

from .extract import Extraction, read_tree
from .tree import NotSGLang, Tree, find_installed, find_package_root


def read_path(path: str | None, installed: bool = False, freeze: bool = False, early=None) -> Extraction:
    """The extraction of the tree at ``path`` (a checkout root, its ``python/`` folder or a ``sglang`` package
    folder), or of the installed ``sglang`` when ``installed``. ``freeze``: what the reading made is moved out of the
    cyclic collector's reach before it is switched back on (a command that exits after one read: no collection
    scans the syntax trees again; a process that reads many trees leaves it off, or their cycles are never freed).
    ``early``: as ``read_tree``'s."""
    root = find_installed() if installed else find_package_root(path)
    with reading(root, freeze):
        return read_tree(Tree(root), early)


@contextlib.contextmanager
def reading(root, freeze: bool = False):
    """What a read of the tree at ``root`` runs under: the cyclic collector off (the syntax trees are many small
    acyclic objects: it only costs time here) and, with ``freeze``, what was made frozen before it is on again; the
    reader's recursion budget, and Python's recursion limit, past every limit the reader checks, as one line (never
    a traceback)."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        with recursion_budget():
            try:
                yield
            except RecursionError:
                raise NotSGLang(str(root), "", "nested too deeply for the reader (Python's recursion limit)") \
                    from None
    finally:
        if freeze:
            gc.freeze()
        if enabled:
            gc.enable()


#: Python frames the reader may use below its entry (its evaluators recurse over syntax trees and call chains).
RECURSION_FRAMES = 1000


@contextlib.contextmanager
def recursion_budget(frames: int = RECURSION_FRAMES):
    """Python's recursion limit set to ``frames`` more than the current depth, so where a too-deep input stops
    the reader does not depend on its caller (the command line or a test)."""
    depth, f = 0, sys._getframe()
    while f is not None:
        depth, f = depth + 1, f.f_back
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


__all__ = ["Extraction", "NotSGLang", "Tree", "find_installed", "find_package_root", "read_path", "read_tree",
           "reading"]
