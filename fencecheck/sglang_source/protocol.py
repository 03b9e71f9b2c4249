"""The protocol facts of a tree, each from its code with file:line: which fence it has (``fence``), the barrier's
gate and settings (``fence.gate``), every runner's part (``graph_runners``, from ``runners``), and per platform the
barrier, the decode graph runner, its marker and the rule it then applies (``platforms``, from ``platform``).

The fence is

- ``declaration`` when the tree has the ``SharedReadEnds`` declaration fence (an ``AttentionBackend`` defining
  ``shared_read_ends``): the backends' declarations and reads are read and decided (``extract``);
- ``read_done_event`` when it has the barrier (``barrier.read_barriers``) without declarations: an older fence, whose
  runners publish a read-done event without asking the backend; its facts are reported, nothing is decided
  (``EXIT_OLDER_FENCE``);
- ``none`` when it has neither (``EXIT_NO_FENCE``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from fencecheck.vocab import Platform

from . import barrier as barrier_mod
from . import platform as platform_mod
from .runners import RunnerFacts, read_runners
from .tree import ClassInfo, Tree

DECLARATION, READ_DONE_EVENT, NO_FENCE = "declaration", "read_done_event", "none"
#: The decode graph runner a platform absent from ``capture_decode_graph``'s map takes (its default).
_DEFAULT = "default"


@dataclass
class Protocol:
    """The facts, with what the rest of the reader needs from them."""

    kind: str
    why: str
    barriers: list = field(default_factory=list)  # barrier.Barrier
    mailbox: str | None = None
    publisher_property: str | None = None
    writes: list = field(default_factory=list)  # barrier.MailboxWrite
    gate: dict | None = None
    runners: list[RunnerFacts] = field(default_factory=list)
    platforms: list[dict] = field(default_factory=list)
    marker: dict | None = None
    publishers: list[dict] = field(default_factory=list)  # older fence: the publisher property's definitions
    gate_node: object = None  # barrier.Gate: the assignment deciding whether the barrier applies
    marker_nodes: list = field(default_factory=list)  # (qualified name, def, file) creating the marker

    def runner(self, name: str) -> RunnerFacts | None:
        return next((r for r in self.runners if r.ci.name == name), None)

    def decode_runner(self) -> RunnerFacts | None:
        """The decode graph runner of the platforms that take the default of ``capture_decode_graph``'s map (CUDA)."""
        row = next((p for p in self.platforms if p["platform"] == Platform.CUDA.value), None)
        name = row["decode_graph_runner"]["class"] if row and row["decode_graph_runner"] else None
        return self.runner(name) if name else None

    def fallback_rule(self) -> str | None:
        """The resolution rule of the CUDA decode graph runner (``runners.Fallback.rule``), None when not read."""
        r = self.decode_runner()
        return r.fallback.rule if r is not None and r.fallback is not None else None

    def fence_json(self) -> dict:
        b = self.barriers
        return {"kind": self.kind, "why": self.why, "barrier": [x.to_json() for x in b],
                "mailbox": self.mailbox, "publisher_property": self.publisher_property,
                "mailbox_writes": [w.to_json() for w in self.writes], "gate": self.gate,
                "publishers": self.publishers}


def _has_declarations(tree: Tree) -> tuple[bool, str]:
    mods = tree.modules_containing("class AttentionBackend")
    for m in sorted(mods):
        mod = tree.module(m)
        ci = mod.classes.get("AttentionBackend") if mod else None
        if ci is not None and "shared_read_ends" in ci.methods:
            return True, f"{ci.name}.shared_read_ends ({ci.file}:{ci.methods['shared_read_ends'].lineno})"
    return False, ""


def _gate(tree: Tree, b, proto) -> dict | None:
    if b is None or b.enabled_attr is None:
        return None
    g = barrier_mod.barrier_gate(tree, b.enabled_attr)
    proto.gate_node = g
    if g is None:
        return {"attribute": b.enabled_attr, "file": None, "line": None, "expr": None, "settings": [],
                "platforms": [], "reason": f"no assignment of self.{b.enabled_attr} in sglang/srt"}
    names = platform_mod.setting_names(g.expr)
    coarse = []
    if b.fine_condition:
        coarse = platform_mod.setting_names(ast.parse(b.fine_condition, mode="eval").body)
    known = platform_mod.settings(tree, names + coarse)
    return {"attribute": g.attr, "file": g.file, "line": g.line, "expr": g.text,
            "settings": [known[n].to_json() for n in names],
            "coarse_settings": [known[n].to_json() for n in coarse],
            "platforms": platform_mod.per_platform(tree, g.module, g.expr, known)}


def _default_runners(tree: Tree, fn, mod) -> list[tuple[ClassInfo, str | None, str, int]]:
    """The runner classes ``capture_decode_graph``'s map falls back to: a ``defaultdict(default, {...})`` whose
    default is a class, or a method returning classes (each with the test leading to its ``return``)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "defaultdict" and node.args \
                and len(node.args) == 2 and isinstance(node.args[1], ast.Dict) and any(
                isinstance(v, (ast.Name, ast.Attribute)) and str(getattr(v, "id", getattr(v, "attr", ""))).endswith(
                    "Runner") for v in node.args[1].values):
            default = node.args[0]
            r = tree.resolve_expr(mod, default) if isinstance(default, (ast.Name, ast.Attribute)) else None
            if isinstance(r, ClassInfo):
                return [(r, None, mod.rel, node.lineno)]
            if isinstance(default, ast.Attribute):
                return _returned_classes(tree, default.attr)
    return []


def _returned_classes(tree: Tree, method: str) -> list[tuple[ClassInfo, str | None, str, int]]:
    out = []
    for m in tree.modules_containing(f"def {method}"):
        mod = tree.module(m)
        for ci in (mod.classes.values() if mod else ()):
            fn = ci.methods.get(method)
            if fn is None:
                continue
            local = {k: v[-1] for k, v in tree.local_imports(mod, fn.body).items()}
            conds: list[str] = []
            for s in fn.body:
                if isinstance(s, ast.If) and s.body and isinstance(s.body[-1], ast.Return):
                    r = _class_of(tree, mod, s.body[-1].value, local)
                    if r is not None:
                        out.append((r, ast.unparse(s.test), mod.rel, s.body[-1].lineno))
                    conds.append(ast.unparse(s.test))
                elif isinstance(s, ast.Return):
                    r = _class_of(tree, mod, s.value, local)
                    if r is not None:
                        out.append((r, None, mod.rel, s.lineno))
                    break
            if out:
                return out
    return out


def _class_of(tree, mod, e, local) -> ClassInfo | None:
    if isinstance(e, ast.Name):
        r = local.get(e.id) or tree.resolve(mod, e.id)
        return r if isinstance(r, ClassInfo) else None
    return None


def _platform_rows(tree: Tree, proto: Protocol) -> list[dict]:
    from .device import decode_graph_runner_map, device_runners

    preds = platform_mod.predicates(tree)
    mapped = device_runners(tree)
    hit = decode_graph_runner_map(tree)
    defaults = _default_runners(tree, hit[0], hit[1]) if hit is not None else []
    gate = {g["platform"]: g for g in (proto.gate or {}).get("platforms", [])}
    marker = proto.marker or {}
    rows = []
    for p in Platform:
        if p.value in mapped:
            ci, file, line = mapped[p.value]
            runner = {"class": ci.name, "file": ci.file, "line": ci.line, "via": f"{file}:{line}",
                      "condition": None}
            others = []
        elif defaults:
            ci, cond, vfile, line = next((d for d in defaults if d[1] is None), defaults[-1])
            runner = {"class": ci.name, "file": ci.file, "line": ci.line, "via": f"{vfile}:{line}", "condition": cond}
            others = [{"class": c.name, "file": c.file, "line": c.line, "condition": k, "via": f"{f}:{ln}"}
                      for c, k, f, ln in defaults if c is not ci]
        else:
            runner, others = None, []
        facts = proto.runner(runner["class"]) if runner else None
        inherits = facts is not None and marker.get("runner") and marker["runner"] in [c.name for c in
                                                                                         tree.mro(facts.ci)]
        mk = (marker.get("platforms") or {}).get(p.value) if inherits else None
        rows.append({
            "platform": p.value,
            "predicate": preds[p.value].to_json() if p.value in preds else None,
            "decode_graph_runner": runner, "other_decode_graph_runners": others,
            "runner_policy": facts.policy if facts is not None else None,
            "marker": mk["marker"] if mk else ("absent" if facts is not None else "unresolved"),
            "marker_absent_when": mk["absent_when"] if mk else [],
            "marker_why": mk["why"] if mk else (
                f"{facts.ci.name} does not plant {marker['attribute']}" if facts is not None and marker else
                "no runner resolves a declaration against an in-graph marker" if facts is not None else
                "no decode graph runner read for this platform"),
            "fallback": facts.fallback.to_json() if facts is not None and facts.fallback is not None else None,
            "barrier": {k: gate[p.value][k] for k in ("default", "on_when", "off_when")} if p.value in gate
            else None,
        })
    return rows


def read_protocol(tree: Tree) -> Protocol:
    """The protocol facts of ``tree``."""
    decl, decl_at = _has_declarations(tree)
    barriers = barrier_mod.read_barriers(tree)
    b = next((x for x in barriers if x.mailbox), None)
    if decl:
        kind, why = DECLARATION, f"the SharedReadEnds declaration fence: {decl_at}"
    elif b is not None:
        kind, why = READ_DONE_EVENT, (f"a barrier without declarations: {b.cls}.{barrier_mod.BARRIER} "
                                      f"({b.file}:{b.line}) waits on `{b.mailbox}` of the runner "
                                      f"`{b.publisher_property}` names; no AttentionBackend defines shared_read_ends")
    else:
        kind, why = NO_FENCE, ("no barrier (no _apply_war_barrier waiting on a read-done event in sglang/srt) and no "
                               "SharedReadEnds declaration (no AttentionBackend defining shared_read_ends)")
    proto = Protocol(kind, why, barriers, b.mailbox if b else None, b.publisher_property if b else None)
    if b is None:
        return proto
    proto.writes = barrier_mod.mailbox_writes(tree, b.mailbox)
    proto.gate = _gate(tree, b, proto)
    proto.runners = read_runners(tree, b.mailbox)
    fb = next((r for r in proto.runners if r.fallback is not None and r.fallback.marker), None)
    if fb is not None:
        owner = next(c for c in tree.mro(fb.ci) if f"{c.name}." in fb.fallback.function
                     and fb.fallback.function.startswith(c.name + "."))
        sites = platform_mod.marker_sites(tree, owner, fb.fallback.marker)
        for site in sites:
            cname, mname = site["function"].split(".")
            cls = next((c for c in tree.mro(owner) if c.name == cname), None)
            if cls is not None and mname in cls.methods:
                proto.marker_nodes.append((f"{cls.key}.{mname}", cls.methods[mname], cls.file))
            f = site["factory"]
            if f is not None:
                proto.marker_nodes.append((f["_fn"].key, f["_fn"].node, f["file"]))
        proto.marker = {"attribute": fb.fallback.marker, "runner": owner.name, "file": owner.file,
                        "line": owner.line, "sites": platform_mod.sites_json(sites),
                        "platforms": platform_mod.marker_per_platform(tree, sites)}
    proto.platforms = _platform_rows(tree, proto)
    if kind == READ_DONE_EVENT:
        proto.publishers = publisher_rows(tree, b.publisher_property)
    return proto


def publisher_rows(tree: Tree, prop: str | None) -> list[dict]:
    """Each definition of the publisher property ``prop``: its class and what each ``return`` returns."""
    out = []
    if not prop:
        return out
    for m in tree.modules_containing(f"def {prop}"):
        mod = tree.module(m)
        for ci in (mod.classes.values() if mod else ()):
            fn = ci.methods.get(prop)
            if fn is None:
                continue
            for n in ast.walk(fn):
                if isinstance(n, ast.Return) and n.value is not None:
                    out.append({"class": ci.name, "file": ci.file, "line": n.lineno,
                                "returns": ast.unparse(n.value)})
    return sorted(out, key=lambda r: (r["class"], r["file"], r["line"]))


def runners_json(proto: Protocol) -> list[dict]:
    """The ``graph_runners`` rows: every runner that resolves, publishes or clears, and every runner some platform's
    decode graph runner is."""
    decode = {p["decode_graph_runner"]["class"] for p in proto.platforms if p["decode_graph_runner"]}
    return [r.to_json() for r in proto.runners
            if r.ci.name in decode or any(e.kind in ("resolve", "publish", "clear") for e in r.events)]


def platforms_json(proto: Protocol) -> dict:
    return {"marker": proto.marker, "platforms": proto.platforms}
