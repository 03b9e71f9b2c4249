"""The import rules of docs/architecture.md hold for every module: layers, the one cross-layer import, no cycles.

Every module of the source tree is parsed with ``ast`` (imports at any depth: module level, function-local, under
``if TYPE_CHECKING``); the imports between fencecheck modules form a directed graph (networkx). A failure names the
importing module, the line and the imported module.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Source folder -> the package it installs as.
PACKAGES = {
    "fencecheck": "fencecheck",
    "model": "fencecheck.model",
    "reference": "fencecheck.reference",
    "gpu": "fencecheck.gpu",
    "proofs": "fencecheck.proofs",
}
BARE = {"model", "reference", "gpu", "proofs"}
ANYTHING = "anything"

#: Imports that break a rule today, each with what it does. The layering does not allow them; each entry must name an
#: import that still exists (a test below), so the entry goes with the import.
KNOWN_VIOLATIONS = {
}


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the architecture folders."""
    out = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((package, *parts))] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[int, str]]:
    """(line, imported fencecheck module) for every import in the file, resolved against the module table; an
    ``from X import y`` names ``X.y`` when that is a module, else ``X``."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "fencecheck"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "fencecheck":
                continue
            for alias in node.names:
                full = f"{module}.{alias.name}"
                out.append((node.lineno, full if full in MODULES else module))
    return out


def _graph() -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(MODULES)
    for name, path in MODULES.items():
        for line, target in _imports(name, path):
            if target in MODULES and target != name:
                g.add_edge(name, target)
                g.edges[name, target].setdefault("lines", []).append(line)
    return g


GRAPH = _graph()


def _rules() -> tuple[dict[str, list[str]], dict[str, set[str] | str], set[tuple[str, str]]]:
    """From docs/architecture.md: layer -> its folders (or files), layer -> layers it may import (or "anything"), and
    the allowed cross-layer imports."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Import rules", 1)[1].split("\n## ", 1)[0]
    members, allowed = {}, {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or cells[0] in ("layer", "---"):
            continue
        layer, folders, may = cells
        members[layer] = re.findall(r"`([\w./]+)`", folders)
        allowed[layer] = ANYTHING if may == ANYTHING else {m.strip() for m in may.split(",")}
    exceptions = {
        (a, b) for a, b in re.findall(r"^- `([\w.]+)` may import `([\w.]+)`", section, flags=re.MULTILINE)
    }
    return members, allowed, exceptions


MEMBERS, ALLOWED, EXCEPTIONS = _rules()


def _layer(module: str) -> str | None:
    """The layer of the folder ``module``'s file lies in, the most specific one (``fencecheck/files/`` beats
    ``fencecheck/``; a file named in the table beats its folder). A folder's rule covers its own files, not its
    subfolders: a module's folder tells its layer."""
    rel = MODULES[module].relative_to(ROOT).as_posix()
    folder = rel.rpartition("/")[0] + "/"
    for layer, entries in MEMBERS.items():
        if rel in entries:
            return layer
    for layer, entries in MEMBERS.items():
        if folder in entries:
            return layer
    return None


def _where(a: str, b: str) -> str:
    lines = ",".join(str(n) for n in sorted(set(GRAPH.edges[a, b]["lines"])))
    return f"{MODULES[a].relative_to(ROOT)}:{lines}: {a} imports {b}"


def test_the_rules_are_read_from_the_document():
    assert set(MEMBERS) == {"vocabulary", "files", "reader", "decision", "render", "model", "reference", "proofs", "gpu",
                            "commands"}
    assert ALLOWED["commands"] == ANYTHING and ALLOWED["vocabulary"] == {"vocabulary"}
    assert all(may == ANYTHING or may <= set(MEMBERS) for may in ALLOWED.values()), ALLOWED
    assert ("fencecheck.proofs.runner", "fencecheck.reference.check") in EXCEPTIONS


def test_every_module_has_a_layer():
    assert not [m for m in MODULES if _layer(m) is None]


def test_every_folder_is_one_layer():
    """Each folder that holds modules is named by the table (a folder per layer); the vocabulary's folder holds no
    command: every module at the package root but ``__main__`` is vocabulary."""
    folders = {p.relative_to(ROOT).as_posix().rpartition("/")[0] + "/" for p in MODULES.values()}
    named = {e for entries in MEMBERS.values() for e in entries if e.endswith("/")}
    assert folders <= named, sorted(folders - named)
    root = [m for m, p in MODULES.items() if p.parent == ROOT / "fencecheck" and p.name != "__main__.py"]
    assert {_layer(m) for m in root} == {"vocabulary"}


def test_the_layers_import_each_other_without_a_loop():
    """At folder level too: the layers' import graph (one node per layer) has no cycle."""
    g = nx.DiGraph()
    for a, b in GRAPH.edges:
        if (a, b) not in EXCEPTIONS and _layer(a) != _layer(b):
            g.add_edge(_layer(a), _layer(b))
    assert nx.is_directed_acyclic_graph(g), list(nx.simple_cycles(g))


def test_imports_follow_the_layers():
    bad = []
    for a, b in GRAPH.edges:
        if (a, b) in EXCEPTIONS or (a, b) in KNOWN_VIOLATIONS:
            continue
        src, dst = _layer(a), _layer(b)
        may = ALLOWED[src]
        if may != ANYTHING and dst not in may:
            bad.append(f"{_where(a, b)} ({src} may import {', '.join(sorted(may))}; {b} is {dst})")
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    g = GRAPH.copy()
    g.remove_edges_from(KNOWN_VIOLATIONS)
    cycles = list(nx.simple_cycles(g))
    described = [" -> ".join([*c, c[0]]) + ": " + "; ".join(_where(x, y) for x, y in zip(c, [*c[1:], c[0]]))
                 for c in cycles]
    assert not cycles, "\n".join(described)


def test_no_bare_imports_of_the_architecture_folders():
    """``import model`` would load a second copy of ``fencecheck.model`` from the checkout."""
    bad = []
    for path in sorted({*MODULES.values(), *(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")}):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            bad += [f"{path.relative_to(ROOT)}:{node.lineno}: import {n}" for n in names if n.split(".")[0] in BARE]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_function_local_imports():
    """The rules are only as good as the graph: a function-local import (proofs.runner's catalog agreement) is an
    edge, and an import of a module (``from .x import y``) is told apart from an import of a name."""
    assert GRAPH.has_edge("fencecheck.proofs.runner", "fencecheck.reference.check")
    assert GRAPH.has_edge("fencecheck.commands.sglang", "fencecheck.decision.pipeline")  # inside a function
    assert GRAPH.has_edge("fencecheck.reference.sim.races", "fencecheck.reference.sim.hb")
    assert not GRAPH.has_edge("fencecheck.reference.sim.races", "fencecheck.reference.sim")


@pytest.mark.parametrize("edge", sorted(KNOWN_VIOLATIONS))
def test_known_violation_is_still_there(edge):
    """An entry of KNOWN_VIOLATIONS names an import that exists; remove the entry when the import goes."""
    assert GRAPH.has_edge(*edge), f"{edge[0]} no longer imports {edge[1]}: remove it from KNOWN_VIOLATIONS"



#: The decision layer's steps, each called by the pipeline alone (``decision/pipeline.py``).
STEPS = {
    "fencecheck.decision.replay": {"demote_never_replayed"},
    "fencecheck.decision.platform": {"demote_platform_bound"},
    "fencecheck.decision.findings": {"decide"},
    "fencecheck.decision.workers": {"decide_worker_reads"},
    "fencecheck.decision.fallback": {"decide_fallback"},
    "fencecheck.decision.status": {"settle"},
}


def test_the_steps_of_a_decision_are_called_through_the_pipeline_alone():
    """Outside the decision layer nobody strings the steps together by hand: ``sglang``, pull-request mode, ``audit``
    and ``verify --sglang`` call ``decision.pipeline``; a command importing a step itself fails here."""
    bad = []
    for name, path in MODULES.items():
        if name.startswith("fencecheck.decision."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module in STEPS:
                bad += [f"{path.relative_to(ROOT)}:{node.lineno}: {a.name}" for a in node.names
                        if a.name in STEPS[node.module]]
    assert not bad, "\n".join(bad)
    callers = {a for a, b in GRAPH.edges if b == "fencecheck.decision.pipeline"}
    assert {"fencecheck.commands.sglang", "fencecheck.commands.audit_release", "fencecheck.commands.verify",
            "fencecheck.decision.pull_request"} <= callers, callers


def test_commands_stay_thin():
    """At most 20 modules in ``fencecheck/commands/``: deciding and rendering have folders of their own."""
    assert len(list((ROOT / "fencecheck" / "commands").glob("*.py"))) <= 20
