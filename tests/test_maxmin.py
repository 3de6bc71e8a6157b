"""The max-min solver alone (no time, no SimPy) against the oracle's plain progressive
filling and hand-computed shares."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.engine.maxmin import EPSILON, SAME_RATE, Channel, MaxMin, same_rate
from tests.helpers import progressive_filling


class Stub:
    """A flow as the solver needs it: its links and a rate."""

    __slots__ = ("channels", "rate")

    def __init__(self, channels: tuple[Channel, ...], rate: float = 0.0) -> None:
        self.channels = channels
        self.rate = rate


def build(bandwidths: list[float], routes: list[tuple[int, ...]]
          ) -> tuple[list[Channel], list[Stub]]:
    """Channels of these bandwidths and one flow per route (link indices), on its links."""
    channels = [Channel(bw) for bw in bandwidths]
    flows = []
    for route in routes:
        flow = Stub(tuple(channels[i] for i in route))
        for channel in flow.channels:
            channel.flows[flow] = None
        flows.append(flow)
    return channels, flows


def used(channels: list[Channel]) -> list[Channel]:
    return [c for c in channels if c.flows]


LINKS = st.lists(st.floats(1.0, 50.0), min_size=1, max_size=7)
ROUTES = st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=3, unique=True),
                  min_size=1, max_size=14)


def case(bandwidths, drawn):
    routes = [tuple(dict.fromkeys(h % len(bandwidths) for h in hops)) for hops in drawn]
    return routes, progressive_filling(bandwidths, routes, list(range(len(routes))))


def test_textbook_example_with_two_bottlenecks():
    # L0: 10, L1: 4. f0 crosses both, f1 only L0, f2 only L1: L1 fills first (2 each),
    # then f1 takes what L0 has left.
    channels, flows = build([10.0, 4.0], [(0, 1), (0,), (1,)])
    for rates in (MaxMin().fill(flows), MaxMin.fill_small(flows, channels)):
        assert [rates[f] for f in flows] == [2.0, 8.0, 2.0]


@pytest.mark.parametrize("p", [2, 3, 16, 100])
def test_all_to_all_on_a_switch_gives_every_transfer_one_port_share(p):
    # Link 2g is GPU g's port up, 2g+1 its port down: p(p-1) transfers, p-1 on each port.
    routes = [(2 * s, 2 * d + 1) for s in range(p) for d in range(p) if s != d]
    _, flows = build([7.0] * (2 * p), routes)
    rates = MaxMin().fill(flows)
    assert set(rates.values()) == {7.0 / (p - 1)}


@settings(max_examples=200, deadline=None)
@given(LINKS, ROUTES)
def test_heap_fill_equals_the_oracle(bandwidths, drawn):
    routes, want = case(bandwidths, drawn)
    _, flows = build(bandwidths, routes)
    rates = MaxMin().fill(flows)
    for index, flow in enumerate(flows):
        assert rates[flow] == pytest.approx(want[index], rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(LINKS, ROUTES)
def test_scan_fill_equals_the_oracle(bandwidths, drawn):
    routes, want = case(bandwidths, drawn)
    channels, flows = build(bandwidths, routes)
    rates = MaxMin.fill_small(flows, used(channels))
    assert sorted(map(id, rates)) == sorted(map(id, flows))
    for index, flow in enumerate(flows):
        assert rates[flow] == pytest.approx(want[index], rel=1e-9)
    shares = list(rates.values())
    assert shares == sorted(shares)  # frozen from the tightest link up


@settings(max_examples=200, deadline=None)
@given(LINKS, ROUTES)
def test_component_fill_gives_the_heap_fill_bit_for_bit(bandwidths, drawn):
    """Given a component's links as the heap fill meets them, with their users counted,
    the component fill needs no membership test and must give exactly the same floats."""
    routes, _ = case(bandwidths, drawn)
    _, flows = build(bandwidths, routes)
    links = list(dict.fromkeys(c for f in flows for c in f.channels))
    solver = MaxMin()
    want = solver.fill(flows)
    for link in links:
        link.users = sum(c is link for f in flows for c in f.channels)
    got = solver.fill_component(flows, links)
    assert got == want and list(got) == list(want)


@settings(max_examples=150, deadline=None)
@given(LINKS, ROUTES, st.lists(st.floats(0.05, 0.95), min_size=14, max_size=14),
       st.integers(1, 13))
def test_background_fill_shares_only_what_the_others_leave(bandwidths, drawn, fractions,
                                                           cut):
    """Flows after ``cut`` keep fixed rates (at most a fraction of each link); the fill of
    the first ``cut`` flows equals the oracle on the capacity those leave."""
    routes, _ = case(bandwidths, drawn)
    cut = min(cut, len(routes))
    channels, flows = build(bandwidths, routes)
    group, others = flows[:cut], flows[cut:]
    for flow, fraction in zip(others, fractions, strict=False):
        flow.rate = fraction * min(c.bandwidth / len(c.flows) for c in flow.channels)
    left = [c.bandwidth - sum(f.rate for f in c.flows if f in others) for c in channels]
    want = progressive_filling(left, routes, list(range(cut)))
    rates = MaxMin().fill(group, background=True)
    assert set(rates) == set(group)
    for index, flow in enumerate(group):
        assert rates[flow] == pytest.approx(want[index], rel=1e-9)


@settings(max_examples=150, deadline=None)
@given(LINKS, ROUTES, st.integers(0, 13))
def test_oracle_rates_pass_the_bottleneck_test_and_a_slowed_flow_fails_it(bandwidths, drawn,
                                                                         slow):
    routes, want = case(bandwidths, drawn)
    _, flows = build(bandwidths, routes)
    for index, flow in enumerate(flows):
        flow.rate = want[index]
    solver = MaxMin()
    assert solver.all_bottlenecked(flows)
    assert solver.without_bottleneck(dict.fromkeys(flows), {f: f.rate for f in flows}) == {}
    victim = flows[slow % len(flows)]
    slower = {victim: 0.9 * victim.rate}
    assert not solver.bottleneck_test(slower)(victim, slower[victim])
    # The flows beside it that now go faster than it on a shared link must be looked at.
    joining = solver.without_bottleneck({victim: None}, slower)
    beside = {other for c in victim.channels for other in c.flows
              if other is not victim and other.rate > slower[victim]}
    assert set(joining) >= beside


def test_one_rounding_rule_merges_rounding_and_keeps_real_differences():
    level = 3.0
    assert same_rate(level * (1 + 0.5 * SAME_RATE), level, 0, 1, 100.0)
    assert not same_rate(level * (1 + 1e-9), level, 0, 1, 100.0)
    # A link that gave up 999 shares of 100 B/s may be 999 ulps of 100 off, over its last.
    drift = 999 * 100.0 * EPSILON * 0.9
    assert same_rate(level + drift, level, 999, 1, 100.0)
    assert not same_rate(level + drift, level, 0, 1, 100.0)


def test_marks_are_never_reused():
    solver = MaxMin()
    marks = [solver.mark() for _ in range(5)]
    _, flows = build([1.0, 2.0], [(0,), (0, 1)])
    solver.fill(flows)
    assert len(set(marks)) == 5 and solver.mark() > max(marks) + 1
