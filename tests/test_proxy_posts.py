"""A GPU's network proxy posts one message at a time (a cost model's ``net_post``, NCCL's
per-step network post overhead): messages that cross the network from one GPU queue behind
each other's posts, messages inside a node and from other GPUs do not. Checked by hand on two
nodes of ``h100-cluster`` with messages of no bytes, where only latencies count."""

from __future__ import annotations

import math

import pytest

from collsim.engine.costs import MessageCosts, path_costs, proxy_post
from collsim.engine.timing import TimingEngine
from collsim.hardware.loader import load_topology
from collsim.nccl.protocols import cost_model, net_post_seconds
from collsim.program import Job, Recv, Send

US = 1e-6
POST = 3 * US


def two_nodes():
    return load_topology("topologies/h100-cluster.yaml", {"nodes": 2})


def burst(pairs: list[tuple[int, int]], k: int):
    """Programs where each (sender, receiver) pair moves ``k`` empty messages at once."""
    def programs(rank: int, job: Job):
        steps = []
        for src, dst in pairs:
            if rank == src:
                steps.append(tuple(Send(dst, t, 0, 0) for t in range(k)))
            if rank == dst:
                steps.append(tuple(Recv(src, t, 0, 0) for t in range(k)))
        return iter(steps)
    return programs


def time_of(topology, programs, p: int, post: float, lanes: tuple[float, ...] = ()) -> float:
    job = Job("broadcast", p, 1, lanes=lanes)
    costs = MessageCosts(send_buffer=math.inf, net_post=post)
    return TimingEngine(topology, list(range(p)), job, programs, costs=costs,
                        lockstep=False).run().time


def test_k_messages_across_the_network_from_one_gpu_pay_k_posts():
    """GPU 0 (node 0) sends 5 empty messages to GPU 8 (node 1) at once: the last is posted
    after 5 posts, so the call takes 5 x 3 us more than without posts."""
    topology = two_nodes()
    programs = burst([(0, 8)], 5)
    free = time_of(topology, programs, 16, 0.0)
    assert time_of(topology, programs, 16, POST) - free == pytest.approx(5 * POST, rel=1e-9)


def test_messages_inside_a_node_post_nothing():
    topology = two_nodes()
    programs = burst([(0, 1)], 5)
    assert time_of(topology, programs, 16, POST) == time_of(topology, programs, 16, 0.0)


def test_each_gpu_has_its_own_proxy():
    """GPUs 0 and 1 each send 4 messages across: 4 posts each, not 8 on one queue."""
    topology = two_nodes()
    programs = burst([(0, 8), (1, 9)], 4)
    free = time_of(topology, programs, 16, 0.0)
    assert time_of(topology, programs, 16, POST) - free == pytest.approx(4 * POST, rel=1e-9)


def test_a_lane_of_w_channels_posts_w_steps_a_message():
    """A lane standing for 3 channels posts 3 steps a message: 2 messages cost 6 posts."""
    topology = two_nodes()
    programs = burst([(0, 8)], 2)
    free = time_of(topology, programs, 16, 0.0, lanes=(3.0,))
    assert time_of(topology, programs, 16, POST, lanes=(3.0,)) - free == \
        pytest.approx(6 * POST, rel=1e-9)


def test_nccl_models_post_nccls_net_overhead_across_nodes_only():
    """NCCL's getNetOverhead: 1 us Intel, 2 us AMD, three times with Simple; nothing on one
    node. h100-cluster declares an Intel CPU."""
    assert net_post_seconds("intel", "LL128") == pytest.approx(1 * US)
    assert net_post_seconds("amd", "LL") == pytest.approx(2 * US)
    assert net_post_seconds("amd", "Simple") == pytest.approx(6 * US)
    cluster = two_nodes()
    assert proxy_post(cost_model(cluster, "ring", "Simple")) == pytest.approx(3 * US)
    assert proxy_post(cost_model(cluster, "ring", "Simple", gpus=range(8))) == 0.0
    assert proxy_post(MessageCosts()) == 0.0


def test_posts_across_nodes_have_no_closed_form():
    topology = two_nodes()
    assert path_costs(topology, MessageCosts(net_post=POST)) is None
