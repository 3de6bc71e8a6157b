"""Parallel sub-programs in both interpreters, and lanes: a cost model's per-channel and
per-GPU caps as virtual links, and identical channels merged into one lane exactly."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from collsim.algorithms import get_algorithm
from collsim.engine.costs import IDEAL, MessageCosts
from collsim.engine.data import run_data
from collsim.engine.simulation import Simulation
from collsim.engine.timing import TimingEngine
from collsim.errors import SimulationError
from collsim.hardware.loader import topology_from_text
from collsim.hardware.topology import switch
from collsim.nccl.layout import machine_layout
from collsim.program import Job, Parallel, Recv, Send
from collsim.simulate import make_job
from collsim.tags import TAGS

LATENCY, BANDWIDTH = 1e-6, 10e9


# -- Parallel ---------------------------------------------------------------------------------

def fan_out(n: int, m: int):
    """Rank 0 runs two sub-programs: two sends of n bytes to rank 1, one by one, and one
    send of m bytes to rank 2."""
    def program(rank: int, job: Job):
        if rank == 0:
            first = (Send(1, tag, 0, n // 4) for tag in (0, 1))
            second = iter([Send(2, 2, 0, m // 4)])
            yield Parallel([first, second])
        elif rank == 1:
            yield Recv(0, 0, 0, n // 4)
            yield Recv(0, 1, 0, n // 4)
        else:
            yield Recv(0, 2, 0, m // 4)
    return program


def test_sub_programs_post_independently_and_the_rank_waits_for_all():
    # m < n: both first sends share GPU 0's port; the small one's last byte leaves at 2m/B,
    # the large one's at (n + m)/B; the second large send follows it alone.
    n, m = 4_000_000, 1_000_000
    run = TimingEngine(switch("s", 3, LATENCY, BANDWIDTH), [0, 1, 2], Job("broadcast", 3, n),
                       fan_out(n, m)).run()
    assert run.finish[2] == pytest.approx(2 * m / BANDWIDTH + 2 * LATENCY, rel=1e-12)
    done = (2 * n + m) / BANDWIDTH + 4 * LATENCY
    assert run.finish[1] == pytest.approx(done, rel=1e-12)
    assert run.finish[0] == pytest.approx(done, rel=1e-12)


def test_nested_and_empty_parallel_steps_and_data():
    # Rank 0 sends its two halves to rank 1 from two sub-programs (the second itself split
    # in two); rank 1 receives them from one sub-program each. An empty Parallel is a no-op.
    def program(rank: int, job: Job):
        yield Parallel([])
        if rank == 0:
            yield Parallel([iter([Send(1, 0, 0, 2)]),
                            iter([Parallel([iter([Send(1, 1, 2, 1)]),
                                            iter([Send(1, 2, 3, 1)])])])])
        else:
            yield Parallel([iter([Recv(0, tag, tag + (tag > 0), 1 + (tag == 0))])
                            for tag in (2, 0, 1)])

    buffers = [{"buf": np.arange(4.0)}, {"buf": np.zeros(4)}]
    run = run_data(program, Job("broadcast", 2, 4), "sum", buffers)
    assert buffers[1]["buf"].tolist() == [0, 1, 2, 3] and run.messages == 3
    timed = TimingEngine(switch("s", 2, LATENCY, BANDWIDTH), [0, 1], Job("broadcast", 2, 4),
                         program).run()
    assert timed.transfers == 3


def test_a_parallel_inside_a_tuple_is_refused_and_a_stuck_sub_program_is_named():
    def in_tuple(rank, job):
        yield (Send(1 - rank, 0, 0, 1), Parallel([]))

    with pytest.raises(SimulationError, match="Parallel step must be a step by itself"):
        TimingEngine(switch("s", 2, LATENCY, BANDWIDTH), [0, 1], Job("broadcast", 2, 1),
                     in_tuple).run()
    with pytest.raises(SimulationError, match="Parallel step must be a step by itself"):
        run_data(in_tuple, Job("broadcast", 2, 1), "sum",
                 [{"buf": np.zeros(1)}, {"buf": np.zeros(1)}])

    def stuck(rank, job):
        if rank == 1:
            yield Parallel([iter([Recv(0, 9, 0, 1)])])

    for run in (lambda: TimingEngine(switch("s", 2, LATENCY, BANDWIDTH), [0, 1],
                                     Job("broadcast", 2, 1), stuck).run(),
                lambda: run_data(stuck, Job("broadcast", 2, 1), "sum",
                                 [{"buf": np.zeros(1)}, {"buf": np.zeros(1)}])):
        with pytest.raises(SimulationError, match=r"rank 1 is blocked in step Recv\(peer=0, tag=9"):
            run()


def test_parts_of_a_tag_space_are_disjoint_and_nest_with_phases():
    parts = [TAGS.part(k, 24) for k in range(24)]
    seen = [set(space.range(50)) for space in parts]
    assert all(not a & b for i, a in enumerate(seen) for b in seen[i + 1:])
    assert TAGS.phase(3) == TAGS.part(3, 16)
    inner = [set(parts[5].phase(k).range(30)) for k in range(2)]
    assert not inner[0] & inner[1]
    assert all((tag - 5) % 24 == 0 for tag in inner[0] | inner[1])  # inside part 5
    with pytest.raises(ValueError, match="part 24 is not one of 0..23"):
        TAGS.part(24, 24)


# -- lanes and caps ---------------------------------------------------------------------------

def sender(lanes: list[int], n: int):
    """Rank 0 sends n bytes to rank 1 on each of ``lanes``, all in one step."""
    def program(rank: int, job: Job):
        if rank == 0:
            yield tuple(Send(1, i, 0, n // 4, lane=lane) for i, lane in enumerate(lanes))
        else:
            yield tuple(Recv(0, i, 0, n // 4) for i in range(len(lanes)))
    return program


def capped_time(costs, lanes: list[int], weights: tuple[float, ...], n: int) -> float:
    job = Job("broadcast", 2, n // 4, lanes=weights)
    return TimingEngine(switch("s", 2, LATENCY, BANDWIDTH), [0, 1], job, sender(lanes, n),
                        costs).run().time


def test_a_channel_cap_is_a_virtual_link_of_weight_times_cap():
    n, cap = 2_000_000, 1e9
    capped = MessageCosts(channel_cap=cap)
    assert capped_time(capped, [0], (), n) == pytest.approx(2 * LATENCY + n / cap, rel=1e-12)
    assert capped_time(capped, [0], (3,), n) == pytest.approx(2 * LATENCY + n / (3 * cap),
                                                              rel=1e-12)
    # Two lanes of weight 4: each at 4 GB/s, together within the 10 GB/s port.
    assert capped_time(capped, [0, 1], (4, 4), n) == pytest.approx(
        2 * LATENCY + n / (4 * cap), rel=1e-12)
    # Weight 20 is above the port: the port's 10 GB/s is the bottleneck.
    assert capped_time(capped, [0], (20,), n) == pytest.approx(2 * LATENCY + n / BANDWIDTH,
                                                               rel=1e-12)


@dataclass(frozen=True)
class GroupCosts(MessageCosts):
    """A cap on each thread group of a channel, as on NCCL's tree kernel's two halves."""

    group_cap: float | None = None


def grouped_time(costs, groups: list[int | None], n: int) -> float:
    """Rank 0 sends n bytes to rank 1 from each of ``groups`` of lane 0, all in one step."""
    def program(rank: int, job: Job):
        if rank == 0:
            yield tuple(Send(1, i, 0, n // 4, group=g) for i, g in enumerate(groups))
        else:
            yield tuple(Recv(0, i, 0, n // 4) for i in range(len(groups)))
    job = Job("broadcast", 2, n // 4, lanes=(1,))
    return TimingEngine(switch("s", 2, LATENCY, BANDWIDTH), [0, 1], job, program,
                        costs).run().time


def test_a_thread_group_moves_at_most_its_cap_even_alone_and_the_channel_cap_binds_all():
    n, cap, group = 2_000_000, 4e9, 3e9
    split = GroupCosts(channel_cap=cap, group_cap=group)
    # One group alone: its cap, though the channel could move more.
    assert grouped_time(split, [0], n) == pytest.approx(2 * LATENCY + n / group, rel=1e-12)
    # Both groups at once: 3 + 3 GB/s is above the channel's 4, which they share.
    assert grouped_time(split, [0, 1], n) == pytest.approx(2 * LATENCY + 2 * n / cap,
                                                           rel=1e-12)
    # A send of the whole channel (no group), and any send of a model without group caps.
    assert grouped_time(split, [None], n) == pytest.approx(2 * LATENCY + n / cap, rel=1e-12)
    assert grouped_time(MessageCosts(channel_cap=cap), [0], n) == pytest.approx(
        2 * LATENCY + n / cap, rel=1e-12)
    # A group cap alone (no channel cap) still binds, and two sends of a group share it.
    assert grouped_time(GroupCosts(group_cap=group), [0, 0], n) == pytest.approx(
        2 * LATENCY + 2 * n / group, rel=1e-12)


def test_a_gpu_cap_bounds_all_lanes_of_a_gpu_together():
    n = 1_000_000
    costs = MessageCosts(channel_cap=4e9, gpu_cap=6e9)
    # Three lanes of weight 1 (4 GB/s each) share the 6 GB/s total: 2 GB/s each.
    assert capped_time(costs, [0, 1, 2], (), n) == pytest.approx(2 * LATENCY + n / 2e9,
                                                                 rel=1e-12)
    assert capped_time(MessageCosts(gpu_cap=6e9), [0, 1, 2], (), n) == pytest.approx(
        2 * LATENCY + 3 * n / 6e9, rel=1e-12)


def test_without_caps_routes_are_the_fabrics_own():
    machine = switch("s", 2, LATENCY, BANDWIDTH)
    for costs, virtual in ((IDEAL, 0), (MessageCosts(channel_cap=1e9), 2)):
        sim = Simulation(machine, costs)
        call = sim.call(Job("broadcast", 2, 100, lanes=(1, 1)), [0, 1], sender([0, 1], 400))
        sim.run()
        assert len(call._virtual) == virtual and call.capped == bool(virtual)
    with pytest.raises(SimulationError, match="lane -1 is negative"):
        capped_time(MessageCosts(channel_cap=1e9), [-1], (), 400)


CLUSTER = """
kind: cluster
nodes: {nodes}
node:
  kind: nvswitch
  gpus: 4
  nvlink: {{latency: 1us, bandwidth: 100GB/s}}
  pcie: {{switches: 2, link: {{latency: 0.5us, bandwidth: 32GB/s}},
         uplink: {{latency: 0.5us, bandwidth: 32GB/s}}}}
  nics: {{count: {nics}, link: {{latency: 2us, bandwidth: 25GB/s}}}}
fabric: {{kind: fat_tree, leaf_ports: 8, oversubscription: 1, latency: 1us}}
gpu: {{reduce_bandwidth: 300GB/s}}
"""


@pytest.mark.parametrize("costs", [IDEAL, MessageCosts(channel_cap=6e9),
                                   MessageCosts(channel_cap=6e9, gpu_cap=15e9)],
                         ids=["no caps", "channel cap", "channel and GPU caps"])
@pytest.mark.parametrize("machine", ["switch", "cluster 2 NICs", "cluster 4 NICs"])
def test_merged_lanes_take_the_same_time_as_separate_channels(costs, machine):
    """C channels as C lanes of weight 1 and as lanes of identical channels merged: max-min
    rates are unique, so the times agree (sizes divide evenly into every piece)."""
    if machine == "switch":
        topology, p, channels = switch("s", 8, LATENCY, BANDWIDTH, 40e9), 8, 4
    else:
        topology = topology_from_text(CLUSTER.format(nodes=3, nics=int(machine.split()[1])))
        p, channels = 12, 8
    algorithm = get_algorithm("allreduce", "ring")
    size = 4 * p * channels * 1000
    times = []
    for merge in (False, True):
        job, gpus = make_job(topology, algorithm, p, size, {"channels": channels})
        layout = machine_layout(topology, gpus, channels, merge=merge)
        job = type(job)(**{**job.__dict__, "layout": layout,
                           "lanes": layout.ring_lanes.weights})
        times.append(TimingEngine(topology, gpus, job, algorithm.program, costs).run().time)
        if merge:
            assert len(layout.ring_lanes.channels) < channels
    assert times[1] == pytest.approx(times[0], rel=1e-9)


def test_each_lane_combines_on_its_share_of_the_reduce_bandwidth():
    # Lanes of weight 1 and 3 receive n bytes each, combining: lane 0 at R/4, lane 1 at
    # 3R/4, each after its transfer (both share the port: n/(B/2) each).
    n, reduce = 1_000_000, 8e9

    def program(rank, job):
        if rank == 0:
            yield tuple(Send(1, lane, 0, n // 4, lane=lane) for lane in (0, 1))
        else:
            yield Parallel([iter([Recv(0, lane, 0, n // 4, reduce=True, lane=lane)])
                            for lane in (0, 1)])

    machine = switch("s", 2, LATENCY, BANDWIDTH, reduce)
    sim = Simulation(machine)
    call = sim.call(Job("reduce", 2, n // 4, lanes=(1, 3)), [0, 1], program)
    sim.run()
    arrive = 2 * LATENCY + 2 * n / BANDWIDTH
    assert call.result.finish[1] == pytest.approx(arrive + n / (reduce / 4), rel=1e-12)
