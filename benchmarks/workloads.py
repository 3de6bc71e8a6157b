"""What one training step costs to simulate, and the error of its fast paths.

    python benchmarks/workloads.py            # every example at the issue's sizes
    python benchmarks/workloads.py --error    # the fast paths against the shared simulation
    python benchmarks/workloads.py --error --only zero3 --gpus 64    # one workload, 64 GPUs
    python benchmarks/workloads.py --routing ecmp    # the fat-tree's flows hashed (ECMP)

The first table times each example workload (workloads/*.yaml) and the jobs example on
``h100-cluster`` at the sizes users wait for (64 GPUs, 128 for gpt-39b-3d, 512 for the
DDP scaling figure), each in a process of its own: wall and CPU seconds, peak memory (the
process's maximum resident set) and the path the step took (collsim/workloads/alone.py,
periodic.py). A
case is cut after ``--limit`` CPU seconds. ``--error`` runs steps small enough for the
shared simulation both ways and prints the largest difference of any time of the result,
as a fraction of the step.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = [("workloads/llama-7b-dp.yaml", 64), ("workloads/llama-7b-zero3.yaml", 64),
         ("workloads/gpt-39b-3d.yaml", 128), ("jobs/two-jobs.yaml", 128),
         ("workloads/llama-7b-dp.yaml", 512)]
ERROR_CASES = [("workloads/llama-7b-dp.yaml", 8), ("workloads/llama-7b-dp.yaml", 16),
               ("workloads/llama-7b-zero3.yaml", 8), ("workloads/llama-7b-zero3.yaml", 16),
               ("workloads/gpt-39b-3d.yaml", 32)]


def machine(gpus: int, routing: str | None = None):
    """``h100-cluster`` with ``gpus`` GPUs, its fat-tree routed by ``routing`` (None: the
    preset's)."""
    from collsim.api import load_topology

    changes: dict = {"nodes": max(1, gpus // 8)}
    if routing is not None:
        changes["fabric.routing"] = routing
    return load_topology("h100-cluster", changes)


def one_case(name: str, gpus: int, routing: str | None = None) -> dict:
    """Time one case in this process; what the table prints of it."""
    wall, cpu = time.perf_counter(), time.process_time()
    topology = machine(gpus, routing)
    if name.startswith("jobs/"):
        from collsim.workloads.jobs import run_jobs
        from collsim.workloads.jobsfile import load_jobs

        results = run_jobs(load_jobs(ROOT / name), topology)
        step, path = max(r.time_s for r in results), "shared"
    else:
        from collsim.workloads import load_workload, run_workload

        result = run_workload(load_workload(ROOT / name), topology, gpus)
        step, path = result.step_s, result.path
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
            "peak": peak, "step": step, "path": path}


def times(result) -> dict[str, float]:
    """Every time of a step result, by name (the per-GPU ones included)."""
    out: dict[str, float] = {}

    def walk(value, name: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{name}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{name}[{index}]")
        elif isinstance(value, float) and name.endswith("_s"):
            out[name] = value

    walk(result.to_dict(ranks=True), "")
    return out


def error(routing: str | None = None, only: str | None = None, gpus_wanted: int | None = None
          ) -> None:
    from collsim.workloads import load_workload, run_workload

    print(f"{'workload':<30}{'GPUs':>5}{'path':>9}{'fast cpu s':>11}{'shared cpu s':>13}"
          f"{'step error':>12}{'worst error':>12}", flush=True)
    cases = ERROR_CASES if gpus_wanted is None else \
        list(dict.fromkeys((name, gpus_wanted) for name, _ in ERROR_CASES))
    for name, gpus in cases:
        if only and only not in name:
            continue
        topology, workload = machine(gpus, routing), load_workload(ROOT / name)
        start = time.process_time()
        fast = run_workload(workload, topology, gpus)
        middle = time.process_time()
        exact = run_workload(workload, topology, gpus, exact=True)
        end = time.process_time()
        got, want = times(fast), times(exact)
        worst = max(abs(got[k] - want[k]) for k in want) / exact.step_s
        step = abs(fast.step_s - exact.step_s) / exact.step_s
        print(f"{name:<30}{gpus:>5}{fast.path:>9}{middle - start:>11.2f}{end - middle:>13.2f}"
              f"{step:>12.2e}{worst:>12.2e}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--error", action="store_true", help="the fast path's error")
    parser.add_argument("--limit", type=int, default=300, help="CPU seconds per case")
    parser.add_argument("--routing", choices=("ecmp", "dmodk"),
                        help="route the fat-tree by hash ECMP or D-mod-k (default: the preset's)")
    parser.add_argument("--only", metavar="TEXT",
                        help="only the cases whose file name contains TEXT")
    parser.add_argument("--gpus", type=int, help="with --error: every workload on this many")
    parser.add_argument("--case", nargs=2, metavar=("FILE", "GPUS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(one_case(args.case[0], int(args.case[1]), args.routing)))
        return
    if args.error:
        error(args.routing, args.only, args.gpus)
        return
    print(f"{'case':<30}{'GPUs':>5}{'path':>9}{'wall s':>9}{'cpu s':>8}{'peak MiB':>9}"
          f"{'step s':>10}", flush=True)
    for name, gpus in CASES:
        if args.only and args.only not in name:
            continue

        def limit(seconds: int = args.limit) -> None:
            resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))

        routing = ["--routing", args.routing] if args.routing else []
        run = subprocess.run([sys.executable, __file__, "--case", name, str(gpus), *routing],
                             capture_output=True, text=True, preexec_fn=limit, cwd=ROOT)
        if run.returncode:
            why = f"cut at {args.limit} CPU s" if run.returncode in (-9, -24, 152) else \
                run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "failed"
            print(f"{name:<30}{gpus:>5}  {why}", flush=True)
            continue
        row = json.loads(run.stdout)
        print(f"{name:<30}{gpus:>5}{row['path']:>9}{row['wall']:>9.1f}{row['cpu']:>8.1f}"
              f"{row['peak']:>9.0f}{row['step']:>10.4f}", flush=True)


if __name__ == "__main__":
    main()
