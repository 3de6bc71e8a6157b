"""The GPU's copies of a slice on a network hop (collsim.engine.staging): a message that
crosses the network waits for its first slice's write into the connection's buffer and its
last slice's read out of it, at NCCL's per-channel figure, unless the ring's step passes the
data on in the same pass; and a message passed on so hides its latency behind its slices
after the first. Checked by hand on rings of nodes of one GPU, against the same calls
without the copies or the slices, on one node (nothing moves) and between the engine's
paths."""

from __future__ import annotations

import dataclasses

import pytest

from collsim.engine.staging import Staging
from collsim.engine.timing import TimingEngine
from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import find_topology
from collsim.nccl import constants as C
from collsim.nccl.protocols import cost_model, slice_staging
from collsim.program import Send
from collsim.simulate import get_algorithm, make_job, simulate

MIB = 2**20


def _cluster():
    return load_topology(find_topology("a100-cluster"), {"nodes": 2})


def _time(topology, collective: str, size: int, gpus: list[int], staged: bool,
          protocol: str = "Simple") -> float:
    """The NCCL ring's time on ``gpus``, 2 channels of 2 MiB chunks (Simple's), with or
    without the slice copies."""
    costs = cost_model(topology, "ring", protocol, gpus)
    if not staged:
        costs = dataclasses.replace(costs, write_seconds=0.0, read_seconds=0.0)
    params = {"placement": gpus, "protocol": protocol, "channels": 2, "chunk_size": 2 * MIB}
    return simulate(topology, collective, "ring", len(gpus), size, params, costs).time_s


def test_simple_figures_are_nccls_slice_and_its_one_node_simple_channel_figure():
    """Simple: 2 steps of the 4 MiB buffer (1 MiB), written and read at perChMaxTreeBw's
    one-node column (A100: 24 GB/s); LL128: one step, written at its channel's cap (half
    the graph channel's perChMaxRingLL128Bw), read as its lines land; LL: nothing."""
    assert slice_staging("Simple", C.arch_row(80), 4 * MIB) == (MIB, 1 / 24e9, 1 / 24e9)
    step = 4 * MIB / 2 / C.NCCL_STEPS  # a 2 MiB buffer's step (NCCL_BUFFSIZE set)
    assert slice_staging("Simple", C.arch_row(90), 2 * MIB)[0] == 2 * step
    assert slice_staging("LL128", C.arch_row(90), 4.5e6) == (4.5e6 / 8, 1 / 18.35e9, 0.0)
    assert slice_staging("LL", C.arch_row(90), 262144) == (0.0, 0.0, 0.0)


def test_an_unpack_device_reads_each_slice_twice():
    """GPUDirect-TCPX (the transport's ``unpack``): the receiving block copies a Simple slice
    out of the bounce pages, then reads it, both at the one channel figure (H100: 38.7 GB/s);
    the write and the other protocols are as without it."""
    row = C.arch_row(90)
    plain = slice_staging("Simple", row, 4 * MIB)
    unpacked = slice_staging("Simple", row, 4 * MIB, unpack=True)
    assert unpacked == (MIB, 1 / 38.7e9, 2 / 38.7e9) and plain[2] == 1 / 38.7e9
    for protocol, buffer in (("LL128", 4.5e6), ("LL", 262144)):
        assert slice_staging(protocol, row, buffer, unpack=True) == \
            slice_staging(protocol, row, buffer)
    tcpx = load_topology(find_topology("a3-high-cluster"), {})
    as_ib = load_topology(find_topology("a3-high-cluster"), {"node.nics.transport": "ib"})
    assert cost_model(tcpx, "ring", "Simple").read_seconds == pytest.approx(2 / 38.7e9)
    assert cost_model(as_ib, "ring", "Simple").read_seconds == pytest.approx(1 / 38.7e9)


def test_the_unpack_copy_delays_an_allreduce_by_one_read_a_loop():
    """Two nodes of one GPU on A3 High, allreduce of 32 MiB on 2 channels (4 loops, each with
    one message read out of the connection's buffer): the TCPX run takes 4 x 1 MiB / 38.7 GB/s
    longer than the same run with the NICs' transport as InfiniBand's reach and latency."""
    tcpx = load_topology(find_topology("a3-high-cluster"), {})
    as_ib = load_topology(find_topology("a3-high-cluster"), {"node.nics.transport": "ib"})
    gpus = [0, tcpx.gpus_per_node]
    extra = _time(tcpx, "allreduce", 32 * MIB, gpus, True) - \
        _time(as_ib, "allreduce", 32 * MIB, gpus, True)
    assert extra == pytest.approx(4 * MIB / 38.7e9, rel=1e-6)


@pytest.mark.parametrize("collective, size, loops", [
    # allgather of 64 MiB on 2 channels: a loop is 2 channels x 2 ranks x 2 MiB, so 8 loops
    # of one network step each, written from the user's buffer and read into it
    ("allgather", 64 * MIB, 8),
    # allreduce of 32 MiB: a loop is a send, a fused receive-reduce-send and a receive, so
    # its two network messages wait for one write (the first) and one read (the second):
    # 2 copies a loop, not 4, over 4 loops
    ("allreduce", 32 * MIB, 4),
])
def test_two_ranks_pay_a_slice_written_and_a_slice_read_every_loop(collective, size, loops):
    """Two nodes of one GPU: each loop waits 2 x 1 MiB / 24 GB/s more, whatever its steps
    between (a fused step passes its slices on without a copy of its own)."""
    topology = _cluster()
    gpus = [0, topology.gpus_per_node]
    staged = _time(topology, collective, size, gpus, True)
    plain = _time(topology, collective, size, gpus, False)
    assert staged - plain == pytest.approx(loops * 2 * MIB / 24e9, rel=1e-9)


def test_one_node_moves_nothing():
    """No route of one node crosses the network: the copies cost nothing there."""
    topology = _cluster()
    gpus = list(range(topology.gpus_per_node))
    assert _time(topology, "allreduce", 64 * MIB, gpus, True) == \
        _time(topology, "allreduce", 64 * MIB, gpus, False)


def test_only_routes_across_the_network_are_staged():
    topology = _cluster()
    staging = Staging.of(cost_model(topology, "ring", "Simple"), topology)
    assert staging is not None
    assert not staging.crosses(0, 1)
    assert staging.crosses(0, topology.gpus_per_node)


@pytest.mark.parametrize("nodes", [2, 4])
@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter"])
def test_lockstep_path_gives_the_events_times_to_the_bit(collective, nodes):
    """Two and four nodes of one GPU, LL128 and Simple: the whole-step path charges the same
    delays, and hides the same latency, as the event engine."""
    topology = load_topology(find_topology("a100-cluster"), {"nodes": nodes})
    gpus = [node * topology.gpus_per_node for node in range(nodes)]
    algorithm = get_algorithm(collective, "ring")
    for protocol in ("Simple", "LL128"):
        costs = cost_model(topology, "ring", protocol, gpus)
        params = {"placement": gpus, "protocol": protocol, "channels": 2,
                  "chunk_size": 2 * MIB if protocol == "Simple" else 576000}
        job, placed = make_job(topology, algorithm, nodes, 24 * MIB, params)
        runs = [TimingEngine(topology, placed, job, algorithm.program, costs,
                             steps=algorithm.lockstep, lockstep=flag).run()
                for flag in (True, False)]
        assert runs[0].path == "lockstep" and runs[1].path != "lockstep"
        assert runs[0].time == runs[1].time


def test_a_broadcast_pipeline_pays_its_copies_once_in_the_fill():
    """Two nodes of one GPU, a 32 MiB broadcast in 512 KiB chunks (Simple's step) on 2
    channels: the root writes every chunk and the other rank reads it, but chunk after chunk
    moves while the previous one is copied, so the call waits for one chunk's write and read
    (2 x 512 KiB / 24 GB/s), not one per chunk."""
    topology = _cluster()
    gpus = [0, topology.gpus_per_node]
    times = []
    for staged in (True, False):
        costs = cost_model(topology, "ring", "Simple", gpus)
        if not staged:
            costs = dataclasses.replace(costs, write_seconds=0.0, read_seconds=0.0)
        params = {"placement": gpus, "protocol": "Simple", "channels": 2, "root": 0,
                  "chunk_size": 512 * 1024}
        times.append(simulate(topology, "broadcast", "ring", 2, 32 * MIB, params, costs).time_s)
    assert times[0] - times[1] == pytest.approx(2 * 512 * 1024 / 24e9, rel=1e-6)


def test_a_longer_ring_pays_the_copies_once_a_loop_not_once_a_step():
    """Four nodes of one GPU, allgather of 64 MiB on 2 channels: 4 loops of 3 network steps
    each; the steps between a loop's ends pass the data on in the same pass, so each loop
    waits for one write and one read, as on two ranks."""
    topology = load_topology(find_topology("a100-cluster"), {"nodes": 4})
    per_node = topology.gpus_per_node
    gpus = [node * per_node for node in range(4)]
    staged = _time(topology, "allgather", 64 * MIB, gpus, True)
    plain = _time(topology, "allgather", 64 * MIB, gpus, False)
    assert staged - plain == pytest.approx(4 * 2 * MIB / 24e9, rel=1e-9)


def test_a_passed_on_message_hides_its_bytes_after_the_first_slice_up_to_its_latency():
    """Staging.hidden: a lane of 2 channels, 1 MiB slices, 10 µs of latency; 4 MiB leave
    at 100 GB/s, so 2 MiB follow the lane's first slices: 20.97 µs, capped at 10 µs; at
    1 TB/s 2.1 µs of the 10; a message no larger than a slice a channel hides nothing."""
    staging = Staging(MIB, 0.0, 0.0, _cluster())
    assert staging.hidden(4 * MIB, 2, 10e-6, 100e9) == 10e-6
    assert staging.hidden(4 * MIB, 2, 10e-6, 1e12) == pytest.approx(2 * MIB / 1e12)
    assert staging.hidden(2 * MIB, 2, 10e-6, 100e9) == 0.0


def test_a_part_of_a_step_waits_for_the_whole_steps_write():
    """A message that is one of 4 parts of a step (Send.parts) across the network is
    delivered after the write of its whole step, as the proxy posts the step once all of it
    is written: 4 x 64 KiB at 1 µs a KiB on one channel; a whole step no larger than the
    slice the same; nothing inside a node."""
    topology = _cluster()
    staging = Staging(MIB, 1e-9, 0.0, topology)
    across, inside = topology.gpus_per_node, 1
    route = (("link",), 5e-6, 25e9)
    part = Send(across, 0, 0, 16384, parts=4)
    assert staging.route(0, across, 65536, 1, part, route)[1] == pytest.approx(
        5e-6 + 4 * 65536 * 1e-9)
    whole = Send(across, 0, 0, 65536)
    assert staging.route(0, across, 4 * 65536, 1, whole, route) == \
        staging.route(0, across, 65536, 1, part, route)
    assert staging.route(0, inside, 65536, 1, part, route) == route


def _latency_hidden(topology, collective: str, size: int, gpus: list[int]) -> float:
    """The NCCL ring's time (2 channels, 2 MiB chunks, Simple, no copies) with 1 MiB
    slices passed on, less the same with 2 MiB slices (a chunk a channel: nothing hides)."""
    costs = dataclasses.replace(cost_model(topology, "ring", "Simple", gpus),
                                write_seconds=0.0, read_seconds=0.0)
    params = {"placement": gpus, "protocol": "Simple", "channels": 2, "chunk_size": 2 * MIB}
    times = [simulate(topology, collective, "ring", len(gpus), size, params,
                      dataclasses.replace(costs, slice_bytes=slice_bytes)).time_s
             for slice_bytes in (2 * MIB, MIB)]
    return times[0] - times[1]


def _network_latency(topology, gpus: list[int]) -> float:
    costs = cost_model(topology, "ring", "Simple", gpus)
    links = [topology.links[i] for i in topology.route(gpus[0], gpus[1])]
    return costs.latency(links)


@pytest.mark.parametrize("collective, size, nodes, loops, passed_on", [
    # allgather of 64 MiB on 4 nodes: 4 loops of 3 network steps, the first two of which
    # its receivers pass on
    ("allgather", 64 * MIB, 4, 4, 2),
    # allreduce of 32 MiB on 2 nodes: 4 loops of a send, a fused receive-reduce-send and a
    # receive: the first message is passed on, the second is not
    ("allreduce", 32 * MIB, 2, 4, 1),
])
def test_a_ring_of_network_hops_pays_a_hops_latency_once_a_loop(collective, size, nodes,
                                                                  loops, passed_on):
    """One GPU a node (A100, one 200 Gb/s NIC): each step a fused receive-and-send passes
    on starts once the first 1 MiB slice of its 2 MiB has arrived, and the other slice, 1 MiB
    a channel at 24 GB/s over 2 channels (87 µs), outlasts the network latency (NCCL's 14
    µs): each passed-on message's latency is hidden whole, each loop pays its last one."""
    topology = load_topology(find_topology("a100-cluster"), {"nodes": nodes})
    gpus = [node * topology.gpus_per_node for node in range(nodes)]
    latency = _network_latency(topology, gpus)
    assert latency > 0
    assert _latency_hidden(topology, collective, size, gpus) == \
        pytest.approx(loops * passed_on * latency, rel=1e-9)


def test_one_node_hides_nothing():
    """The pass-on is charged on network hops only, like the copies."""
    topology = _cluster()
    gpus = list(range(topology.gpus_per_node))
    assert _latency_hidden(topology, "allreduce", 64 * MIB, gpus) == 0.0


def test_a_chunk_of_two_slices_is_copied_hidden_and_given_back_by_halves():
    """A Simple ring chunk is 2 slices (``slices`` = 2): a 512 KiB chunk a channel is
    copied 256 KiB at a time, passed on hides its bytes after the first 256 KiB (at most the
    latency), and gives its slot back that hidden time plus one 256 KiB read after its
    delivery; a 4 MiB one is cut at the 1 MiB slice. Off the network nothing."""
    from collsim.program import Send
    topology = _cluster()
    costs = dataclasses.replace(cost_model(topology, "ring", "Simple"), slices=2)
    staging = Staging.of(costs, topology)
    assert staging.slices == 2
    kib = 1024
    assert staging.piece(512 * kib, 1) == 256 * kib
    assert staging.piece(1024 * kib, 2) == 256 * kib   # a lane of 2 channels: per channel
    assert staging.piece(4 * MIB, 1) == MIB
    latency, rate = 14e-6, 25e9
    assert staging.hidden(512 * kib, 1, latency, rate) == pytest.approx(256 * kib / rate)
    assert staging.hidden(4 * MIB, 1, latency, rate) == latency
    passed_on = Send(1, 0, 0, 1, forwarding=True)
    across = (0, topology.gpus_per_node)
    route = ((), latency, rate)
    assert staging.consumed(*across, 512 * kib, 1, passed_on, route) == pytest.approx(
        256 * kib / rate + 256 * kib * staging.read_seconds)
    assert staging.consumed(*across, 512 * kib, 1, Send(1, 0, 0, 1), route) == 0.0
    assert staging.consumed(0, 1, 512 * kib, 1, passed_on, route) == 0.0
