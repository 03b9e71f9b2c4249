"""What ``fencecheck verify`` reports on one backend (docs/verify.md): its facts, the symbolic verdict, the catalog
contexts, the findings, and the advice, each proposed change with its verification."""

from __future__ import annotations

from dataclasses import dataclass, field

from fencecheck.verdict import Verdict

from .backend_facts import ModeFacts
from .catalog_contexts import Context
from .component_changes import ComponentChange
from .counterexample import Counterexample
from .symbolic_contexts import BOUNDS
from .symconfig import Bounds


@dataclass
class Check:
    """A proposed change verified over the same contexts: each catalog context's verdict, and the symbolic verdict
    (None: not asked for, a catalog context races already, so the change is unsafe whatever it is)."""

    symbolic: Verdict | None
    contexts: list[Context]

    @property
    def safe(self) -> bool:
        return self.symbolic is Verdict.PROVED and all(c.safe for c in self.contexts)

    def text(self) -> str:
        n = len(self.contexts) + 1
        bad = [f"{c.scenario} ({'; '.join(sorted({r.place().text() for r in c.brought})) or 'unknown'})"
               for c in self.contexts if not c.safe]
        if self.safe:
            return f"safe in all {n} contexts (the symbolic family and {n - 1} catalog scenarios)"
        if self.symbolic is None:
            return (f"races in {len(bad)} of {n - 1} catalog scenarios: {', '.join(bad)} (the symbolic family not "
                    "checked: a race in the catalog already refutes the change)")
        parts = ([] if self.symbolic is Verdict.PROVED else [f"symbolic {self.symbolic.value}"]) + bad
        return f"races in {len(parts)} of {n} contexts: {', '.join(parts)}"


@dataclass
class Advice:
    change: str  # the change, in SGLang's terms
    why: str  # what it is for
    check: Check | None  # its verification (None: no change to the backend is offered)
    component: ComponentChange | None = None  # the change outside the backend, and what the model finds with it

    def text(self) -> str:
        tail = f": {self.check.text()}" if self.check is not None else ""
        if self.component is not None:
            tail += f"; {self.component.text()}"
        return f"{self.change}{tail} ({self.why})"


@dataclass
class VerifyReport:
    backend: str
    modes: list[ModeFacts]
    verdict: Verdict = Verdict.UNKNOWN
    reason: str = ""
    counterexample: Counterexample | None = None
    contexts: list[Context] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    advice: list[Advice] = field(default_factory=list)
    bounds: Bounds = BOUNDS

    @property
    def safe(self) -> bool:
        return self.verdict is Verdict.PROVED and all(c.safe for c in self.contexts)
