"""Each node kind and fabric routes GPU pairs over their real path; times are hand-computed
from the figures in the YAML (latencies add up, the slowest link sets the rate, transfers
crossing one link share it)."""

from __future__ import annotations

import pytest

from collsim.engine.timing import TimingEngine
from collsim.hardware.cluster import ClusterTopology
from collsim.hardware.graph import stable_hash
from collsim.hardware.loader import topology_from_text
from collsim.hardware.topology import Topology
from collsim.program import Job, Recv, Send

MB = 10**6


def deliver(topology: Topology, pairs: list[tuple[int, int]], nbytes: int) -> dict:
    """Start every (src GPU, dst GPU) transfer of ``nbytes`` at t = 0; return when each
    destination has its bytes (rank r runs on GPU r; a GPU takes part in one pair only)."""
    def program(rank: int, job: Job):
        ops = [Send(d, 0, 0, nbytes) for s, d in pairs if s == rank]
        ops += [Recv(s, 0, 0, nbytes) for s, d in pairs if d == rank]
        if ops:
            yield tuple(ops)

    job = Job("alltoall", topology.gpus, nbytes, itemsize=1)
    run = TimingEngine(topology, list(range(topology.gpus)), job, program).run()
    return {(s, d): run.finish[d] for s, d in pairs}


def names(topology: Topology, src: int, dst: int) -> list[str]:
    return [topology.links[i].name for i in topology.route(src, dst)]


PCIE_NODE = """
kind: pcie
gpus: 8
pcie:
  switches: 4
  sockets: 2
  link: {latency: 1us, bandwidth: 30GB/s}
  uplink: {latency: 2us, bandwidth: 25GB/s}
  inter_socket: {latency: 3us, bandwidth: 20GB/s}
"""


def test_pcie_gpus_under_one_switch_talk_through_it():
    t = topology_from_text(PCIE_NODE)
    assert names(t, 0, 1) == ["n0.gpu0->n0.pcie0", "n0.pcie0->n0.gpu1"]
    [time] = deliver(t, [(0, 1)], 30 * MB).values()
    assert time == pytest.approx(2e-6 + 30 * MB / 30e9, rel=1e-12)


def test_pcie_gpus_on_one_socket_go_up_to_the_root_port():
    t = topology_from_text(PCIE_NODE)
    assert names(t, 0, 2) == ["n0.gpu0->n0.pcie0", "n0.pcie0->n0.cpu0",
                              "n0.cpu0->n0.pcie1", "n0.pcie1->n0.gpu2"]
    [time] = deliver(t, [(0, 2)], 25 * MB).values()
    assert time == pytest.approx(1e-6 + 2e-6 + 2e-6 + 1e-6 + 25 * MB / 25e9, rel=1e-12)


def test_pcie_sockets_share_the_inter_socket_link():
    t = topology_from_text(PCIE_NODE)
    assert names(t, 0, 4) == ["n0.gpu0->n0.pcie0", "n0.pcie0->n0.cpu0", "n0.cpu0->n0.cpu1",
                              "n0.cpu1->n0.pcie2", "n0.pcie2->n0.gpu4"]
    latency = 1e-6 + 2e-6 + 3e-6 + 2e-6 + 1e-6
    [alone] = deliver(t, [(0, 4)], 20 * MB).values()
    assert alone == pytest.approx(latency + 20 * MB / 20e9, rel=1e-12)
    # 0->4 and 2->6 use different switches but the same cpu0->cpu1 link: 10 GB/s each.
    # 5->1 crosses the other way (cpu1->cpu0), alone: it keeps the full 20 GB/s.
    times = deliver(t, [(0, 4), (2, 6), (5, 1)], 20 * MB)
    assert times[0, 4] == pytest.approx(latency + 20 * MB / 10e9, rel=1e-12)
    assert times[2, 6] == pytest.approx(latency + 20 * MB / 10e9, rel=1e-12)
    assert times[5, 1] == pytest.approx(latency + 20 * MB / 20e9, rel=1e-12)


def test_nvswitch_node_is_two_hops_between_any_gpus_and_uniform():
    t = topology_from_text("""
kind: nvswitch
gpus: 8
nvlink: {latency: 0.5us, bandwidth: 450GB/s}
pcie: {switches: 4, link: {latency: 1us, bandwidth: 63GB/s},
       uplink: {latency: 1us, bandwidth: 63GB/s}}
""")
    assert names(t, 3, 6) == ["n0.gpu3->n0.nvswitch", "n0.nvswitch->n0.gpu6"]
    assert t.path_parameters() == (1e-6, 1 / 450e9)
    # Two GPUs sending to one: the receiver's NVSwitch port is shared, 225 GB/s each.
    times = deliver(t, [(0, 7), (1, 7), (2, 3)], 45 * MB)
    assert times[0, 7] == pytest.approx(1e-6 + 45 * MB / 225e9, rel=1e-12)
    assert times[2, 3] == pytest.approx(1e-6 + 45 * MB / 450e9, rel=1e-12)


NVLINK_RING = """
kind: nvlink
gpus: 4
nvlink: {latency: 0.7us, bandwidth: 25GB/s}
wiring: ring
links_per_pair: 2
pcie: {switches: 1, link: {latency: 1us, bandwidth: 16GB/s},
       uplink: {latency: 1us, bandwidth: 16GB/s}}
"""


def test_nvlink_ring_neighbours_use_their_links_and_others_fall_back_to_pcie():
    t = topology_from_text(NVLINK_RING)
    assert names(t, 0, 1) == ["n0.gpu0->n0.gpu1"]
    assert names(t, 3, 0) == ["n0.gpu3->n0.gpu0"]
    assert names(t, 0, 2) == ["n0.gpu0->n0.pcie0", "n0.pcie0->n0.gpu2"]
    times = deliver(t, [(0, 1), (0, 2)], 10 * MB)
    assert times[0, 1] == pytest.approx(0.7e-6 + 10 * MB / 50e9, rel=1e-12)  # 2 x 25 GB/s
    assert times[0, 2] == pytest.approx(2e-6 + 10 * MB / 16e9, rel=1e-12)


def test_nvlink_explicit_pairs_set_each_pairs_bandwidth():
    t = topology_from_text("""
kind: nvlink
gpus: 3
nvlink: {latency: 1us, bandwidth: 20GB/s}
pairs: [[0, 1, 1], [1, 2, 3], [0, 2, 2]]
""")
    assert [t.path_bandwidth(a, b) for a, b in [(0, 1), (1, 2), (2, 0)]] == [20e9, 60e9, 40e9]
    assert t.path_parameters() is None


def test_nvlink_node_without_a_path_is_an_input_error():
    from collsim.errors import InputError
    with pytest.raises(InputError, match="GPUs 0 and 2 have no path"):
        topology_from_text(NVLINK_RING.replace("pcie:", "x_pcie:").split("x_pcie:")[0])


CLUSTER = """
kind: cluster
nodes: 2
node:
  kind: nvswitch
  gpus: 4
  nvlink: {{latency: 1us, bandwidth: 100GB/s}}
  pcie: {{switches: 2, sockets: 2, link: {{latency: 0.5us, bandwidth: 60GB/s}},
         uplink: {{latency: 0.5us, bandwidth: 60GB/s}},
         inter_socket: {{latency: 1us, bandwidth: 40GB/s}}}}
  nics: {{count: {nics}, link: {{latency: 2us, bandwidth: 25GB/s}}, gpudirect: {direct}}}
fabric: {{kind: switch}}
"""


def test_gpudirect_reaches_the_nic_under_the_gpus_own_switch():
    t = topology_from_text(CLUSTER.format(nics=2, direct="true"))
    assert names(t, 1, 5) == [
        "n0.gpu1->n0.pcie0", "n0.pcie0->n0.nic0", "n0.nic0->switch", "switch->n1.nic0",
        "n1.nic0->n1.pcie0", "n1.pcie0->n1.gpu1"]
    [time] = deliver(t, [(1, 5)], 25 * MB).values()
    assert time == pytest.approx(4 * 0.5e-6 + 2 * 2e-6 + 25 * MB / 25e9, rel=1e-12)


def test_without_gpudirect_traffic_is_staged_through_the_gpus_socket():
    t = topology_from_text(CLUSTER.format(nics=1, direct="false"))
    # GPU 3 sits on socket 1; the one NIC sits under switch 0 on socket 0.
    assert names(t, 3, 4)[:6] == [
        "n0.gpu3->n0.pcie1", "n0.pcie1->n0.cpu1", "n0.cpu1->n0.cpu0", "n0.cpu0->n0.pcie0",
        "n0.pcie0->n0.nic0", "n0.nic0->switch"]
    # GPU 0 shares the NIC's switch but still goes up to its CPU and back down.
    assert names(t, 0, 4)[:4] == ["n0.gpu0->n0.pcie0", "n0.pcie0->n0.cpu0",
                                  "n0.cpu0->n0.pcie0", "n0.pcie0->n0.nic0"]


def test_torus_of_gpus_takes_shortest_wraparound_paths():
    t = topology_from_text("kind: torus\ndims: [4, 4]\nlink: {latency: 1us, bandwidth: 10GB/s}")
    assert len(t.route(0, 3)) == 1          # (0,0) -> (0,3) wraps around
    assert len(t.route(0, 10)) == 4         # (0,0) -> (2,2): two hops in each dimension
    times = deliver(t, [(0, 10)], 10 * MB)
    assert times[0, 10] == pytest.approx(4e-6 + 10 * MB / 10e9, rel=1e-12)
    # Equal-cost paths are spread: 0 -> (1,1) has two, and different pairs use both.
    first_hops = {names(t, s, (s + 5) % 16)[0].split("->")[1] for s in range(16)}
    assert len(first_hops) > 4


def test_ecmp_spreads_over_spines_and_is_the_same_in_every_process():
    text = """
kind: cluster
nodes: 8
node:
  kind: nvswitch
  gpus: 8
  nvlink: {latency: 1us, bandwidth: 100GB/s}
  pcie: {switches: 1, link: {latency: 1us, bandwidth: 60GB/s},
         uplink: {latency: 1us, bandwidth: 60GB/s}}
  nics: {count: 8, link: {latency: 1us, bandwidth: 50GB/s}}
fabric: {kind: fat_tree, leaf_ports: 16, latency: 1us}
"""
    t, again = topology_from_text(text), topology_from_text(text)
    spines = {}
    for g in range(16):                     # nodes 0-1 (leaf 0) to nodes 2-3 (leaf 1)
        route = names(t, g, g + 16)
        assert route == names(again, g, g + 16)
        assert len(route) == 8
        spines[g] = route[3]
    assert len(set(spines.values())) >= 8   # 16 flows over 16 spines
    assert stable_hash("a", 1) == 718304929  # CRC-32: the same in every process


def test_routes_are_computed_lazily():
    t = topology_from_text("""
kind: cluster
nodes: 64
node:
  kind: nvswitch
  gpus: 8
  nvlink: {latency: 1us, bandwidth: 100GB/s}
  pcie: {switches: 4, link: {latency: 1us, bandwidth: 60GB/s},
         uplink: {latency: 1us, bandwidth: 60GB/s}}
  nics: {count: 8, link: {latency: 1us, bandwidth: 50GB/s}}
fabric: {kind: fat_tree, leaf_ports: 32, oversubscription: 2, latency: 1us}
""")
    assert isinstance(t, ClusterTopology)
    assert t.gpus == 512 and not t.fabric_router._preds
    t.route(0, 511)
    assert len(t.fabric_router._preds) == 1
