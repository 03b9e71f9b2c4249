"""The speculative algorithms of an SGLang tree and the worker class ``create_worker`` returns for each.

The algorithms are the members of ``SpeculativeAlgorithm`` (its ``is_*`` predicates evaluated per member with the
forward-mode evaluator of ``declare.Modes``); ``create_worker``'s ``if`` chain is followed per member: a test the
predicates decide picks its branch, any other test (a server setting) becomes the row's condition.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .declare import Modes, enum_members
from .tree import ClassInfo, Tree
from .worker_types import last_local_imports


class Algorithms(Modes):
    """``SpeculativeAlgorithm``'s members and its boolean ``is_*`` methods, evaluated per member (``Modes``'s
    evaluator over another enum)."""

    def __init__(self, ci: ClassInfo):  # noqa: super().__init__ looks up ForwardMode
        self.cls = ci
        self.members = enum_members(ci)[0]
        self._memo = {}


def registry(tree: Tree) -> Algorithms | None:
    """The tree's ``SpeculativeAlgorithm`` (the first by file defining ``create_worker``), or None."""
    cands = [c for c in tree.classes_named("SpeculativeAlgorithm") if "create_worker" in c.methods]
    return Algorithms(sorted(cands, key=lambda c: c.file)[0]) if cands else None


@dataclass(frozen=True)
class Dispatch:
    """One class ``create_worker`` returns for the member ``name``, under ``conditions``, at ``line``."""

    name: str
    conditions: tuple[str, ...]
    worker: ClassInfo
    line: int


def _residual(algos: Algorithms, test: ast.expr, member: str):
    """(value, texts): True/False when the predicates decide ``test`` for ``member``; else None and the texts of the
    parts they do not decide (the parts of an ``and`` that hold are dropped)."""
    v = algos._eval(test, member, {})
    if v is not None:
        return v, ()
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        rest = tuple(ast.unparse(x) for x in test.values if algos._eval(x, member, {}) is not True)
        return None, rest
    return None, (ast.unparse(test),)


def negated(text: str) -> str:
    """``not text``, parenthesised when ``text`` has spaces."""
    return f"not ({text})" if " " in text else f"not {text}"


def dispatch(tree: Tree, algos: Algorithms) -> tuple[list[Dispatch], dict[str, list[str]]]:
    """One row per (member, worker class) ``create_worker`` returns; and per member the returns that are no class of
    the tree."""
    owner = algos.cls
    fn = owner.methods["create_worker"]
    rows, notes = [], {}
    for m in algos.members:
        if algos.predicate("is_none", m) is True:
            continue
        notes[m] = []
        _dispatch_block(tree, algos, owner, list(fn.body), m, (), rows, notes[m])
    return rows, notes


def _dispatch_block(tree, algos, owner, stmts, m, conds, rows, notes) -> bool:
    """Appends ``m``'s rows of ``stmts``; True when every path returns."""
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Raise):
            return True
        if isinstance(s, ast.Return) and s.value is not None:
            r = last_local_imports(tree, owner.module, stmts[:i]).get(getattr(s.value, "id", None)) \
                if isinstance(s.value, ast.Name) else None
            if r is None and isinstance(s.value, ast.Name):
                r = tree.resolve(owner.module, s.value.id)
            if isinstance(r, ClassInfo):
                rows.append(Dispatch(m, conds, r, s.lineno))
            else:
                notes.append(f"create_worker returns `{ast.unparse(s.value)}` ({owner.file}:{s.lineno})"
                             + (f" when {' and '.join(conds)}" if conds else "")
                             + ": not a class of the tree (known only at run time)")
            return True
        if isinstance(s, ast.If):
            v, texts = _residual(algos, s.test, m)
            if v is True:
                if _dispatch_block(tree, algos, owner, list(s.body), m, conds, rows, notes):
                    return True
                continue
            if v is False:
                if _dispatch_block(tree, algos, owner, list(s.orelse), m, conds, rows, notes):
                    return True
                continue
            text = " and ".join(texts)
            n_rows = len(rows)
            body_ends = _dispatch_block(tree, algos, owner, list(s.body), m, conds + (text,), rows, notes)
            dynamic = len(rows) == n_rows  # the branch returned no class of the tree: not a condition of the rest
            rest = conds if dynamic else conds + (negated(text),)
            if _dispatch_block(tree, algos, owner, list(s.orelse), m, rest, rows, notes) and body_ends:
                return True
            if body_ends:
                conds = rest
    return False


