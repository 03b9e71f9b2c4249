"""The words fencecheck uses for SGLang's shared-read fence (docs/sglang-mechanism.md).

Every enum here is a closed set; scenario files spell the members by their ``value``.
"""

from __future__ import annotations

import difflib
import enum
import types


class ForwardMode(str, enum.Enum):
    """SGLang's ``ForwardMode`` members that matter to the fence (docs/sglang-mechanism.md#the-base-rule)."""

    DECODE = "DECODE"
    TARGET_VERIFY = "TARGET_VERIFY"
    EXTEND = "EXTEND"
    MIXED = "MIXED"
    IDLE = "IDLE"
    DRAFT_EXTEND = "DRAFT_EXTEND"
    DRAFT_EXTEND_V2 = "DRAFT_EXTEND_V2"
    DLLM_EXTEND = "DLLM_EXTEND"
    PREBUILT = "PREBUILT"
    SPLIT_PREFILL = "SPLIT_PREFILL"


class SharedReadEnds(int, enum.Enum):
    """Where a backend's reads of scheduler-shared state end, ordered by lateness
    (docs/sglang-mechanism.md#the-sharedreadends-declaration)."""

    PRE_REPLAY = 1
    IN_REPLAY = 2
    POST_REPLAY = 3
    UNKNOWN = 4

    @staticmethod
    def max_of(*ends: "SharedReadEnds") -> "SharedReadEnds":
        """The latest member; a wrapper with one ``UNKNOWN`` child is ``UNKNOWN``
        (docs/sglang-mechanism.md#the-sharedreadends-declaration)."""
        if not ends:
            raise ValueError("max_of needs at least one SharedReadEnds")
        return SharedReadEnds(max(int(e) for e in ends))

    @classmethod
    def parse(cls, text: str) -> "SharedReadEnds":
        return cls[text]


#: The declarations that publish an event of their own, earliest first: the publish points a mailbox can be set at
#: (``UNKNOWN`` publishes nothing, docs/sglang-mechanism.md#unknown-publishes-nothing).
PUBLISHING_ENDS: tuple[SharedReadEnds, ...] = tuple(e for e in SharedReadEnds if e is not SharedReadEnds.UNKNOWN)


class ModeFamily(enum.IntEnum):
    """The families of forward modes the fence tells apart, as the model encodes a phase's mode (its value).

    ``DECODE``: decode-like (``DECODE``; the base rule's ``IN_REPLAY``). ``VERIFY``: verify-like (``TARGET_VERIFY``;
    the base rule's ``IN_REPLAY``, and under the ``gated`` rule ``IN_REPLAY`` only as the last reading phase).
    ``OTHER``: every other mode (the base rule's ``UNKNOWN``). ``EXTEND``: extend-like (``EXTEND``, the mode the
    prefill path publishes for, docs/sglang-0.5.23.md#45-prefill-extend-publishes).
    """

    DECODE = 0
    VERIFY = 1
    OTHER = 2
    EXTEND = 3


#: The family of each forward mode that has one of its own; every other mode is ``ModeFamily.OTHER``.
_FAMILY_OF = {ForwardMode.DECODE: ModeFamily.DECODE, ForwardMode.TARGET_VERIFY: ModeFamily.VERIFY,
              ForwardMode.EXTEND: ModeFamily.EXTEND}
#: The forward mode that stands for each family where a family must be read back as a mode (a counterexample
#: read as a scenario, the corpus's phases).
REPRESENTATIVE: dict[ModeFamily, ForwardMode] = {
    ModeFamily.DECODE: ForwardMode.DECODE, ModeFamily.VERIFY: ForwardMode.TARGET_VERIFY,
    ModeFamily.OTHER: ForwardMode.DRAFT_EXTEND_V2, ModeFamily.EXTEND: ForwardMode.EXTEND,
}


def family(mode: ForwardMode) -> ModeFamily:
    """The family ``mode`` belongs to."""
    return _FAMILY_OF.get(mode, ModeFamily.OTHER)


def base_shared_read_ends(mode: ForwardMode) -> SharedReadEnds:
    """Base ``AttentionBackend.shared_read_ends``: decode-like and verify-like modes -> IN_REPLAY, else UNKNOWN
    (docs/sglang-mechanism.md#the-base-rule)."""
    if family(mode) in (ModeFamily.DECODE, ModeFamily.VERIFY):
        return SharedReadEnds.IN_REPLAY
    return SharedReadEnds.UNKNOWN


class ReadSite(str, enum.Enum):
    """Where, relative to a runner's replay, a backend reads scheduler-shared state.

    ``pre_replay``: the out-of-graph metadata prep before the launch. ``in_graph_before_marker``: the in-graph
    metadata prep at the head of the graph, before the marker's record node. ``in_graph_after_marker``: model kernels
    after the marker (and, for breakable graphs, later segments). ``post_replay``: out-of-graph work on the forward
    stream after the launch, before the runner's replay call returns (and so before a ``POST_REPLAY`` publish).
    """

    PRE_REPLAY = "pre_replay"
    IN_GRAPH_BEFORE_MARKER = "in_graph_before_marker"
    IN_GRAPH_AFTER_MARKER = "in_graph_after_marker"
    POST_REPLAY = "post_replay"


#: The site of reads the worker does on F after a runner returns (a race's site, not a backend's).
WORKER_SITE = "worker_after"

#: The sites a declaration promises reads end by: a backend is honest when its reads lie inside this set.
COVERED_SITES: dict[SharedReadEnds, frozenset[ReadSite]] = {
    SharedReadEnds.PRE_REPLAY: frozenset({ReadSite.PRE_REPLAY}),
    SharedReadEnds.IN_REPLAY: frozenset({ReadSite.PRE_REPLAY, ReadSite.IN_GRAPH_BEFORE_MARKER}),
    SharedReadEnds.POST_REPLAY: frozenset(ReadSite),
    SharedReadEnds.UNKNOWN: frozenset(ReadSite),
}


#: The scheduler-shared locations fencecheck knows, by SGLang's attribute names (docs/sglang-mechanism.md#the-hazard,
#: docs/sglang-0.5.23.md#8-read-sites-per-backend-family): the request-to-token map, the sliding-window index map
#: of SWA models, the mamba row map of hybrid linear-attention models. The one list of them: the static reader
#: (``fencecheck.sglang_source.reads``) looks for these names, and ``tests/test_locations.py`` fails on a second.
#: A scenario may name others; the CLI warns about a name it does not know, with the closest known ones.
SHARED_LOCATIONS: frozenset[str] = frozenset(
    {"req_to_token", "full_to_swa_index_mapping", "req_index_to_mamba_index_mapping"})
#: Other names of a known location: each is that one location, never a second one. Scenario, backend and trace
#: files are read through ``canonical_location`` (``fencecheck.scenario``, ``fencecheck.trace_json``), so a read
#: of one name and a write of the other meet.
LOCATION_ALIASES: types.MappingProxyType = types.MappingProxyType({"swa_index_map": "full_to_swa_index_mapping"})


def canonical_location(name: str) -> str:
    """The one name of the location ``name`` names: its canonical name for an alias, else ``name`` itself."""
    return LOCATION_ALIASES.get(name, name)


def closest_locations(name: str, n: int = 3) -> list[str]:
    """The known shared locations spelled most like ``name`` (difflib), best first; empty when none is close."""
    return difflib.get_close_matches(name, sorted(SHARED_LOCATIONS), n=n, cutoff=0.6)


class Execution(str, enum.Enum):
    """How a phase runs: one captured graph, a segmented (breakable) graph, or eagerly without a graph."""

    GRAPH = "graph"
    BREAKABLE_GRAPH = "breakable_graph"
    EAGER = "eager"


class PublishPolicy(str, enum.Enum):
    """How a runner publishes its read-done event (docs/sglang-mechanism.md#publishing, #other-publishers).

    ``resolve``: resolve the declaration and publish accordingly (``DecodeCudaGraphRunner``).
    ``always_pre_replay``: record a ring event and publish it before every replay, without asking the backend
    (the EAGLE draft-extend graph runner of the PR era). ``never``: publishes nothing.
    ``clear_then_resolve``: after the out-of-graph prep, set the mailbox to None, then resolve and publish as
    ``resolve`` does (the released EAGLE draft-extend graph runner, which plants no marker).
    ``prefill``: the prefill paths (eager runner, prefill graph runner): resolve with the prefill rule (``UNKNOWN``
    unless the mode is ``EXTEND`` and the prefill gates hold) and publish only ``PRE_REPLAY``, right after the
    out-of-graph prep, eager or graph alike; never clears.
    """

    RESOLVE = "resolve"
    ALWAYS_PRE_REPLAY = "always_pre_replay"
    NEVER = "never"
    CLEAR_THEN_RESOLVE = "clear_then_resolve"
    PREFILL = "prefill"


class ResolutionRule(str, enum.Enum):
    """How ``_resolve_shared_read_ends`` turns a declaration into a publish point (docs/sglang-mechanism.md#resolution).

    ``gated``: before PR #35059 (non-decode modes -> UNKNOWN; TARGET_VERIFY -> UNKNOWN unless the algorithm says
    verify is the last reading phase). ``declaration_only``: PR #35059 as merged (IN_REPLAY without a marker falls back
    to PRE_REPLAY). ``declaration_only_post_fallback``: IN_REPLAY without a marker falls back to POST_REPLAY. Which
    rule a tree applies is read from its decode graph runner (``fencecheck/sglang_source/runners.py``).
    """

    GATED = "gated"
    DECLARATION_ONLY = "declaration_only"
    DECLARATION_ONLY_POST_FALLBACK = "declaration_only_post_fallback"


#: What each declaration-only rule resolves IN_REPLAY to when the runner has no in-graph marker (the rule a tree
#: applies is read from the end its decode graph runner returns there).
NO_MARKER_FALLBACK: dict[ResolutionRule, SharedReadEnds] = {
    ResolutionRule.DECLARATION_ONLY: SharedReadEnds.PRE_REPLAY,
    ResolutionRule.DECLARATION_ONLY_POST_FALLBACK: SharedReadEnds.POST_REPLAY,
}


class PrepStream(str, enum.Enum):
    """The stream a phase's out-of-graph metadata prep runs on (docs/sglang-mechanism.md#streams)."""

    FORWARD = "forward"
    PLAN = "plan"


class PlanJoin(str, enum.Enum):
    """How the forward stream joins the plan stream after a plan-stream prep: ``F.wait_stream(P)`` before the
    launch, after the launch (before any post-replay publish), or not at all."""

    BEFORE_REPLAY = "before_replay"
    AFTER_REPLAY = "after_replay"
    NONE = "none"


class StepKind(str, enum.Enum):
    """Kinds of scheduler step an algorithm may run differently (DSpark: idle ranks, fallback rounds)."""

    NORMAL = "normal"
    IDLE = "idle"
    FALLBACK = "fallback"


class BarrierPlacement(str, enum.Enum):
    """Where the scheduler applies ``_apply_war_barrier`` (docs/sglang-mechanism.md#barrier-placement): right after
    ``run_batch`` returns (since PR #31687) or at the top of the loop (before it, leaving result processing
    unfenced)."""

    AFTER_RUN_BATCH = "after_run_batch"
    LOOP_TOP = "loop_top"


class EventLoop(str, enum.Enum):
    """The scheduler's event loop, which decides whether and where the WAR barrier applies.

    ``overlap``: the overlap loops (plain and disaggregated decode): the barrier at ``placement``.
    ``normal``: no overlap: the forward runs on the schedule stream itself, so every write is stream-ordered after it.
    ``pp``: pipeline parallel: no barrier; result processing starts only after the host synchronises on the
    forward's completion. ``disagg_prefill``: disaggregated prefill with overlap: a fine barrier at once when the
    mailbox holds an event; otherwise the coarse wait is deferred past result processing.
    """

    OVERLAP = "overlap"
    NORMAL = "normal"
    PP = "pp"
    DISAGG_PREFILL = "disagg_prefill"


class Platform(str, enum.Enum):
    """The platforms SGLang's code tells apart by a predicate of its own (``is_cuda()``, ``is_hip()``, ...): whether
    the barrier is on, which decode graph runner replays and whether its graphs have the in-graph marker are read per
    platform from the tree (``fencecheck/sglang_source/platform.py``). ``hip`` is ROCm."""

    CUDA = "cuda"
    HIP = "hip"
    MUSA = "musa"
    XPU = "xpu"
    NPU = "npu"
    CPU = "cpu"


class Stream(str, enum.Enum):
    """The streams (docs/sglang-mechanism.md#streams): schedule S, forward F, plan P."""

    S = "S"
    F = "F"
    P = "P"
