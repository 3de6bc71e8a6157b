"""Training steps as workloads: a model, its parallelism and its compute, planned into per-rank
tasks (compute spans and collective calls on process groups) and executed on SimPy with a
pluggable :class:`~collsim.workloads.service.CollectiveService` that times the calls."""

from __future__ import annotations

__all__ = ["load_workload", "build_plan", "run_plan", "run_workload"]


def __getattr__(name: str):  # loaded on first use, so that import collsim.workloads is cheap
    if name == "load_workload":
        from collsim.workloads.loader import load_workload
        return load_workload
    if name == "build_plan":
        from collsim.workloads.plan import build_plan
        return build_plan
    if name == "run_plan":
        from collsim.workloads.executor import run_plan
        return run_plan
    if name == "run_workload":
        from collsim.workloads.step import run_workload
        return run_workload
    raise AttributeError(name)
