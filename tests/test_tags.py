"""Tag spaces: the phases of a composite algorithm never share a tag, at any depth."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.tags import PHASES, TAGS, Tags

PATHS = st.lists(st.integers(0, PHASES - 1), max_size=4)


def space(path: list[int]) -> Tags:
    tags = TAGS
    for k in path:
        tags = tags.phase(k)
    return tags


def test_the_whole_space_numbers_tags_from_zero():
    assert [TAGS[i] for i in range(5)] == [0, 1, 2, 3, 4]
    assert list(TAGS.range(3)) == [0, 1, 2]


def test_phases_interleave_by_hand():
    first, second = TAGS.phases(2)
    assert [first[i] for i in range(3)] == [0, PHASES, 2 * PHASES]
    assert [second[i] for i in range(3)] == [1, PHASES + 1, 2 * PHASES + 1]
    assert list(second.range(3)) == [second[i] for i in range(3)]
    assert second.phase(1)[2] == 1 + PHASES * (1 + PHASES * 2)


@settings(max_examples=300, deadline=None)
@given(PATHS, PATHS, st.integers(0, 10**6), st.integers(0, 10**6))
def test_different_phases_never_share_a_tag(a, b, i, j):
    """Two spaces reached by paths of phases, neither a prefix of the other, are disjoint;
    within one space, different indices are different tags."""
    one, other = space(a), space(b)
    diverge = a[:len(b)] != b and b[:len(a)] != a
    if diverge:
        assert one[i] != other[j]
    if a == b:
        assert (one[i] == other[j]) == (i == j)


@settings(max_examples=200, deadline=None)
@given(PATHS, st.integers(0, PHASES - 1), st.integers(0, 10**6))
def test_a_phase_uses_tags_of_its_parent_only(path, k, i):
    parent, child = space(path), space(path).phase(k)
    offset = child[i] - parent.first
    assert offset % parent.stride == 0 and offset >= 0


def test_out_of_range_phases_and_indices_are_refused():
    with pytest.raises(ValueError):
        TAGS.phase(PHASES)
    with pytest.raises(ValueError):
        TAGS.phase(-1)
    with pytest.raises(IndexError):
        TAGS.phase(1)[-1]
