"""Regenerate the workload figures in plots/workloads/: run each one's workloads, save what it
draws as NAME.csv, draw NAME.png from that table (workloads/draw.py, which redraws without
running anything), and write summary.txt, the numbers in words.

    .venv/bin/python workloads/figures.py [--out plots/workloads] [--only NAME ...]

Each figure's runs are one function below. Data-parallel steps whose calls never overlap (DDP's
buckets run one after another on the data stream) use the isolated service, each distinct
call simulated once; ZeRO-3, the 3D step and the jobs run on the shared simulation, where
concurrent calls contend for links.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path
from typing import Any

import draw

from collsim.api import load_topology
from collsim.workloads import load_workload, run_workload
from collsim.workloads.service import isolated, simulated

HERE = Path(__file__).resolve().parent
DP = HERE / "llama-7b-dp.yaml"
ZERO3 = HERE / "llama-7b-zero3.yaml"
THREE_D = HERE / "gpt-39b-3d.yaml"
JOBS = HERE.parent / "jobs" / "two-jobs.yaml"
LINES: list[str] = []


def note(text: str) -> None:
    print(text, flush=True)
    LINES.append(text)


def cluster(gpus: int, name: str = "h100-cluster"):
    return load_topology(name, {"nodes": max(1, gpus // 8)})


def alone(topology):
    return isolated(simulated(topology))


def dp_scaling() -> list[dict[str, Any]]:
    """LLaMA-7B DDP from 8 to 512 H100s: step time and exposed communication per allreduce
    algorithm (collsim has no NVLS algorithm; double binary tree stops at 128 GPUs to keep
    the script short)."""
    sizes = [8, 16, 32, 64, 128, 256, 512]
    algorithms = {"ring": sizes, "hierarchical": sizes,
                  "double_binary_tree": [s for s in sizes if s <= 128]}
    rows = []
    for algorithm, gpus_list in algorithms.items():
        for gpus in gpus_list:
            topology = cluster(gpus)
            workload = load_workload(DP, {"algorithms.allreduce": algorithm})
            result = run_workload(workload, topology, gpus, service=alone(topology))
            rows.append({"algorithm": algorithm, "gpus": gpus, "step_s": result.step_s,
                         "exposed_s": result.exposed_s})
            note(f"dp {algorithm} {gpus} GPUs: step {result.step_s:.4f} s, exposed "
                 f"{result.exposed_s:.4f} s")
    return rows


def zero3_vs_dp() -> list[dict[str, Any]]:
    """The same model under DDP and ZeRO-3 on 32 GPUs; ZeRO-3 once with every call alone
    and once on the shared fabric, where its gathers and reductions contend."""
    gpus = 32
    topology = cluster(gpus)
    dp = run_workload(load_workload(DP), topology, gpus, service=alone(topology))
    z3_alone = run_workload(load_workload(ZERO3), topology, gpus, service=alone(topology))
    z3 = run_workload(load_workload(ZERO3), topology, gpus)
    rows = []
    for label, result in (("DDP", dp), ("ZeRO-3, calls alone", z3_alone),
                          ("ZeRO-3, shared fabric", z3)):
        note(f"zero3-vs-dp {label}: step {result.step_s:.4f} s, exposed {result.exposed_s:.4f} s")
        rows.append({"setup": label, "step_s": result.step_s, "exposed_s": result.exposed_s})
    return rows


def ps_vs_allreduce() -> list[dict[str, Any]]:
    """Parameter server vs ring and hierarchical allreduce, the same gradient bytes."""
    rows = []
    for algorithm in ("parameter_server", "ring", "hierarchical"):
        for gpus in (8, 16, 32, 64):
            topology = cluster(gpus)
            workload = load_workload(DP, {"algorithms.allreduce": algorithm})
            result = run_workload(workload, topology, gpus, service=alone(topology))
            rows.append({"algorithm": algorithm, "gpus": gpus, "step_s": result.step_s})
            note(f"ps-vs-allreduce {algorithm} {gpus} GPUs: step {result.step_s:.4f} s")
    return rows


def gradient_formats() -> list[dict[str, Any]]:
    """fp32, bf16, fp8 and top-1% gradients on 64 GPUs."""
    gpus = 64
    topology = cluster(gpus)
    variants = {"fp32": {"dtypes.gradients": "fp32"}, "bf16": {"dtypes.gradients": "bf16"},
                "fp8 e4m3": {"dtypes.gradients": "fp8_e4m3"},
                "top-1%": {"compression.kind": "topk", "compression.fraction": 0.01}}
    rows = []
    for label, changes in variants.items():
        result = run_workload(load_workload(DP, changes), topology, gpus,
                              service=alone(topology))
        rows.append({"format": label, "step_s": result.step_s, "exposed_s": result.exposed_s})
        note(f"formats {label}: step {result.step_s:.4f} s, exposed {result.exposed_s:.4f} s")
    return rows


def timeline_3d() -> list[dict[str, Any]]:
    """The 39B GPT's step in 3D (tensor 8 x pipeline 4 x data 2) on 64 GPUs, from its
    recorded run: one GPU per pipeline stage, a row per stream (pipeline: its sends)."""
    from collsim.workloads.tracing import record_step

    topology = cluster(64)
    step = record_step(load_workload(THREE_D), topology, 64)
    note(f"3d: step {step.result.step_s:.4f} s, bubble {step.result.bubble_s:.4f} s, "
         f"exposed {step.result.exposed_s:.4f} s")
    rows = []
    for stage, gpu in enumerate([0, 16, 32, 48]):  # stage 0..3 of data replica 0 (Megatron)
        for stream in ("compute", "tensor", "pipeline", "data"):
            for index, task in enumerate(step.plan.tasks[gpu]):
                if task.call is None:
                    if stream != "compute":
                        continue
                    kind = task.category
                elif task.call.label != stream or task.preposted:
                    continue  # a receive posted at the start: its send is drawn
                else:
                    kind = stream
                start = step.timeline.start[gpu][index]
                end = max(step.timeline.end[gpu][index], start)
                rows.append({"stage": stage, "gpu": gpu, "stream": stream, "kind": kind,
                             "start_s": start, "end_s": end})
    return rows


def two_jobs() -> list[dict[str, Any]]:
    """The jobs of jobs/two-jobs.yaml on a non-blocking and on a 2:1 fat-tree."""
    from collsim.workloads.jobs import run_jobs
    from collsim.workloads.jobsfile import load_jobs

    jobs = load_jobs(JOBS)
    rows = []
    for topology_name in ("h100-cluster", "h100-cluster-2to1"):
        for r in run_jobs(jobs, load_topology(topology_name, {"nodes": 16})):
            note(f"two-jobs {topology_name} {r.name}: {r.time_s:.5f} s, alone {r.solo_s:.5f} "
                 f"s, slowdown {r.slowdown:.3f}")
            rows.append({"fabric": topology_name, "job": r.name, "time_s": r.time_s,
                         "alone_s": r.solo_s, "slowdown": r.slowdown})
    return rows


def save_table(path: Path, rows: list[dict[str, Any]]) -> None:
    """A figure's table: one row per drawn value, floats to 6 significant digits."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(list(rows[0]))
        for row in rows:
            writer.writerow([f"{v:.6g}" if isinstance(v, float) else v for v in row.values()])


FIGURES = {"dp-scaling": dp_scaling, "zero3-vs-dp": zero3_vs_dp,
           "ps-vs-allreduce": ps_vs_allreduce, "gradient-formats": gradient_formats,
           "3d-timeline": timeline_3d, "two-jobs": two_jobs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(HERE.parent / "plots" / "workloads"))
    parser.add_argument("--only", nargs="*", choices=list(FIGURES), default=list(FIGURES))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    begin = time.perf_counter()
    for name in args.only:
        started = time.perf_counter()
        save_table(out / f"{name}.csv", FIGURES[name]())
        draw.draw(name, out)
        print(f"{name}: {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    if set(args.only) == set(FIGURES):
        (out / "summary.txt").write_text("\n".join(LINES) + "\n")
    print(f"all: {time.perf_counter() - begin:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
