"""``_resolve_shared_read_ends``: the three rules of ``fencecheck.vocab.ResolutionRule`` (docs/sglang-mechanism.md#resolution)."""

from __future__ import annotations

from typing import Callable

from fencecheck.vocab import ForwardMode, ResolutionRule, SharedReadEnds


def resolve_shared_read_ends(
    rule: ResolutionRule,
    mode: ForwardMode,
    ask_backend: Callable[[ForwardMode], SharedReadEnds],
    has_marker: bool,
    is_last_shared_read_phase: Callable[[ForwardMode], bool],
) -> SharedReadEnds:
    """Where the runner will publish for ``mode``. The backend is asked at most once.

    ``gated`` (before PR #35059): modes other than DECODE/TARGET_VERIFY are UNKNOWN without asking; TARGET_VERIFY is
    UNKNOWN unless the algorithm says verify is the step's last reading phase. All rules then take the declaration,
    with IN_REPLAY on a runner without its marker falling back to PRE_REPLAY (as merged) or POST_REPLAY (the TODO's
    sound choice).
    """
    if rule is ResolutionRule.GATED:
        if mode not in (ForwardMode.DECODE, ForwardMode.TARGET_VERIFY):
            return SharedReadEnds.UNKNOWN
        if mode is ForwardMode.TARGET_VERIFY and not is_last_shared_read_phase(mode):
            return SharedReadEnds.UNKNOWN
    declared = ask_backend(mode)
    if declared is SharedReadEnds.IN_REPLAY and not has_marker:
        if rule is ResolutionRule.DECLARATION_ONLY_POST_FALLBACK:
            return SharedReadEnds.POST_REPLAY
        return SharedReadEnds.PRE_REPLAY
    return declared
