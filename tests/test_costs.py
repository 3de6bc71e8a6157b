"""The cost-model seam: the timing engine and the closed forms charge the same model, so
they agree under any model, and the ideal model is the links' own figures."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.algorithms import REGISTRY
from collsim.algorithms.nccl.switches import SWITCH_ALGORITHMS
from collsim.collectives import COLLECTIVES
from collsim.engine.costs import IDEAL, MessageCosts, path_costs, route_alpha_beta
from collsim.engine.fabric import Fabric
from collsim.hardware.topology import Link, Topology, fully_connected, switch
from collsim.simulate import simulate
from tests.helpers import ExplicitTopology, run_transfers

LATENCY, BANDWIDTH, REDUCE = 0.7e-6, 50e9, 400e9
# Everything the seam can charge, none of it trivial.
PROTOCOL = MessageCosts(launch=6.5e-6, per_message=1.1e-6, per_hop={"port": 0.35e-6},
                        efficiency={"port": 0.8}, wire_ratio=128 / 120)
# The in-switch algorithms' forms charge a GPU-switch hop α/2, which holds on the ideal
# switch only: a model charging per message gives that hop a message's whole latency.
EXACT = sorted(key for key, a in REGISTRY.items()
               if a.exact in ("any", "pow2") and key[1] != "hierarchical"
               and key[1] not in SWITCH_ALGORITHMS)


@pytest.fixture(scope="module")
def machine():
    return switch("ideal", 16, LATENCY, BANDWIDTH, REDUCE)


def test_the_ideal_model_charges_the_links_own_figures():
    topo = switch("s", 4, LATENCY, BANDWIDTH)
    alpha, beta = route_alpha_beta(IDEAL, [topo.links[i] for i in topo.route(0, 3)])
    assert (alpha, beta) == (2 * LATENCY, 1 / BANDWIDTH) == topo.path_parameters()
    fabric = Fabric(None, topo)
    channels, latency, bottleneck = fabric.route(1, 2)
    assert (latency, bottleneck) == (2 * LATENCY, BANDWIDTH)
    assert [c.bandwidth for c in fabric.channels] == [BANDWIDTH] * 8


def test_one_transfer_pays_every_part_of_the_model_by_hand():
    # Two hops of kind "port": per message once, link latency and per-hop extra twice;
    # bytes on the wire n·(128/120) at 80% of line rate.
    n = 3e6
    topo = switch("s", 2, LATENCY, BANDWIDTH)
    want = 1.1e-6 + 2 * (LATENCY + 0.35e-6) + n * (128 / 120) / (0.8 * BANDWIDTH)
    result = simulate(topo, "broadcast", "binomial", 2, int(n), costs=PROTOCOL)
    assert result.time_s == pytest.approx(6.5e-6 + want, rel=1e-12)
    assert result.analytic_time_s == pytest.approx(6.5e-6 + want, rel=1e-12)


def test_efficiency_and_per_hop_cost_follow_the_link_kind():
    links = [(1e-6, 10e9), (2e-6, 10e9)]
    topo = ExplicitTopology(links, {(0, 1): (0,), (2, 3): (1,)})
    topo.links[1].kind = "slow"
    model = MessageCosts(per_hop={"slow": 5e-6}, efficiency={"slow": 0.5})
    fabric = Fabric(None, topo, model)
    assert fabric.route(0, 1)[1:] == (1e-6, 10e9)
    assert fabric.route(2, 3)[1:] == (pytest.approx(7e-6, rel=1e-12), 5e9)


def test_launch_alone_is_the_time_of_a_call_that_moves_nothing():
    topo = switch("s", 4, LATENCY, BANDWIDTH)
    result = simulate(topo, "allreduce", "ring", 1, 4096, costs=MessageCosts(launch=3e-6))
    assert result.time_s == 3e-6 == result.analytic_time_s


@pytest.mark.parametrize("key", EXACT, ids="/".join)
def test_simulation_equals_closed_form_under_a_protocol_model(machine, key):
    """Every algorithm whose closed form is exact on switch stays exact when the model
    charges a launch, per-message and per-hop latency, an efficiency and a wire ratio."""
    collective, name = key
    algorithm = REGISTRY[key]
    ranks = [2, 3, 5, 8, 12, 16] if algorithm.exact == "any" else [2, 4, 8, 16]
    for p in ranks:
        chunk = 4 * 16 * p
        params = {"chunk_size": chunk} if "chunk_size" in algorithm.params else {}
        if COLLECTIVES[collective].rooted:
            params["root"] = (p * 5) // 7
        size = 3 * chunk
        ideal = simulate(machine, collective, name, p, size, params)
        result = simulate(machine, collective, name, p, size, params, costs=PROTOCOL)
        assert result.time_s > ideal.time_s + PROTOCOL.launch  # the model is charged
        assert math.isclose(result.time_s, result.analytic_time_s, rel_tol=1e-9), \
            (key, p, result.time_s, result.analytic_time_s)


@settings(max_examples=25, deadline=None)
@given(st.floats(0, 1e-4), st.floats(0, 1e-5), st.floats(0, 1e-5), st.floats(0.05, 1.0),
       st.floats(1.0, 3.0), st.sampled_from([2, 3, 6, 7]))
def test_ring_allreduce_matches_its_closed_form_under_any_model(launch, message, hop,
                                                                 efficiency, ratio, p):
    model = MessageCosts(launch, message, {"direct": hop}, {"direct": efficiency}, ratio)
    mesh = fully_connected("mesh", 8, 2e-6, 25e9, 300e9)
    result = simulate(mesh, "allreduce", "ring", p, 4 * p * 1000, costs=model)
    assert math.isclose(result.time_s, result.analytic_time_s, rel_tol=1e-9)


class MixedKinds(Topology):
    """Three GPUs whose routes match in figures but cross links of two kinds."""

    def __init__(self) -> None:
        super().__init__("mixed", "mixed", 3, [Link("a", "b", 1e-6, 1e9, "nvlink"),
                                               Link("b", "a", 1e-6, 1e9, "pcie")])

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        return (0,) if src < dst else (1,)

    def path_parameters(self) -> tuple[float, float]:
        return 1e-6, 1e-9


def test_no_closed_form_where_the_model_makes_alike_routes_differ():
    topo = MixedKinds()
    assert path_costs(topo, IDEAL) == (1e-6, 1e-9)
    assert path_costs(topo, MessageCosts(per_message=1e-6)) == (2e-6, 1e-9)
    assert path_costs(topo, MessageCosts(per_hop={"pcie": 1e-6})) is None
    assert path_costs(topo, MessageCosts(efficiency={"nvlink": 0.9})) is None


def test_transfers_share_the_reachable_bandwidth_on_the_wire():
    # Two transfers on one link of 10 B/s at 50% efficiency with 2 wire bytes per byte:
    # 2.5 payload B/s of link, 1.25 each: 5 B take 4 s.
    topo = ExplicitTopology([(0.0, 10.0)], {(0, 1): (0,), (2, 1): (0,)})
    model = MessageCosts(efficiency={"link": 0.5}, wire_ratio=2.0)
    env_times = run_transfers(topo, [(0.0, 0, 1, 5.0), (0.0, 2, 1, 5.0)], costs=model)
    assert env_times == [pytest.approx(4.0)] * 2
