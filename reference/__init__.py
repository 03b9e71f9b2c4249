"""The reference implementation of SGLang's shared-read fence over a small device interface."""

from .check import check_scenario
from .run import drive, run_scenario

__all__ = ["check_scenario", "drive", "run_scenario"]
