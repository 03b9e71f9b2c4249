"""Per platform, what the tree's code gives the fence there: whether the barrier is on (the gate's expression
evaluated per platform, with each setting it names at its default and flipped), which decode graph runner replays
(``capture_decode_graph``'s per-device map; every other platform takes the CUDA runner) and whether that runner's
graphs have the in-graph marker (the conditions under which the function creating the marker returns None).

A platform is one of ``vocab.Platform``; the tree's predicate of it is its module-level function ``is_<platform>``
(``is_cuda``, ``is_hip``, ...). They are taken to hold one at a time: on platform P, ``is_P()`` is true and every other
platform's predicate false (each tests its own PyTorch build: ``torch.version.cuda``, ``torch.version.hip``, ...;
their definitions are cited). A function that only combines them (``is_cuda_alike``: ``return is_cuda() or
is_hip()``) is evaluated through its body. A setting is ``envs.NAME.get()`` with its default read from the tree's
``Envs`` class (``NAME = EnvBool(False)``); any other test is not known statically and leaves the value unresolved.

The marker: the runner attribute its resolver tests (``runners.Fallback.marker``) is assigned from a call in a
method of the runner's MRO (``self.in_graph_metadata_prep_done = make_external_event(...)``); the guards of that
method before the assignment (``if not ...is_current_stream_capturing(): return``) say when it is created at all,
and the called function's ``if T: return None`` branches and ``except E: return None`` handlers when it is None.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from fencecheck.vocab import Platform

from .tree import ClassInfo, FuncInfo, Tree

MAX_DEPTH = 4


@dataclass(frozen=True)
class Predicate:
    platform: str
    function: str
    file: str
    line: int

    def to_json(self) -> dict:
        return {"platform": self.platform, "function": self.function, "file": self.file, "line": self.line}


def predicates(tree: Tree) -> dict[str, Predicate]:
    """platform -> the tree's ``is_<platform>`` (the first module under ``sglang/srt/utils`` defining it, else
    anywhere in ``sglang/srt``)."""
    out: dict[str, Predicate] = {}
    mods = sorted(tree.modules_containing("def is_cuda("), key=lambda m: ("/utils/" not in tree.rel(m), m))
    for m in mods:
        mod = tree.module(m)
        if mod is None or "/srt/" not in mod.rel:
            continue
        for p in Platform:
            fi = mod.functions.get(f"is_{p.value}")
            if fi is not None and p.value not in out:
                out[p.value] = Predicate(p.value, f"is_{p.value}", mod.rel, fi.node.lineno)
    return out


@dataclass(frozen=True)
class Setting:
    name: str
    default: bool | None
    file: str | None
    line: int | None

    def to_json(self) -> dict:
        return {"name": self.name, "default": self.default, "file": self.file, "line": self.line}


def settings(tree: Tree, names) -> dict[str, Setting]:
    """The default of each ``envs.NAME`` of ``names``: ``NAME = EnvBool(<constant>)`` in the tree's ``Envs`` class."""
    want = set(names)
    out = {n: Setting(n, None, None, None) for n in want}
    if not want:
        return out
    for m in tree.modules_containing("class Envs"):
        mod = tree.module(m)
        ci = mod.classes.get("Envs") if mod else None
        if ci is None:
            continue
        for node in ci.node.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and node.targets[0].id in want and isinstance(node.value, ast.Call) and node.value.args:
                arg = node.value.args[0]
                default = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, bool) else None
                out[node.targets[0].id] = Setting(node.targets[0].id, default, mod.rel, node.lineno)
    return out


def _setting_of(e) -> str | None:
    """``NAME`` of ``envs.NAME.get()``."""
    if isinstance(e, ast.Call) and not e.args and isinstance(e.func, ast.Attribute) and e.func.attr == "get" \
            and isinstance(e.func.value, ast.Attribute) and isinstance(e.func.value.value, ast.Name) \
            and e.func.value.value.id == "envs":
        return e.func.value.attr
    return None


def setting_names(e: ast.expr) -> list[str]:
    return sorted({n for n in (_setting_of(x) for x in ast.walk(e)) if n})


class Evaluator:
    """Three-valued evaluation of a test on one platform under given setting values (None: not known)."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self.names = {f"is_{p.value}": p.value for p in Platform}

    def value(self, mod, e: ast.expr, platform: str, values: dict, depth: int = 0) -> bool | None:
        if isinstance(e, ast.Constant) and isinstance(e.value, bool):
            return e.value
        if isinstance(e, ast.BoolOp):
            vals = [self.value(mod, v, platform, values, depth) for v in e.values]
            if isinstance(e.op, ast.And):
                return False if False in vals else (True if all(v is True for v in vals) else None)
            return True if True in vals else (False if all(v is False for v in vals) else None)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            v = self.value(mod, e.operand, platform, values, depth)
            return None if v is None else not v
        name = _setting_of(e)
        if name is not None:
            return values.get(name)
        if isinstance(e, ast.Call) and not e.args and not e.keywords:
            last = e.func.attr if isinstance(e.func, ast.Attribute) else getattr(e.func, "id", None)
            if last in self.names:  # a platform's predicate (resolved or through a star import: the tree's own)
                return self.names[last] == platform
            fn = self._function(mod, e.func)
            if fn is not None:
                if fn.name in self.names:
                    return self.names[fn.name] == platform
                body = [s for s in fn.node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                if depth < MAX_DEPTH and len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value:
                    return self.value(fn.module, body[0].value, platform, values, depth + 1)
        return None

    def _function(self, mod, func) -> FuncInfo | None:
        r = self.tree.resolve_expr(mod, func) if isinstance(func, (ast.Name, ast.Attribute)) else None
        return r if isinstance(r, FuncInfo) else None


def per_platform(tree: Tree, mod, expr: ast.expr, known: dict[str, Setting]) -> list[dict]:
    """Per platform: the value of ``expr`` with its settings at their defaults (``default``: True, False or None),
    and the settings that, set to the other value alone, turn it on (``on_when``) or off (``off_when``)."""
    ev = Evaluator(tree)
    names = setting_names(expr)
    defaults = {n: known[n].default for n in names if n in known}
    out = []
    for p in Platform:
        base = ev.value(mod, expr, p.value, defaults)
        on, off = [], []
        for n in names:
            d = defaults.get(n)
            for flip in ((not d,) if d is not None else (True, False)):
                v = ev.value(mod, expr, p.value, {**defaults, n: flip})
                if v is True and base is not True:
                    on.append({"setting": n, "value": flip})
                if v is False and base is not False:
                    off.append({"setting": n, "value": flip})
        out.append({"platform": p.value, "default": base, "on_when": on, "off_when": off})
    return out


# --- the marker -------------------------------------------------------------------------------------------------------
def _early_returns(fn, line: int) -> list[dict]:
    """The tests of ``if T: return`` at the top of ``fn`` before ``line``: the creation needs each false."""
    out = []
    for s in fn.body:
        if getattr(s, "lineno", 0) >= line:
            break
        if isinstance(s, ast.If) and s.body and isinstance(s.body[-1], ast.Return) and not s.orelse:
            out.append({"test": ast.unparse(s.test), "line": s.lineno})
    return out


def _none_when(fn) -> list[dict]:
    """When the factory ``fn`` returns None: ``if T: return None`` (``test``) and ``try: ... except E: return None``
    (``raises``, with the call tried)."""
    out = []
    for s in ast.walk(fn):
        if isinstance(s, ast.If) and s.body and isinstance(s.body[-1], ast.Return) \
                and (s.body[-1].value is None or (isinstance(s.body[-1].value, ast.Constant)
                                                  and s.body[-1].value.value is None)):
            out.append({"test": ast.unparse(s.test), "line": s.lineno})
        if isinstance(s, ast.Try):
            tried = next((ast.unparse(x.func) + "(" + ", ".join(ast.unparse(a) for a in x.args)
                          + "".join(f", {k.arg}={ast.unparse(k.value)}" if x.args else f"{k.arg}={ast.unparse(k.value)}"
                                    for k in x.keywords) + ")"
                          for b in s.body for x in ast.walk(b) if isinstance(x, ast.Call)), None)
            for h in s.handlers:
                if h.body and isinstance(h.body[-1], ast.Return) and (
                        h.body[-1].value is None or (isinstance(h.body[-1].value, ast.Constant)
                                                     and h.body[-1].value.value is None)):
                    out.append({"raises": ast.unparse(h.type) if h.type is not None else "any exception",
                                "call": tried, "line": h.lineno})
    return out


def marker_sites(tree: Tree, ci: ClassInfo, attr: str) -> list[dict]:
    """Each assignment of ``self.<attr>`` from a call in a method of ``ci``'s MRO: the method, its guards, the
    factory called and when it returns None."""
    out = []
    for c in tree.mro(ci):
        for fn in c.methods.values():
            for n in ast.walk(fn):
                if not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and any(
                        isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
                        and t.value.id == "self" for t in n.targets)):
                    continue
                factory = None
                r = tree.resolve_expr(c.module, n.value.func) if isinstance(n.value.func, (ast.Name, ast.Attribute)) \
                    else None
                if isinstance(r, FuncInfo):
                    factory = {"function": r.name, "file": r.module.rel, "line": r.node.lineno,
                               "none_when": _none_when(r.node), "_fn": r}
                out.append({"function": f"{c.name}.{fn.name}", "file": c.file, "line": n.lineno,
                            "call": ast.unparse(n.value.func), "guards": _early_returns(fn, n.lineno),
                            "factory": factory})
    return out


def marker_per_platform(tree: Tree, sites: list[dict]) -> dict[str, dict]:
    """platform -> {``marker``: ``present`` / ``absent`` / ``unresolved``, ``why``}: absent when a factory's
    None-test holds there, present when none does (but for the exceptions and guards, quoted), else unresolved."""
    ev = Evaluator(tree)
    out = {}
    for p in Platform:
        verdicts, absent_when = [], []
        for s in sites:
            f = s["factory"]
            if f is None:
                verdicts.append(("unresolved", f"`{s['call']}` ({s['file']}:{s['line']}) is no function of the tree"))
                continue
            fn = f["_fn"]
            tests = [w for w in f["none_when"] if "test" in w]
            vals = [ev.value(fn.module, ast.parse(w["test"], mode="eval").body, p.value, {}) for w in tests]
            hit = next((w for w, v in zip(tests, vals) if v is True), None)
            if hit is not None:
                verdicts.append(("absent", f"{f['function']} returns None when {hit['test']} "
                                           f"({f['file']}:{hit['line']})"))
            elif all(v is False for v in vals):
                unless = [f"{w['call']} raises {w['raises']}" for w in f["none_when"] if "raises" in w]
                guards = [f"{g['test']} ({s['file']}:{g['line']})" for g in s["guards"]]
                raises_at = [f"{f['file']}:{w['line']}" for w in f["none_when"] if "raises" in w]
                verdicts.append(("present", f"{f['function']} ({f['file']}:{f['line']}) returns an event"
                                 + "".join(f" unless {u} ({a})" for u, a in zip(unless, raises_at))
                                 + (f"; created only when not {' or '.join(guards)}" if guards else "")))
                absent_when.extend(unless)
            else:
                w = next(w for w, v in zip(tests, vals) if v is None)
                verdicts.append(("unresolved", f"{f['function']} returns None when {w['test']} "
                                               f"({f['file']}:{w['line']}), not known statically on {p.value}"))
        kinds = {k for k, _ in verdicts}
        kind = "absent" if not verdicts else (kinds.pop() if len(kinds) == 1 else "unresolved")
        out[p.value] = {"marker": kind, "why": "; ".join(w for _, w in verdicts) or "nothing creates a marker",
                        "absent_when": absent_when if kind == "present" else []}
    return out


def sites_json(sites: list[dict]) -> list[dict]:
    return [{**s, "factory": None if s["factory"] is None else {k: v for k, v in s["factory"].items()
                                                                  if not k.startswith("_")}} for s in sites]
