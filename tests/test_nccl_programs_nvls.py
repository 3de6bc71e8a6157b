"""NVLS (the NVSwitch reduces and multicasts): data against numpy for p = 1..40 on one node
and on uneven nodes, closed forms on the ideal switch and on an NVSwitch node, a two-node
allreduce through a SHARP switch by hand, the bytes on a GPU's links, NCCL's chunk for the
call's size, and the machines NVLS refuses."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from collsim.algorithms import REGISTRY
from collsim.algorithms.nccl.nvls import (
    lane_chunks,
    nvls_allreduce_job,
    nvls_one_node_job,
    serial_steps,
    tree_heads,
)
from collsim.algorithms.nccl.nvls_tree import tree_halves
from collsim.algorithms.nccl.switches import nvls_chunk_bytes
from collsim.engine.costs import IDEAL
from collsim.engine.data import check_algorithm
from collsim.engine.timing import TimingEngine
from collsim.errors import InputError
from collsim.hardware.loader import load_topology, topology_from_text
from collsim.hardware.topology import fully_connected, switch
from collsim.output.linkload import link_loads
from collsim.program import Job
from collsim.recorded import record_call
from collsim.simulate import make_job, simulate
from tests.helpers import uneven_nodes
from tests.test_nccl_algorithms import DTYPES, OPS

COUNTS = (0, 1, 7, 3, 37)


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter"])
def test_data_for_1_to_40_ranks_on_one_node(collective):
    program = REGISTRY[collective, "nvls"].program
    declare = nvls_allreduce_job if collective == "allreduce" else nvls_one_node_job
    for p in range(1, 41):
        dtype, op = DTYPES[p % len(DTYPES)], OPS[p % len(OPS)]
        itemsize = np.dtype(dtype).itemsize
        count = (COUNTS[p % 5] * p) // 3 + p % 4
        job = Job(collective, p, count, itemsize,
                  params={"channels": 1 + p % 4, "chunk_size": itemsize * (1 + p % 3)})
        check_algorithm(program, declare(job), op, dtype, seed=p)


def test_allreduce_data_across_uneven_nodes_through_network_switches():
    program = REGISTRY["allreduce", "nvls"].program
    for p in range(1, 41):
        dtype, op = DTYPES[p % len(DTYPES)], OPS[(p + 1) % len(OPS)]
        itemsize = np.dtype(dtype).itemsize
        job = Job("allreduce", p, (0, 1, p + 3, 4 * p + 1)[p % 4], itemsize,
                  params={"channels": 1 + p % 3, "chunk_size": itemsize * (1 + p % 5)},
                  nodes=uneven_nodes(p, p))
        declared = nvls_allreduce_job(job)
        nodes = len(set(job.nodes))
        assert len(declared.helpers) == (nodes + max(job.nodes.count(k) for k in set(job.nodes))
                                         if nodes > 1 else 1)
        check_algorithm(program, declared, op, dtype, seed=p)


LATENCY, BANDWIDTH, REDUCE = 0.7e-6, 50e9, 400e9


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter"])
def test_closed_forms_on_the_ideal_switch_for_channels_and_chunk_caps(collective):
    machine = switch("ideal", 17, LATENCY, BANDWIDTH, REDUCE)
    for p in (2, 5, 17):
        unit = 4 * 64 * p
        for channels in (1, 3):
            # 0 bytes; a few chunks; more chunks than the cap (64 for two hops, 192 for the
            # allreduce's four: they grow instead), a multiple of both.
            for size in (0, 3 * channels * unit, 128 * 192 * channels * unit):
                result = simulate(machine, collective, "nvls", p, size,
                                  {"channels": channels, "chunk_size": unit})
                assert result.time_s == pytest.approx(result.analytic_time_s, rel=1e-9)


def test_one_node_streams_by_chunk_and_across_nodes_a_loop_is_every_heads_chunk():
    # One node: the pipeline's unit is a channel's chunk, so 160 chunks are 160 steps of
    # messages up and down for the 40 GPUs and, for the 32 heads (NCCL's most), a partial and
    # a result. Across nodes it is NCCL's loop, heads x chunk a channel, with at most 32
    # heads: 40 GPUs a node make 160 chunks 5 loops (4 with 40).
    machine = switch("ideal", 40, LATENCY, BANDWIDTH, REDUCE)
    unit = 4 * 64 * 40  # slices of whole elements, as the closed form assumes
    result = simulate(machine, "allreduce", "nvls", 40, 160 * unit, {"chunk_size": unit})
    assert result.transfers == (2 * 40 + 2 * 32) * 160
    assert result.time_s == pytest.approx(result.analytic_time_s, rel=1e-9)
    job = Job("allreduce", 80, 160 * unit // 4, params={"chunk_size": unit},
              nodes=tuple(r // 40 for r in range(80)))
    assert len(lane_chunks(job, 6)) == 5


def test_the_allreduce_form_by_hand():
    # 4 chunks of c = n/4, slices s = c/8; steps j = 0..6 carry (up, down): (c, 0), (c, s),
    # (c + s, s), (c + s, s + c), (s, s + c), (s, c), (0, c): each link's flows share it, so
    # a step takes L + the larger side / B: 7 L + (4c + 3(c + s)) / B.
    machine = switch("ideal", 8, LATENCY, BANDWIDTH)
    n = 4 * 2**20
    c, s = n / 4, n / 32
    result = simulate(machine, "allreduce", "nvls", 8, n, {"chunk_size": 2**20})
    assert result.time_s == pytest.approx(7 * LATENCY + (4 * c + 3 * (c + s)) / BANDWIDTH,
                                          rel=1e-12)


NODE = """
kind: nvswitch
gpus: 8
nvlink: {latency: 0.5us, bandwidth: 300GB/s}
gpu: {model: test, arch: 90}
nccl: {launch: 0us, cpu: intel, nvls: true}
"""


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter"])
def test_an_nvswitch_node_meets_the_closed_form_and_uses_the_nodes_switch(collective):
    machine = topology_from_text(NODE)
    size = 8 * 4 * 64 * 10
    result = simulate(machine, collective, "nvls", 8, size, {"chunk_size": 4 * 64 * 8},
                      IDEAL)
    assert result.time_s == pytest.approx(result.analytic_time_s, rel=1e-9)
    job, _ = make_job(machine, REGISTRY[collective, "nvls"], 8, size, {"channels": 4})
    assert [h.endpoint for h in job.helpers] == ["n0.nvswitch"] and job.lanes == (4,)


def test_two_nodes_through_a_sharp_switch_by_hand():
    # One chunk (k = 1): up to the NVSwitch (n), the node's sum of slice h to its head
    # (n/8), to the leaf and back through PCIe and the NIC (n/8 each way), to the NVSwitch
    # (n/8) and multicast (n): six stages one after another.
    topology = load_topology("topologies/h100-cluster.yaml", {"nodes": 2, "nccl.sharp": True})
    n = 8 * 2**20
    result = simulate(topology, "allreduce", "nvls", 16, n,
                      {"chunk_size": 2**30, "channels": 1}, IDEAL)
    job, gpus = make_job(topology, REGISTRY["allreduce", "nvls"], 16, n, {})
    assert [h.endpoint for h in job.helpers] == ["n0.nvswitch", "n1.nvswitch"] + ["leaf0"] * 8
    net = topology.route(gpus[3], topology.endpoint("leaf0"))
    net_latency = sum(topology.links[i].latency for i in net)
    net_bandwidth = min(topology.links[i].bandwidth for i in net)
    nvlink = 450e9
    want = (2 * (0.5e-6 + n / nvlink) + 2 * (0.5e-6 + n / 8 / nvlink)
            + 2 * (net_latency + n / 8 / net_bandwidth))
    assert result.time_s == pytest.approx(want, rel=1e-12)


def test_machines_without_nvls_are_refused_with_the_key_to_set():
    cases = [
        (load_topology("topologies/dgx-a100.yaml"), "allreduce", 8, "nccl.nvls"),
        (fully_connected("mesh", 4, 1e-6, 1e9), "allreduce", 4, "nccl.nvls"),
        (load_topology("topologies/h100-cluster.yaml", {"nodes": 2}), "allreduce", 16,
         "nccl.sharp"),
        (load_topology("topologies/h100-cluster.yaml", {"nodes": 2}), "allgather", 16, "ranks"),
    ]
    for topology, collective, p, key in cases:
        with pytest.raises(InputError) as raised:
            simulate(topology, collective, "nvls", p, 4 * 1024)
        assert raised.value.key == key, str(raised.value)
    with pytest.raises(InputError, match="declares that its NVSwitch can reduce"):
        simulate(load_topology("topologies/dgx-a100.yaml"), "allreduce", "nvls", 8, 4096)


def test_nvls_beats_the_ring_on_a_dgx_h100_at_large_sizes_under_ideal_costs():
    # 192 MiB is 1536 chunks of 128 KiB, capped at 192 of c = 1 MiB: 195 steps of 0.5 us,
    # four moving c and 191 moving c + c/8 at 450 GB/s; the ring's 14 steps move n/8 each.
    topology = load_topology("topologies/dgx-h100.yaml")
    n = 192 * 2**20
    c = n / 192
    nvls = simulate(topology, "allreduce", "nvls", 8, n, {"channels": 1}, IDEAL).time_s
    ring = simulate(topology, "allreduce", "ring", 8, n, {"channels": 1}, IDEAL).time_s
    assert nvls == pytest.approx(195 * 0.5e-6 + (4 * c + 191 * (c + c / 8)) / 450e9, rel=1e-9)
    assert ring == pytest.approx(14 * (1e-6 + n / 8 / 450e9), rel=1e-9)


def test_each_gpu_link_carries_the_load_and_the_store_as_well():
    # multimem.ld_reduce returns slice g of every chunk's sum to GPU g, which stores it back:
    # every GPU's link to the NVSwitch carries n + n/p each way, not n.
    machine = topology_from_text(NODE)
    n = 8 * 4 * 64 * 12
    recorded = record_call(machine, "allreduce", "nvls", 8, n, {"chunk_size": 4 * 64 * 8})
    loads = {load.link.name: load.bytes for load in link_loads(recorded.fabric)}
    gpu_links = {name: b for name, b in loads.items() if "nvswitch" in name}
    assert len(gpu_links) == 16
    assert all(b == pytest.approx(n * (1 + 1 / 8)) for b in gpu_links.values()), gpu_links


@pytest.mark.parametrize(("algorithm", "size", "channels", "heads", "nodes", "want"), [
    # DGX H100: 16 channels x 8 heads = 128 ops; 128 KiB from 1 GiB (64 x 128 x 128 KiB) up.
    ("nvls", 2**30, 16, 8, 1, 128 << 10),
    ("nvls", 2**30 - 1, 16, 8, 1, 64 << 10),
    ("nvls", 64 << 20, 16, 8, 1, 64 << 10),      # 8 x 128 x 64 KiB is 64 MiB: not below it
    ("nvls", (64 << 20) - 1, 16, 8, 1, 32 << 10),
    ("nvls", 8 << 20, 16, 8, 1, 32 << 10),        # 2 x 128 x 32 KiB = 8 MiB
    ("nvls", 4 << 20, 16, 8, 1, 16 << 10),
    ("nvls", 1 << 20, 16, 8, 1, 16 << 10),       # 16 KiB is the least
    # NVLSTree: 128 KiB on 2 nodes at 1 GiB; from 4 nodes at most 64 KiB.
    ("nvls_tree", 2**30, 16, 8, 2, 128 << 10),
    ("nvls_tree", 2**30, 16, 8, 4, 64 << 10),
    ("nvls_tree", (64 << 20) - 1, 16, 8, 2, 64 << 10),   # under 4 x 128 x 128 KiB
    ("nvls_tree", (8 << 20) - 1, 16, 8, 4, 32 << 10),    # under 1 x 128 x 64 KiB
    ("nvls_tree", 8 << 20, 16, 8, 4, 64 << 10),
])
def test_nccls_nvls_chunk_for_the_calls_size(algorithm, size, channels, heads, nodes, want):
    assert nvls_chunk_bytes(algorithm, size, channels, heads, nodes) == want


def test_auto_runs_nvls_with_nccls_chunk_and_a_given_one_wins():
    topology = load_topology("topologies/dgx-h100.yaml")
    job, _ = make_job(topology, REGISTRY["allreduce", "nvls"], 8, 4 << 20, {})
    assert job.params["chunk_size"] == 16 << 10
    job, _ = make_job(topology, REGISTRY["allreduce", "nvls"], 8, 4 << 20,
                      {"chunk_size": 1 << 20})
    assert job.params["chunk_size"] == 1 << 20
    smaller = simulate(topology, "allreduce", "nvls", 8, 16 << 20).time_s
    larger = simulate(topology, "allreduce", "nvls", 8, 16 << 20, {"chunk_size": 128 << 10})
    assert smaller != larger.time_s


def test_every_loop_climbs_both_trees_half_each():
    """NCCL's NVLS channel c climbs tree c mod 2 and every channel loops over its own region,
    so one loop on 4 nodes sends half of each slice up each tree. Tree 0 is 0 <- 2 <- {1, 3},
    tree 1 its mirror 3 <- 1 <- {2, 0}; a head moves one half-slice (n/16 on 8 heads) a
    hop each way: an inner node 3 hops in one tree and 1 in the other, the others 1 + 1.
    Sent whole through tree 0 alone the loop would load node 2's NICs with 3 slices (6 half-
    slices) and node 1's with 1 (2)."""
    topology = load_topology("topologies/h100-cluster.yaml", {"nodes": 4})
    n = 2 * 8 * 16384  # 2 channels x 8 heads x 16 KiB: one loop
    recorded = record_call(topology, "allreduce", "nvls_tree", 32, n,
                           {"channels": 2, "chunk_size": 16384}, costs=IDEAL)
    half_slices: dict[str, set[float]] = {}
    for load in link_loads(recorded.fabric):
        if load.link.kind == "nic":
            node = load.link.name.replace("leaf0->", "").split(".")[0]
            half_slices.setdefault(node, set()).add(load.bytes / (n / 16))
    assert half_slices == {"n0": {2.0}, "n1": {4.0}, "n2": {4.0}, "n3": {2.0}}


@pytest.mark.parametrize(("channels", "even"), [(2, 1 / 2), (3, 2 / 3), (16, 1 / 2)])
def test_tree_halves_cut_each_loop_by_the_channels_of_each_tree(channels, even):
    """Channels c climb tree c mod 2: of 3 channels, 2 climb tree 0 with 2/3 of each loop."""
    count = 3 * channels * 8 * 1000 + 5
    job = Job("allreduce", 16, count, params={"channels": channels, "chunk_size": 4000},
              nodes=(0,) * 8 + (1,) * 8)
    loops = lane_chunks(job, 6)
    regions, trees = tree_halves(job, 6)
    assert len(loops) == 4 and trees == [0, 1] * 4
    for i, (offset, count) in enumerate(loops):
        first, second = regions[2 * i], regions[2 * i + 1]
        assert first == (offset, count * ((channels + 1) // 2) // channels)
        assert second == (offset + first[1], count - first[1])
        assert first[1] == pytest.approx(count * even, abs=1)


def test_one_channel_climbs_tree_0_alone():
    job = Job("allreduce", 16, 3 * 8 * 1000, params={"channels": 1, "chunk_size": 4000},
              nodes=(0,) * 8 + (1,) * 8)
    regions, trees = tree_halves(job, 6)
    assert regions == lane_chunks(job, 6) and trees == [0, 0, 0]


def test_only_nccls_32_heads_load_and_store_a_slice():
    # 40 GPUs on one NVSwitch: GPUs 0-31 head a slice of every chunk (n/32 more each way),
    # GPUs 32-39 only send their copy up and take the multicast down (n each way).
    machine = topology_from_text(NODE.replace("gpus: 8", "gpus: 40"))
    n = 32 * 4 * 64 * 12
    recorded = record_call(machine, "allreduce", "nvls", 40, n, {"chunk_size": 32 * 4 * 64})
    loads = {load.link.name: load.bytes for load in link_loads(recorded.fabric)}
    gpu_links = sorted(b for name, b in loads.items() if "nvswitch" in name)
    assert len(gpu_links) == 80
    assert gpu_links[:16] == pytest.approx([n] * 16)
    assert gpu_links[16:] == pytest.approx([n * (1 + 1 / 32)] * 64)


def test_the_scatter_and_gather_one_head_after_another_by_hand():
    # 4 GPUs, 4 heads, 6 chunks of one element (NCCL's too), a = 1 us: loop 0 is chunks 0-3,
    # loop 1 chunks 4-5. Loop 0's scatter (4a) comes first; loop 1's (chunks 4, 5) beside
    # steps 0 and 1; loop 0's gather (chunks 0-3) beside steps 7, 8, 9, 10, the last three
    # at the last step (8); loop 1's gather (2a) after it.
    job = Job("allreduce", 4, 6, 4, params={"chunk_size": 4, "arity_us": 1.0})
    lead, each, tail = serial_steps(job, 6, 4)
    assert lead == pytest.approx(4e-6) and tail == pytest.approx(2e-6)
    assert each == pytest.approx([1e-6, 1e-6, 0, 0, 0, 0, 0, 1e-6, 3e-6])
    # 384 of NCCL's chunks run as the pipeline's 192 (its cap): each stands for two, but
    # the first and last loops are NCCL's own (4 chunks each).
    job = Job("allreduce", 4, 384, 4, params={"chunk_size": 4, "arity_us": 1.0})
    lead, each, tail = serial_steps(job, 192, 4)
    assert lead == pytest.approx(4e-6) and tail == pytest.approx(4e-6)
    assert each[:3] == pytest.approx([2e-6] * 3) and sum(each) == pytest.approx(2e-6 * 376)
    # without arity_us (the ideal model) nothing is charged
    assert serial_steps(Job("allreduce", 4, 6, 4, params={"chunk_size": 4}), 6, 4) == \
        (0.0, [0.0] * 9, 0.0)


def test_the_scatter_and_gather_pauses_add_their_time_where_no_bytes_hide_them():
    # The case above on the ideal switch with a = 1 ms: the pauses (4 + 1 + 1 + 1 + 3 + 2 =
    # 12 a) take at most their sum longer than the pipeline alone, and at least that less
    # the pipeline's whole time (what they overlap).
    machine = switch("ideal", 4, LATENCY, BANDWIDTH, REDUCE)
    job, gpus = make_job(machine, REGISTRY["allreduce", "nvls"], 4, 24, {"chunk_size": 4})
    program = REGISTRY["allreduce", "nvls"].program
    alone = TimingEngine(machine, gpus, job, program).run().time
    paused = replace(job, params={**job.params, "arity_us": 1000.0})
    with_pauses = TimingEngine(machine, gpus, paused, program).run().time
    assert 12e-3 - alone <= with_pauses - alone <= 12e-3 * (1 + 1e-9)
    assert alone < 1e-4


def test_under_nccls_costs_a_one_node_allreduce_pays_its_arity_figure():
    topology = load_topology("topologies/dgx-h100.yaml")
    job, _ = make_job(topology, REGISTRY["allreduce", "nvls"], 8, 4 << 20, {})
    assert job.params["arity_us"] == 0.4
    job, _ = make_job(topology, REGISTRY["allreduce", "nvls"], 8, 4 << 20,
                      {"chunk_size": 1 << 20})
    assert job.params["arity_us"] == 0.4  # a chunk the caller gives keeps NCCL's kernel
    job, _ = make_job(topology, REGISTRY["allgather", "nvls"], 8, 4 << 20, {})
    assert "arity_us" not in job.params


def test_nvls_tree_crosses_racks_through_32_heads_and_their_nics():
    # NCCL's NVLS graph has at most NCCL_MAX_NVLS_ARITY = 32 heads, one per NIC:GPU pair: two
    # 72-GPU racks cross through GPUs 0-31 and their NICs. Each head moves a half-slice up
    # one tree and down the other (n/64 twice) each way; the other 40 NICs carry nothing.
    topology = load_topology("topologies/gb200-nvl72-cluster.yaml", {"nodes": 2})
    n = 2 * 32 * 4096  # 2 channels x 32 heads x 4096 B: one loop
    recorded = record_call(topology, "allreduce", "nvls_tree", 144, n,
                           {"channels": 2, "chunk_size": 4096}, costs=IDEAL)
    nics = {load.link.name: load.bytes for load in link_loads(recorded.fabric)
            if load.link.kind == "nic" and load.bytes > 0}
    assert {name.split("->")[0] for name in nics if name.startswith("n")} == {
        f"n{node}.nic{g}" for node in (0, 1) for g in range(32)}
    assert list(nics.values()) == pytest.approx([n / 32] * 128)


@pytest.mark.parametrize(("sizes", "want"), [((8, 8), 8), ((72, 72), 32), ((40, 8), 32),
                                             ((1, 1), 1), ((16, 32), 32)])
def test_tree_heads_are_one_per_gpu_of_the_largest_node_at_most_32(sizes, want):
    nodes, first = [], 0
    for size in sizes:
        nodes.append(tuple(range(first, first + size)))
        first += size
    assert tree_heads(nodes) == want
