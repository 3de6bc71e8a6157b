"""The fabric against hand computation: single transfers, shared links, max-min fairness."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.engine.policy import FabricPolicy
from collsim.hardware.topology import switch
from tests.helpers import ExplicitTopology, fluid_max_min, run_transfers


def test_single_transfer_takes_latency_plus_size_over_bandwidth():
    topo = ExplicitTopology([(3e-6, 50e9)], {(0, 1): (0,)})
    [t] = run_transfers(topo, [(0.0, 0, 1, 1e6)])
    assert t == pytest.approx(3e-6 + 1e6 / 50e9, rel=1e-12)


def test_multi_hop_pays_every_latency_once_and_the_slowest_bandwidth():
    topo = ExplicitTopology([(1e-6, 100e9), (2e-6, 25e9), (0.5e-6, 400e9)],
                            {(0, 1): (0, 1, 2)})
    [t] = run_transfers(topo, [(0.0, 0, 1, 4e6)])
    assert t == pytest.approx(3.5e-6 + 4e6 / 25e9, rel=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 7, 16])
def test_k_transfers_on_one_link_each_finish_at_latency_plus_k_n_over_bandwidth(k):
    topo = ExplicitTopology([(1e-6, 10e9)], {(s, 1): (0,) for s in range(k)}, gpus=k + 1)
    times = run_transfers(topo, [(0.0, s, 1, 2e6) for s in range(k)])
    for t in times:
        assert t == pytest.approx(1e-6 + k * 2e6 / 10e9, rel=1e-12)


def test_the_two_directions_of_a_link_do_not_slow_each_other():
    topo = switch("s", 2, 1e-6, 10e9)
    times = run_transfers(topo, [(0.0, 0, 1, 1e6), (0.0, 1, 0, 1e6)])
    assert times == [pytest.approx(2e-6 + 1e6 / 10e9, rel=1e-12)] * 2


def test_textbook_max_min_example_with_different_bottlenecks():
    # L0: 10 B/s, L1: 4 B/s. f0 crosses both, f1 only L0, f2 only L1.
    # t in [0,2): L1 is the bottleneck, f0 = f2 = 2, f1 gets the rest of L0: 8.
    #   f2 (4 B) leaves at t=2; f0 has 4 B left, f1 has 24-16 = 8 B left.
    # t in [2,3): L1 now gives f0 4 (its bottleneck), f1 gets 10-4 = 6. f0 leaves at t=3.
    # t >= 3: f1 alone at 10 B/s with 8-6 = 2 B left: leaves at 3.2.
    lat = 1e-3
    topo = ExplicitTopology([(lat, 10.0), (lat, 4.0)],
                            {(0, 1): (0, 1), (2, 3): (0,), (4, 5): (1,)})
    t0, t1, t2 = run_transfers(topo, [(0.0, 0, 1, 8.0), (0.0, 2, 3, 24.0), (0.0, 4, 5, 4.0)])
    assert t2 == pytest.approx(2.0 + lat, rel=1e-12)
    assert t0 == pytest.approx(3.0 + 2 * lat, rel=1e-12)
    assert t1 == pytest.approx(3.2 + lat, rel=1e-12)


def test_late_arrival_slows_a_transfer_already_moving():
    # f0 alone for 1 s at 10 B/s (10 B of 30 done), then shares with f1: 5 B/s each.
    # f1 (10 B) leaves at 3; f0 has 30-10-10 = 10 B left at 3, alone again: leaves at 4.
    topo = ExplicitTopology([(0.0, 10.0)], {(0, 1): (0,), (2, 1): (0,)})
    t0, t1 = run_transfers(topo, [(0.0, 0, 1, 30.0), (1.0, 2, 1, 10.0)])
    assert t1 == pytest.approx(3.0)
    assert t0 == pytest.approx(4.0)


def test_a_transfer_that_has_drained_does_not_take_bandwidth_during_its_latency():
    # f0's last byte leaves at 1.0 and is delivered at 3.0; f1 starts at 1.5 on the same
    # link and must get the whole link.
    topo = ExplicitTopology([(2.0, 10.0)], {(0, 1): (0,), (2, 1): (0,)})
    t0, t1 = run_transfers(topo, [(0.0, 0, 1, 10.0), (1.5, 2, 1, 10.0)])
    assert t0 == pytest.approx(3.0)
    assert t1 == pytest.approx(1.5 + 1.0 + 2.0)


def test_zero_byte_transfer_takes_the_route_latency():
    topo = switch("s", 2, 1.5e-6, 10e9)
    assert run_transfers(topo, [(0.0, 0, 1, 0)]) == [pytest.approx(3e-6)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3),
                          st.floats(1.0, 1e3), st.floats(0.0, 5.0)), min_size=1, max_size=12))
def test_bytes_are_conserved_and_no_link_is_oversubscribed(spec):
    """Whatever the arrivals: no transfer beats its alone time, and the bottleneck link's
    work bounds the last delivery from below (work conservation)."""
    routes = {(s, d): (s, 4 + d) for s in range(4) for d in range(4)}
    topo = ExplicitTopology([(0.0, 7.0)] * 8, routes)
    transfers = [(start, s, d, size) for s, d, size, start in spec]
    times = run_transfers(topo, transfers)
    for (start, _, _, size), t in zip(transfers, times, strict=True):
        assert t >= start + size / 7.0 * (1 - 1e-9)
    for link in range(8):
        users = [(start, size) for start, s, d, size in transfers if link in routes[s, d]]
        if users:
            first = min(start for start, _ in users)
            last = max(t for (start, s, d, size), t in zip(transfers, times, strict=True)
                       if link in routes[s, d])
            assert last >= first + sum(size for _, size in users) / 7.0 * (1 - 1e-9)


RANDOM_LINKS = st.lists(st.floats(1.0, 50.0), min_size=2, max_size=7)
RANDOM_TRANSFERS = st.lists(
    st.tuples(st.lists(st.integers(0, 6), min_size=1, max_size=3, unique=True),
              st.floats(0.5, 200.0), st.sampled_from([0.0, 0.25, 1.0, 2.5])),
    min_size=1, max_size=14)


def random_case(bandwidths, spec):
    """Links (latency, bandwidth), a route per transfer over them, and the transfers
    (start, src, dst, bytes), from the hypothesis draws above."""
    links = [(0.01 * (i % 3), bw) for i, bw in enumerate(bandwidths)]
    routes, transfers = {}, []
    for index, (hops, size, start) in enumerate(spec):
        hops = tuple(h % len(links) for h in hops)
        routes[index, 100 + index] = tuple(dict.fromkeys(hops))
        transfers.append((start, index, 100 + index, size))
    return links, routes, transfers


@settings(max_examples=150, deadline=None)
@given(RANDOM_LINKS, RANDOM_TRANSFERS)
def test_local_rate_updates_agree_with_recomputing_every_connected_transfer(bandwidths, spec):
    """The fabric recomputes max-min rates only as far as they change; on random links,
    routes and arrival times it must deliver every transfer when a full recomputation of
    the connected transfers would."""
    links, routes, transfers = random_case(bandwidths, spec)
    topo = ExplicitTopology(links, routes, gpus=200)
    local = run_transfers(topo, transfers)
    reference = run_transfers(topo, transfers, FabricPolicy(local_updates=False))
    for got, want in zip(local, reference, strict=True):
        assert got == pytest.approx(want, rel=1e-9)


@settings(max_examples=150, deadline=None)
@given(RANDOM_LINKS, RANDOM_TRANSFERS)
def test_delivery_times_match_an_independent_fluid_max_min_simulation(bandwidths, spec):
    """The fabric skips events and recomputations (no drain event for a transfer nobody
    outlasts, small components refilled whole, local updates); a plain fluid simulation
    that refills every moving transfer at every start and every last byte gives the same
    delivery times."""
    links, routes, transfers = random_case(bandwidths, spec)
    topo = ExplicitTopology(links, routes, gpus=200)
    want = fluid_max_min(links, routes, transfers)
    # Whole small components, then local updates only.
    for policy in (FabricPolicy(), FabricPolicy(small_component=1)):
        got = run_transfers(topo, transfers, policy)
        for g, w in zip(got, want, strict=True):
            assert g == pytest.approx(w, rel=1e-9)


def test_the_policy_chooses_the_rate_solver_and_the_fabric_uses_it():
    """The solver seam: a solver handed in through FabricPolicy is the one every settle asks,
    and (being MaxMin underneath) gives the textbook example's times."""
    from collsim.engine.maxmin import MaxMin

    class Counting(MaxMin):
        fills = 0

        def fill_small(self, flows, channels):
            Counting.fills += 1
            return MaxMin.fill_small(flows, channels)

    topo = ExplicitTopology([(1e-3, 10.0), (1e-3, 4.0)],
                            {(0, 1): (0, 1), (2, 3): (0,), (4, 5): (1,)})
    transfers = [(0.0, 0, 1, 8.0), (0.0, 2, 3, 24.0), (0.0, 4, 5, 4.0)]
    got = run_transfers(topo, transfers, FabricPolicy(solver=Counting))
    assert Counting.fills > 0
    assert got == run_transfers(topo, transfers)


def test_shortcuts_follow_the_policy_and_a_subclass_is_never_bypassed():
    """The lockstep/symmetric paths ask the policy and the fabric class: off in the policy,
    or on a subclass that does not declare itself replaceable, every event runs."""
    from collsim.engine.fabric import Fabric

    class Watching(Fabric):
        pass

    class Declared(Fabric):
        replaceable = True

    assert Fabric.shortcuts_allowed() and Declared.shortcuts_allowed()
    assert not Watching.shortcuts_allowed()


def test_a_policy_without_shortcuts_runs_every_event_to_the_same_times():
    from collsim.algorithms.registry import get_algorithm
    from collsim.engine.timing import TimingEngine
    from collsim.simulate import make_job

    topology = switch("s", 8, 1e-6, 10e9)
    ring = get_algorithm("allreduce", "ring")
    job, gpus = make_job(topology, ring, 8, 1 << 20, {})
    quick = TimingEngine(topology, gpus, job, ring.program).run()
    full = TimingEngine(topology, gpus, job, ring.program,
                        policy=FabricPolicy(shortcuts=False)).run()
    assert quick.path == "lockstep" and full.path == "full"
    assert full.finish == quick.finish
