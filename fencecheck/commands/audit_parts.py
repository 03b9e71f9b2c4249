"""What the audit's parts share: a part's outcome (``Part``), the renderer of ``fencecheck check --witness`` the
release document quotes (``CheckText``), and a race drawn as a Mermaid sequence with its section text."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from fencecheck.verdict import Race


@dataclass
class Part:
    """A part's outcome: ``ok`` (it passed, or was skipped: it fails nothing), ``unknown`` (its only shortfall is an
    unknown verdict), ``skipped`` (it did not run: an input it needs is missing; ``summary`` says which)."""

    name: str
    ok: bool
    summary: str
    seconds: float
    unknown: bool = False
    lines: list[str] = field(default_factory=list)
    skipped: bool = False

    def status(self) -> str:
        """``ok``, ``skipped``, ``unknown`` or ``FAILED``, as the summary table and the progress lines show it."""
        if self.ok:
            return "skipped" if self.skipped else "ok"
        return "unknown" if self.unknown else "FAILED"


#: Characters written as Mermaid entity codes inside a quoted label: '#' (an entity starts with it), the quote that
#: ends the label, ';' (ends a statement), and '<' '>' '&' (HTML in a label).
_MERMAID_ENTITIES = {"#": "#35;", '"': "#quot;", ";": "#59;", "<": "#lt;", ">": "#gt;", "&": "#amp;"}


def mermaid_label(text: str) -> str:
    """``text`` as a quoted Mermaid label that renders as ``text`` itself: nothing shortened or replaced, the
    characters Mermaid would read otherwise written as its entity codes (``#35;`` for '#', ``#quot;``, ...)."""
    return '"' + "".join(_MERMAID_ENTITIES.get(c, c) for c in text) + '"'


def race_nodes(race: Race) -> list[tuple[str, str, str]]:
    """The diagram's nodes: (id, caption, text). The documents print each text beside the diagram under its caption,
    and the node's label is that text."""
    nodes = [("R", "the racing read", race.read_text()), ("W", "the write it is not ordered before", race.write_text())]
    if race.synced_up_to:
        nodes.append(("K", f"the last kernel of {race.read_stream} that {race.write_stream} was ordered after",
                      race.synced_up_to))
        if race.via:
            nodes.append(("V", "the wait that ordered it", race.via))
    if race.barrier:
        nodes.append(("B", "the barrier", f"barrier of step {race.step}: {race.barrier}"))
    return nodes


def mermaid(race: Race) -> str:
    """The racing read, the write, what the writer's stream was last ordered after, and the missing edge; each
    node's label is its text in ``race_nodes``."""
    lines = ["```mermaid", "flowchart LR"]
    ids = set()
    for node, _, text in race_nodes(race):
        lines.append(f"  {node}[{mermaid_label(text)}]")
        ids.add(node)
    if "K" in ids:
        lines.append(f"  K -->|{race.read_stream} order| R")
        if "V" in ids:
            lines.append("  K --> V")
            lines.append(f"  V -->|{race.write_stream} order| W")
        else:
            lines.append("  K --> W")
    if "B" in ids:
        lines.append(f"  B -->|{race.write_stream} order| W")
    lines.append("  R -.->|missing edge| W")
    lines.append("  style R fill:#fdd,stroke:#c00")
    lines.append("  style W fill:#fdd,stroke:#c00")
    lines.append("```")
    return "\n".join(lines)


def race_section(race: Race) -> list[str]:
    """A race in the documents: each node's caption and text, the diagram, and the missing edge."""
    out = [f"- {node}, {caption}: `{text}`" for node, caption, text in race_nodes(race)]
    return out + ["", mermaid(race), "", f"Missing edge: {race.missing_edge}", ""]


#: ``check_text(path) -> (text, exit status)``: what ``fencecheck check PATH --witness`` prints, and its exit status.
CheckText = Callable[[Path], tuple[str, int]]
