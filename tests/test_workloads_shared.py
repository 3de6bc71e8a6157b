"""The shared-fabric service: calls of a step on one simulation contend for links, each
member starts at its own arrival and ends at its own finish; alone it agrees with the
isolated stand-in."""

from __future__ import annotations

import pytest
import simpy

from collsim.api import load_topology
from collsim.engine.simulation import Simulation
from collsim.workloads.loader import load_workload
from collsim.workloads.service import Call, isolated, simulated
from collsim.workloads.shared import SharedFabric
from collsim.workloads.step import run_workload

SIZE = 1 << 20


def send(key, src, dst, size=SIZE):
    return Call(key, "pipeline", "broadcast", (src, dst), size, "binomial", "uint8")


def run_calls(topology, arrivals):
    """Members arriving at (time, call, gpu); returns each member's finish time."""
    env = simpy.Environment()
    service = SharedFabric(env, topology)
    finish = {}

    def member(at, call, gpu):
        yield env.timeout(at)
        service.arrive(call, gpu, lambda: finish.__setitem__((call.key, gpu), env.now))

    for at, call, gpu in arrivals:
        env.process(member(at, call, gpu))
    env.run()
    service.simulation.check()
    return finish


def test_two_sends_from_one_gpu_share_its_port():
    """On the canonical switch, two sends out of GPU 0 at once each get half its uplink:
    latency + 2 n / bandwidth, where alone one takes latency + n / bandwidth."""
    topology = load_topology("switch-64")
    _, latency, bandwidth = Simulation(topology).fabric.route(0, 1)
    a, b = send("a", 0, 1), send("b", 0, 2)
    finish = run_calls(topology, [(0, a, 0), (0, a, 1), (0, b, 0), (0, b, 2)])
    for key, dst in (("a", 1), ("b", 2)):
        assert finish[key, dst] == pytest.approx(latency + 2 * SIZE / bandwidth, rel=1e-12)
    alone = run_calls(topology, [(0, a, 0), (0, a, 1)])
    assert alone["a", 1] == pytest.approx(latency + SIZE / bandwidth, rel=1e-12)


def test_disjoint_sends_do_not_slow_each_other_on_a_switch():
    topology = load_topology("switch-64")
    _, latency, bandwidth = Simulation(topology).fabric.route(0, 1)
    a, b = send("a", 0, 1), send("b", 2, 3)
    finish = run_calls(topology, [(0, a, 0), (0, a, 1), (0, b, 2), (0, b, 3)])
    assert finish["a", 1] == finish["b", 3] == pytest.approx(latency + SIZE / bandwidth,
                                                              rel=1e-12)


def test_a_member_starts_at_its_own_arrival():
    """The receiver arrives 5 ms late: the message moves from then on; the sender, whose
    send needs the receive posted, finishes with it."""
    topology = load_topology("switch-64")
    _, latency, bandwidth = Simulation(topology).fabric.route(0, 1)
    a = send("a", 0, 1)
    finish = run_calls(topology, [(0, a, 0), (5e-3, a, 1)])
    assert finish["a", 1] == pytest.approx(5e-3 + latency + SIZE / bandwidth, rel=1e-12)
    assert finish["a", 0] <= finish["a", 1]
    assert finish["a", 0] > 5e-3


def test_a_data_parallel_step_matches_the_stand_in_when_calls_never_overlap():
    """DDP's buckets run one after another on the data stream, so no two calls overlap:
    the shared fabric gives the isolated stand-in's step."""
    topology = load_topology("switch-64")
    workload = load_workload("workloads/llama-7b-dp.yaml", {"model.layers": 4,
                                                             "model.parameters": "800M"})
    alone = run_workload(workload, topology, 8, service=isolated(simulated(topology)))
    together = run_workload(workload, topology, 8, exact=True)
    assert together.step_s == pytest.approx(alone.step_s, rel=1e-9)
    assert together.exposed_s == pytest.approx(alone.exposed_s, rel=1e-9, abs=1e-12)


def test_zero3_gathers_and_reductions_contend():
    """ZeRO-3 runs its parameter gathers beside its gradient reduce-scatters; on one fabric
    they share each GPU's ports, so the step is no faster than with every call alone."""
    topology = load_topology("switch-64")
    workload = load_workload("workloads/llama-7b-zero3.yaml", {"model.layers": 4,
                                                                "model.parameters": "800M"})
    alone = run_workload(workload, topology, 8, service=isolated(simulated(topology)))
    together = run_workload(workload, topology, 8, exact=True)
    assert together.step_s >= alone.step_s * (1 - 1e-9)
    assert together.kinds["data reducescatter"].time_s > \
        alone.kinds["data reducescatter"].time_s


def test_the_shared_step_is_deterministic():
    topology = load_topology("switch-64")
    workload = load_workload("workloads/llama-7b-zero3.yaml", {"model.layers": 2,
                                                                "model.parameters": "100M",
                                                                "noise.jitter": 0.1,
                                                                "noise.spread": "1ms"})
    first = run_workload(workload, topology, 6).to_dict(ranks=True)
    assert run_workload(workload, topology, 6).to_dict(ranks=True) == first
