"""The closed vocabularies: ``SharedReadEnds`` order and ``max_of``, the base rule, each declaration's sites."""

from __future__ import annotations

import pytest

from fencecheck.vocab import COVERED_SITES, ForwardMode, ReadSite, SharedReadEnds, base_shared_read_ends


def test_shared_read_ends_order_and_values():
    assert [e.value for e in SharedReadEnds] == [1, 2, 3, 4]
    assert SharedReadEnds.PRE_REPLAY < SharedReadEnds.IN_REPLAY < SharedReadEnds.POST_REPLAY < SharedReadEnds.UNKNOWN


def test_max_of_takes_the_latest_and_unknown_wins():
    assert SharedReadEnds.max_of(SharedReadEnds.PRE_REPLAY, SharedReadEnds.IN_REPLAY) is SharedReadEnds.IN_REPLAY
    assert SharedReadEnds.max_of(SharedReadEnds.POST_REPLAY, SharedReadEnds.UNKNOWN) is SharedReadEnds.UNKNOWN
    assert SharedReadEnds.max_of(SharedReadEnds.PRE_REPLAY) is SharedReadEnds.PRE_REPLAY
    with pytest.raises(ValueError):
        SharedReadEnds.max_of()


@pytest.mark.parametrize("mode", list(ForwardMode))
def test_base_rule(mode):
    expected = SharedReadEnds.IN_REPLAY if mode in (ForwardMode.DECODE, ForwardMode.TARGET_VERIFY) else SharedReadEnds.UNKNOWN
    assert base_shared_read_ends(mode) is expected


def test_covered_sites_grow_with_lateness():
    ends = list(SharedReadEnds)
    for early, late in zip(ends, ends[1:]):
        assert COVERED_SITES[early] <= COVERED_SITES[late]
    assert COVERED_SITES[SharedReadEnds.PRE_REPLAY] == {ReadSite.PRE_REPLAY}
