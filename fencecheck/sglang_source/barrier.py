"""The scheduler's WAR barrier as the tree writes it: where it is defined, which worker property names the runner
whose mailbox it reads (the publisher), the mailbox attribute, where it clears the mailbox, its fine and coarse
waits and the flag that turns it off; the assignment of that flag (the gate); and every write of the mailbox
attribute anywhere in ``sglang/srt`` (publishes and clears, each with its enclosing function).

Nothing here is a name of a release: the mailbox is whatever attribute the barrier waits on (``shared_read_done_event``
in trees with the declaration fence, ``war_fastpath_read_done_event`` in older ones), the publisher whatever property
it takes the runner from. The barrier is the function named ``_apply_war_barrier`` that waits on the schedule stream;
a tree without one has no barrier this reader knows.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .tree import Tree

BARRIER = "_apply_war_barrier"


@dataclass(frozen=True)
class Barrier:
    """One definition of the barrier and what its body says (each line in ``file``)."""

    cls: str | None
    file: str
    line: int
    publisher_property: str | None  # ``last_shared_read_runner``: the worker property naming the runner
    publisher_line: int | None
    mailbox: str | None  # the attribute holding the read-done event
    mailbox_line: int | None
    clear_line: int | None  # ``runner.<mailbox> = None``
    fine_line: int | None  # ``wait_event(ev)``
    fine_condition: str | None
    coarse_line: int | None  # ``wait_stream(self.forward_stream)``
    enabled_attr: str | None  # ``if not self.<attr>: return``
    enabled_line: int | None
    node: object = field(default=None, compare=False, repr=False)  # the def

    def to_json(self) -> dict:
        return {"class": self.cls, "file": self.file, "line": self.line,
                "publisher_property": self.publisher_property, "publisher_line": self.publisher_line,
                "mailbox": self.mailbox, "mailbox_line": self.mailbox_line, "clear_line": self.clear_line,
                "fine_wait": None if self.fine_line is None else {"line": self.fine_line,
                                                                  "condition": self.fine_condition},
                "coarse_line": self.coarse_line,
                "enabled_by": None if self.enabled_attr is None else {"attribute": self.enabled_attr,
                                                                      "line": self.enabled_line}}


@dataclass(frozen=True)
class MailboxWrite:
    """An assignment of the mailbox attribute: a publish (``value`` not None) or a clear."""

    function: str  # qualified: ``module.Class.method`` or ``module.function``
    cls: str | None
    file: str
    line: int
    target: str  # ``self.model_runner.shared_read_done_event``
    value: str  # ``read_done``, ``None``, ``self.in_graph_metadata_prep_done``

    @property
    def clears(self) -> bool:
        return self.value == "None"

    def to_json(self) -> dict:
        return {"function": self.function, "class": self.cls, "file": self.file, "line": self.line,
                "target": self.target, "value": self.value, "kind": "clear" if self.clears else "publish"}


def _functions(mod):
    """(class name or None, def) of every top-level function and method of ``mod``."""
    for node in mod.tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield None, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield node.name, item


def _attr_chain(e) -> list[str] | None:
    """``self.a.b`` -> ["self", "a", "b"]; None for anything else."""
    out = []
    while isinstance(e, ast.Attribute):
        out.append(e.attr)
        e = e.value
    if isinstance(e, ast.Name):
        return [e.id] + out[::-1]
    return None


def _read_barrier(cls: str | None, fn, rel: str) -> Barrier:
    assigns: dict[str, tuple[ast.expr, int]] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            assigns.setdefault(n.targets[0].id, (n.value, n.lineno))
    fine = coarse = fine_cond = None
    mailbox = mailbox_line = publisher = publisher_line = None
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            if n.func.attr == "wait_event" and n.args:
                fine = n.lineno
                ev = n.args[0]
                src = assigns.get(ev.id) if isinstance(ev, ast.Name) else (ev, n.lineno)
                chain = _attr_chain(src[0]) if src else None
                if chain and len(chain) >= 2:
                    mailbox, mailbox_line = chain[-1], src[1]
                    holder = chain[:-1]
                    if len(holder) == 1 and holder[0] in assigns:  # ``runner = self.model_worker.<prop>``
                        h = _attr_chain(assigns[holder[0]][0])
                        if h and len(h) >= 2:
                            publisher, publisher_line = h[-1], assigns[holder[0]][1]
                    elif len(holder) >= 2:
                        publisher, publisher_line = holder[-1], src[1]
            elif n.func.attr == "wait_stream":
                coarse = n.lineno
    clear = None
    enabled = enabled_line = None
    guards = [n for n in ast.walk(fn) if isinstance(n, ast.If) and fine is not None
              and any(getattr(x, "lineno", None) == fine for s in n.body for x in ast.walk(s))]
    if guards:
        fine_cond = ast.unparse(max(guards, key=lambda n: n.lineno).test)  # the innermost test
    for n in ast.walk(fn):
        if isinstance(n, ast.If) and enabled is None:
            t = n.test
            if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not) and n.body \
                    and isinstance(n.body[0], ast.Return):
                chain = _attr_chain(t.operand)
                if chain and chain[0] == "self" and len(chain) == 2:
                    enabled, enabled_line = chain[1], n.lineno
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is None and mailbox \
                and any(isinstance(t, ast.Attribute) and t.attr == mailbox for t in n.targets):
            clear = n.lineno
    return Barrier(cls, rel, fn.lineno, publisher, publisher_line, mailbox, mailbox_line, clear, fine, fine_cond,
                   coarse, enabled, enabled_line, fn)


def read_barriers(tree: Tree) -> list[Barrier]:
    """Every definition of the barrier in ``sglang/srt``, sorted by file and line."""
    out = []
    for m in tree.modules_containing(f"def {BARRIER}"):
        mod = tree.module(m)
        if mod is None or "/srt/" not in mod.rel:
            continue
        for cls, fn in _functions(mod):
            if fn.name == BARRIER:
                out.append(_read_barrier(cls, fn, mod.rel))
    return sorted(out, key=lambda b: (b.file, b.line))


def mailbox_writes(tree: Tree, mailbox: str) -> list[MailboxWrite]:
    """Every assignment ``X.<mailbox> = value`` in ``sglang/srt`` outside ``__init__`` (where the mailbox is
    created), sorted by file and line."""
    out = []
    for m in tree.modules_containing(mailbox):
        mod = tree.module(m)
        if mod is None or "/srt/" not in mod.rel:
            continue
        for cls, fn in _functions(mod):
            if fn.name == "__init__":
                continue
            for n in tree.walk(fn):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) \
                    and n.value is not None else []
                for t in targets:
                    if isinstance(t, ast.Attribute) and t.attr == mailbox:
                        qual = ".".join(x for x in (mod.name, cls, fn.name) if x)
                        out.append(MailboxWrite(qual, cls, mod.rel, n.lineno, ast.unparse(t), ast.unparse(n.value)))
    return sorted(set(out), key=lambda w: (w.file, w.line, w.target))


@dataclass(frozen=True)
class Gate:
    """``self.<attr> = <expr>``: the assignment that decides whether the barrier applies at all."""

    attr: str
    expr: ast.expr
    module: object  # tree.Module the expression is in (its names resolve there)
    file: str
    line: int
    function: str | None = None  # the qualified name of the function assigning it
    node: object = None  # that function's def

    @property
    def text(self) -> str:
        return ast.unparse(self.expr)


def barrier_gate(tree: Tree, attr: str) -> Gate | None:
    """The first assignment of ``self.<attr>`` in ``sglang/srt`` (the barrier's enabled flag), or None."""
    for m in sorted(tree.modules_containing(f"{attr} =")):
        mod = tree.module(m)
        if mod is None or "/srt/" not in mod.rel:
            continue
        for cls, fn in _functions(mod):
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == attr
                                                        for t in node.targets):
                    qual = ".".join(x for x in (mod.name, cls, fn.name) if x)
                    return Gate(attr, node.value, mod, mod.rel, node.lineno, qual, fn)
    return None
