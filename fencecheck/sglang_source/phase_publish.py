"""How a runner phase of a decode step publishes into its side's mailbox, read from the ``runners`` rows.

The runner's class is the class of the ``self`` attribute called (``self.cuda_graph_runner =
FrozenKVMTPCudaGraphRunner(self)``), or the runner classes the attribute can be built from (``self.x = cls(self)``
where ``cls`` comes from a per-device table or a selector naming classes in the same function: when they disagree,
the one that publishes). A model runner's ``forward`` (and a target worker's ``forward_batch_generation``) replays
the decode graph runner, unless the phase is on the draft side and the worker sets its model runner up without
decode graphs: then it runs eagerly under the eager runner's row.
"""

from __future__ import annotations

import ast

from .algorithm_records import Publish
from .records import Runner
from .step_walk import ENTRY, StepCall
from .tree import ClassInfo, Tree
from .worker_types import AttrTypes, last_local_imports

#: The reader's runner ``publish`` values as the scenario's ``PublishPolicy``.
POLICY = {"resolve": "resolve", "clear_then_resolve": "clear_then_resolve", "publish_unconditionally":
          "always_pre_replay", "prefill_publish": "prefill", "never": "never"}
#: The runner a model runner's ``forward`` replays for a decode-step mode, and the one it runs eagerly.
GRAPH_RUNNER, EAGER_RUNNER = "DecodeCudaGraphRunner", "EagerRunner"


def _no_decode_graphs(tree: Tree, ci: ClassInfo | None) -> str | None:
    """``file:line`` of an ``init_cuda_graphs(..., capture_decode_cuda_graph=False)`` call in a method of ``ci``'s
    MRO (the worker sets its model runner up without decode graphs), or None."""
    for c in (tree.mro(ci) if ci is not None else ()):
        for fn in c.methods.values():
            for n in tree.walk(fn):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "init_cuda_graphs" \
                        and any(k.arg == "capture_decode_cuda_graph" and isinstance(k.value, ast.Constant)
                                and k.value.value is False for k in n.keywords):
                    return f"{c.file}:{n.lineno}"
    return None


def _runner_candidates(tree: Tree, ci: ClassInfo, attr: str, runners: dict) -> list[Runner]:
    """The runner rows of the classes ``self.<attr> = f(...)`` can build in a method of ``ci``'s MRO: the runner
    classes named in ``f`` or in what the local names ``f`` uses were assigned (a table of classes per device, a
    selector's candidates), followed through the function's own assignments."""
    found: dict = {}
    for c in tree.mro(ci):
        for fn in c.methods.values():
            assigns: dict[str, list] = {}
            for n in tree.walk(fn):
                if isinstance(n, ast.Assign):
                    for t in n.targets:
                        if isinstance(t, ast.Name):
                            assigns.setdefault(t.id, []).append(n.value)
            local = None

            def collect(expr, seen, depth=0):
                nonlocal local
                for n in ast.walk(expr):
                    if not isinstance(n, ast.Name) or n.id in seen or depth > 6:
                        continue
                    seen.add(n.id)
                    if n.id in assigns:
                        for v in assigns[n.id]:
                            collect(v, seen, depth + 1)
                        continue
                    r = tree.resolve(c.module, n.id)
                    if r is None:
                        if local is None:
                            local = last_local_imports(tree, c.module, fn.body)
                        r = local.get(n.id)
                    if isinstance(r, ClassInfo) and (r.name, r.file) in runners:
                        found[(r.name, r.file)] = runners[(r.name, r.file)]

            for n in tree.walk(fn):
                if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and any(
                        isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
                        and t.value.id == "self" for t in n.targets):
                    collect(n.value.func, set())
    return [found[k] for k in sorted(found)]


def _row_text(row: Runner) -> str:
    return f"{row.cls}: publish {row.publish} ({row.method.file}:{row.method.line})"


class PhasePublish:
    """``PhasePublish(tree, types, runners)(call, side)``: how the runner call ``call`` on ``side`` publishes."""

    def __init__(self, tree: Tree, types: AttrTypes, runners: tuple[Runner, ...]):
        self.tree, self.types = tree, types
        self.runners = {(r.cls, r.file): r for r in runners}
        self.by_name = {r.cls: r for r in runners}

    def __call__(self, p: StepCall, side: str) -> Publish:
        """``policy`` None when the runner's class is not known statically."""
        k = self.types.raw(p.subject).get(p.attr) if p.subject is not None and p.attr else None
        row = self.runners.get((k.name, k.file)) if k is not None else None
        if row is not None:
            return Publish(POLICY[row.publish], "graph", _row_text(row))
        if k is None and p.subject is not None and p.attr:
            rows = _runner_candidates(self.tree, p.subject, p.attr, self.runners)
            policies = {r.publish for r in rows}
            publishing = policies - {"never"}
            if rows and len(publishing) <= 1:
                # candidates that disagree (one per device): the one that publishes, under which a later read races
                chosen = publishing.pop() if publishing else "never"
                return Publish(POLICY[chosen], "graph",
                               f"`self.{p.attr}` is built from one of " + ", ".join(_row_text(r) for r in rows)
                               + (f" (taken as {chosen}, the one that publishes)" if len(policies) > 1 else ""))
        model_runner = p.call.endswith("." + ENTRY) or (p.call.endswith(".forward") and k is None)
        if model_runner:
            eager = _no_decode_graphs(self.tree, p.subject) if side == "draft" else None
            if eager is not None:
                row = self.by_name.get(EAGER_RUNNER)
                return Publish(POLICY[row.publish] if row else "never", "eager",
                               f"the worker sets its model runner up without decode graphs ({eager}): the mode runs "
                               f"eagerly" + (f"; {_row_text(row)}" if row else ""))
            row = self.by_name.get(GRAPH_RUNNER)
            if row is not None:
                return Publish(POLICY[row.publish], "graph",
                               f"the model runner replays its decode graph runner; {_row_text(row)}")
        what = f"`{p.call}` ({p.file}:{p.line})"
        return Publish(None, "graph", f"the runner class of {what} is not known statically")


def may_publish(mode: str | None, pub: Publish) -> bool:
    """Whether a runner phase in ``mode`` publishing as ``pub`` can put an event into its mailbox in a decode step
    (the simulator decides whether it does: ``clear_then_resolve`` and ``resolve`` ask the backend)."""
    if pub.policy == "never" or (pub.policy == "prefill" and mode != "EXTEND"):
        return False
    return not (pub.execution == "eager" and pub.policy != "prefill")
