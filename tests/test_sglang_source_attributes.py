"""Paths whose ``getattr`` tests no object of the tree can pass (``attributes.dead_path``), on a small tree.

Also a path's platform tests through attributes defined in ``__init__``, settled per platform (``on_platform``).

The pool sets its ReplaySSM flags together in ``__init__`` (0.5.23's ``MambaPool`` shape): the commit branch that
needs the fold flag without the KDA flag cannot run; the other branches can, and so can every branch once something
else assigns one of the flags."""

from __future__ import annotations

from pathlib import Path

from fencecheck.sglang_source.attributes import dead_path
from fencecheck.sglang_source.tree import Tree

POOL = '''import torch


class MambaPool:
    def __init__(self, size, cache_params, enable_linear_replayssm, enable_linear_replayssm_spec):
        self.replayssm_spec_fold = bool(enable_linear_replayssm_spec and cache_params.is_kda)
        _replayssm_on = enable_linear_replayssm or enable_linear_replayssm_spec
        with torch.device("cuda"):
            self.replayssm_is_kda = bool(_replayssm_on and cache_params.is_kda)
            self.replayssm_cache_base = (
                torch.zeros((size + 1,), dtype=torch.int32)
                if enable_linear_replayssm_spec and not self.replayssm_spec_fold
                else None
            )


class UnifiedPool:
    def __init__(self):
        self.replayssm_is_kda = False
        self.replayssm_spec_fold = False
        self.replayssm_cache_base = None
'''
FOLD_NOT_KDA = ("mamba_pool is not None", "getattr(mamba_pool, 'replayssm_spec_fold', False)",
                "not getattr(mamba_pool, 'replayssm_is_kda', False)")
BASE_NOT_KDA = ("mamba_pool is not None", "getattr(mamba_pool, 'replayssm_cache_base', None) is not None",
                "not getattr(mamba_pool, 'replayssm_is_kda', False)")
FOLD_KDA = ("getattr(mamba_pool, 'replayssm_spec_fold', False)", "getattr(mamba_pool, 'replayssm_is_kda', False)")


def _tree(tmp_path: Path, extra: str = "") -> Tree:
    root = tmp_path / "sglang"
    for rel, text in {"__init__.py": "", "srt/__init__.py": "", "srt/mem_cache/__init__.py": "",
                      "srt/mem_cache/memory_pool.py": POOL, "srt/user.py": extra}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return Tree(root)


def test_a_branch_no_pool_of_the_tree_takes_cannot_run_and_the_others_can(tmp_path):
    tree = _tree(tmp_path)
    why = dead_path(tree, FOLD_NOT_KDA)
    assert why.startswith("no object can pass its tests of mamba_pool: MambaPool.replayssm_spec_fold = "
                          "bool(enable_linear_replayssm_spec and cache_params.is_kda) "
                          "(sglang/srt/mem_cache/memory_pool.py:6)")
    assert "UnifiedPool.replayssm_spec_fold = False" in why
    assert dead_path(tree, BASE_NOT_KDA) is None  # a GDN pool with the spec flag
    assert dead_path(tree, FOLD_KDA) is None  # a KDA pool with the spec flag
    assert dead_path(tree, ("getattr(mamba_pool, 'replayssm_spec_fold', False)",)) is None  # one test alone


def test_an_assignment_elsewhere_or_a_later_one_leaves_the_path_as_it_is(tmp_path):
    assert dead_path(_tree(tmp_path / "a", "def force(pool):\n    pool.replayssm_spec_fold = True\n"),
                     FOLD_NOT_KDA) is None
    later = POOL.replace("        self.replayssm_cache_base = None\n",
                         "        self.replayssm_cache_base = None\n\n    def enable(self):\n"
                         "        self.replayssm_spec_fold = True\n")
    root = tmp_path / "b"
    _tree(root)
    (root / "sglang/srt/mem_cache/memory_pool.py").write_text(later, encoding="utf-8")
    assert dead_path(Tree(root / "sglang"), FOLD_NOT_KDA) is None


BACKEND = '''from sglang.srt.utils import is_npu


class Backend:
    def __init__(self, runner):
        self.is_npu = is_npu()
        self.gather = runner.gather

    def late(self):
        self.gather = False
'''


def test_a_platform_test_through_an_attribute_defined_in_init_is_settled_per_platform(tmp_path):
    """``not self.is_npu`` with ``self.is_npu = is_npu()`` the only assignment holds on CUDA and is false on NPU; an
    attribute assigned again outside ``__init__`` (``self.gather``) stays a condition on every platform."""
    from fencecheck.sglang_source.attributes import on_platform

    root = tmp_path / "sglang"
    for rel, text in {"__init__.py": "", "srt/__init__.py": "", "srt/utils.py": "def is_npu():\n    return False\n",
                      "srt/layers/__init__.py": "", "srt/layers/backend.py": BACKEND}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    tree = Tree(root)
    ci = tree.module("sglang.srt.layers.backend").classes["Backend"]
    conds = ("not self.is_npu and self.gather", "x > 1")
    assert on_platform(tree, ci, conds, "cuda") == ("self.gather", "x > 1")
    assert on_platform(tree, ci, conds, "npu") is None
    assert on_platform(tree, ci, ("self.is_npu or self.gather",), "cuda") == ("self.is_npu or self.gather",)
    assert on_platform(tree, ci, ("self.is_npu or self.gather",), "npu") == ()
