"""Process groups partition the ranks for every (tensor, data, pipeline, expert) and every
layout order, and Megatron's order gives Megatron's groups."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.workloads.groups import AXES, KINDS, Layout


@st.composite
def layouts(draw):
    tensor, pipeline = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    expert = draw(st.integers(1, 4))
    data = expert * draw(st.integers(1, 4))
    order = tuple(draw(st.permutations(AXES)))
    return Layout(tensor, data, pipeline, expert, order)


@settings(max_examples=150, deadline=None)
@given(layout=layouts())
def test_every_kind_of_group_partitions_the_ranks(layout):
    world = layout.world
    sizes = {"tensor": layout.tensor, "data": layout.data, "pipeline": layout.pipeline,
             "expert": layout.expert, "expert_data": layout.data // layout.expert}
    for kind in KINDS:
        groups = layout.groups(kind)
        members = sorted(itertools.chain.from_iterable(groups))
        assert members == list(range(world)), kind
        assert {len(g) for g in groups} == {sizes[kind]}
        assert len(groups) == world // sizes[kind]
        for group in groups:
            for rank in group:
                assert layout.group(kind, rank) == group


@settings(max_examples=150, deadline=None)
@given(layout=layouts())
def test_coordinates_are_a_bijection_and_groups_vary_one_axis(layout):
    for rank in range(layout.world):
        coords = layout.coords(rank)
        assert layout.rank(**coords) == rank
        assert all(0 <= coords[a] < layout.size(a) for a in AXES)
        for axis in AXES:
            group = layout.group(axis, rank)
            seen = [layout.coords(g) for g in group]
            assert [c[axis] for c in seen] == list(range(layout.size(axis)))
            assert all({a: c[a] for a in AXES if a != axis} ==
                       {a: coords[a] for a in AXES if a != axis} for c in seen)
        for first, second in itertools.combinations(AXES, 2):
            assert set(layout.group(first, rank)) & set(layout.group(second, rank)) == {rank}
        expert, expert_data = layout.group("expert", rank), layout.group("expert_data", rank)
        assert set(expert) & set(expert_data) == {rank}
        assert sorted(e for g in expert_data for e in layout.group("expert", g)) == \
            sorted(layout.group("data", rank))


def test_megatrons_order_gives_megatrons_groups():
    """Megatron-LM's initialize_model_parallel docstring: 16 GPUs, tensor 2, pipeline 4."""
    layout = Layout(tensor=2, data=2, pipeline=4)
    assert layout.groups("tensor") == [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9), (10, 11),
                                       (12, 13), (14, 15)]
    assert layout.groups("data") == [(0, 2), (1, 3), (4, 6), (5, 7), (8, 10), (9, 11),
                                     (12, 14), (13, 15)]
    assert layout.groups("pipeline") == [(0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14),
                                         (3, 7, 11, 15)]


def test_another_order_puts_pipeline_inside_data():
    layout = Layout(tensor=2, data=2, pipeline=4, order=("tensor", "pipeline", "data"))
    assert layout.groups("pipeline")[0] == (0, 2, 4, 6)
    assert layout.groups("data")[0] == (0, 8)


def test_expert_groups_are_consecutive_replicas_of_a_data_group():
    layout = Layout(tensor=2, data=4, pipeline=1, expert=2)
    assert layout.group("data", 0) == (0, 2, 4, 6)
    assert layout.group("expert", 0) == (0, 2) and layout.group("expert", 4) == (4, 6)
    assert layout.group("expert_data", 0) == (0, 4) and layout.group("expert_data", 2) == (2, 6)


def test_bad_layouts_are_refused():
    with pytest.raises(ValueError, match="order"):
        Layout(order=("tensor", "data", "data"))
    with pytest.raises(ValueError, match="divide"):
        Layout(data=3, expert=2)
