"""The step's fast path: calls that run alone on their links are timed alone, and the step
agrees with the shared simulation; calls that overlap are found and run shared."""

from __future__ import annotations

import subprocess
import sys

import pytest
import simpy

from collsim.api import load_topology
from collsim.workloads.alone import AloneCalls
from collsim.workloads.loader import load_workload
from collsim.workloads.service import Call
from collsim.workloads.step import run_workload

SMALL = {"model.layers": 4, "model.parameters": "800M"}


def allreduce(key, group):
    return Call(key, "data", "allreduce", tuple(group), 1 << 20, "ring", "bfloat16")


def fields(result):
    """Every number of a step result, by name (the per-GPU times included)."""
    out = {}

    def walk(value, name):
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{name}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{name}[{index}]")
        elif isinstance(value, float):
            out[name] = value

    walk(result.to_dict(ranks=True), "")
    return out


@pytest.mark.parametrize("name, topology, gpus", [
    ("workloads/llama-7b-dp.yaml", "switch-64", 8),
    ("workloads/llama-7b-dp.yaml", "h100-cluster", 16),
    ("workloads/llama-7b-zero3.yaml", "switch-64", 8),
])
def test_the_fast_path_agrees_with_the_shared_simulation(name, topology, gpus):
    """Every time of the step within 1e-7 of the step time of the shared simulation's, the
    MFU within 1e-7 of itself (docs/engine.md#step-paths), on the path the result names."""
    machine = load_topology(topology, {"nodes": gpus // 8} if topology == "h100-cluster"
                            else None)
    workload = load_workload(name, SMALL)
    fast = run_workload(workload, machine, gpus)
    exact = run_workload(workload, machine, gpus, exact=True)
    assert fast.path == "alone" and exact.path == "shared"
    got, want = fields(fast), fields(exact)
    assert got.keys() == want.keys()
    for key, value in want.items():
        if key == ".mfu":
            assert got[key] == pytest.approx(value, rel=1e-7)
        else:
            assert got[key] == pytest.approx(value, abs=1e-7 * exact.step_s), key


def test_calls_overlapping_on_their_links_are_found():
    """Two calls of one group at once contend: both are named, though each was timed
    alone; a third, later, is not."""
    topology = load_topology("switch-64")
    env = simpy.Environment()
    service = AloneCalls(env, topology)
    first, second, later = (allreduce(k, range(4)) for k in ("a", "b", "c"))

    def member(at, call, gpu):
        yield env.timeout(at)
        service.arrive(call, gpu, lambda: None)

    for gpu in range(4):
        env.process(member(0.0, first, gpu))
        env.process(member(0.0, second, gpu))
        env.process(member(1.0, later, gpu))
    env.run()
    assert service.alone == 3
    assert service.conflicts() == {"a", "b"}


def test_calls_on_disjoint_gpus_of_a_switch_do_not_conflict():
    topology = load_topology("switch-64")
    env = simpy.Environment()
    service = AloneCalls(env, topology)
    for key, group in (("a", range(4)), ("b", range(4, 8))):
        call = allreduce(key, group)
        for gpu in group:
            service.arrive(call, gpu, lambda: None)
    env.run()
    assert service.alone == 2 and service.conflicts() == set()


def test_members_arriving_apart_run_shared_and_conflicts_force_them_shared():
    """A member far behind the others: the call runs on the shared simulation, members
    starting at their own arrival; a call forced shared never waits for the others."""
    topology = load_topology("switch-64")
    env = simpy.Environment()
    late = allreduce("late", range(4))
    forced = allreduce("forced", range(8, 12))
    service = AloneCalls(env, topology, forced=frozenset({"forced"}))
    ends = {}

    def member(at, call, gpu):
        yield env.timeout(at)
        service.arrive(call, gpu, lambda: ends.__setitem__((call.key, gpu), env.now))

    for gpu in range(4):
        env.process(member(0.5 if gpu == 3 else 0.0, late, gpu))
        env.process(member(0.0, forced, gpu + 8))
    env.run()
    assert service.alone == 0
    assert all(ends["late", gpu] > 0.5 for gpu in range(4))
    assert service.shared.simulation.calls[0].result is not None


def test_the_cli_names_the_path_and_refuses_exact_with_isolated():
    base = [sys.executable, "-m", "collsim", "workload", "workloads/llama-7b-dp.yaml",
            "-t", "switch-64", "--gpus", "8", "--with", "model.layers=4",
            "--with", "model.parameters=800M"]
    shown = subprocess.run(base, capture_output=True, text=True, check=True).stdout
    assert "calls timed: alone" in shown
    exact = subprocess.run([*base, "--exact"], capture_output=True, text=True, check=True)
    assert "calls timed: shared" in exact.stdout
    both = subprocess.run([*base, "--exact", "--isolated"], capture_output=True, text=True)
    assert both.returncode == 2 and "Traceback" not in both.stderr
    assert "--exact" in both.stderr


@pytest.mark.parametrize("exact", [False, True])
def test_a_progress_line_can_read_the_run_in_progress(exact):
    """``observe`` gets one object whose clock and transfers are the running step's."""
    topology = load_topology("switch-64")
    workload = load_workload("workloads/llama-7b-dp.yaml", SMALL)
    seen = []
    result = run_workload(workload, topology, 8, exact=exact, observe=seen.append)
    [current] = seen
    assert current.env.now == pytest.approx(result.step_s, rel=1e-12)
    assert isinstance(current.fabric.transfers, int)
    assert (current.fabric.transfers > 0) == exact  # timed alone: nothing on the shared one
