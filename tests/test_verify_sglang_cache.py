"""What `verify --sglang` keeps between runs (`tree_log`, `sglang_cache.facts_load`): a kept answer is used only while every question its read asked of the files gets the same answer, and then it is the answer a fresh read gives.

The log's rules one by one (a read module changed, an unread one changed, a search or the class index answered
differently, a module added), the command's text the same from a kept answer, an edit that misses, an entry that
cannot be read; and, for edits drawn at random (a line deleted, doubled or commented out, in any module of the
synthetic pull-request tree), the answer with the kept entries of the unedited tree equal to a fresh read."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pr_pair import TREES, lay

from fencecheck.decision import cache as sglang_cache
from fencecheck.decision import backend_source as verify_source
from fencecheck.commands.main import main
from fencecheck.errors import FencecheckError
from fencecheck.sglang_source.tree import Tree, find_package_root
from fencecheck.sglang_source.tree_log import Log, still_holds

BACKEND = "sglang/srt/layers/attention/paged_backend.py"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(sglang_cache.ENV, str(folder))
    return folder


def _logged(root: Path, ask) -> tuple[Tree, dict]:
    tree = Tree(find_package_root(root))
    tree.log = Log()
    ask(tree)
    return tree, tree.log.to_json(tree)


def _fresh(root: Path) -> Tree:
    return Tree(find_package_root(root))


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    p = root / rel
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new, 1))


def test_the_log_fails_on_a_module_the_read_looked_at_and_holds_on_one_it_did_not(tmp_path):
    root = lay(tmp_path / "t", "head")
    _, data = _logged(root, lambda t: t.module("sglang.srt.layers.attention.paged_backend"))
    assert data["read"] == ["sglang.srt.layers.attention.paged_backend"] and data["classes"] is None
    assert still_holds(data, _fresh(root))
    _edit(root, "sglang/srt/managers/scheduler.py", "\n", "\n# an unread edit\n")
    assert still_holds(data, _fresh(root))  # no search asked, no class index: an unread module is not a question
    _edit(root, BACKEND, "self.page_table = None", "self.page_table = []")
    assert not still_holds(data, _fresh(root))


def test_a_memo_hit_is_recorded_like_a_first_read(tmp_path):
    root = lay(tmp_path / "t", "head")
    tree = Tree(find_package_root(root))
    tree.module("sglang.srt.layers.attention.paged_backend")  # parsed before the log began
    tree.log = Log()
    tree.module("sglang.srt.layers.attention.paged_backend")
    assert tree.log.modules == {"sglang.srt.layers.attention.paged_backend"}


def test_an_unread_module_fails_the_log_where_a_search_now_finds_it_or_no_longer_does(tmp_path):
    root = lay(tmp_path / "t", "head")
    _, data = _logged(root, lambda t: t.modules_containing("req_to_token_pool"))
    found = data["searches"][0][2]
    assert "sglang.srt.layers.attention.paged_backend" in found and not data["read"]
    _edit(root, "sglang/srt/managers/scheduler.py", "\n", "\n# a comment without the needle\n")
    assert still_holds(data, _fresh(root))
    _edit(root, "sglang/srt/environ.py", "\n", "\n# req_to_token_pool, now named here\n")
    assert not still_holds(data, _fresh(root))
    root2 = lay(tmp_path / "u", "head")
    _edit(root2, BACKEND, "model_runner.req_to_token_pool.req_to_token", "model_runner.pool.req_to_token")
    assert not still_holds(data, _fresh(root2))  # the searched module no longer holds the needle


def test_an_unread_module_fails_the_log_where_its_class_statements_change_after_the_class_index_was_asked(tmp_path):
    root = lay(tmp_path / "t", "head")
    _, data = _logged(root, lambda t: t.class_index())
    assert data["classes"] is not None
    _edit(root, "sglang/srt/environ.py", "\n", "\n# class-free edit\n")
    assert still_holds(data, _fresh(root))
    _edit(root, "sglang/srt/environ.py", "\n", "\nclass Extra(AttentionBackend):\n    pass\n")
    assert not still_holds(data, _fresh(root))


def test_a_module_added_or_removed_fails_the_log(tmp_path):
    root = lay(tmp_path / "t", "head")
    _, data = _logged(root, lambda t: t.module("sglang.srt.environ"))
    (root / "sglang/srt/extra.py").write_text("X = 1\n")
    assert not still_holds(data, _fresh(root))
    (root / "sglang/srt/extra.py").unlink()
    assert still_holds(data, _fresh(root))
    (root / "sglang/srt/environ.py").unlink()
    assert not still_holds(data, _fresh(root))


def test_a_module_moved_into_a_package_of_the_same_name_fails_the_log(tmp_path):
    """``x.py`` and ``x/__init__.py`` are one module name; which file it is changes the classes' files and what a
    relative import means (found by an independent review: the names alone held)."""
    root = lay(tmp_path / "t", "head")
    _, data = _logged(root, lambda t: t.module("sglang.srt.layers.attention.paged_backend"))
    src = root / BACKEND
    (root / BACKEND[:-3]).mkdir()
    src.rename(root / BACKEND[:-3] / "__init__.py")
    assert not still_holds(data, _fresh(root))


def test_fencecheck_s_code_digest_holds_the_python_that_parses(monkeypatch):
    import sys

    monkeypatch.setattr(sglang_cache, "_CODE", None)
    here = sglang_cache.code_digest()
    monkeypatch.setattr(sglang_cache, "_CODE", None)
    monkeypatch.setattr(sys.implementation, "cache_tag", "cpython-399")
    assert sglang_cache.code_digest() != here


def test_fencecheck_s_code_digest_holds_its_data_files(monkeypatch, tmp_path):
    """The catalogs' TOML and the recorded releases' JSON are read by the code: a changed one misses."""
    import fencecheck

    pkg = tmp_path / "pkg"
    shutil.copytree(Path(fencecheck.__path__[0]), pkg, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(fencecheck, "__path__", [str(pkg)])
    monkeypatch.setattr(sglang_cache, "_CODE", None)
    here = sglang_cache.code_digest()
    (toml,) = sorted(pkg.rglob("*.toml"))[:1]
    toml.write_text(toml.read_text() + "\n# edited\n")
    monkeypatch.setattr(sglang_cache, "_CODE", None)
    assert sglang_cache.code_digest() != here


def test_the_phase_scopes_are_kept_on_their_tree(tmp_path):
    """Not in a module-level table keyed by ``id(tree)``, which a later tree can reuse (found by an independent
    review)."""
    from fencecheck.sglang_source import contexts

    root = lay(tmp_path / "t", "head")
    tree = Tree(find_package_root(root))
    contexts._scope(tree, {"file": BACKEND, "line": 13})
    assert tree.__dict__["_phase_scopes"] == {(BACKEND, 13): f"{BACKEND}:12"}
    assert not [k for k, v in vars(contexts).items() if isinstance(v, dict) and k.isupper() and "SCOPE" in k]


def _double(x):
    return 2 * x


def _raises(x):
    raise ValueError(f"boom {x}")


def _dies_in_the_child(parent):
    import os
    import signal

    if os.getpid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)
    return "computed here"


def test_beside_gives_the_answer_or_computes_it_here_when_the_forked_process_fails():
    """A forked read that dies (killed for memory) is computed here instead of waited for without end (found by an
    independent review); one that raises raises here."""
    import os

    from fencecheck.decision.beside import beside

    with beside(_double, 21) as got:
        assert got is None or got() == 42
    with beside(_dies_in_the_child, os.getpid()) as got:
        assert got is None or got() == "computed here"
    with pytest.raises(ValueError, match="boom 1"), beside(_raises, 1) as got:
        if got is not None:
            got()
        else:
            _raises(1)


def _plus(a, x):
    return a + x


def _dies_after_the_first_stage(a, parent):
    import os
    import signal

    if os.getpid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)
    return ("here", a)


def test_beside_with_a_second_stage_gives_both_answers_or_computes_them_here():
    """``then`` runs in the forked process on what the caller sends once the first answer is done; where the process
    dies in the second stage, both stages are computed here with what was sent."""
    import os

    from fencecheck.decision.beside import beside

    with beside(_double, 21, then=_plus) as got:
        if got is not None:
            got.send(8)
            assert got() == (42, 50)
    with beside(_double, 4, then=_dies_after_the_first_stage) as got:
        if got is not None:
            got.send(os.getpid())
            assert got() == (8, ("here", 8))


@pytest.mark.slow
def test_verify_sglang_says_the_same_on_one_core_and_two_fresh_or_kept(tmp_path, cache, monkeypatch):
    """The configurations and the files decided in them come from the forked process that reads them, from a kept
    answer (decided beside), or from this process on one core: the same text each way."""
    import os

    root = lay(tmp_path / "t", "head")
    monkeypatch.setenv(sglang_cache.ENV, "off")
    two = _verify(str(root), "PagedBackend")
    assert two[0] == 1 and "the tree's generated configurations:" in two[1]
    with monkeypatch.context() as m:
        m.setattr(os, "cpu_count", lambda: 1)
        assert _verify(str(root), "PagedBackend") == two
    monkeypatch.setenv(sglang_cache.ENV, str(cache))
    assert _verify(str(root), "PagedBackend") == two  # read and kept
    assert _verify(str(root), "PagedBackend") == two  # both answers kept
    with monkeypatch.context() as m:
        m.setattr(os, "cpu_count", lambda: 1)
        assert _verify(str(root), "PagedBackend") == two


def test_data_of_another_shape_does_not_hold(tmp_path):
    root = lay(tmp_path / "t", "head")
    _, data = _logged(root, lambda t: t.module("sglang.srt.environ"))
    tree = _fresh(root)
    for bad in (None, {}, {**data, "manifest": {}}, {**data, "searches": [[1]]}, [], "x"):
        assert not still_holds(bad, tree)


def _answer(root: Path):
    """What ``load`` gives for PagedBackend (or the line of its error)."""
    try:
        source, found = verify_source.load(str(root), "PagedBackend")
    except FencecheckError as e:
        return ("error", str(e))
    return (source.cls, source.file, source.line, source.version, source.configurations,
            [(v.rows, v.data) for v in found])


def _verify(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["verify", "--sglang", *argv], out=out, err=err)
    return code, out.getvalue()


def _unread(*a, **k):
    raise AssertionError("the tree was read again")


@pytest.mark.slow
def test_a_second_verify_uses_the_kept_answers_and_says_the_same(tmp_path, cache, monkeypatch):
    root = lay(tmp_path / "t", "head")
    monkeypatch.setenv(sglang_cache.ENV, "off")
    off = _verify(str(root), "PagedBackend")
    monkeypatch.setenv(sglang_cache.ENV, str(cache))
    first = _verify(str(root), "PagedBackend")
    assert first == off and off[0] == 1 and len(list(cache.glob("facts-*.json"))) == 2
    with monkeypatch.context() as m:
        m.setattr(verify_source, "read_entries", _unread)
        m.setattr(verify_source, "configurations", _unread)
        assert _verify(str(root), "PagedBackend") == off


def test_a_kept_answer_is_used_without_reading_the_tree(tmp_path, cache, monkeypatch):
    root = lay(tmp_path / "t", "head")
    first = _answer(root)
    assert len(list(cache.glob("facts-*.json"))) == 2
    with monkeypatch.context() as m:
        m.setattr(verify_source, "read_entries", _unread)
        m.setattr(verify_source, "configurations", _unread)
        assert _answer(root) == first
    monkeypatch.setenv(sglang_cache.ENV, "off")
    assert _answer(root) == first


def test_an_edit_to_the_backend_is_read_again(tmp_path, cache, monkeypatch):
    root = lay(tmp_path / "t", "head")
    before = _answer(root)
    # the change's in-graph gather removed: the backend reads before the replay only
    _edit(root, BACKEND, "pages = self.req_to_token[forward_batch.req_pool_indices, : forward_batch.seq_lens]",
          "pages = self.page_table")
    kept = _answer(root)
    monkeypatch.setenv(sglang_cache.ENV, "off")
    assert kept == _answer(root) and kept != before
    assert "in_graph_after_marker" in repr(before[-1]) and "in_graph_after_marker" not in repr(kept[-1])


def test_an_entry_that_cannot_be_read_is_read_again_from_the_tree(tmp_path, cache):
    root = lay(tmp_path / "t", "head")
    first = _answer(root)
    for p in cache.glob("facts-*.json"):
        p.write_text("{not json")
    assert _answer(root) == first
    for p in cache.glob("facts-*.json"):
        p.write_text('{"log": {}, "answer": {"cls": "Nope"}}')
    assert _answer(root) == first


def _kept(cache: Path) -> dict[str, dict]:
    """The facts entries by the kind of their answer."""
    import json

    out = {}
    for p in cache.glob("facts-*.json"):
        data = json.loads(p.read_text(encoding="utf-8"))
        out["configurations" if "configurations" in data["answer"] else "backend"] = {"path": p, "data": data}
    return out


@pytest.mark.parametrize("answer", [None, [], {"cls": "Nope"}, {"cls": 1, "file": "f", "line": 1, "variants": []},
                                    {"cls": "X", "file": "f", "line": 1, "variants": [{"rows": [{"x": 1}]}]},
                                    {"configurations": 3}])
def test_an_entry_whose_answer_has_the_wrong_shape_is_read_again_and_replaced(tmp_path, cache, answer):
    """Its log still holds, its answer is not what the reader needs: a miss, never an internal error."""
    import json

    root = lay(tmp_path / "t", "head")
    first = _answer(root)
    kept = _kept(cache)
    for k in kept.values():
        k["path"].write_text(json.dumps({**k["data"], "answer": answer}), encoding="utf-8")
    assert _answer(root) == first
    for k in kept.values():  # under its own key and digest: the answer's shape alone is checked
        payload = {f: k["data"][f] for f in ("kind", "name", "log")}
        k["path"].write_text(json.dumps(sglang_cache._sealed(k["data"]["key"], {**payload, "answer": answer})),
                             encoding="utf-8")
    assert _answer(root) == first
    assert {k: json.loads(v["path"].read_text(encoding="utf-8")) for k, v in kept.items()} \
        == {k: v["data"] for k, v in kept.items()}


def test_an_entry_copied_over_another_key_is_a_miss(tmp_path, cache):
    """An entry names the key it was stored under: the backend's answer copied over the configurations' entry (or
    the other way) is not used."""
    import json

    root = lay(tmp_path / "t", "head")
    first = _answer(root)
    kept = _kept(cache)
    back, conf = kept["backend"], kept["configurations"]
    back["path"].write_text(json.dumps(conf["data"]), encoding="utf-8")
    conf["path"].write_text(json.dumps(back["data"]), encoding="utf-8")
    assert _answer(root) == first
    assert json.loads(back["path"].read_text(encoding="utf-8")) == back["data"]
    assert json.loads(conf["path"].read_text(encoding="utf-8")) == conf["data"]


def test_with_the_cache_off_nothing_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(sglang_cache.ENV, "off")
    _answer(lay(tmp_path / "t", "head"))
    assert not list(tmp_path.rglob("facts-*.json"))


@pytest.fixture(scope="module")
def kept_head(tmp_path_factory):
    """The synthetic head and the cache folder its first verify kept."""
    base = tmp_path_factory.mktemp("kept")
    root = lay(base / "head", "head")
    mp = pytest.MonkeyPatch()
    mp.setenv(sglang_cache.ENV, str(base / "cache"))
    try:
        _answer(root)
    finally:
        mp.undo()
    return root, base / "cache"


#: the synthetic head's modules (the layers ``lay`` copies)
_FILES = sorted({p.relative_to(TREES / case).as_posix() for case in ("common", "after_marker", "pr_head")
                 for p in (TREES / case).rglob("*.py")})
#: their lines, stripped (what a transplant puts in); the class statements among them (what the class index reads)
_LINES = sorted({ln.strip() for rel in _FILES for case in ("common", "after_marker", "pr_head")
                 if (TREES / case / rel).exists() for ln in (TREES / case / rel).read_text().splitlines() if ln.strip()})
_CLASS_LINES = [ln for ln in _LINES if ln.startswith("class ")]


@settings(max_examples=50, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rel=st.sampled_from(_FILES), line=st.integers(0, 400),
       how=st.sampled_from(["delete", "double", "comment", "transplant"]),
       moved=st.one_of(st.sampled_from(_CLASS_LINES), st.sampled_from(_LINES)))
def test_an_edit_anywhere_gives_with_the_kept_answers_what_a_fresh_read_gives(kept_head, tmp_path_factory, rel,
                                                                               line, how, moved):
    """``transplant``: a line of any module (a class statement half the time) put in at the top level: a text search
    or the class index may find the module now."""
    root0, cache0 = kept_head
    work = tmp_path_factory.mktemp("edit")
    root = work / "head"
    shutil.copytree(root0, root)
    shutil.copytree(cache0, work / "cache")
    p = root / rel
    lines = p.read_text().splitlines(keepends=True)
    i = line % len(lines) if lines else 0
    edits = {"delete": lines[i:i + 1] and [], "double": lines[i:i + 1] * 2, "comment": ["# " + x for x in lines[i:i + 1]],
             "transplant": [moved + ("\n    pass\n" if moved.endswith(":") else "\n")] + lines[i:i + 1]}
    lines[i:i + 1] = edits[how]
    p.write_text("".join(lines))
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv(sglang_cache.ENV, "off")
        fresh = _answer(root)
        mp.setenv(sglang_cache.ENV, str(work / "cache"))
        assert _answer(root) == fresh
    finally:
        mp.undo()


def _no_configurations(tree):
    raise FencecheckError("the configurations", "", "cannot be read (a test)")


@pytest.mark.slow
def test_a_late_failure_of_the_read_leaves_no_partial_report(tmp_path, monkeypatch):
    """The configurations are read while the backend is verified; where their read fails, the command ends with the
    one error and writes nothing of the report it had made (found by an independent review)."""
    import os

    root = lay(tmp_path / "t", "head")
    monkeypatch.setenv(sglang_cache.ENV, "off")
    monkeypatch.setattr(verify_source, "configurations", _no_configurations)
    for cores in (2, 1):
        with monkeypatch.context() as m:
            m.setattr(os, "cpu_count", lambda: cores)
            out, err = io.StringIO(), io.StringIO()
            code = main(["verify", "--sglang", str(root), "PagedBackend"], out=out, err=err)
            assert code == 2 and out.getvalue() == "" and "cannot be read (a test)" in err.getvalue(), cores
