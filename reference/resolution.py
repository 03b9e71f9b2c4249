"""``_resolve_shared_read_ends``: the three rules of ``fencecheck.vocab.ResolutionRule`` (docs/sglang-mechanism.md#resolution),
and the prefill paths' resolution and publish gates (docs/sglang-0.5.23.md#22-the-base-rule-and-the-prefill-resolution,
docs/sglang-0.5.23.md#45-prefill-extend-publishes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from fencecheck.vocab import ForwardMode, ModeFamily, ResolutionRule, SharedReadEnds, family


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
        if family(mode) not in (ModeFamily.DECODE, ModeFamily.VERIFY):
            return SharedReadEnds.UNKNOWN
        if mode is ForwardMode.TARGET_VERIFY and not is_last_shared_read_phase(mode):
            return SharedReadEnds.UNKNOWN
    declared = ask_backend(mode)
    if declared is SharedReadEnds.IN_REPLAY and not has_marker:
        if rule is ResolutionRule.DECLARATION_ONLY_POST_FALLBACK:
            return SharedReadEnds.POST_REPLAY
        return SharedReadEnds.PRE_REPLAY
    return declared


@dataclass(frozen=True)
class PrefillSwitches:
    """What the prefill paths' resolution and publish depend on besides the declaration: the scheduler's switches
    and whether the speculative algorithm lets prefill publish (docs/sglang-0.5.23.md#12-switches,
    docs/sglang-0.5.23.md#45-prefill-extend-publishes)."""

    force_coarse: bool = False
    prefill_read_done: bool = True
    publish_allowed: bool = True
    hierarchical_cache: bool = False


def resolve_prefill_shared_read_ends(
    mode: ForwardMode, ask_backend: Callable[[ForwardMode], SharedReadEnds], switches: PrefillSwitches
) -> SharedReadEnds:
    """``resolve_prefill_shared_read_ends``: UNKNOWN when coarse is forced, prefill read-done is switched off, or the
    mode is not EXTEND (the backend is then not asked); else the backend's declaration for EXTEND, with no marker
    fallback (a prefill path has no marker)."""
    if switches.force_coarse or not switches.prefill_read_done or mode is not ForwardMode.EXTEND:
        return SharedReadEnds.UNKNOWN
    return ask_backend(mode)


def prefill_publishes(resolved: SharedReadEnds, switches: PrefillSwitches) -> bool:
    """``maybe_publish_prefill_shared_read_done``: only PRE_REPLAY publishes, and only when the algorithm allows it
    and no hierarchical cache (HiCache storage, LMCache) is on."""
    return resolved is SharedReadEnds.PRE_REPLAY and switches.publish_allowed and not switches.hierarchical_cache
