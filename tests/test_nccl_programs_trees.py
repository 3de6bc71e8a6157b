"""NVLSTree and CollNet (direct and chain): data against numpy for p = 1..40 on one node,
uneven nodes and one GPU per node; timing by hand on two nodes of an H100 cluster; the
closed forms (one node on the ideal switch) and the machines these programs refuse."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from collsim.algorithms import REGISTRY
from collsim.algorithms.nccl.collnet import collnet_chain_job, collnet_direct_job
from collsim.algorithms.nccl.nvls import nvls_allreduce_job
from collsim.algorithms.nccl.nvls_tree import depth, loop_serial, nvls_tree_job
from collsim.callspec import CallSpec
from collsim.engine.costs import IDEAL, MessageCosts
from collsim.engine.data import check_algorithm
from collsim.engine.timing import TimingEngine
from collsim.errors import InputError
from collsim.hardware.loader import load_topology, topology_from_text
from collsim.hardware.topology import switch
from collsim.nccl.layout import double_tree
from collsim.program import Job, Parallel, Recv, Send
from collsim.simulate import make_call, make_job, simulate
from tests.helpers import uneven_nodes
from tests.test_nccl_algorithms import CLUSTER, DTYPES, OPS
from tests.test_parallel_lanes import GroupCosts

DECLARE = {"nvls_tree": nvls_tree_job, "collnet_direct": collnet_direct_job,
           "collnet_chain": collnet_chain_job}


@pytest.mark.parametrize("name", list(DECLARE))
def test_data_for_1_to_40_ranks_on_one_node_uneven_nodes_and_one_gpu_per_node(name):
    program = REGISTRY["allreduce", name].program
    for p in range(1, 41):
        dtype = DTYPES[p % len(DTYPES)]
        itemsize = np.dtype(dtype).itemsize
        # Uneven nodes for every p; one node and one GPU per node for every other p.
        layouts = (uneven_nodes(p, p), () if p % 2 else tuple(range(p)))
        for shape, nodes in enumerate(layouts):
            op = OPS[(p + shape) % len(OPS)]
            count = (0, 1, p + 3, 3 * p + 7, 37)[(p + shape) % 5]
            job = Job("allreduce", p, count, itemsize, nodes=nodes,
                      params={"channels": 1 + (p + shape) % 5,
                              "chunk_size": itemsize * (1 + p % 4)})
            check_algorithm(program, DECLARE[name](job), op, dtype, seed=p + shape)


@pytest.mark.parametrize("name", ["nvls", "collnet_direct", "collnet_chain"])
def test_data_through_two_level_sharp_trees(name):
    """Heads grouped under leaves (two nodes a leaf), each leaf combining its heads' copies
    and exchanging sums with a top switch above the leaves."""
    declare = {"nvls": nvls_allreduce_job, "collnet_direct": collnet_direct_job,
               "collnet_chain": collnet_chain_job}[name]
    program = REGISTRY["allreduce", name].program
    for p in range(2, 41, 3):
        nodes = uneven_nodes(p, 7 * p)
        job = Job("allreduce", p, (1, p + 3, 4 * p + 1)[p % 3], 8, nodes=nodes,
                  params={"channels": 1 + p % 3, "chunk_size": 8 * (1 + p % 4)})
        declared = declare(job, lambda head, nodes=nodes: f"leaf{nodes[head] // 2}")
        if len(set(nodes)) > 2:
            assert any(name.startswith("top") for name in (h.endpoint for h in declared.helpers))
        check_algorithm(program, declared, OPS[p % len(OPS)], "int64", seed=p)


MACHINE = CLUSTER + """gpu: {model: test, arch: 90}
nccl: {launch: 0us, cpu: intel, nvls: true, sharp: true}
"""


@pytest.mark.parametrize("name", ["nvls", "nvls_tree", "collnet_direct", "collnet_chain"])
def test_data_with_machine_plans_and_placement_lists(name):
    """Jobs prepared on a machine (two leaves, spines above) with random GPU lists: helper
    ranks on its NVSwitches, leaves and spines, and the data still right."""
    algorithm = REGISTRY["allreduce", name]
    rng = np.random.default_rng(len(name))
    for nodes, nics in ((2, 1), (3, 2), (4, 4)):
        topology = topology_from_text(MACHINE, {"nodes": nodes, "node.nics.count": nics})
        for p in sorted({2, 5, 9, nodes * 8}):
            gpus = sorted(int(g) for g in rng.choice(topology.gpus, p, replace=False))
            params = {"placement": gpus, "channels": int(rng.integers(1, 9)), "chunk_size": 8}
            job, _ = make_job(topology, algorithm, p, 4 * (7 * p + 3), params)
            assert job.helpers and all(topology.endpoint(h.endpoint) >= topology.gpus
                                       for h in job.helpers)
            check_algorithm(algorithm.program, job, "sum", "int32", seed=p)


def test_the_double_trees_depth():
    assert [depth(tree) for tree in double_tree(1)] == [0, 0]
    assert [depth(tree) for tree in double_tree(2)] == [1, 1]
    # 0 <- 4 <- 2 <- 1 (and 3, 5, 6 below 2 and 6): the in-order tree over 8 nodes.
    assert depth(double_tree(8)[0]) == 3


def cluster(nodes: int = 2):
    return load_topology("topologies/h100-cluster.yaml", {"nodes": nodes, "nccl.sharp": True})


def route_figures(topology, src: int, dst: int) -> tuple[float, float]:
    route = topology.route(src, dst)
    return (sum(topology.links[i].latency for i in route),
            min(topology.links[i].bandwidth for i in route))


NVLINK_LATENCY, NVLINK = 0.5e-6, 450e9  # h100-cluster.yaml's NVLink4, per hop and direction


def test_nvls_tree_on_two_nodes_by_hand():
    # One chunk: up to the NVSwitch (n), the node's slice to its head (n/8), the child head
    # to the root head over the network (n/8), the global sum back (n/8), to the NVSwitch
    # (n/8) and multicast (n). Each GPU heads one slice on its own NIC: nothing contends.
    topology = cluster()
    n = 8 * 2**20
    result = simulate(topology, "allreduce", "nvls_tree", 16, n,
                      {"chunk_size": 2**30, "channels": 1}, IDEAL)
    latency, bandwidth = route_figures(topology, 3, 11)
    want = (2 * (NVLINK_LATENCY + n / NVLINK) + 2 * (NVLINK_LATENCY + n / 8 / NVLINK)
            + 2 * (latency + n / 8 / bandwidth))
    assert result.time_s == pytest.approx(want, rel=1e-12)
    job, _ = make_job(topology, REGISTRY["allreduce", "nvls_tree"], 16, n, {"channels": 3})
    assert [h.endpoint for h in job.helpers] == ["n0.nvswitch", "n1.nvswitch"]
    assert job.lanes == (3,)


def test_nvls_tree_scatter_and_gather_one_head_after_another_by_hand():
    # Two loops of one channel (8 heads, a chunk of n/16 each): loop 0's scatter (8a) before
    # it goes up, loop 1's beside loop 0's send, loop 0's gather beside loop 1's receive and
    # loop 1's after it. With a = 1 ms each loop's trip (T, the one-chunk case above at n/2)
    # is over before the next pause ends: loop 1 leaves at 16a and is back at 16a + T, its
    # gather ends at 24a + T.
    topology = cluster()
    n, a = 8 * 2**20, 1e-3
    algorithm = REGISTRY["allreduce", "nvls_tree"]
    job, gpus, _ = make_call(CallSpec(topology, "allreduce", "nvls_tree", 16, n,
                                      {"chunk_size": n // 16, "channels": 1}, IDEAL))
    assert "arity_us" not in job.params  # the ideal model pays nothing
    lead, scatter, gather, tail = loop_serial(replace_params(job, arity_us=a * 1e6),
                                              [(0, job.count // 2)] * 2, 8)
    assert [lead, *scatter, *gather, tail] == pytest.approx([8 * a, 8 * a, 0, 0, 8 * a, 8 * a])
    time = TimingEngine(topology, gpus, replace_params(job, arity_us=a * 1e6),
                        algorithm.program).run().time
    m = n / 2
    latency, bandwidth = route_figures(topology, 3, 11)
    trip = (2 * (NVLINK_LATENCY + m / NVLINK) + 2 * (NVLINK_LATENCY + m / 8 / NVLINK)
            + 2 * (latency + m / 8 / bandwidth))
    assert time == pytest.approx(24 * a + trip, rel=1e-12)


def test_nvls_tree_pays_nccls_arity_figure_where_a_loop_hides_all_but_the_ends():
    # Under NCCL's costs every GPU pays 0.4 us a head each way; at 128 MiB on 2 nodes
    # (8 loops of 16 MiB) each loop's scatter and gather hide behind the loops' bytes, so
    # the call takes the first scatter and the last gather longer: 2 x 8 x 0.4 us.
    topology = load_topology("topologies/h100-cluster.yaml", {"nodes": 2})
    algorithm = REGISTRY["allreduce", "nvls_tree"]
    job, gpus, plan = make_call(CallSpec(topology, "allreduce", "nvls_tree", 16, 2**27, {}))
    assert job.params["arity_us"] == 0.4
    paid, free = (TimingEngine(topology, gpus, replace_params(job, **extra), algorithm.program,
                               plan.costs).run().time for extra in ({}, {"arity_us": 0.0}))
    assert paid - free == pytest.approx(2 * 8 * 0.4e-6, rel=0.05)


def test_nvls_tree_data_with_the_scatter_and_gather_charged():
    # The pauses move no data: the sums still match numpy on nodes of 3 GPUs.
    program = REGISTRY["allreduce", "nvls_tree"].program
    for p in (4, 6, 9, 16):
        job = Job("allreduce", p, 5 * p + 3, 4, nodes=tuple(i // 3 for i in range(p)),
                  params={"channels": 3, "chunk_size": 8, "arity_us": 0.4})
        check_algorithm(program, nvls_tree_job(job), "sum", "float32", seed=p)


def replace_params(job: Job, **params) -> Job:
    return dataclasses.replace(job, params={**job.params, **params})


def test_collnet_direct_on_two_nodes_by_hand():
    # One chunk: each GPU sends 7 slices of n/8 to the node's other GPUs (NVLink through the
    # NVSwitch, two hops), each head sends its slice to the leaf and gets the sum back
    # through PCIe and its NIC, then sends it to the 7 others.
    topology = cluster()
    n = 8 * 2**20
    result = simulate(topology, "allreduce", "collnet_direct", 16, n,
                      {"chunk_size": 2**30, "channels": 1}, IDEAL)
    leaf = topology.endpoint("leaf0")
    latency, bandwidth = route_figures(topology, 3, leaf)
    want = (2 * (2 * NVLINK_LATENCY + 7 * n / 8 / NVLINK)
            + 2 * (latency + n / 8 / bandwidth))
    assert result.time_s == pytest.approx(want, rel=1e-12)
    job, _ = make_job(topology, REGISTRY["allreduce", "collnet_direct"], 16, n, {})
    assert [h.endpoint for h in job.helpers] == ["leaf0"] * 8


def test_collnet_chain_lanes_each_reach_their_own_switch():
    # Two nodes, 8 NICs: channel c's chains start at the GPU on NIC c mod 8; every lane's
    # heads are under leaf0; one helper per lane.
    topology = cluster()
    job, _ = make_job(topology, REGISTRY["allreduce", "collnet_chain"], 16, 4 * 1024,
                      {"channels": 16})
    assert job.lanes == (2,) * 8 and [h.endpoint for h in job.helpers] == ["leaf0"] * 8
    one, more = (simulate(topology, "allreduce", "collnet_chain", 16, 2**26,
                          {"channels": c}).time_s for c in (1, 8))
    # One chain is held by its NIC (64 MiB each way at 48 GB/s); eight chains side by side,
    # each through its own NIC, by NVLink, where every GPU forwards the buffer up and down
    # its chains (2 x 64 MiB at 370.8 GB/s): 3.7 times apart.
    nic, nvlink = 2**26 / 48e9, 2 * 2**26 / 370.8e9
    assert one > nic and more > nvlink
    assert 0.9 * nic / nvlink < one / more < 8


def test_heads_under_two_leaves_reduce_there_and_meet_on_a_spine_per_slice():
    # 8 nodes of 8 NICs on 32-port leaves: nodes 0-3 under leaf0, 4-7 under leaf1. Each
    # slice's heads reduce at their leaf; slice h's leaves meet on spine h (8 spines).
    topology = cluster(8)
    job, _ = make_job(topology, REGISTRY["allreduce", "collnet_direct"], 64, 4096, {})
    assert [h.endpoint for h in job.helpers] == [
        name for h in range(8) for name in ("leaf0", "leaf1", f"spine{h}")]
    tree = job.layout.trees[1]
    assert tree.leaves == ((64 + 3, (1, 9, 17, 25)), (64 + 4, (33, 41, 49, 57)))
    assert tree.top == 64 + 5 and tree.parent(41) == 64 + 4


@pytest.mark.parametrize("name,low,high", [("collnet_direct", 0.9, 1.1),
                                           ("collnet_chain", 1.0, 1.35)])
def test_collnet_models_against_the_simulation_on_one_switch(name, low, high):
    machine = switch("ideal", 17, 0.7e-6, 50e9, 400e9)
    for p in (2, 3, 8, 17):
        for size in (4096, 2**21, 2**24):
            for channels in (1, 4)[: 2 if p < 17 else 1]:
                result = simulate(machine, "allreduce", name, p, size, {"channels": channels})
                ratio = result.analytic_time_s / result.time_s
                assert low - 1e-9 <= ratio <= high, (p, size, channels, ratio)


def test_nvls_tree_on_one_node_is_nvls():
    machine = switch("ideal", 8, 0.7e-6, 50e9)
    for size in (0, 4096, 2**22):
        tree = simulate(machine, "allreduce", "nvls_tree", 8, size)
        nvls = simulate(machine, "allreduce", "nvls", 8, size)
        assert tree.time_s == nvls.time_s == pytest.approx(tree.analytic_time_s, rel=1e-9)


def test_machines_that_cannot_reduce_in_their_switches_are_refused():
    plain = load_topology("topologies/h100-cluster.yaml", {"nodes": 2})
    for name in ("collnet_direct", "collnet_chain"):
        with pytest.raises(InputError) as raised:
            simulate(plain, "allreduce", name, 16, 4096)
        assert raised.value.key == "nccl.sharp"
    with pytest.raises(InputError) as raised:
        simulate(load_topology("topologies/a100-cluster.yaml", {"nodes": 2}), "allreduce",
                 "nvls_tree", 16, 4096)
    assert raised.value.key == "nccl.nvls"


def _bytes_between_nodes(program, job: Job, node_of: list[int]) -> tuple[list[int], list[int]]:
    """Elements each GPU rank sends to and receives from other nodes' GPUs, over its whole
    program (``Parallel`` sub-programs included)."""
    sent, received = [0] * job.nranks, [0] * job.nranks

    def walk(rank: int, steps) -> None:
        for step in steps:
            if isinstance(step, Parallel):
                for sub in step.programs:
                    walk(rank, sub)
                continue
            for op in step if isinstance(step, (tuple, list)) else (step,):
                far = (isinstance(op, (Send, Recv)) and op.peer < job.nranks
                       and node_of[op.peer] != node_of[rank])
                if far and isinstance(op, Send):
                    sent[rank] += op.count
                elif far:
                    received[rank] += op.count

    for rank in range(job.nranks):
        walk(rank, program(rank, job))
    return sent, received


@pytest.mark.parametrize("nodes", [2, 3, 4, 5, 8])
def test_nvls_tree_heads_carry_equal_network_loads(nodes):
    """Chunk i of every slice climbs tree i mod 2 (NCCL's NVLS channels alternate trees),
    so every head sends and receives the same bytes across nodes as the node's other heads:
    each NIC is inner in one tree and a leaf in the other, not inner for half the heads."""
    per_node = 4
    p = nodes * per_node
    node_of = [r // per_node for r in range(p)]
    job = nvls_tree_job(Job("allreduce", p, 64 * 1024 * per_node, 4, nodes=tuple(node_of),
                            params={"channels": 4, "chunk_size": 4096}))
    sent, received = _bytes_between_nodes(REGISTRY["allreduce", "nvls_tree"].program, job,
                                           node_of)
    for node in range(nodes):
        heads = range(node * per_node, (node + 1) * per_node)
        assert len({sent[r] for r in heads}) == 1, [sent[r] for r in heads]
        assert len({received[r] for r in heads}) == 1, [received[r] for r in heads]
        assert sent[heads[0]] > 0


def test_the_trees_up_and_down_halves_each_move_at_their_groups_cap():
    """NCCL's tree runs its reduce up and broadcast down on thread groups of their own
    (runTreeSplit): on 2 ranks of one switch one chunk goes up from the child under its
    group's cap and back down from the root, which uses all its threads, under the
    channel's. Without group caps both move at the channel's; the difference is exactly
    size/group - size/cap."""
    size, cap, group = 400_000, 5e9, 2e9  # one chunk; the port's 100 GB/s never binds
    machine = switch("s", 2, 1e-6, 100e9)
    algorithm = REGISTRY[("allreduce", "nccl_tree")]
    job, gpus = make_job(machine, algorithm, 2, size, {"channels": 1})
    times = {name: TimingEngine(machine, gpus, job, algorithm.program, costs).run().time
             for name, costs in (("split", GroupCosts(channel_cap=cap, group_cap=group)),
                                 ("whole", MessageCosts(channel_cap=cap)))}
    # Two messages, each over two links of 1 us, and their bytes at the cap.
    assert times["whole"] == pytest.approx(4e-6 + 2 * size / cap, rel=1e-9)
    assert times["split"] - times["whole"] == pytest.approx(size / group - size / cap,
                                                            rel=1e-9)
