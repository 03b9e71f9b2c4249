"""The adapter interface regression suites replay traces against.

An adapter binds one implementation of SGLang's shared-read fence to fencecheck: given a scenario it configures the
implementation's scheduler, worker, runners and backends as the scenario says, runs ``steps`` steps on a device that
records every stream, event, graph and buffer operation in host order, and returns that trace in fencecheck's
format. ``fencecheck regress`` writes tests that compare such a trace, op for op, with the trace the model generated,
and check its races with the simulator. The reference implementation is the first adapter (``fencecheck.reference.adapter``); docs/regress.md shows
how a downstream repository binds its own classes.
"""

from __future__ import annotations

import importlib
from typing import Protocol

from .errors import InputError
from .scenario import Scenario
from .trace import Trace


class FenceAdapter(Protocol):
    #: shown in test failures
    name: str

    def run(self, scenario: Scenario, steps: int) -> Trace:
        """Run ``scenario`` for ``steps`` steps and return the host-ordered trace of device operations."""
        ...


def load_adapter(spec: str) -> FenceAdapter:
    """``module:Class`` (instantiated without arguments) or ``module:object``."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise InputError("FENCECHECK_ADAPTER", "", f"expected 'module:Class', got {spec!r}")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise InputError("FENCECHECK_ADAPTER", "", f"cannot load {spec!r} ({err})") from None
    return obj() if isinstance(obj, type) else obj
