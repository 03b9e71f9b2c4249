"""Each fact of the vocabulary has one source.

No module restates a set of ``SharedReadEnds`` or ``ForwardMode`` members, and the model's integer encodings are the
vocabulary's own values."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fencecheck.vocab import REPRESENTATIVE, ForwardMode, ModeFamily, SharedReadEnds, family

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for folder in ("fencecheck", "model", "reference", "proofs", "gpu")
                 for p in (ROOT / folder).rglob("*.py") if p != ROOT / "fencecheck" / "vocab.py")
ENUMS = {"SharedReadEnds": {e.name for e in SharedReadEnds}, "ForwardMode": {m.name for m in ForwardMode}}


def _member(node: ast.expr) -> tuple[str, str] | None:
    """(enum, member) for ``Enum.MEMBER``, or for a string spelling a ``SharedReadEnds`` member's name."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ENUMS:
        return node.value.id, node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in ENUMS["SharedReadEnds"]:
        return "SharedReadEnds", node.value
    return None


def restated_sets(source: str, name: str = "<src>") -> list[str]:
    """Every literal collection of two or more members of one vocabulary enum (a restated set or order)."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else (
            node.keys if isinstance(node, ast.Dict) else None)
        if not elts or len(elts) < 2 or any(e is None for e in elts):
            continue
        members = [_member(e) for e in elts]
        if all(members) and len({m[0] for m in members}) == 1:
            found.append(f"{name}:{node.lineno}: {', '.join(m[1] for m in members)}")
    return found


def test_no_module_restates_a_vocabulary_set():
    bad = [hit for p in SOURCES for hit in restated_sets(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("copy", [
    'ENDS = ("PRE_REPLAY", "IN_REPLAY", "POST_REPLAY", "UNKNOWN")',
    "POINTS = (SharedReadEnds.PRE_REPLAY, SharedReadEnds.IN_REPLAY)",
    "if mode in (ForwardMode.DECODE, ForwardMode.TARGET_VERIFY): pass",
    "CLASS = {ForwardMode.DECODE: 0, ForwardMode.EXTEND: 3}",
])
def test_the_check_sees_a_copy(copy):
    assert restated_sets(copy)


def test_a_single_member_is_no_copy():
    assert not restated_sets("x = (SharedReadEnds.UNKNOWN, 3)\nif m == ForwardMode.EXTEND: pass")


def test_the_model_encodes_the_vocabulary_values():
    from fencecheck.model import symconfig as C
    from fencecheck.model.concrete import mode_class
    from fencecheck.model.counterexample import MODES

    assert (C.PRE, C.IN, C.POST, C.UNKNOWN) == tuple(int(e) for e in SharedReadEnds)
    assert (C.DECODE, C.VERIFY, C.OTHER, C.EXTEND) == tuple(int(f) for f in ModeFamily)
    assert C.MODE_CLASSES == len(ModeFamily)
    assert all(mode_class(m) == int(family(m)) for m in ForwardMode)
    assert MODES == {int(f): m for f, m in REPRESENTATIVE.items()}
    assert all(family(m) is f for f, m in REPRESENTATIVE.items())


def test_the_reader_orders_declarations_as_the_vocabulary_does():
    from fencecheck.sglang_source.declare import ENDS

    assert ENDS == tuple(e.name for e in SharedReadEnds)
