"""Buffered sends (a cost model's ``send_buffer``, NCCL's connection slots): a send that fits
in its connection's buffer starts when posted and completes when its last byte has left;
the message waits at the receiver until its receive is posted, and frees its room when
taken. Checked by hand on rings whose hops differ, on the buffer's bound, against the
rendezvous where they must agree, and on the fabric itself."""

from __future__ import annotations

import dataclasses
import math

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.engine.costs import IDEAL, MessageCosts, buffered
from collsim.engine.fabric import Fabric
from collsim.engine.timing import TimingEngine
from collsim.errors import SimulationError
from collsim.hardware.loader import load_topology
from collsim.hardware.topology import FullyConnectedTopology, fully_connected, switch
from collsim.nccl.protocols import cost_model
from collsim.program import Job, Recv, Reduce, Send
from collsim.simulate import get_algorithm, make_job

BUFFERED = MessageCosts(send_buffer=math.inf)
US = 1e-6


def run(topology, programs, p: int, costs=BUFFERED, collective: str = "broadcast"):
    return TimingEngine(topology, list(range(p)), Job(collective, p, 1), programs,
                        costs=costs).run()


def slow_hop_mesh(p: int, slow: float, fast: float, bandwidth: float
                  ) -> FullyConnectedTopology:
    """A full mesh whose link 0 -> 1 has latency ``slow`` and every other ``fast``."""
    mesh = fully_connected("mesh", p, fast, bandwidth)
    links = list(mesh.links)
    index = mesh.route(0, 1)[0]
    links[index] = dataclasses.replace(links[index], latency=slow)
    return FullyConnectedTopology("mesh", "fully_connected", p, links)


def ring_allgather_time(topology, p: int, size: int, costs) -> float:
    algorithm = get_algorithm("allgather", "ring")
    job, gpus = make_job(topology, algorithm, p, size, {"channels": 1})
    return TimingEngine(topology, gpus, job, algorithm.program, costs=costs,
                        lockstep=False).run().time


def test_a_ring_pays_each_hop_latency_once_a_lap_not_the_slowest_every_step():
    """4 ranks, 1 us a block, 10 us on hop 0 -> 1 and 1 us elsewhere. Buffered, rank i's
    step s+1 starts at max(its send of step s drained, its receive delivered):
    [0,0,0,0] -> [2,11,2,2] -> [4,13,13,4] -> [6,15,15,15], so 15 us. Under the rendezvous
    every step waits for the slow hop: [11,11,2,2] -> [22,22,13,13] -> [33,33,24,24]."""
    block = 4000  # bytes a step: 1 us at 4 GB/s
    mesh = slow_hop_mesh(4, 10 * US, 1 * US, 4e9)
    assert ring_allgather_time(mesh, 4, 4 * block, BUFFERED) == pytest.approx(15 * US, rel=1e-9)
    assert ring_allgather_time(mesh, 4, 4 * block, IDEAL) == pytest.approx(33 * US, rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(p=st.integers(2, 12), elements=st.integers(0, 4000),
       collective=st.sampled_from(["allreduce", "allgather", "reducescatter", "alltoall"]),
       per_message=st.sampled_from([0.0, 2.1e-6]))
def test_on_uniform_links_buffering_changes_no_ring_or_pairwise_time(p, elements, collective,
                                                                    per_message):
    """Every hop alike: each step of a ring or a pairwise exchange waits for a message as
    slow as its own, so buffering changes nothing (the closed forms hold under both)."""
    name = "pairwise" if collective == "alltoall" else "ring"
    topology = switch("s", p, 0.6e-6, 50e9, 70e9)
    algorithm = get_algorithm(collective, name)
    job, gpus = make_job(topology, algorithm, p, 4 * elements * p, {})
    times = [TimingEngine(topology, gpus, job, algorithm.program, lockstep=False,
                          costs=MessageCosts(per_message=per_message,
                                             send_buffer=math.inf if b else 0.0)
                          ).run().time for b in (False, True)]
    assert times[1] == pytest.approx(times[0], rel=1e-12, abs=1e-18)


def test_a_send_completes_when_its_bytes_have_left_and_the_receive_on_delivery():
    latency, bandwidth, count = 1.5e-6, 20e9, 5000  # a route on the switch is two links
    def program(rank, job):
        yield Send(1, 0, 0, count) if rank == 0 else Recv(0, 0, 0, count)
    finish = run(switch("s", 2, latency, bandwidth), program, 2).finish
    assert finish[0] == pytest.approx(4 * count / bandwidth, rel=1e-12)
    assert finish[1] == pytest.approx(2 * latency + 4 * count / bandwidth, rel=1e-12)


def test_a_message_waits_for_its_receive_and_completes_when_it_is_posted():
    """Rank 1 combines for 1 ms before posting its receive; the message arrived long
    before, so the receive completes the instant it is posted (rendezvous: the bytes would
    only start moving then)."""
    latency, bandwidth, reduce_bandwidth = 1e-6, 20e9, 4e9
    machine = switch("s", 2, latency, bandwidth, reduce_bandwidth)
    busy = int(1e-3 * reduce_bandwidth / 4)  # elements combined in 1 ms

    def program(rank, job):
        if rank == 0:
            yield Send(1, 0, 0, 100)
        else:
            yield Reduce("buf", 0, "buf", 0, busy)
            yield Recv(0, 0, 0, 100)
    buffered_finish = run(machine, program, 2).finish
    rendezvous_finish = run(machine, program, 2, IDEAL).finish
    assert buffered_finish[1] == pytest.approx(1e-3, rel=1e-12)
    assert rendezvous_finish[1] == pytest.approx(1e-3 + 2 * latency + 400 / bandwidth,
                                                 rel=1e-12)


def test_sends_before_receives_finish_where_the_rendezvous_deadlocks():
    """Both ranks send in one step and receive in the next: buffered, both messages move at
    once; under the rendezvous it is the deadlock the program model warns of."""
    latency, bandwidth, count = 1e-6, 10e9, 1000

    def program(rank, job):
        yield Send(1 - rank, 0, 0, count)
        yield Recv(1 - rank, 0, 0, count)
    machine = switch("s", 2, latency, bandwidth)
    assert run(machine, program, 2).time == pytest.approx(2 * latency + 4 * count / bandwidth,
                                                          rel=1e-12)
    with pytest.raises(SimulationError, match="deadlock"):
        run(machine, program, 2, IDEAL)


def test_a_buffered_send_nobody_receives_is_an_error():
    def program(rank, job):
        if rank == 0:
            yield Send(1, 7, 0, 10)
    with pytest.raises(SimulationError, match="never received.*rank 0"):
        run(switch("s", 2, 1e-6, 1e9), program, 2)


def test_counts_that_differ_are_an_error_on_either_side():
    def late_receive(rank, job):
        yield Send(1, 0, 0, 10) if rank == 0 else Recv(0, 0, 0, 12)
    with pytest.raises(SimulationError, match="expects 12 elements but rank 0 sends 10"):
        run(switch("s", 2, 1e-6, 1e9), late_receive, 2)


def test_the_fabric_reports_the_last_byte_out_then_delivery():
    """Two transfers share GPU 0's port (10 GB/s): the first, 1 MB, drains at 200 us while
    the second (3 MB) moves beside it; it is delivered 4 us (two links) after draining."""
    env = simpy.Environment()
    fabric = Fabric(env, switch("s", 3, 2e-6, 10e9))
    events: list[tuple[str, int, float]] = []
    for index, (dst, size) in enumerate([(1, 1e6), (2, 3e6)]):
        fabric.transfer(0, dst, size, lambda i: events.append(("delivered", i, env.now)),
                        index, on_drained=lambda i: events.append(("drained", i, env.now)))
    env.run()
    expected = [("drained", 0, 200e-6), ("delivered", 0, 204e-6),
                ("drained", 1, 400e-6), ("delivered", 1, 404e-6)]
    assert [e[:2] for e in events] == [e[:2] for e in expected]
    assert [e[2] for e in events] == pytest.approx([e[2] for e in expected], rel=1e-12)


def test_nccl_protocols_buffer_and_the_ideal_model_does_not():
    topology = load_topology("topologies/h100-cluster.yaml", {"nodes": 2})
    # NCCL_STEPS slots: LL's 512 KiB of lines carry half data, LL128's 4.7 MB 120 of 128.
    assert buffered(cost_model(topology, "ring", "LL")) == 8 * 512 * 8 * 16 / 2
    assert buffered(cost_model(topology, "ring", "LL128")) == 120 * 640 * 8 * 8 * 120 / 128
    assert buffered(cost_model(topology, "nccl_tree", "Simple")) == 4 * 2**20
    assert not buffered(IDEAL) and not buffered(MessageCosts())


def test_nccl_ring_across_nodes_pays_the_network_latency_per_crossing():
    """16 GPUs on 2 nodes, LL (latency-bound): 30 steps of which NCCL's model charges
    2·nodes on the network. Buffered, the time falls well below 30 network latencies and
    stays above the lap's: 2 nodes x 2 laps of network latency."""
    topology = load_topology("topologies/h100-cluster.yaml", {"nodes": 2})
    costs = cost_model(topology, "ring", "LL")
    network = costs.step_latency[2]
    algorithm = get_algorithm("allreduce", "ring")
    job, gpus = make_job(topology, algorithm, 16, 16 * 1024, {"protocol": "LL"})
    time = TimingEngine(topology, gpus, job, algorithm.program, costs=costs).run().time
    rendezvous = TimingEngine(topology, gpus, job, algorithm.program,
                              costs=dataclasses.replace(costs, send_buffer=0.0)).run().time
    assert rendezvous - costs.launch > 30 * network
    assert 4 * network < time - costs.launch < 0.5 * (rendezvous - costs.launch)


def stream(count: int, messages: int, late: float, reduce_bandwidth: float = 4e9,
           parts: int = 1):
    """Rank 0 sends ``messages`` messages of ``count`` elements to rank 1, one a step, each
    one of ``parts`` parts of a step; rank 1 combines for ``late`` seconds first, then
    receives them one a step."""
    busy = int(late * reduce_bandwidth / 4)

    def program(rank, job):
        if rank == 0:
            for i in range(messages):
                yield Send(1, i, 0, count, parts=parts)
        else:
            yield Reduce("buf", 0, "buf", 0, busy)
            for i in range(messages):
                yield Recv(0, i, 0, count)
    return program


def test_a_full_buffer_holds_the_sender_until_the_receiver_takes_a_message():
    """Room for 3 messages, 5 to send, the receiver 1 ms late: messages 0-2 leave one after
    another (b each); message 3 waits for room until the receiver takes message 0 at 1 ms,
    then drains at 1 ms + b; message 4, posted then, drains at 1 ms + 2b and arrives alpha
    later. Without a bound the sender is done at 5b."""
    latency, bandwidth, count = 1e-6, 20e9, 25_000   # 100 kB: b = 5 us; two links
    b, alpha = 4 * count / bandwidth, 2 * latency
    machine = switch("s", 2, latency, bandwidth, 4e9)
    costs = MessageCosts(send_buffer=3 * 4 * count)
    finish = run(machine, stream(count, 5, 1e-3), 2, costs).finish
    assert finish[0] == pytest.approx(1e-3 + 2 * b, rel=1e-9)
    assert finish[1] == pytest.approx(1e-3 + 2 * b + alpha, rel=1e-9)
    unbounded = run(machine, stream(count, 5, 1e-3), 2).finish
    assert unbounded[0] == pytest.approx(5 * b, rel=1e-9)
    assert unbounded[1] == pytest.approx(1e-3, rel=1e-9)


def test_a_message_larger_than_the_buffer_waits_for_its_receive():
    """Bigger than the whole buffer: the rendezvous (it starts when the receive is posted)
    but the send still completes when its bytes have left."""
    latency, bandwidth, count = 1e-6, 20e9, 25_000
    b, alpha = 4 * count / bandwidth, 2 * latency
    machine = switch("s", 2, latency, bandwidth, 4e9)
    finish = run(machine, stream(count, 1, 1e-3), 2, MessageCosts(send_buffer=4 * count - 1)
                 ).finish
    assert finish[0] == pytest.approx(1e-3 + b, rel=1e-9)
    assert finish[1] == pytest.approx(1e-3 + b + alpha, rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(counts=st.lists(st.integers(1, 50_000), min_size=1, max_size=8),
       room=st.integers(0, 6), late=st.sampled_from([0.0, 3e-4]))
def test_the_buffer_never_holds_more_than_its_room(counts, room, late):
    """Whatever the sizes, the bytes sent ahead of their receives never exceed the room
    (a message bigger than the room waits for its receive); every message arrives."""
    latency, bandwidth = 1e-6, 20e9
    capacity = room * 4 * 10_000
    machine = switch("s", 2, latency, bandwidth, 4e9)
    busy = int(late * 4e9 / 4)
    engine = TimingEngine(machine, [0, 1], Job("broadcast", 2, 1), _varied(counts, busy),
                          costs=MessageCosts(send_buffer=capacity))
    call = engine.call
    peaks = []
    original = call._start

    def watched(message):
        original(message)
        held = message.connection.held
        if message.receiver is None:  # sent ahead of its receive
            peaks.append(held)
    call._start = watched
    result = engine.run()
    assert all(held <= capacity for held in peaks)
    assert result.transfers == len(counts)
    assert all(c.held == 0 and not c.waiting for c in call._connections.values())


def _varied(counts: list[int], busy: int):
    def program(rank, job):
        if rank == 0:
            for i, count in enumerate(counts):
                yield Send(1, i, 0, count)
        else:
            yield Reduce("buf", 0, "buf", 0, busy)
            for i, count in enumerate(counts):
                yield Recv(0, i, 0, count)
    return program


@dataclasses.dataclass(frozen=True)
class SlotCosts(MessageCosts):
    """MessageCosts that count a connection's slots across the network, as NCCL's do where
    the receiver clears each slot for its sender (costs.slot_credit)."""

    slot_credit: float | None = None
    slots: int = 8


def across_the_network(per_message: float):
    """2 nodes of the H100 cluster, ranks on GPU 0 and GPU 8 (one network route), and the
    route's alpha and bottleneck under ``per_message`` seconds a message."""
    topology = load_topology("topologies/h100-cluster.yaml", {"nodes": 2})
    links = [topology.links[i] for i in topology.route(0, 8)]
    costs = MessageCosts(per_message=per_message, send_buffer=math.inf)
    return topology, costs.latency(links), min(link.bandwidth for link in links)


def test_a_connection_across_the_network_holds_at_most_its_slots_until_credits_return():
    """16 messages of b seconds each from one node to the other, the receiver waiting for
    each: with 8 slots and a credit of c = 20 us (> 7b), messages 0-7 leave back to back;
    message 8 waits for message 0's slot: taken at b + alpha, free at b + alpha + c; each
    later message k + 8 waits for message k's, (k + 1)b + alpha + c. The last (k = 7)
    leaves at 8b + alpha + c, drains b later and arrives alpha after that:
    9b + 2alpha + c. Counting bytes only, the sender streams: the last arrives at 16b +
    alpha."""
    topology, alpha, bandwidth = across_the_network(5 * US)
    count = 12_500                         # 50 kB: b = 1 us on a 50 GB/s NIC
    b, credit = 4 * count / bandwidth, 20 * US
    counted = SlotCosts(per_message=5 * US, send_buffer=math.inf, slot_credit=credit)
    engine = TimingEngine(topology, [0, 8], Job("broadcast", 2, 1), stream(count, 16, 0.0),
                          costs=counted)
    finish = engine.run().finish
    assert finish[1] == pytest.approx(9 * b + 2 * alpha + credit, rel=1e-9)
    assert finish[0] == pytest.approx(9 * b + alpha + credit, rel=1e-9)
    assert all(c.count == 0 and c.slots == 8 for c in engine.call._connections.values())
    bytes_only = TimingEngine(topology, [0, 8], Job("broadcast", 2, 1),
                              stream(count, 16, 0.0),
                              costs=SlotCosts(per_message=5 * US, send_buffer=math.inf)
                              ).run().finish
    assert bytes_only[1] == pytest.approx(16 * b + alpha, rel=1e-9)


def test_the_parts_of_a_step_share_its_slot():
    """The 16 messages above as halves of 8 steps hold 8 slots: they stream as if bytes
    alone counted (16b + alpha); as thirds of steps too. As whole steps they wait for
    credits (9b + 2alpha + c, above)."""
    topology, alpha, bandwidth = across_the_network(5 * US)
    count = 12_500
    b, credit = 4 * count / bandwidth, 20 * US
    counted = SlotCosts(per_message=5 * US, send_buffer=math.inf, slot_credit=credit)
    for parts, want in ((2, 16 * b + alpha), (3, 16 * b + alpha),
                        (1, 9 * b + 2 * alpha + credit)):
        engine = TimingEngine(topology, [0, 8], Job("broadcast", 2, 1),
                              stream(count, 16, 0.0, parts=parts), costs=counted)
        assert engine.run().finish[1] == pytest.approx(want, rel=1e-9)
        assert all(c.count == pytest.approx(0, abs=1e-12)
                   for c in engine.call._connections.values())


def test_slots_are_counted_only_on_routes_that_cross_the_network():
    """The same stream between two GPUs of one node streams as if bytes alone counted."""
    topology, _, _ = across_the_network(5 * US)
    counted = SlotCosts(per_message=5 * US, send_buffer=math.inf, slot_credit=20 * US)
    programs = stream(12_500, 16, 0.0)
    inside = [TimingEngine(topology, [0, 1], Job("broadcast", 2, 1), programs, costs=costs
                           ).run().finish
              for costs in (counted, dataclasses.replace(counted, slot_credit=None))]
    assert inside[0] == inside[1]


@settings(max_examples=25, deadline=None)
@given(counts=st.lists(st.integers(1, 50_000), min_size=1, max_size=20),
       slots=st.integers(1, 8), late=st.sampled_from([0.0, 3e-4]),
       credit=st.sampled_from([0.0, 4e-6, 20e-6]))
def test_a_connection_never_holds_more_messages_than_its_slots(counts, slots, late, credit):
    """Whatever the sizes and the receiver's delay, a connection across the network holds
    at most its slots of messages when one starts while another's slot is on its way back,
    and every message arrives with every slot returned at the end."""
    topology, _, _ = across_the_network(1 * US)
    busy = int(late * 4e9 / 4)
    engine = TimingEngine(topology, [0, 8], Job("broadcast", 2, 1), _varied(counts, busy),
                          costs=SlotCosts(send_buffer=math.inf, slot_credit=credit,
                                          slots=slots))
    call = engine.call
    peaks = []
    original = call._start

    def watched(message):
        returning = message.connection.returning
        original(message)
        if returning:
            peaks.append(message.connection.count)
    call._start = watched
    result = engine.run()
    assert all(count <= slots for count in peaks)
    assert result.transfers == len(counts)
    assert all(c.count == 0 and c.held == 0 and not c.waiting
               for c in call._connections.values())


def test_nccl_counts_slots_where_the_transport_clears_them():
    """InfiniBand and EFA clear each slot for the sender: NCCL's network step is the
    credit's latency; TCPXO pushes its data (no count); in-switch families keep theirs."""
    p5 = load_topology("topologies/p5-efa-cluster.yaml", {"nodes": 2})
    ring = cost_model(p5, "ring", "LL128")
    assert ring.slot_credit == ring.step_latency[2] and ring.slots == 8
    ib = cost_model(load_topology("topologies/h100-cluster.yaml", {"nodes": 2}),
                    "nvls_tree", "Simple")
    assert ib.slot_credit is not None and ib.slot_credit > 0
    a3 = load_topology("topologies/a3-mega-cluster.yaml", {"nodes": 2})
    assert cost_model(a3, "ring", "LL128").slot_credit is None
    assert cost_model(p5, "nvls", "Simple").slot_credit is None


def test_two_slots_pay_a_round_trip_every_two_messages():
    """A Simple ring chunk's 2 slots a connection (NCCL_STEPS / CHUNKSTEPS): 16 messages of b
    seconds, credit c > b. Messages 2j and 2j + 1 leave at jP and jP + b, P = b + alpha + c
    (message 2j's slot is message 2j - 2's, back at its arrival plus c; message 2j + 1's
    frees, b later, when 2j has drained): the last leaves at 7P + b and arrives at
    9b + 8alpha + 7c."""
    topology, alpha, bandwidth = across_the_network(5 * US)
    count = 12_500                         # 50 kB: b = 1 us on a 50 GB/s NIC
    b, credit = 4 * count / bandwidth, 20 * US
    two = SlotCosts(per_message=5 * US, send_buffer=math.inf, slot_credit=credit, slots=2)
    finish = TimingEngine(topology, [0, 8], Job("broadcast", 2, 1), stream(count, 16, 0.0),
                          costs=two).run().finish
    assert finish[1] == pytest.approx(9 * b + 8 * alpha + 7 * credit, rel=1e-9)


def _ring_slots(topology, collective: str, algorithm: str, protocol: str) -> int:
    from collsim.callspec import CallSpec
    from collsim.simulate import make_call
    call = CallSpec(topology, collective, algorithm, 16, 2**24, {"protocol": protocol})
    return make_call(call)[2].costs.slots


def test_a_simple_ring_chunk_holds_chunksteps_of_a_connections_slots():
    """NCCL's Simple ring chunk moves a connection's step by CHUNKSTEPS = 4 of its 8 slots
    whatever its bytes (allreduce, allgather, reducescatter): 2 chunks a connection.
    Broadcast's one-step chunks, LL128's steps and the tree's keep 8."""
    topology = load_topology("topologies/h100-cluster.yaml", {"nodes": 2})
    assert [_ring_slots(topology, c, "ring", "Simple")
            for c in ("allreduce", "allgather", "reducescatter")] == [2, 2, 2]
    assert _ring_slots(topology, "broadcast", "ring", "Simple") == 8
    assert _ring_slots(topology, "allgather", "ring", "LL128") == 8
    assert _ring_slots(topology, "allreduce", "nccl_tree", "Simple") == 8


@pytest.mark.parametrize("size, slower", [(2**24, True), (2**30, False)])
def test_chunk_slots_bind_below_a_full_chunk_and_not_at_it(size, slower):
    """A ring allgather across 2 nodes of H100: at 16 MiB (64 KiB chunks) 2 chunks in flight
    a connection, each slot back a network step after its receiver took it, hold the ring
    back against 8; at 1 GiB (full 2 MiB chunks) the 4 MiB buffer already held 2, so the
    time is the same to the bit."""
    from collsim.callspec import CallSpec
    from collsim.simulate import make_call
    topology = load_topology("topologies/h100-cluster.yaml", {"nodes": 2})
    chosen = get_algorithm("allgather", "ring")
    job, gpus, planned = make_call(CallSpec(topology, "allgather", "ring", 16, size,
                                            {"protocol": "Simple"}), chosen)
    times = [TimingEngine(topology, gpus, job, chosen.program, costs).run().time
             for costs in (planned.costs, dataclasses.replace(planned.costs, slots=8))]
    assert (times[0] > 1.5 * times[1]) if slower else (times[0] == times[1])


def test_the_symmetric_path_counts_slots_as_every_rank_does():
    """A ring LL allreduce of 1 MiB on 4 nodes of p5 (EFA), where the slots bind: the
    symmetric path (one rank per orbit) gives every rank's events' finish times to the bit,
    and both are slower than with bytes counted alone."""
    from collsim.callspec import CallSpec
    from collsim.simulate import make_call
    topology = load_topology("topologies/p5-efa-cluster.yaml", {"nodes": 4})
    call = CallSpec(topology, "allreduce", "ring", 32, 2**20, {"protocol": "LL"})
    chosen = get_algorithm("allreduce", "ring")
    job, gpus, planned = make_call(call, chosen)
    assert planned.costs.slot_credit is not None
    runs = [TimingEngine(topology, gpus, job, chosen.program, costs, symmetric=symmetric,
                         lockstep=False).run()
            for costs, symmetric in ((planned.costs, chosen.symmetric),
                                     (planned.costs, None),
                                     (dataclasses.replace(planned.costs, slot_credit=None),
                                      chosen.symmetric))]
    assert [run.path for run in runs] == ["symmetric", "full", "symmetric"]
    assert runs[0].finish == runs[1].finish
    assert runs[0].time > runs[2].time
