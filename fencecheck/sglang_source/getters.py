"""Getter fields that hand out a scheduler-shared map, read from the tree: ``X.name()`` returns that map wherever it is
called, so its use there (indexed, passed to a call or a kernel, the receiver of a method call other than a shape
query) is a read of it, as a use of ``X.req_to_token`` is.

SGLang passes some maps to a component as a no-argument lambda in a constructing call (0.5.23's DSpark verify gets
``CommitInjectCtx(..., resolve_req_to_token=lambda: (self.model_runner.req_to_token_pool.req_to_token))``,
``dspark_worker_v2.py``, and reads it in the commit kernel's arguments inside the verify graph,
``dspark_verify.py``). A keyword name is a getter of a location when, in the tree given:
- some call passes ``name=lambda: E`` with ``E`` an attribute chain ending in the location (``....req_to_token``);
- every keyword ``name=`` of every call in the tree passes such a lambda of that same location;
- every field default ``name: T = V`` of the tree is such a lambda too, no ``X.name = ...`` sets the field, no
  function or method of the tree is named ``name``, and the name is not a method of Python's containers.

The receiver of the call is not typed (as for the pool methods, ``pool_reads``): the name alone tells the getter, and
the finding cites the lambda it comes from. ``getters`` is computed once per tree.
"""

from __future__ import annotations

import ast
import re
import weakref

from ..vocab import SHARED_LOCATIONS
from .attributes import _targets
from .pool_reads import _CONTAINER
from .tree import Tree

#: ``name=lambda: (a.b.c`` in a module's text: a keyword lambda and the attribute chain it returns (a candidate)
_LAMBDA_KW = re.compile(r"=lambda:\s*\(?\s*([A-Za-z_][\w.]*)")
_NAME_BEFORE = re.compile(r"(\w+)$")

_MEMO: "weakref.WeakKeyDictionary[Tree, dict[str, tuple[str, str, int]]]" = weakref.WeakKeyDictionary()


def _returned(value: ast.expr) -> str | None:
    """The location a no-argument lambda returns (its body an attribute chain ending in one), or None."""
    if not isinstance(value, ast.Lambda):
        return None
    a = value.args
    if a.args or a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg:
        return None
    body = value.body
    if isinstance(body, ast.Attribute) and body.attr in SHARED_LOCATIONS:
        return body.attr
    return None


def getters(tree: Tree) -> dict[str, tuple[str, str, int]]:
    """Keyword name -> (the location its lambdas return, the file and line of the first), for the tree's getter
    fields (see the module's docstring), sorted by name."""
    hit = _MEMO.get(tree)
    if hit is not None:
        return hit
    cands: set[str] = set()
    for mod in tree.modules_containing("=lambda:"):
        text = tree.text(mod)
        for m in _LAMBDA_KW.finditer(text):
            if m.group(1).rsplit(".", 1)[-1] in SHARED_LOCATIONS:
                name = _NAME_BEFORE.search(text, max(0, m.start() - 80), m.start())
                if name is not None and name.group(1) not in _CONTAINER:
                    cands.add(name.group(1))
    out: dict[str, tuple[str, str, int]] = {}
    for name in sorted(cands):
        locs, first = set(), None
        for mod in tree.modules_containing(f"{name}=", f"{name}: ", f"def {name}(", f".{name} ="):
            m = tree.module(mod)
            if m is None:
                locs.add(None)
                continue
            for node in tree.walk(m.tree):
                if isinstance(node, ast.keyword) and node.arg == name:
                    value = node.value
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                        and node.target.id == name and node.value is not None:
                    value = node.value  # a field's default
                elif (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name) or any(
                        isinstance(t, ast.Attribute) and t.attr == name for t in _targets(node)):
                    locs.add(None)  # a method of that name, or the field set
                    continue
                else:
                    continue
                loc = _returned(value)
                locs.add(loc)
                if loc is not None and first is None:
                    first = (m.rel, value.lineno)
        if len(locs) == 1 and None not in locs and first is not None:
            out[name] = (next(iter(locs)), *first)
    _MEMO[tree] = out
    return out
