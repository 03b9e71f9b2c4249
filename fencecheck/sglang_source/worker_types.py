"""The classes of a worker's fields: ``self.x`` -> the class it is built from, read from the assignments on the
worker's MRO and, for a field handed in through ``__init__``, from every construction of the worker in the tree."""

from __future__ import annotations

import ast

from .tree import ClassInfo, Tree


def _called_name(func: ast.expr) -> str | None:
    """The name a call's callee ends in (``Cls`` of ``Cls(...)`` and ``mod.Cls(...)``): the last dotted part of its
    text where that is a name, which only a name or an attribute has."""
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def last_local_imports(tree: Tree, mod, stmts) -> dict:
    """name -> what the last function-local ``from X import Y`` in ``stmts`` binds it to (``Tree.local_imports``)."""
    return {k: v[-1] for k, v in tree.local_imports(mod, stmts).items()}


class AttrTypes:
    """``types(ci)``: ``self.x`` -> the class every ``self.x = Cls(...)`` (or ``Cls(...) if c else None``) of the
    lowest class on ``ci``'s MRO that assigns ``x`` names (when just one), plus properties returning such a field;
    runners, backends and target workers (an attribute named ``*target*``) are left out: their work is the runners'
    phases, not the worker's. ``raw(ci)`` keeps them (the runner classes a phase's publish behaviour is read from).

    A field assigned from a parameter of ``__init__`` (``self.x = x``) takes the class of the argument at every
    construction of the class in the tree (``Cls(..., x=self.y)`` or positionally, ``self.y`` a field of the
    constructing class, or ``Other(...)``), when all of them agree on one class."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self._raw: dict[ClassInfo, dict] = {}
        self._types: dict[ClassInfo, dict] = {}
        self._ctor: dict[ClassInfo, list] = {}

    def __call__(self, ci: ClassInfo) -> dict:
        if ci not in self._types:
            self._types[ci] = {a: k for a, k in self.raw(ci).items()
                                   if not k.name.endswith(("Runner", "Backend")) and "target" not in a}
        return self._types[ci]

    def _class_of_call(self, mod, fn, value, local) -> ClassInfo | None:
        r = self.tree.resolve_expr(mod, value.func)
        if r is None and isinstance(value.func, ast.Name):
            if local[0] is None:
                local[0] = last_local_imports(self.tree, mod, fn.body)
            r = local[0].get(value.func.id)
        return r if isinstance(r, ClassInfo) else None

    def raw(self, ci: ClassInfo) -> dict:
        if ci in self._raw:
            return self._raw[ci]
        self._raw[ci] = {}
        seen: dict[str, set] = {}
        props: dict[str, str] = {}
        for c in self.tree.mro(ci):
            own: dict[str, set] = {}
            for fn in c.methods.values():
                local = [None]
                params = [a.arg for a in fn.args.args[1:]] if fn.name == "__init__" else []
                kwonly = [a.arg for a in fn.args.kwonlyargs] if fn.name == "__init__" else []
                for node in self.tree.walk(fn):
                    if not isinstance(node, ast.Assign):
                        continue
                    value = node.value
                    if isinstance(value, ast.IfExp):  # ``Cls(...) if hosts else None``: Cls or nothing
                        sides = [x for x in (value.body, value.orelse)
                                 if not (isinstance(x, ast.Constant) and x.value is None)]
                        value = sides[0] if len(sides) == 1 else value
                    if isinstance(value, ast.Call):
                        k = self._class_of_call(c.module, fn, value, local)
                    elif isinstance(value, ast.Name) and value.id in params + kwonly:
                        k = self._from_constructions(c, value.id, params.index(value.id)
                                                     if value.id in params else None)
                    else:
                        continue
                    for t in node.targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            own.setdefault(t.attr, set()).add(k)
                body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                if any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list) and len(body) == 1 \
                        and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Attribute) \
                        and isinstance(body[0].value.value, ast.Name) and body[0].value.value.id == "self":
                    props.setdefault(fn.name, body[0].value.attr)
            for a, cs in own.items():  # the lowest class on the MRO that assigns a field decides its class
                seen.setdefault(a, cs)
        out = {}
        for a, cs in seen.items():
            if len(cs) == 1:
                (k,) = cs
                if k is not None:
                    out[a] = k
        for p, a in props.items():
            if a in out and p not in out:
                out[p] = out[a]
        self._raw[ci] = out
        return out

    def _constructions(self, ci: ClassInfo) -> list:
        """(constructing class, call) for each ``ci(...)`` in a method of a class under ``sglang/srt``."""
        if ci not in self._ctor:
            out = []
            for m in self.tree.modules_containing(ci.name + "(", under="sglang.srt"):
                mod = self.tree.module(m)
                for c in (mod.classes.values() if mod else ()):
                    for fn in c.methods.values():
                        local = [None]
                        for node in self.tree.walk(fn):
                            if isinstance(node, ast.Call) and _called_name(node.func) == ci.name \
                                    and self._class_of_call(c.module, fn, node, local) is ci:
                                out.append((c, node))
            self._ctor[ci] = out
        return self._ctor[ci]

    def _from_constructions(self, ci: ClassInfo, param: str, index: int | None) -> ClassInfo | None:
        found = set()
        for creator, call in self._constructions(ci):
            arg = next((k.value for k in call.keywords if k.arg == param), None)
            if arg is None and index is not None and index < len(call.args) \
                    and not any(isinstance(a, ast.Starred) for a in call.args[:index + 1]):
                arg = call.args[index]
            if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "self":
                found.add(self.raw(creator).get(arg.attr))
            elif isinstance(arg, ast.Call):
                found.add(self._class_of_call(creator.module, None, arg, [{}]))
            else:
                found.add(None)
        return found.pop() if len(found) == 1 else None
