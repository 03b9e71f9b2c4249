"""The tree's text search through its word index answers as a plain scan of every module's text.

The same modules, in the tree's order, for needles of any shape (no word character, spanning word boundaries, at a
text's start or end, non-ASCII), with and without ``under``; a module skipped for its size is searched as an empty
text, with its note."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fencecheck.sglang_source.tree import Tree, in_folder

MODULES = {
    "__init__.py": "",
    "a.py": "def foo(x):\n    return x.bar()\n",
    "b.py": "class AttentionBackend(Base):\n    name = 'b'\n",
    "srt/__init__.py": "from .x import Runner\n",
    "srt/x.py": "Runner = 1\nf = lambda: Foo.bar(1)\n# naïve café → done",
    "srt/y.py": "x=lambda:0\nname='y'  # ü_word\n",
    "srt/sub/__init__.py": "o.ba",
    "srt/sub/z.py": "def f(): return .5 + x.attr\n\tself.attr_x = 2\n",
    "srt2/w.py": "import srt\nclass AttentionBackendX: pass\n...\n",
    "big.py": "def foo(x):\n" + "    pass\n" * 400,  # past max_module_bytes: skipped
}
MAX_BYTES = 2000

NEEDLES = [
    "def foo(", ".attr", "class AttentionBackend", "Runner", "name=", "=lambda:", "Foo.bar(", "o.ba", "def f",
    "def", "f", "x", "", " ", "\n", "(", ")", "...", ".", "= ", "# ", "\n\t", "'", "from", "from .x", "done",
    "naïve", "café →", "→", "ü_w", "ü", "_word\n", "_", "1\nf", "pass\n", "AttentionBackendX", "Backend(",
    "return .5", ".5", "2\n", "missing", "srt", "import srt\n", "x.", "a b", "self.attr_x = 2\n",
]
UNDERS = ["", "sglang", "sglang.srt", "sglang.srt.sub", "sglang.srt.x", "sglang.srt2", "sglang.sr", "nothing"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    base = tmp_path_factory.mktemp("tree") / "sglang"
    for rel, text in MODULES.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text, encoding="utf-8")
    return base


def _scan(tree: Tree, needles: tuple[str, ...], under: str) -> list[str]:
    """The plain scan: every module below ``under`` whose text holds a needle, in the tree's order."""
    return [m for m in tree.paths if in_folder(m, under) and any(n in tree.raw_text(m) for n in needles)]


@pytest.mark.parametrize("under", UNDERS)
@pytest.mark.parametrize("needle", NEEDLES)
def test_one_needle_answers_as_the_plain_scan(root, needle, under):
    tree = Tree(root, max_module_bytes=MAX_BYTES)
    assert tree.raw_search((needle,), under) == _scan(tree, (needle,), under)


@pytest.mark.parametrize("under", UNDERS)
def test_several_needles_answer_as_the_union_in_tree_order(root, under):
    tree = Tree(root, max_module_bytes=MAX_BYTES)
    for i in range(len(NEEDLES)):
        needles = tuple(NEEDLES[i:i + 3])
        assert tree.raw_search(needles, under) == _scan(tree, needles, under)


ALPHABET = st.sampled_from(list("abdefxo_. =(:)\n\t'#→üé5AR") + ["def", "lambda", "attr", "Runner", "Foo"])


@settings(max_examples=300, deadline=None)
@given(needles=st.lists(st.lists(ALPHABET, max_size=6).map("".join), min_size=1, max_size=3),
       under=st.sampled_from(UNDERS))
def test_any_needles_answer_as_the_plain_scan(root, needles, under):
    tree = Tree(root, max_module_bytes=MAX_BYTES)
    assert tree.raw_search(tuple(needles), under) == _scan(tree, tuple(needles), under)


def test_the_skipped_module_is_an_empty_text_with_its_note_and_searches_stay_unrecorded(root):
    from fencecheck.sglang_source.tree_log import Log

    tree = Tree(root, max_module_bytes=MAX_BYTES)
    tree.log = Log()
    assert tree.raw_search(("def foo(",), "") == ["sglang.a"]  # big.py holds it too, but was not read
    assert [n.file for n in tree.notes] == ["sglang/big.py"]
    assert tree.module("sglang.big") is None
    assert not tree.log.searches
    assert tree.modules_containing("Runner", under="sglang.srt") == ["sglang.srt", "sglang.srt.x"]
    assert tree.log.searches == {(("Runner",), "sglang.srt"): ["sglang.srt", "sglang.srt.x"]}
    assert [n.file for n in tree.notes] == ["sglang/big.py"]  # read once


def test_the_index_is_shared_with_a_sibling_and_dropped_by_forget(root):
    tree = Tree(root, max_module_bytes=MAX_BYTES)
    sib = tree.sibling()
    assert sib.raw_search(("Foo.bar(",), "") == ["sglang.srt.x"]
    assert tree.word_index() is sib.word_index() and tree.word_index()["modules"]
    tree.forget()
    assert not sib.__dict__.get("_words")
    assert sib.raw_search(("Foo.bar(",), "") == ["sglang.srt.x"]  # read again
