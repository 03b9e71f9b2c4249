"""What a step does with the fence, beyond the phases ``algorithms`` lists: the step without speculation (the model
runner's own runners), each speculative algorithm's execution alternatives (a graph replay or its eager fallback, and
the test that picks the eager one), its publisher per condition, and every clear of a mailbox on its way.

The model runner's runners are the runner classes constructed with the model runner in the module of
``capture_decode_graph`` (``EagerRunner(model_runner)``, ``PrefillCudaGraphRunner(model_runner)``), each told by its
facts: a runner that replays no graph runs eagerly; one that replays publishes by the prefill rule is the prefill graph
runner; the decode graph runner is the platform's (``protocol.platforms``). A runner built on a given model runner publishes into that model
runner's mailbox: its constructions and the assignments swapping it into a model runner are listed (``bindings``).
A phase's alternatives are two runner
phases of one side and mode whose conditions differ in one test, true for the graph replay and false for the eager
run (``can_run_decode_cuda_graph``).
"""

from __future__ import annotations

import ast

from .barrier import _functions as module_functions
from .tree import Tree


def model_runner_runners(tree: Tree, proto) -> list[dict]:
    """The runners constructed with the model runner where the decode graph runner is chosen, with their role."""
    from .device import decode_graph_runner_map

    hit = decode_graph_runner_map(tree)
    if hit is None:
        return []
    mod = hit[1]
    facts = {r.ci.name: r for r in proto.runners}
    out = []
    for fn in mod.tree.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for n in ast.walk(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in facts and n.args \
                    and isinstance(n.args[0], ast.Name) and n.args[0].id == "model_runner":
                r = facts[n.func.id]
                kinds = {e.kind for e in r.events}
                role = "eager" if "replay" not in kinds else (
                    "prefill_graph" if r.policy == "prefill_publish" else "graph")
                out.append({"class": r.ci.name, "role": role, "policy": r.policy, "function": fn.name,
                            "file": mod.rel, "line": n.lineno})
    return sorted(out, key=lambda x: (x["file"], x["line"]))


def _literal(text: str) -> tuple[str, bool]:
    """(atom, polarity) of a condition literal: ``not (x)`` and ``not x`` are ``x`` negated, recursively."""
    pol = True
    while True:
        if text.startswith("not (") and text.endswith(")") and _balanced(text[5:-1]):
            text, pol = text[5:-1], not pol
        elif text.startswith("not ") and " " not in text[4:]:
            text, pol = text[4:], not pol
        else:
            return text, pol


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


def alternatives(phases: list[dict]) -> list[dict]:
    """Pairs of runner phases (same side and mode) that are a graph replay and its eager fallback: the test that is
    true for the replay and false for the eager run."""
    runs = [p for p in phases if p["kind"] == "runner" and p.get("publish")]
    out, seen = [], set()
    for g in runs:
        if g["publish"]["execution"] != "graph":
            continue
        lg = {_literal(c) for c in g.get("conditions", ())}
        for e in runs:
            if e["publish"]["execution"] != "eager" or e["side"] != g["side"] or e["mode"] != g["mode"]:
                continue
            le = {_literal(c) for c in e.get("conditions", ())}
            diff_g, diff_e = lg - le, le - lg
            if len(diff_g) == 1 and len(diff_e) == 1:
                (ag, pg), (ae, pe) = next(iter(diff_g)), next(iter(diff_e))
                if ag == ae and pg != pe and (g["line"], e["line"]) not in seen:
                    seen.add((g["line"], e["line"]))
                    test = ag if pg else f"not ({ag})"
                    out.append({"side": g["side"], "mode": g["mode"], "graph_when": test,
                                "graph": {k: g[k] for k in ("call", "file", "line")} | {"policy": g["publish"]["policy"]},
                                "eager": {k: e[k] for k in ("call", "file", "line")} | {"policy": e["publish"]["policy"]}})
    return out


def bindings(tree: Tree, proto) -> dict:
    """Which model runner's mailbox a runner built on a given model runner publishes into: each construction of such
    a runner class under ``sglang/srt/speculative`` with its model runner argument, and each assignment that swaps a
    runner into a model runner's decode graph runner slot (``self.model_runner.decode_cuda_graph_runner = ...``)."""
    given = {r.ci.name for r in proto.runners if r.binds and r.binds["side"] == "given"
             and any(e.kind == "publish" for e in r.events)}
    built, swaps = [], []
    for m in tree.modules_containing("Runner", under="sglang.srt.speculative"):
        mod = tree.module(m)
        for cls, fn in (module_functions(mod) if mod else ()):
            for n in tree.walk(fn):
                if isinstance(n, ast.Call) and n.args and _name(n.func) in given:
                    built.append({"runner": _name(n.func), "model_runner": ast.unparse(n.args[0]),
                                  "function": f"{cls}.{fn.name}" if cls else fn.name, "file": mod.rel,
                                  "line": n.lineno})
                if isinstance(n, ast.Assign):
                    for t in n.targets:
                        if isinstance(t, ast.Attribute) and t.attr == "decode_cuda_graph_runner":
                            swaps.append({"model_runner": ast.unparse(t.value), "runner": ast.unparse(n.value),
                                          "function": f"{cls}.{fn.name}" if cls else fn.name, "file": mod.rel,
                                          "line": n.lineno})
    key = lambda x: (x["file"], x["line"])  # noqa: E731
    return {"constructions": sorted(built, key=key), "swaps": sorted(swaps, key=key)}


def _name(f) -> str:
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def step_facts(tree: Tree, proto, algorithms: list[dict], modes=None) -> dict:
    """``{"model_runner": [...], "bindings": {...}, "algorithms": [{name, condition, alternatives, publisher,
    clears}], "prefill_gates": {...} or None}`` (``modes``: the tree's ``declare.Modes``, read when not given)."""
    facts = {r.ci.name: r for r in proto.runners}
    algos = []
    for a in algorithms:
        clears = []
        for p in a["phases"]:
            if p["kind"] != "runner" or not p.get("publish"):
                continue
            for r in _runner_classes(p, facts):
                for e in r.events:
                    if e.kind == "clear":
                        clears.append({"phase": p["call"], "mode": p["mode"], "side": p["side"], "runner": r.ci.name,
                                       "file": e.file, "line": e.line, "what": e.what})
        worker = a["worker"]["class"] if a["worker"] else None
        mro = {c.name for c in _mro_of(tree, a["worker"])} if a["worker"] else set()
        for w in proto.writes:
            if w.clears and w.cls in mro:
                clears.append({"phase": None, "mode": None, "side": None, "runner": None, "worker": worker,
                               "file": w.file, "line": w.line, "what": f"{w.target} = None"})
        algos.append({"name": a["name"], "condition": a["condition"], "worker": worker,
                      "alternatives": alternatives(a["phases"]),
                      "publisher": [{"side": x["side"], "publisher": x["publisher"], "condition": x["condition"],
                                     "file": x["file"], "line": x["line"]} for x in a["publisher"]],
                      "clears": sorted(clears, key=lambda c: (c["file"], c["line"]))})
    from .backend_reader import _root_backend
    from .prefill_gates import prefill_gates

    if modes is None:
        from .declare import Modes

        modes = Modes(tree)
    return {"model_runner": model_runner_runners(tree, proto), "bindings": bindings(tree, proto), "algorithms": algos,
            "prefill_gates": prefill_gates(tree, proto, _root_backend(tree), modes)}


def _runner_classes(p, facts) -> list:
    """The runner facts a phase's publish behaviour was read from (the classes its ``why`` names)."""
    why = p["publish"]["why"] or ""
    return [r for name, r in facts.items() if f"{name}: publish" in why]


def _mro_of(tree: Tree, w) -> list:
    mod = tree.module(".".join(w["file"][:-3].split("/")).removesuffix(".__init__"))
    ci = mod.classes.get(w["class"]) if mod else None
    return tree.mro(ci) if ci is not None else []
