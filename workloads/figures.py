"""Regenerate the workload figures in plots/workloads/ (and summary.txt, their numbers).

    .venv/bin/python workloads/figures.py [--out plots/workloads] [--only NAME ...]

Each figure is one function below. Data-parallel steps whose calls never overlap (DDP's
buckets run one after another on the data stream) use the isolated service, each distinct
call simulated once; ZeRO-3, the 3D step and the jobs run on the shared simulation, where
concurrent calls contend for links.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from collsim.api import load_topology  # noqa: E402
from collsim.workloads import load_workload, run_workload  # noqa: E402
from collsim.workloads.service import isolated, simulated  # noqa: E402

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


def dp_scaling(out: Path) -> None:
    """LLaMA-7B DDP from 8 to 512 H100s: step time and exposed communication per allreduce
    algorithm (collsim has no NVLS algorithm; double binary tree stops at 128 GPUs to keep
    the script short)."""
    sizes = [8, 16, 32, 64, 128, 256, 512]
    algorithms = {"ring": sizes, "hierarchical": sizes,
                  "double_binary_tree": [s for s in sizes if s <= 128]}
    figure, (step_axes, exposed_axes) = plt.subplots(1, 2, figsize=(10, 4))
    for algorithm, gpus_list in algorithms.items():
        steps, exposed = [], []
        for gpus in gpus_list:
            topology = cluster(gpus)
            workload = load_workload(DP, {"algorithms.allreduce": algorithm})
            result = run_workload(workload, topology, gpus, service=alone(topology))
            steps.append(result.step_s)
            exposed.append(result.exposed_s)
            note(f"dp {algorithm} {gpus} GPUs: step {result.step_s:.4f} s, exposed "
                 f"{result.exposed_s:.4f} s")
        step_axes.plot(gpus_list, steps, marker="o", label=algorithm)
        exposed_axes.plot(gpus_list, exposed, marker="o", label=algorithm)
    for axes, what in ((step_axes, "step time (s)"), (exposed_axes,
                                                      "exposed communication (s)")):
        axes.set_xscale("log", base=2)
        axes.set_xlabel("H100 GPUs (8 per node, non-blocking fat-tree)")
        axes.set_ylabel(what)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    figure.suptitle("LLaMA-7B data parallel, bf16 gradients in 25 MiB buckets, overlapped",
                    fontsize=10)
    figure.tight_layout()
    figure.savefig(out / "dp-scaling.png", dpi=110)
    plt.close(figure)


def stacked(axes, labels, results) -> None:
    """Bars of compute, exposed communication and bubble per GPU."""
    bottom = [0.0] * len(results)
    for part, colour in (("compute_s", "#2e7d32"), ("exposed_s", "#c62828"),
                         ("bubble_s", "#9e9e9e")):
        values = [getattr(r, part) for r in results]
        axes.bar(labels, values, bottom=bottom, color=colour, label=part[:-2])
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    axes.set_ylabel("seconds per step (average GPU)")
    axes.legend(fontsize=8)


def zero3_vs_dp(out: Path) -> None:
    """The same model under DDP and ZeRO-3 on 32 GPUs; ZeRO-3 once with every call alone
    and once on the shared fabric, where its gathers and reductions contend."""
    gpus = 32
    topology = cluster(gpus)
    dp = run_workload(load_workload(DP), topology, gpus, service=alone(topology))
    z3_alone = run_workload(load_workload(ZERO3), topology, gpus, service=alone(topology))
    z3 = run_workload(load_workload(ZERO3), topology, gpus)
    labels = ["DDP", "ZeRO-3\n(calls alone)", "ZeRO-3\n(shared fabric)"]
    for label, result in zip(labels, (dp, z3_alone, z3), strict=True):
        note(f"zero3-vs-dp {label.replace(chr(10), ' ')}: step {result.step_s:.4f} s, "
             f"exposed {result.exposed_s:.4f} s")
    figure, axes = plt.subplots(figsize=(6, 4))
    stacked(axes, labels, [dp, z3_alone, z3])
    axes.set_title(f"LLaMA-7B on {gpus} H100s: DDP vs ZeRO-3", fontsize=10)
    figure.tight_layout()
    figure.savefig(out / "zero3-vs-dp.png", dpi=110)
    plt.close(figure)


def ps_vs_allreduce(out: Path) -> None:
    """Parameter server vs ring and hierarchical allreduce, the same gradient bytes."""
    sizes = [8, 16, 32, 64]
    figure, axes = plt.subplots(figsize=(6, 4))
    for algorithm in ("parameter_server", "ring", "hierarchical"):
        exposed = []
        for gpus in sizes:
            topology = cluster(gpus)
            workload = load_workload(DP, {"algorithms.allreduce": algorithm})
            result = run_workload(workload, topology, gpus, service=alone(topology))
            exposed.append(result.step_s)
            note(f"ps-vs-allreduce {algorithm} {gpus} GPUs: step {result.step_s:.4f} s")
        axes.plot(sizes, exposed, marker="o", label=algorithm)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("H100 GPUs")
    axes.set_ylabel("step time (s)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    axes.set_title("LLaMA-7B DDP: parameter server vs allreduce", fontsize=10)
    figure.tight_layout()
    figure.savefig(out / "ps-vs-allreduce.png", dpi=110)
    plt.close(figure)


def gradient_formats(out: Path) -> None:
    """fp32, bf16, fp8 and top-1% gradients on 64 GPUs."""
    gpus = 64
    topology = cluster(gpus)
    variants = {"fp32": {"dtypes.gradients": "fp32"}, "bf16": {"dtypes.gradients": "bf16"},
                "fp8 e4m3": {"dtypes.gradients": "fp8_e4m3"},
                "top-1%": {"compression.kind": "topk", "compression.fraction": 0.01}}
    results = []
    for label, changes in variants.items():
        result = run_workload(load_workload(DP, changes), topology, gpus,
                              service=alone(topology))
        results.append(result)
        note(f"formats {label}: step {result.step_s:.4f} s, exposed {result.exposed_s:.4f} s")
    figure, axes = plt.subplots(figsize=(6, 4))
    stacked(axes, list(variants), results)
    axes.set_title(f"LLaMA-7B DDP on {gpus} H100s: gradient formats", fontsize=10)
    figure.tight_layout()
    figure.savefig(out / "gradient-formats.png", dpi=110)
    plt.close(figure)


def timeline_3d(out: Path) -> None:
    """The 39B GPT's step in 3D (tensor 8 x pipeline 4 x data 2) on 64 GPUs, drawn from its
    recorded run: one GPU per pipeline stage, a row per stream (pipeline: its sends)."""
    from collsim.workloads.tracing import record_step

    topology = cluster(64)
    step = record_step(load_workload(THREE_D), topology, 64)
    note(f"3d: step {step.result.step_s:.4f} s, bubble {step.result.bubble_s:.4f} s, "
         f"exposed {step.result.exposed_s:.4f} s")
    colours = {"forward": "#66bb6a", "backward": "#1b5e20", "optimizer": "#8d6e63",
               "tensor": "#1565c0", "data": "#c62828", "pipeline": "#f9a825"}
    streams = ["compute", "tensor", "pipeline", "data"]
    gpus = [0, 16, 32, 48]  # stage 0..3 of data replica 0 (Megatron's order)
    figure, axes = plt.subplots(figsize=(11, 5))
    labels = []
    row = 0
    for stage, gpu in enumerate(gpus):
        for stream in streams:
            spans, colour_list = [], []
            for index, task in enumerate(step.plan.tasks[gpu]):
                start = step.timeline.start[gpu][index]
                end = step.timeline.end[gpu][index]
                if task.call is None:
                    if stream != "compute":
                        continue
                    colour = colours.get(task.category, "#9e9e9e")
                else:
                    if task.call.label != stream or task.preposted:
                        continue  # a receive posted at the start: its send is drawn
                    colour = colours.get(stream, "#757575")
                spans.append((start * 1e3, max(end - start, 0.0) * 1e3))
                colour_list.append(colour)
            axes.broken_barh(spans, (row - 0.4, 0.8), facecolors=colour_list)
            labels.append(f"stage {stage} (GPU {gpu}) {stream}")
            row += 1
    axes.set_yticks(range(len(labels)), labels, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel("time (ms)")
    handles = [matplotlib.patches.Patch(color=c, label=k) for k, c in colours.items()]
    axes.legend(handles=handles, fontsize=7, ncol=6, loc="upper center",
                bbox_to_anchor=(0.5, -0.12))
    axes.set_title("GPT-39B, tensor 8 x pipeline 4 x data 2, 1F1B over 8 micro-batches, "
                   "64 H100s", fontsize=10)
    figure.tight_layout()
    figure.savefig(out / "3d-timeline.png", dpi=110)
    plt.close(figure)


def two_jobs(out: Path) -> None:
    """The jobs of jobs/two-jobs.yaml on a non-blocking and on a 2:1 fat-tree."""
    from collsim.workloads.jobs import run_jobs
    from collsim.workloads.jobsfile import load_jobs

    jobs = load_jobs(JOBS)
    names = [job.name for job in jobs.jobs]
    figure, axes = plt.subplots(figsize=(6, 4))
    width = 0.35
    for i, topology_name in enumerate(("h100-cluster", "h100-cluster-2to1")):
        results = run_jobs(jobs, load_topology(topology_name, {"nodes": 16}))
        for r in results:
            note(f"two-jobs {topology_name} {r.name}: {r.time_s:.5f} s, alone {r.solo_s:.5f} "
                 f"s, slowdown {r.slowdown:.3f}")
        axes.bar([x + i * width for x in range(len(names))], [r.slowdown for r in results],
                 width, label=topology_name)
    axes.set_xticks([x + width / 2 for x in range(len(names))], names, fontsize=8)
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_ylabel("time together / time alone")
    axes.legend(fontsize=8)
    axes.set_title("two jobs on 128 H100s, each on half of every leaf", fontsize=10)
    figure.tight_layout()
    figure.savefig(out / "two-jobs.png", dpi=110)
    plt.close(figure)


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
        FIGURES[name](out)
        print(f"{name}: {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    if set(args.only) == set(FIGURES):
        (out / "summary.txt").write_text("\n".join(LINES) + "\n")
    print(f"all: {time.perf_counter() - begin:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
