"""What the shared fabric costs against the isolated stand-in for a training step, and what
recording (for --trace / --link-report) adds: CPU seconds per step.

    python benchmarks/workloads.py
"""

from __future__ import annotations

import time
from pathlib import Path

from collsim.api import load_topology
from collsim.workloads import load_workload, run_workload
from collsim.workloads.service import isolated, simulated
from collsim.workloads.tracing import record_step

HERE = Path(__file__).resolve().parent.parent / "workloads"
CASES = [("llama-7b-dp.yaml", 16), ("llama-7b-dp.yaml", 64), ("llama-7b-zero3.yaml", 16),
         ("gpt-39b-3d.yaml", 32)]


def cpu(function, *args, **kwargs) -> tuple[float, object]:
    start = time.process_time()
    result = function(*args, **kwargs)
    return time.process_time() - start, result


def main() -> None:
    print(f"{'workload':<22}{'GPUs':>6}{'isolated s':>12}{'shared s':>10}{'recorded s':>12}"
          f"{'step (iso)':>12}{'step (shared)':>15}")
    for name, gpus in CASES:
        topology = load_topology("h100-cluster", {"nodes": max(1, gpus // 8)})
        workload = load_workload(HERE / name)
        alone_s, alone = cpu(run_workload, workload, topology, gpus,
                             service=isolated(simulated(topology)))
        shared_s, shared = cpu(run_workload, workload, topology, gpus)
        recorded_s, _ = cpu(record_step, workload, topology, gpus)
        print(f"{name:<22}{gpus:>6}{alone_s:>12.2f}{shared_s:>10.2f}{recorded_s:>12.2f}"
              f"{alone.step_s:>12.4f}{shared.step_s:>15.4f}", flush=True)


if __name__ == "__main__":
    main()
