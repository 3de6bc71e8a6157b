"""NCCL's ring broadcast and reduce, and its tree, with a window: up to ``window`` chunks in
flight on each hop, in order on the connection, each forwarded in ``units`` (LL and LL128;
Simple runs one chunk at a time). The ring's pipelines send a chunk across nodes only once
all of it has arrived, in units its receiver passes on as they land; the tree sends it whole
there. Data against numpy, the closed form on the switch, the messages each hop carries, a
network hop timed by hand, NCCL's tree chunk, and what the plan gives each protocol."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.algorithms import get_algorithm
from collsim.algorithms.chain import window_pipeline_time
from collsim.algorithms.nccl.channels import pipeline_units, tree_chunk_bytes
from collsim.algorithms.nccl.switches import chunk_cap
from collsim.calls.plan import plan
from collsim.engine.costs import IDEAL, route_alpha_beta
from collsim.engine.data import check_algorithm
from collsim.hardware.loader import load_topology, topology_from_text
from collsim.hardware.topology import switch
from collsim.program import Job
from collsim.simulate import make_job, simulate
from tests.helpers import THREE_NODES, uneven_nodes

LATENCY, BANDWIDTH, REDUCE = 0.9e-6, 40e9, 150e9
ALPHA, BETA, GAMMA = 2 * LATENCY, 1 / BANDWIDTH, 1 / REDUCE
DTYPES = ["int32", "int64", "float32", "float64", "uint8"]
OPS = ["sum", "prod", "max", "min"]


@pytest.mark.parametrize("collective,name", [("broadcast", "ring"), ("reduce", "ring"),
                                             ("allreduce", "nccl_tree")])
def test_data_for_1_to_40_ranks_with_windows_units_and_uneven_nodes(collective, name):
    algorithm = get_algorithm(collective, name)
    for p in range(1, 41):
        dtype, op = DTYPES[p % len(DTYPES)], OPS[p % len(OPS)]
        itemsize = np.dtype(dtype).itemsize
        for window, units in ((2, 1), (8, 5), (3, 20)):
            count = (0, 1, p + 3, 7 * p + 5, 131)[(p + window) % 5]
            job = Job(collective, p, count, itemsize,
                      root=(5 * p) // 7 if collective != "allreduce" else 0,
                      params={"channels": 1 + p % 4, "chunk_size": itemsize * (1 + p % 6),
                              "window": window, "units": units},
                      nodes=uneven_nodes(p, p + window))
            check_algorithm(algorithm.program, job, op, dtype, seed=p + units)


def no_stall(window: int, send: float, combine: float) -> bool:
    return (ALPHA + send + combine) / window <= max(send, combine)


@settings(max_examples=60, deadline=None)
@given(p=st.integers(2, 24), window=st.integers(2, 8), units=st.integers(1, 6),
       chunks=st.integers(1, 12), per_unit=st.integers(1, 4000),
       collective=st.sampled_from(["broadcast", "reduce"]))
def test_on_the_switch_the_window_pipeline_takes_its_closed_form(p, window, units, chunks,
                                                                 per_unit, collective):
    """Equal units: exact when the window covers the latency, else at most the closed form
    (whose steady gap for a stalled window is an upper bound)."""
    machine = switch("s", p, LATENCY, BANDWIDTH, REDUCE)
    chunks = min(chunks, chunk_cap(p))
    size = 4 * per_unit * units * chunks
    params = {"chunk_size": 4 * per_unit * units, "window": window, "units": units}
    result = simulate(machine, collective, "ring", p, size, params)
    k = chunks * units
    send, combine = size / k * BETA, size / k * GAMMA * (collective == "reduce")
    want = window_pipeline_time(p - 1, k, ALPHA, send, combine, window)
    assert result.analytic_time_s == pytest.approx(want, rel=1e-12)
    if no_stall(window, send, combine):
        assert result.time_s == pytest.approx(want, rel=1e-9)
    else:
        assert result.time_s <= want * (1 + 1e-9)
    if units == 1:  # the same chunks one at a time are never faster
        in_turn = simulate(machine, collective, "ring", p, size, {"chunk_size": 4 * per_unit})
        assert result.time_s <= in_turn.time_s * (1 + 1e-9)


def test_latency_hidden_by_the_window_is_paid_once_per_hop():
    # 16 ranks, 64 chunks of 64 KiB: with 8 in flight the chunks stream at the link's rate
    # after the first one's 15 hops; one at a time each pays alpha at every step.
    machine = switch("s", 16, LATENCY, BANDWIDTH)
    size, chunk = 64 * 65536, 65536
    windowed = simulate(machine, "broadcast", "ring", 16, size,
                        {"chunk_size": chunk, "window": 8}).time_s
    in_turn = simulate(machine, "broadcast", "ring", 16, size, {"chunk_size": chunk}).time_s
    assert windowed == pytest.approx(15 * (ALPHA + chunk * BETA) + 63 * chunk * BETA, rel=1e-9)
    assert in_turn == pytest.approx((15 + 63) * (ALPHA + chunk * BETA), rel=1e-9)





@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
def test_every_hop_carries_units_and_the_data_is_right(collective):
    # One channel on 3 nodes of 4: every one of the 11 hops of the ring from the root carries
    # k·units messages, the ones across nodes too (a step's parts, read as they land).
    topology = topology_from_text(THREE_NODES, {"node.nics.count": 1})
    k, units = 6, 5
    size = 4 * 10 * units * k
    params = {"channels": 1, "chunk_size": 4 * 10 * units, "window": 4, "units": units}
    result = simulate(topology, collective, "ring", 12, size, params)
    assert result.transfers == 11 * k * units
    job, _ = make_job(topology, get_algorithm(collective, "ring"), 12, size, params)
    check_algorithm(get_algorithm(collective, "ring").program, job, "sum", "int32", seed=3)


TWO_BY_TWO = THREE_NODES.replace("nodes: 3", "nodes: 2").replace("gpus: 4", "gpus: 2")


@pytest.mark.parametrize("units", [1, 4, 7])
def test_a_network_hop_gathers_its_step_and_its_receiver_passes_each_unit_on(units):
    """2 nodes of 2 GPUs, one chain A -NVLink-> B -network-> C -NVLink-> D, one chunk of
    ``units`` units of s bytes, all in flight (window 8): B sends its step over the network
    only once all of it has arrived (the proxy posts a written step), in turn unit by unit,
    and C passes each unit on to D as it lands. So the last unit reaches D after
    2·αn + αw + (units + 1)·s·βn + units·s·βw; were the network hop's step delivered whole,
    C would forward nothing before its last byte, (units - 1)·s·βn later."""
    topology = topology_from_text(TWO_BY_TWO, {"node.nics.count": 2})
    s = 4 * 1000
    params = {"channels": 1, "chunk_size": s * units, "window": 8, "units": units}
    job, _ = make_job(topology, get_algorithm("broadcast", "ring"), 4, s * units, params)
    ring = job.layout.channels[0].ring
    chain = ring[ring.index(job.root):] + ring[:ring.index(job.root)]
    crossing = [job.node_of(a) != job.node_of(b)
                for a, b in zip(chain[:-1], chain[1:], strict=True)]
    assert crossing == [False, True, False]

    def hop(a: int, b: int) -> tuple[float, float]:
        return route_alpha_beta(IDEAL, [topology.links[i] for i in topology.route(a, b)])

    (alpha_n, beta_n), (alpha_w, beta_w) = hop(chain[0], chain[1]), hop(chain[1], chain[2])
    assert hop(chain[2], chain[3]) == (alpha_n, beta_n) and beta_n < beta_w
    want = 2 * alpha_n + alpha_w + (units + 1) * s * beta_n + units * s * beta_w
    result = simulate(topology, "broadcast", "ring", 4, s * units, params, IDEAL)
    assert result.time_s == pytest.approx(want, rel=1e-9)


def test_the_plan_gives_ll_and_ll128_a_window_of_warp_units_and_simple_none():
    assert [pipeline_units(protocol) for protocol in ("LL", "LL128", "Simple")] == [16, 20, 1]
    cluster = load_topology("topologies/h100-cluster.yaml", {"nodes": 2})
    gpus = list(range(16))
    for collective in ("broadcast", "reduce"):
        for protocol, window, units in (("LL", 8, 16), ("LL128", 8, 20), ("Simple", None, None)):
            planned = plan(cluster, collective, "ring", gpus, 2**24,
                           {"protocol": protocol, "channels": 4})
            assert planned.params.get("window") == window
            assert planned.params.get("units") == units
    # A cost model of the caller's has no protocol: one chunk at a time.
    assert "window" not in plan(switch("s", 4, 1e-6, 1e9), "broadcast", "ring", range(4), 2**20,
                                {"channels": 2}).params


def test_window_and_units_are_checked():
    machine = switch("s", 4, 1e-6, 1e9)
    for name, bad in (("window", 0), ("units", -1), ("window", 1.5), ("units", True)):
        with pytest.raises(Exception) as raised:
            simulate(machine, "broadcast", "ring", 4, 1024, {name: bad})
        assert getattr(raised.value, "key", None) == f"param.{name}"


def test_the_tree_moves_units_inside_a_node_and_whole_chunks_across():
    tree = get_algorithm("allreduce", "nccl_tree")
    one_node = switch("s", 8, LATENCY, BANDWIDTH, REDUCE)
    size = 4 * 6000
    for units in (2, 5):
        params = {"chunk_size": 4 * 500, "window": 8}
        whole = simulate(one_node, "allreduce", "nccl_tree", 8, size, params).transfers
        split = simulate(one_node, "allreduce", "nccl_tree", 8, size,
                         {**params, "units": units}).transfers
        assert split == units * whole  # every hop inside the node carries units
    cluster = topology_from_text(THREE_NODES, {"node.nics.count": 1})
    params = {"channels": 2, "chunk_size": 4 * 500, "window": 8}
    whole = simulate(cluster, "allreduce", "nccl_tree", 12, size, params).transfers
    split = simulate(cluster, "allreduce", "nccl_tree", 12, size, {**params, "units": 5})
    assert whole < split.transfers < 5 * whole  # the network hops carry whole chunks
    job, _ = make_job(cluster, tree, 12, size, {**params, "units": 5})
    check_algorithm(tree.program, job, "max", "float32", seed=12)


def test_ncclss_tree_chunk():
    # One step of the protocol's buffer: LL 32 KiB of data, Simple 512 KiB, whatever the call.
    assert tree_chunk_bytes("LL", 2**20, 8, 2, 16) == 32768
    assert tree_chunk_bytes("Simple", 2**20, 8, 2, 16) == 512 * 1024
    # LL128 on 2 nodes of 8, 8 channels: 1 + log2i(2) + 0.8 = 2.8 steps, so a channel's share
    # needs 2.8 x 64 / 8 = 22.4 chunks before the first rule stops halving (above 131,072 B),
    # and 5.6 before the second (above 32,768 B).
    assert tree_chunk_bytes("LL128", 2**30, 8, 2, 16) == 576000   # 233 chunks each
    assert tree_chunk_bytes("LL128", 2**26, 8, 2, 16) == 288000   # 14, then 29 at half
    assert tree_chunk_bytes("LL128", 2**24, 8, 2, 16) == 72000    # stops at or below 131,072
    assert tree_chunk_bytes("LL128", 2**20, 8, 2, 16) == 18000    # 1 MiB: 1 < 5.6 twice more
    # 16 nodes of 8 on 16 channels: 1 + 4 + 0.8 = 5.8 steps, 46.4 chunks.
    assert tree_chunk_bytes("LL128", 2**28, 16, 16, 128) == 288000  # 29, then 58
    assert tree_chunk_bytes("LL128", 2**27, 16, 16, 128) == 144000  # 14, 29, then 58


def test_a_windowed_ll_tree_gets_ncclss_chunk_and_units_and_no_window_none():
    cluster = load_topology("topologies/h100-cluster.yaml", {"nodes": 2})
    gpus = list(range(16))
    for protocol in ("LL", "LL128"):
        planned = plan(cluster, "allreduce", "nccl_tree", gpus, 2**24,
                       {"protocol": protocol, "channels": 8, "window": 8})
        assert planned.params["chunk_size"] == tree_chunk_bytes(protocol, 2**24, 8, 2, 16)
        assert planned.params["units"] == pipeline_units(protocol)
        default = plan(cluster, "allreduce", "nccl_tree", gpus, 2**24,
                       {"protocol": protocol, "channels": 8}).params
        assert not {"window", "units", "chunk_size"} & set(default)
    simple = plan(cluster, "allreduce", "nccl_tree", gpus, 2**24,
                  {"protocol": "Simple", "channels": 8, "window": 8}).params
    assert "units" not in simple and "chunk_size" not in simple
