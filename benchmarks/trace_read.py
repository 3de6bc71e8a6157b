"""Reading a big job's traces: writes synthetic Kineto traces of about 1 GB in a temporary
folder (many ranks, many steps; shaped like PyTorch's NCCL traces: CPU ops, compute kernels,
c10d ops with record_param_comms inside, NCCL kernels), reads them with read_trace, and
prints the wall time and the process's peak memory, which must stay under 1 GiB.

    python benchmarks/trace_read.py                  # 16 ranks, about 1 GB
    python benchmarks/trace_read.py --ranks 8 --mb 100 --keep /tmp/traces
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from collsim.replay import read_trace
from collsim.scenarios.progress import Progress

DP = 8  # ranks per data-parallel group; the world is the other group
LAYERS = 12  # compute ops per step between the step's collectives
GIB = 1 << 30

CPU_OP = ('{{"ph": "X", "cat": "cpu_op", "name": "aten::{op}", "pid": {pid}, "tid": {pid}, '
          '"ts": {ts:.3f}, "dur": {dur:.3f}, "args": {{"External id": {ext}, "Record '
          'function id": 0, "Concrete Inputs": ["", ""], "Input type": ["float", "float"], '
          '"Input Strides": [[4096, 1], [4096, 1]], "Input Dims": [[1024, 4096], [4096, '
          '4096]], "Ev Idx": {ext}}}}}')
KERNEL = ('{{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": {stream}, '
          '"ts": {ts:.3f}, "dur": {dur:.3f}, "args": {{"External id": {ext}, "device": 0, '
          '"stream": {stream}, "correlation": {ext}, "registers per thread": 128, '
          '"shared memory": 49152, "blocks per SM": 2.0, "grid": [132, 1, 1], '
          '"block": [256, 1, 1]}}}}')
C10D = ('{{"ph": "X", "cat": "cpu_op", "name": "c10d::{op}", "pid": {pid}, "tid": {pid}, '
        '"ts": {ts:.3f}, "dur": 30.0, "args": {{"External id": {ext}, "Record function id": '
        '0, "Concrete Inputs": ["", "", "", "", "False", "-1"], "Input type": [{types}, "", '
        '"", "", "Scalar", "Scalar"], "Input Dims": [{dims}, [], [], [], [], []], "Ev Idx": '
        '{ext}}}}}')
PARAMS = ('{{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": {pid}, '
          '"tid": {pid}, "ts": {ts:.3f}, "dur": 5.0, "args": {{"External id": {ext}, '
          '"Collective name": "{name}", "dtype": "BFloat16", "In msg nelems": {nin}, '
          '"Out msg nelems": {nout}, "Group size": {size}, "Process Group Name": "{group}", '
          '"Process Group Description": "{desc}", "Process Group Ranks": "{ranks}", '
          '"In split size": "[]", "Out split size": "[]", "Seq": {seq}}}}}')


def _groups(world: int) -> list[tuple[str, str, list[int]]]:
    groups = [("0", "default_pg", list(range(world)))]
    for g in range(world // DP):
        groups.append((str(g + 1), "dp", list(range(g * DP, (g + 1) * DP))))
    return groups


def write_rank(path: Path, rank: int, world: int, steps: int) -> None:
    """One rank's trace: per step, LAYERS compute ops (with their kernels), then an
    allgather and a reduce-scatter on the rank's data-parallel group and an allreduce on the
    world, each a c10d op with record_param_comms and an NCCL kernel."""
    groups = _groups(world)
    dp = groups[1 + rank // DP]
    configs = ", ".join(
        f'{{"pg_name": "{n}", "pg_desc": "{d}", "backend_config": "cuda:nccl", '
        f'"pg_size": {len(r)}, "ranks": {r}}}' for n, d, r in groups if rank in r)
    pid, ts, ext, seq = 1000 + rank, 1_000_000.0, 0, {}
    with open(path, "w", encoding="utf-8") as out:
        out.write(f'{{"schemaVersion": 1, "distributedInfo": {{"backend": "nccl", "rank": '
                  f'{rank}, "world_size": {world}, "pg_count": {len(groups)}, "pg_config": '
                  f'[{configs}], "nccl_version": "2.21.5"}}, "traceEvents": [\n')
        first = True
        for _ in range(steps):
            for layer in range(LAYERS):
                ext += 1
                for op in ("mm", "add_", "relu"):
                    out.write(("" if first else ",\n") + CPU_OP.format(
                        op=op, pid=pid, ts=ts, dur=8.0, ext=ext))
                    first = False
                    out.write(",\n" + KERNEL.format(
                        name=f"void gemm_kernel<{layer}>", stream=7, ts=ts + 5, dur=40.0,
                        ext=ext))
                    ts += 50.0
            for op, name, group, nin, nout in (
                    ("_allgather_base_", "_allgather_base", dp, 4096, 4096 * DP),
                    ("_reduce_scatter_base_", "_reduce_scatter_base", dp, 4096 * DP, 4096),
                    ("allreduce_", "allreduce", groups[0], 1 << 16, 1 << 16)):
                ext += 1
                key = group[0]
                seq[key] = seq.get(key, 0) + 1
                if op == "allreduce_":
                    types, dims = '"TensorList"', f"[[{nin}]]"
                elif op == "_allgather_base_":
                    types, dims = '"c10::BFloat16", "c10::BFloat16"', f"[{nout}], [{nin}]"
                else:
                    types, dims = '"c10::BFloat16", "c10::BFloat16"', f"[{nout}], [{nin}]"
                line = C10D.format(op=op, pid=pid, ts=ts, ext=ext, types=types, dims=dims)
                if op != "allreduce_":  # two tensors: drop the list form's extra "" pair
                    line = line.replace(', "", "", "", "Scalar"', ', "", "", "Scalar"', 1)
                out.write(",\n" + line)
                out.write(",\n" + PARAMS.format(
                    pid=pid, ts=ts + 1, ext=ext, name=name, nin=nin, nout=nout,
                    size=len(group[2]), group=key, desc=group[1], ranks=group[2],
                    seq=seq[key]))
                kind = {"allreduce": "AllReduce_Sum_bf16_RING_LL",
                        "_allgather_base": "AllGather_RING_LL",
                        "_reduce_scatter_base": "ReduceScatter_Sum_bf16_RING_LL"}[name]
                out.write(",\n" + KERNEL.format(
                    name=f"ncclDevKernel_{kind}(ncclDevKernelArgsStorage<4096ul>)",
                    stream=20, ts=ts + 10, dur=120.0, ext=ext))
                ts += 200.0
        out.write('\n], "traceName": "synthetic"}\n')


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16, help="ranks (a multiple of 8)")
    parser.add_argument("--mb", type=float, default=1000, help="total size to write, MB")
    parser.add_argument("--keep", help="write the traces here and keep them")
    args = parser.parse_args(argv)
    if args.ranks % DP:
        parser.error(f"--ranks must be a multiple of {DP}")
    folder = Path(args.keep or tempfile.mkdtemp(prefix="collsim-traces-"))
    folder.mkdir(parents=True, exist_ok=True)
    # one step of one rank is about 40 KB of JSON (measured on a first rank below)
    probe = folder / "probe.json"
    write_rank(probe, 0, args.ranks, 10)
    per_step = probe.stat().st_size / 10
    probe.unlink()
    steps = max(1, int(args.mb * 1e6 / args.ranks / per_step))
    progress = Progress(args.ranks)
    started = time.monotonic()
    for rank in range(args.ranks):
        write_rank(folder / f"rank{rank}.json", rank, args.ranks, steps)
        progress.advance(1)
    progress.close()
    total = sum(p.stat().st_size for p in folder.glob("rank*.json"))
    print(f"wrote {args.ranks} traces, {steps} steps each, {total / 1e6:,.0f} MB in "
          f"{time.monotonic() - started:.1f} s", flush=True)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    progress = Progress(args.ranks)
    started, cpu = time.monotonic(), time.process_time()
    trace = read_trace(folder, progress=progress.advance)
    wall, cpu = time.monotonic() - started, time.process_time() - cpu
    progress.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    calls = sum(len(c) for c in trace.calls.values())
    spans = sum(len(c) for c in trace.compute.values())
    print(f"read {total / 1e6:,.0f} MB in {wall:.1f} s wall, {cpu:.1f} s CPU "
          f"({total / 1e6 / cpu:.1f} MB per CPU second): "
          f"{calls:,} calls, {spans:,} compute spans, {len(trace.groups)} groups")
    print(f"peak memory {peak / 2**20:,.0f} MiB (before reading {before / 2**20:,.0f} MiB)")
    if not args.keep:
        for path in folder.glob("rank*.json"):
            path.unlink()
        os.rmdir(folder)
    if peak >= GIB:
        sys.exit(f"peak memory {peak / 2**20:,.0f} MiB is over 1 GiB")


if __name__ == "__main__":
    main()
