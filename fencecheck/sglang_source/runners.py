"""Each runner's part in the fence, read from its code: where it asks the backend (``resolve``), the rule it applies
when its graph has no in-graph marker (``fallback``), where it puts the read-done event into the mailbox (before the
replay, the in-graph marker, after the replay), where it clears the mailbox, and whose model runner it publishes into.

A runner is a ``*Runner`` class with an ``execute`` or ``replay`` method (the one defined lowest on its MRO). Its entry
method is followed through ``self`` methods on its MRO and module-level helpers (resolved through imports) to
``MAX_DEPTH`` calls, in statement order. On the way:

- a **publish** is an assignment of the mailbox attribute (``barrier.Barrier.mailbox``) with a value, by any means:
  a helper, a direct assignment, an event created and recorded in place. Its ``event`` is ``marker`` when the value
  is an attribute of the runner (the in-graph marker, recorded inside the graph: no new record), else ``fresh`` (an
  event recorded out of graph where it is assigned);
- a **clear** is an assignment of ``None`` to it;
- a **resolve** is a call of a method whose name ends in ``shared_read_ends`` (the backend's declaration, the
  runner's own resolver, the prefill resolution);
- the **replay** is a call of ``replay`` (or ``replay_with_...``) on the runner's graph backend or on a captured
  graph (``self.backend.replay(...)``, ``self.graphs[key].replay()``);
  each event is ``before_replay`` or ``after_replay`` by its place on the call chain against it (``in_graph_marker``
  for a marker handed over after the launch). A runner with no such call (the eager runner) places events against its
  model forward (``before_forward``, ``after_forward``) when it has one.

A test on the way stays the event's condition (``if shared_read_ends is SharedReadEnds.PRE_REPLAY``), and a test of a
SharedReadEnds member is also read as the set of resolved ends it holds for (``ends``); a helper's parameter bound to a
constant at the call (``_publish_read_done(in_graph=True)``) decides that helper's tests of it. An early ``return``
before an event makes its negation a condition.

The **fallback** is read from the resolver a runner calls (a ``self`` method whose name says ``resolve`` and that asks
``shared_read_ends``): the ``SharedReadEnds`` member it returns under a test that the declaration is ``IN_REPLAY`` and
a runner attribute (the marker) is ``None``. ``PRE_REPLAY`` there is ``ResolutionRule.declaration_only``,
``POST_REPLAY`` ``declaration_only_post_fallback``; anything else is unresolved with its reason.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

from fencecheck.vocab import NO_MARKER_FALLBACK, SharedReadEnds

from .records import Runner, RunnerEvent, RunnerMethod
from .step_walk import calls_postorder as _calls_postorder
from .tree import ClassInfo, FuncInfo, Tree

MAX_DEPTH = 4
ENTRIES = ("execute", "replay")
#: The fallback's end as the resolution rule it makes.
RULE_OF_FALLBACK = {end.name: rule.value for rule, end in NO_MARKER_FALLBACK.items()}
_ENDS = tuple(e.name for e in SharedReadEnds)


@dataclass(frozen=True)
class Event:
    """One thing a runner's entry does to the fence, in call-chain order."""

    kind: str  # resolve / publish / clear / replay / forward
    file: str
    line: int
    function: str  # where it happens: ``Class.method`` or ``module.function``
    chain: tuple  # ((function key, line of the call or event), ...) from the entry down
    conditions: tuple[str, ...] = ()
    ends: tuple[str, ...] | None = None  # resolved ends the conditions hold for (None: any)
    what: str = ""  # the call or assignment
    event: str | None = None  # publish: ``fresh`` / ``marker``
    marker: str | None = None  # publish of a marker: its attribute
    after_replay: bool | None = False  # the replay ran before it on its path (None: on some paths)
    after_forward: bool | None = False  # the model forward did (a runner without a graph)


@dataclass(frozen=True)
class Fallback:
    rule: str | None  # a ResolutionRule value, None when not read
    end: str | None
    marker: str | None  # the runner attribute tested ``is None``
    condition: str | None
    function: str
    file: str
    line: int
    reason: str | None = None

    def to_json(self) -> dict:
        return {"rule": self.rule or "unresolved", "end": self.end, "marker": self.marker,
                "condition": self.condition, "function": self.function, "file": self.file, "line": self.line,
                **({"reason": self.reason} if self.reason else {})}


def _chain_before(a: tuple, b: tuple) -> bool | None:
    """Whether the event at chain ``a`` comes before the one at ``b`` (None: they part nowhere)."""
    for (k1, l1), (k2, l2) in zip(a, b):
        if k1 != k2:
            return None
        if l1 != l2:
            return l1 < l2
    return None


def _ends_of(test: ast.expr) -> set[str] | None:
    """The SharedReadEnds members ``test`` holds for when it tests a local against members (the local holds a resolved
    end); None when it is no such test."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _ends_of(test.operand)
        return None if inner is None else set(_ENDS) - inner
    if isinstance(test, ast.BoolOp):
        parts = [_ends_of(v) for v in test.values]
        if any(p is None for p in parts):
            return None
        out = set(parts[0])
        for p in parts[1:]:
            out = out & p if isinstance(test.op, ast.And) else out | p
        return out
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name):
        op, right = test.ops[0], test.comparators[0]
        members = [_member(x) for x in (right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right])]
        if any(m is None for m in members):
            return None
        if isinstance(op, (ast.Is, ast.Eq, ast.In)):
            return set(members)
        if isinstance(op, (ast.IsNot, ast.NotEq, ast.NotIn)):
            return set(_ENDS) - set(members)
    return None


@functools.cache
def _ends_of_text(text: str) -> frozenset | None:
    try:
        e = _ends_of(ast.parse(text, mode="eval").body)
    except SyntaxError:  # pragma: no cover - the texts are unparsed tests
        return None
    return None if e is None else frozenset(e)


def _member(e) -> str | None:
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "SharedReadEnds" \
            and e.attr in _ENDS:
        return e.attr
    return None


@dataclass(frozen=True)
class _State:
    conds: tuple[str, ...]
    replay: bool | None  # the replay ran on this path (None: on some paths to here)
    forward: bool | None  # the model forward ran (a runner without a graph)

    def extend(self, text: str) -> _State:
        return _State(self.conds + (text,), self.replay, self.forward)


def _join(flags) -> bool | None:
    flags = set(flags)
    return flags.pop() if len(flags) == 1 else None


def _neg(text: str) -> str:
    return f"not ({text})" if " " in text else f"not {text}"


class _Walker:
    """The events of one runner's entry method, walked path by path in statement order. A path's state is its
    conditions and whether the replay (and the model forward) already ran on it (True, False, or None when only some
    paths to here ran it)."""

    def __init__(self, tree: Tree, ci: ClassInfo, mailbox: str):
        self.tree, self.ci, self.mailbox = tree, ci, mailbox
        self.events: list[Event] = []
        self.functions: dict[str, tuple] = {}  # key -> (def, file): what the events were read from

    def run(self, owner: ClassInfo, fn) -> list[Event]:
        self.fn(owner, fn, owner.module, {}, _State((), False, False), (), 0, ())
        return self.events

    def fn(self, owner, node, module, consts, state, chain, depth, stack):
        """Walks one function; returns the state after it (the flags of every way out, the caller's conditions)."""
        key = f"{owner.key}.{node.name}" if owner is not None else f"{module.name}.{node.name}"
        if key in stack or depth > MAX_DEPTH:
            return state
        self.functions[key] = (node, module.rel)
        ctx = {"owner": owner, "module": module, "key": key, "consts": consts, "chain": chain, "depth": depth,
               "stack": stack + (key,), "exits": [],
               "label": f"{owner.name}.{node.name}" if owner is not None else f"{module.name.rsplit('.', 1)[-1]}."
                                                                              f"{node.name}"}
        out = self.block(node.body, state, ctx)
        ways = ctx["exits"] + ([out] if out is not None else [])
        return _State(state.conds, _join(w.replay for w in ways) if ways else state.replay,
                      _join(w.forward for w in ways) if ways else state.forward)

    def block(self, stmts, state, ctx):
        """Walks ``stmts`` from ``state``; the state at their end, or None when every path through them ends."""
        for s in stmts:
            state = self.stmt(s, state, ctx)
            if state is None:
                return None
        return state

    def _decided(self, test, ctx):
        consts = ctx["consts"]
        if isinstance(test, ast.Name) and test.id in consts:
            return bool(consts[test.id])
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            v = self._decided(test.operand, ctx)
            return None if v is None else not v
        return None

    def stmt(self, s, state, ctx):
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return state
        if isinstance(s, ast.Raise):
            return None
        if isinstance(s, ast.Return):
            if s.value is not None:
                state = self.exprs(s.value, state, ctx)
            ctx["exits"].append(state)
            return None
        if isinstance(s, ast.If):
            state = self.exprs(s.test, state, ctx)
            v = self._decided(s.test, ctx)
            if v is not None:
                return self.block(s.body if v else s.orelse, state, ctx)
            text = ast.unparse(s.test)
            a = self.block(s.body, state.extend(text), ctx)
            b = self.block(s.orelse, state.extend(_neg(text)), ctx)
            if a is None or b is None:
                return a if b is None else b  # an early return: the rest runs only on the other branch
            return _State(state.conds, _join((a.replay, b.replay)), _join((a.forward, b.forward)))
        if isinstance(s, (ast.With, ast.AsyncWith)):
            for it in s.items:
                state = self.exprs(it.context_expr, state, ctx)
            return self.block(s.body, state, ctx)
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            state = self.exprs(s.test if isinstance(s, ast.While) else s.iter, state, ctx)
            a = self.block(s.body, state, ctx)  # zero or more times
            ways = [state] + ([a] if a is not None else [])
            return _State(state.conds, _join(w.replay for w in ways), _join(w.forward for w in ways))
        if isinstance(s, ast.Try):
            a = self.block(s.body, state, ctx)
            for h in s.handlers:
                self.block(h.body, state, ctx)
            after = a if a is not None else state
            a = self.block(s.orelse, after, ctx)
            return self.block(s.finalbody, a if a is not None else after, ctx)
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            value = s.value
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            if value is None:
                return state
            state = self.exprs(value, state, ctx)
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr == self.mailbox:
                    self._mailbox(s, t, value, state, ctx)
            return state
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.expr):
                state = self.exprs(child, state, ctx)
        return state

    def _event(self, kind, node, state, ctx, **kw) -> None:
        ends = None
        for text in state.conds:
            e = _ends_of_text(text)
            if e is not None:
                ends = e if ends is None else ends & e
        self.events.append(Event(kind, ctx["module"].rel, node.lineno, ctx["label"],
                                 ctx["chain"] + ((ctx["key"], node.lineno),), state.conds,
                                 None if ends is None else tuple(x for x in _ENDS if x in ends),
                                 after_replay=state.replay, after_forward=state.forward, **kw))

    def _mailbox(self, s, target, value, state, ctx) -> None:
        what = f"{ast.unparse(target)} = {ast.unparse(value)}"
        if isinstance(value, ast.Constant) and value.value is None:
            self._event("clear", s, state, ctx, what=what)
            return
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "self":
            self._event("publish", s, state, ctx, what=what, event="marker", marker=value.attr)
            return
        self._event("publish", s, state, ctx, what=what, event="fresh")

    def exprs(self, node, state, ctx):
        for c in _calls_postorder(node):
            name = _callee_name(c)
            if name.endswith("shared_read_ends"):
                self._event("resolve", c, state, ctx, what=ast.unparse(c.func))
            elif _is_replay(c):
                self._event("replay", c, state, ctx, what=ast.unparse(c.func))
                state = _State(state.conds, True, state.forward)
            elif name == "forward" and "model" in ast.unparse(c.func):
                self._event("forward", c, state, ctx, what=ast.unparse(c.func))
                state = _State(state.conds, state.replay, True)
            target = self.target(c, ctx)
            if target is not None:
                owner, node2, module = target
                state = self.fn(owner, node2, module, _bind(node2, c), state,
                                ctx["chain"] + ((ctx["key"], c.lineno),), ctx["depth"] + 1, ctx["stack"])
        return state

    def target(self, c: ast.Call, ctx):
        f = c.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
            hit = self.tree.lookup(self.ci, f.attr)
            if hit is not None:
                return hit[0], hit[1], hit[0].module
            return None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) \
                and f.value.func.id == "super" and ctx["owner"] is not None:
            hit = self.tree.lookup(self.ci, f.attr, ctx["owner"])
            return (hit[0], hit[1], hit[0].module) if hit is not None else None
        if isinstance(f, ast.Name):
            r = self.tree.resolve(ctx["module"], f.id)
            if r is None:
                local = self.tree.local_imports(ctx["module"], [self.functions[ctx["key"]][0]])
                r = (local.get(f.id) or [None])[-1]
            if isinstance(r, FuncInfo):
                return None, r.node, r.module
        return None


def _is_replay(c: ast.Call) -> bool:
    """A graph launch: ``replay`` (or ``replay_with_...``) called on the runner's graph backend (``self.backend``) or on
    a captured graph."""
    f = c.func
    if not (isinstance(f, ast.Attribute) and (f.attr == "replay" or f.attr.startswith("replay_with_"))):
        return False
    recv = ast.unparse(f.value)
    return recv.endswith("backend") or "graph" in recv.lower()


def _callee_name(c: ast.Call) -> str:
    f = c.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def _bind(fn, call: ast.Call) -> dict:
    """The parameters of ``fn`` bound to constants at ``call``."""
    params = [a.arg for a in fn.args.args]
    if params and params[0] in ("self", "cls"):
        params = params[1:]
    pairs = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
    return {p: a.value for p, a in pairs if isinstance(a, ast.Constant)}


# --- the fallback ---------------------------------------------------------------------------------------------------
def _fallback(tree: Tree, ci: ClassInfo, events: list[Event], functions: dict) -> Fallback | None:
    """The no-marker rule of the resolver ``ci`` calls, or None when it calls none."""
    for ev in events:
        if ev.kind != "resolve" or not ev.what.startswith("self."):
            continue
        name = ev.what[len("self."):]
        if "resolve" not in name:
            continue
        hit = tree.lookup(ci, name)
        if hit is None:
            continue
        owner, fn = hit
        label = f"{owner.name}.{fn.name}"
        asks = any(isinstance(n, ast.Call) and _callee_name(n) == "shared_read_ends" for n in ast.walk(fn))
        if not asks:
            continue
        for n in ast.walk(fn):
            if not (isinstance(n, ast.If) and n.body and isinstance(n.body[-1], ast.Return)):
                continue
            marker = _none_test(n.test)
            if marker is None or "IN_REPLAY" not in ast.unparse(n.test):
                continue
            end = _member(n.body[-1].value) if n.body[-1].value is not None else None
            cond = ast.unparse(n.test)
            if end in RULE_OF_FALLBACK:
                return Fallback(RULE_OF_FALLBACK[end], end, marker, cond, label, owner.file, n.body[-1].lineno)
            return Fallback(None, end, marker, cond, label, owner.file, n.body[-1].lineno,
                            f"returns `{ast.unparse(n.body[-1].value) if n.body[-1].value else 'None'}` without a "
                            "marker: no resolution rule of fencecheck's vocabulary")
        return Fallback(None, None, None, None, label, owner.file, fn.lineno,
                        "no branch returning a SharedReadEnds member when the declaration is IN_REPLAY and a runner "
                        "attribute is None")
    return None


def _none_test(test) -> str | None:
    """The runner attribute ``test`` requires to be None (``self.x is None``, within an ``and``), or None."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    for p in parts:
        if isinstance(p, ast.Compare) and len(p.ops) == 1 and isinstance(p.ops[0], ast.Is) \
                and isinstance(p.comparators[0], ast.Constant) and p.comparators[0].value is None \
                and isinstance(p.left, ast.Attribute) and isinstance(p.left.value, ast.Name) \
                and p.left.value.id == "self":
            return p.left.attr
    return None


# --- the model runner a runner publishes into -------------------------------------------------------------------------
def _binds(tree: Tree, ci: ClassInfo) -> dict | None:
    """``self.model_runner = <expr>`` in the lowest ``__init__`` on ``ci``'s MRO that sets it: the expression, its
    side (``draft`` when it names a draft or MTP model runner, ``given`` when it is the constructor's parameter)."""
    for c in tree.mro(ci):
        init = c.methods.get("__init__")
        if init is None:
            continue
        params = {a.arg for a in init.args.args + init.args.kwonlyargs}
        for n in ast.walk(init):
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "model_runner"
                                                 and isinstance(t.value, ast.Name) and t.value.id == "self"
                                                 for t in n.targets):
                text = ast.unparse(n.value)
                side = "given" if isinstance(n.value, ast.Name) and n.value.id in params else \
                    ("draft" if re.search(r"draft|mtp", text) else None)
                return {"expr": text, "side": side, "file": c.file, "line": n.lineno}
    return None


# --- rows -----------------------------------------------------------------------------------------------------------
def _policy(events: list[Event], fallback: Fallback | None) -> str:
    """The runner's publish kind in the reader's terms (``resolve``, ``clear_then_resolve``, ``prefill_publish``,
    ``publish_unconditionally``, ``never``)."""
    pubs = [e for e in events if e.kind == "publish"]
    if not pubs:
        return "never"
    if any("prefill" in k.lower() for e in pubs for k, _ in e.chain) or \
            any(e.kind == "resolve" and "prefill" in e.what for e in events):
        return "prefill_publish"
    resolves = [e for e in events if e.kind == "resolve"]
    clears = [e for e in events if e.kind == "clear"]
    if resolves and clears and any(_chain_before(c.chain, resolves[-1].chain) for c in clears):
        return "clear_then_resolve"
    if resolves and all(e.ends is not None for e in pubs):
        return "resolve"
    return "publish_unconditionally"


def _position(ev: Event, events) -> str | None:
    """Where ``ev`` happens against the launch on its path: ``before_replay`` / ``after_replay`` (``in_graph_marker``
    for a marker handed over after the launch), or ``before_forward`` / ``after_forward`` in a runner that replays no
    graph; None when the paths to it disagree."""
    if any(e.kind == "replay" for e in events):
        done, where = ev.after_replay, ("before_replay", "after_replay")
    elif any(e.kind == "forward" for e in events):
        done, where = ev.after_forward, ("before_forward", "after_forward")
    else:
        return None
    if done is None:
        return None
    if ev.event == "marker" and done:
        return "in_graph_marker"
    return where[1] if done else where[0]


def runner_candidates(tree: Tree) -> list[tuple[ClassInfo, ClassInfo, ast.FunctionDef]]:
    """(runner class, owner of its entry, entry def) of every ``*Runner`` class under ``sglang/srt`` with an
    ``execute`` or ``replay`` method (the one lowest on its MRO), sorted by file and line."""
    names = set()
    for m in tree.modules_containing("Runner"):
        if not tree.rel(m).startswith("sglang/srt/"):
            continue  # the fence is the server runtime's (multimodal_gen and the rest have runners of their own)
        for cm in re.finditer(r"^[ \t]*class[ \t]+(\w*Runner)\b", tree.text(m), re.MULTILINE):
            names.add((m, cm.group(1)))
    out = []
    for m, name in sorted(names):
        mod = tree.module(m)
        ci = mod.classes.get(name) if mod else None
        if ci is None:
            continue
        mro = tree.mro(ci)
        hits = [h for h in (tree.lookup(ci, e) for e in ENTRIES) if h is not None]
        if not hits:
            continue
        owner, fn = min(hits, key=lambda h: mro.index(h[0]))
        out.append((ci, owner, fn))
    return sorted(out, key=lambda x: (x[0].file, x[0].line))


@dataclass(frozen=True)
class RunnerFacts:
    ci: ClassInfo
    owner: ClassInfo
    entry: ast.FunctionDef
    events: tuple[Event, ...]
    fallback: Fallback | None
    policy: str
    binds: dict | None
    functions: tuple  # (key, def, file) of every function the events were read from

    def row(self) -> Runner:
        """The ``runners`` row (the reader's summary of the runner)."""
        ev = sorted({(e.line, e.file, "prefill_publish" if e.kind == "publish" and self.policy == "prefill_publish"
                      else e.kind) for e in self.events if e.kind in ("resolve", "publish", "clear")})
        return Runner(self.ci.name, self.ci.file, self.ci.line, self.policy,
                      RunnerMethod(self.owner.name, self.entry.name, self.owner.file, self.entry.lineno),
                      tuple(RunnerEvent(ln, f, k) for ln, f, k in ev))

    def to_json(self) -> dict:
        anchor = _anchor(self.events)

        def at(e: Event) -> dict:
            return {"file": e.file, "line": e.line, "function": e.function}

        def cond(e: Event):
            return " and ".join(e.conditions) if e.conditions else None

        return {
            "class": self.ci.name, "file": self.ci.file, "line": self.ci.line,
            "entry": {"class": self.owner.name, "name": self.entry.name, "file": self.owner.file,
                      "line": self.entry.lineno},
            "policy": self.policy,
            "binds": self.binds,
            "replay": None if anchor is None else {**at(anchor), "kind": anchor.kind, "call": anchor.what},
            "resolves": [{**at(e), "call": e.what, "condition": cond(e)} for e in self.events if e.kind == "resolve"],
            "fallback": self.fallback.to_json() if self.fallback is not None else None,
            "publishes": [{**at(e), "at": _position(e, self.events), "event": e.event, "marker": e.marker,
                           "ends": list(e.ends) if e.ends is not None else None, "condition": cond(e),
                           "how": e.what, "via": [k for k, _ in e.chain[:-1]]}
                          for e in self.events if e.kind == "publish"],
            "clears": [{**at(e), "at": _position(e, self.events), "condition": cond(e),
                        "before_resolve": _clear_before_resolve(e, self.events)}
                       for e in self.events if e.kind == "clear"],
        }


def _anchor(events) -> Event | None:
    """The launch shown for the runner: the replay on the path with the fewest conditions (the main one), else the
    model forward so chosen."""
    for kind in ("replay", "forward"):
        cands = [e for e in events if e.kind == kind]
        if cands:
            return min(cands, key=lambda e: (len(e.conditions), e.chain))
    return None


def _clear_before_resolve(clear: Event, events) -> bool:
    return any(_chain_before(clear.chain, e.chain) for e in events if e.kind == "resolve")


def read_runners(tree: Tree, mailbox: str | None) -> list[RunnerFacts]:
    """The facts of every runner (``runner_candidates``), for the mailbox attribute ``mailbox`` (None: the tree has
    no barrier the reader knows, so no runner publishes into one)."""
    out = []
    for ci, owner, fn in runner_candidates(tree):
        if mailbox is None:
            out.append(RunnerFacts(ci, owner, fn, (), None, "never", _binds(tree, ci), ()))
            continue
        w = _Walker(tree, ci, mailbox)
        events = w.run(owner, fn)
        fb = _fallback(tree, ci, events, w.functions)
        out.append(RunnerFacts(ci, owner, fn, tuple(events), fb, _policy(events, fb), _binds(tree, ci),
                               tuple((k, node, file) for k, (node, file) in sorted(w.functions.items()))))
    return out
