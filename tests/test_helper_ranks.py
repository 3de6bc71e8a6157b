"""Helper ranks on switches (NVLS, SHARP): endpoints and routes of the topology, and a small
NVLS-like allreduce whose data is checked and whose time is computed by hand."""

from __future__ import annotations

import pytest

from collsim.engine.data import check_algorithm
from collsim.engine.timing import TimingEngine
from collsim.errors import SimulationError
from collsim.hardware.loader import topology_from_text
from collsim.hardware.topology import switch
from collsim.program import Copy, HelperRank, Job, Recv, Reduce, Send, block

LATENCY, BANDWIDTH = 0.5e-6, 100e9


def nvls_like(rank: int, job: Job):
    """Every GPU sends slice h of its buffer to the switch (helper rank p); the switch
    combines the p copies of each slice and multicasts it to every GPU."""
    p, n = job.nranks, job.count
    switch_rank = p
    slices = [block(n, p, h) for h in range(p)]
    if rank < p:
        yield tuple(Send(switch_rank, h, *slices[h]) for h in range(p))
        yield tuple(Recv(switch_rank, p + h, *slices[h]) for h in range(p))
        return
    # The switch: GPU r's copy of slice h lands at tmp[r·n + offset of h].
    yield tuple(Recv(r, h, r * n + slices[h][0], slices[h][1], buf="tmp")
                for r in range(p) for h in range(p))
    yield tuple(op for h, (offset, length) in enumerate(slices) for op in
                [Copy("buf", offset, "tmp", offset, length)]
                + [Reduce("buf", offset, "tmp", r * n + offset, length) for r in range(1, p)])
    yield tuple(Send(g, p + h, *slices[h]) for g in range(p) for h in range(p))


def nvls_job(p: int, count: int, endpoint: str = "switch", reduce_bandwidth=float("inf")
             ) -> Job:
    return Job("allreduce", p, count, itemsize=4,
               helpers=(HelperRank(endpoint, reduce_bandwidth, scratch=p * count),))


@pytest.mark.parametrize("p", range(1, 17))
def test_nvls_like_allreduce_data_is_the_sum_at_every_gpu(p):
    for count in (0, p // 2 + 1, 3 * p + 1):
        for op in ("sum", "max"):
            check_algorithm(nvls_like, nvls_job(p, count), op, "int64", seed=p + count)


@pytest.mark.parametrize("p", [1, 2, 5, 8, 16])
def test_nvls_like_allreduce_time_on_a_switch_by_hand(p):
    # Up: p slices of n/p share each GPU's uplink, arriving at L + n/B; down: p slices share
    # each downlink, L + n/B more. The switch adds no port of its own.
    count = 1000 * p
    n = 4 * count
    machine = switch("s", p, LATENCY, BANDWIDTH)
    run = TimingEngine(machine, list(range(p)), nvls_job(p, count), nvls_like).run()
    assert run.time == pytest.approx(2 * LATENCY + 2 * n / BANDWIDTH, rel=1e-12)
    assert len(run.finish) == p and run.transfers == 2 * p * p
    # A switch that reduces at R combines p-1 copies of the whole buffer in turn.
    reducing = 50e9
    run = TimingEngine(machine, list(range(p)), nvls_job(p, count, reduce_bandwidth=reducing),
                       nvls_like).run()
    assert run.time == pytest.approx(2 * LATENCY + 2 * n / BANDWIDTH + (p - 1) * n / reducing,
                                     rel=1e-12)


NODE = """
kind: nvswitch
gpus: 8
nvlink: {latency: 0.7us, bandwidth: 300GB/s}
"""


def test_nvls_like_allreduce_on_an_nvswitch_node_uses_each_gpus_nvlink():
    machine = topology_from_text(NODE)
    assert [e.name for e in machine.endpoints()] == ["n0.nvswitch"]
    assert machine.nvswitch(0) == "n0.nvswitch" and machine.nvswitch(1) is None
    hub = machine.endpoint("n0.nvswitch")
    up, down = machine.route(3, hub), machine.route(hub, 3)
    assert [machine.links[i].name for i in up + down] == ["n0.gpu3->n0.nvswitch",
                                                          "n0.nvswitch->n0.gpu3"]
    assert machine.route(3, 5) == up + machine.route(hub, 5)  # GPU routes unchanged
    count = 8 * 1000
    run = TimingEngine(machine, list(range(8)), nvls_job(8, count, "n0.nvswitch"),
                       nvls_like).run()
    assert run.time == pytest.approx(2 * 0.7e-6 + 2 * 4 * count / 300e9, rel=1e-12)


CLUSTER = """
kind: cluster
nodes: 3
node:
  kind: nvswitch
  gpus: 2
  nvlink: {latency: 1us, bandwidth: 200GB/s}
  pcie: {switches: 2, link: {latency: 0.5us, bandwidth: 40GB/s},
         uplink: {latency: 0.5us, bandwidth: 40GB/s}}
  nics: {count: 2, link: {latency: 2us, bandwidth: 25GB/s}}
fabric: {kind: fat_tree, leaf_ports: 4, oversubscription: 1, latency: 1us}
"""


def test_network_switches_are_endpoints_reached_through_the_gpus_nic():
    machine = topology_from_text(CLUSTER)
    names = [e.name for e in machine.endpoints()]
    assert names[:3] == ["n0.nvswitch", "n1.nvswitch", "n2.nvswitch"]
    assert set(names[3:]) == {"leaf0", "leaf1", "spine0", "spine1", "spine2", "spine3"}
    assert machine.endpoint_count == machine.gpus + len(names)

    def hops(src, dst):
        return [machine.links[i].name for i in machine.route(src, dst)]

    gpu = 3  # node 1, local GPU 1, on NIC 1 under PCIe switch 1
    assert hops(gpu, machine.endpoint("leaf0")) == ["n1.gpu1->n1.pcie1", "n1.pcie1->n1.nic1",
                                                   "n1.nic1->leaf0"]
    to_spine = hops(gpu, machine.endpoint("spine2"))
    assert to_spine[:3] == hops(gpu, machine.endpoint("leaf0")) and len(to_spine) == 4
    assert to_spine[3] == "leaf0->spine2"
    assert hops(machine.endpoint("leaf0"), gpu) == ["leaf0->n1.nic1", "n1.nic1->n1.pcie1",
                                                   "n1.pcie1->n1.gpu1"]
    assert hops(machine.endpoint("leaf1"), machine.endpoint("spine0")) == ["leaf1->spine0"]
    with pytest.raises(ValueError, match="no route from GPU 0 to n1.nvswitch"):
        machine.route(0, machine.endpoint("n1.nvswitch"))


def test_a_sharp_like_reduction_at_the_leaf_by_hand():
    # Four GPUs (nodes 0 and 1) send their buffer to leaf0 over PCIe and their NIC (25 GB/s
    # bottleneck, 0.5 + 0.5 + 2 us), the leaf combines and sends the result back.
    machine = topology_from_text(CLUSTER)
    count = 25_000
    run = TimingEngine(machine, [0, 1, 2, 3], nvls_job(4, count, "leaf0"), nvls_like).run()
    assert run.time == pytest.approx(2 * 3e-6 + 2 * 4 * count / 25e9, rel=1e-12)


def test_an_unknown_endpoint_is_named_with_the_ones_that_exist():
    with pytest.raises(SimulationError, match="has no endpoint 'nvswitch'; it has: switch"):
        TimingEngine(switch("s", 2, LATENCY, BANDWIDTH), [0, 1], nvls_job(2, 4, "nvswitch"),
                     nvls_like).run()


def test_a_helper_rank_needs_a_positive_reduce_bandwidth():
    with pytest.raises(ValueError, match="reduce_bandwidth must be positive"):
        HelperRank("switch", reduce_bandwidth=0.0)
