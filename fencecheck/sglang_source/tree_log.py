"""What a read of an SGLang tree looked at, so that an answer computed from it can be kept and trusted again.

A ``Log`` set on a ``Tree`` (``tree.log``) records, from the tree's creation on, every question whose answer reached
the reader from the files: each module whose text was read or whose syntax tree was asked for (``Tree.text``,
``Tree.module``, a memo hit included), each text search (``Tree.modules_containing``: the needles, the folder and the
modules found) and the text index of class statements (``Tree.class_index``). The tree's module names are always part
of it, with the file behind each. Anything the reader knows of the tree came through one of these (the memos a tree
keeps are filled from them), so an answer computed by a pure function of the tree is the same on any tree where each
recorded question gets the same answer.

Kept (``Log.to_json``), a log holds a digest of every module's text besides: ``still_holds`` reads the texts of the
tree given (a fraction of a second for a release; parsing them is what a kept answer saves) and asks again only
what a changed module could change. A changed module the read looked at fails it; a changed one it did not look at
fails it only where a search now finds it or no longer does, or its class statements differ from before.
"""

from __future__ import annotations

import hashlib
import json


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:32]


def names_digest(tree) -> str:
    """A digest of the tree's module names with the file behind each (``x.py`` and ``x/__init__.py`` are one name:
    which one it is decides the classes' files and what a relative import means), in the tree's order."""
    return _sha("\n".join(f"{m}\0{tree.rel(m)}" for m in tree.paths))


def _text_digest(tree, m: str) -> str:
    d = tree.digests.get(("text", m))
    if d is None:
        d = tree.digests[("text", m)] = _sha(tree.raw_text(m))
    return d


def _classes_digest(tree, m: str) -> str:
    from .tree import class_statements

    d = tree.digests.get(("classes", m))
    if d is None:
        d = tree.digests[("classes", m)] = _sha(json.dumps(class_statements(tree.raw_text(m))))
    return d


class Log:
    """The questions a read asked of its tree (see the module's text)."""

    def __init__(self) -> None:
        self.modules: set[str] = set()
        self.searches: dict[tuple[tuple[str, ...], str], list[str]] = {}
        self.class_index = False

    def to_json(self, tree) -> dict:
        """The questions with the answers ``tree`` gave them, and a digest of each module's text (and, when the
        class index was asked, of its class statements)."""
        return {"names": names_digest(tree),
                "manifest": {m: _text_digest(tree, m) for m in tree.paths},
                "read": sorted(self.modules),
                "searches": [[list(n), u, found] for (n, u), found in sorted(self.searches.items())],
                "classes": {m: _classes_digest(tree, m) for m in tree.paths} if self.class_index else None}


def still_holds(data: dict, tree) -> bool:
    """Whether every question of a log kept as ``data`` (``Log.to_json``) gets the same answer from ``tree``, asked
    without recording; False for data of another shape."""
    from .tree import in_folder

    try:
        searches = [(tuple(needles), under, set(found)) for needles, under, found in data["searches"]]
        if not all(isinstance(n, str) for needles, _, _ in searches for n in needles) \
                or data["names"] != names_digest(tree):
            return False
        manifest, read, classes = data["manifest"], set(data["read"]), data["classes"]
        changed = [m for m in tree.paths if _text_digest(tree, m) != manifest[m]]
        if read & set(changed):
            return False
        for needles, under, found in searches:
            if any((m in found) != any(n in tree.raw_text(m) for n in needles)
                   for m in changed if in_folder(m, under)):
                return False
        return classes is None or all(_classes_digest(tree, m) == classes[m] for m in changed)
    except (KeyError, TypeError, ValueError, AttributeError):
        return False
