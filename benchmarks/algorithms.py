"""Engine speed per algorithm family: transfers simulated per CPU second, against ring.

Each family runs one representative collective on a ``switch`` at p = 1024, in a fresh
subprocess, timing only the engine's run. Two cases are heavy:

- ``direct`` starts all p(p-1) transfers at once, each port shared by p-1 of them: a
  million transfers at 1024 ranks (about 15 s and 1.2 GB).
- the double binary tree runs twice: at 16 MiB (16 chunks a tree, the pipeline mostly
  filling and draining) and at 64 MiB (full pipeline, where every port carries several
  transfers at different rates and each change ripples through the max-min shares).

"ops" counts every operation the programs post (sends, receives, local copies and
combines). A case shorter than a second is repeated until a second has passed and its
fastest run is reported.

    python benchmarks/algorithms.py               # every family
    python benchmarks/algorithms.py --ranks 256   # another default rank count
    python benchmarks/algorithms.py --repeat 3    # fastest of three runs of each case
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

MiB = 2**20
# family: (collective, algorithm, size in bytes at p ranks, largest p if below the default)
FAMILIES = {
    "ring": ("allreduce", "ring", lambda p: 4 * p * 256, None),
    "binomial": ("allreduce", "binomial", lambda p: 16 * MiB, None),
    "chain": ("broadcast", "chain", lambda p: 64 * MiB, None),
    "binary_tree": ("broadcast", "binary_tree", lambda p: 64 * MiB, None),
    "double_binary_tree": ("allreduce", "double_binary_tree", lambda p: 16 * MiB, None),
    "double_binary_tree (64 MiB)": ("allreduce", "double_binary_tree", lambda p: 64 * MiB,
                                    None),
    "recursive_doubling": ("allreduce", "recursive_doubling", lambda p: 16 * MiB, None),
    "halving_doubling": ("allreduce", "halving_doubling", lambda p: 4 * p * 256, None),
    "recursive_halving": ("reducescatter", "recursive_halving", lambda p: 4 * p * 256, None),
    "scatter_allgather": ("broadcast", "scatter_allgather", lambda p: 4 * p * 256, None),
    "reducescatter_gather": ("reduce", "reducescatter_gather", lambda p: 4 * p * 256, None),
    "bruck (allgather)": ("allgather", "bruck", lambda p: 4 * p * 256, None),
    "bruck (alltoall)": ("alltoall", "bruck", lambda p: 4 * p * 256, None),
    "pairwise": ("alltoall", "pairwise", lambda p: 4 * p * 256, None),
    "direct": ("allgather", "direct", lambda p: 4 * p * 256, None),
    "linear": ("gather", "linear", lambda p: 4 * p * 256, None),
    "parameter_server": ("allreduce", "parameter_server", lambda p: MiB, None),
    "dissemination": ("barrier", "dissemination", lambda p: 0, None),
    "scan": ("scan", "recursive_doubling", lambda p: MiB, None),
}


def case(family: str, p: int) -> tuple:
    """One family's benchmark case at p ranks: (topology, gpus, job, algorithm), on a
    ``switch`` with 1 µs links of 100 GB/s and a reduction bandwidth of 1 TB/s."""
    from collsim.hardware.topology import switch
    from collsim.simulate import get_algorithm, make_job

    collective, name, size, _ = FAMILIES[family]
    topology = switch("bench", p, 1e-6, 100e9, 1e12)
    algorithm = get_algorithm(collective, name)
    job, gpus = make_job(topology, algorithm, p, size(p), {})
    return topology, gpus, job, algorithm


def one(family: str, p: int) -> dict:
    """Simulate one family's case; CPU seconds of the timing run and transfers moved."""
    from collsim.engine.timing import TimingEngine

    topology, gpus, job, algorithm = case(family, p)
    # Families with a few thousand transfers run in milliseconds, where this machine's
    # timer noise dominates: repeat the run until a second of CPU has passed and keep the
    # fastest (a fresh engine each time; the ring's one run takes many seconds). Every
    # family runs on the event-driven path (ring would otherwise take the lockstep path),
    # so that the figures compare the engine's cost per transfer.
    best, spent = float("inf"), 0.0
    while spent < 1.0:
        start = time.process_time()
        run = TimingEngine(topology, gpus, job, algorithm.program, lockstep=False).run()
        cpu = time.process_time() - start
        best, spent = min(best, cpu), spent + cpu
    cpu = best
    ops = sum(len(step) if isinstance(step, (tuple, list)) else 1
              for rank in range(p) for step in algorithm.program(rank, job))
    return {"family": family, "p": p, "transfers": run.transfers, "ops": ops, "cpu_s": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--family", nargs="*", default=list(FAMILIES))
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each case this many times, in fresh processes, and keep "
                             "the fastest (this machine's timings vary by ±30%%, ring's "
                             "included, and ring is every ratio's denominator)")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]))))
        return
    families = ["ring"] + [f for f in args.family if f != "ring"]
    print(f"{'family':<28} {'collective':<14} {'p':>5} {'transfers':>10} {'ops':>10} "
          f"{'cpu s':>8} {'transfers/s':>12} {'vs ring':>8} {'ops/s':>10}")
    ring_rate = None
    rates: dict[str, tuple[int, float]] = {}
    for family in families:
        limit = FAMILIES[family][3]
        p = min(args.ranks, limit) if limit else args.ranks
        runs = [json.loads(subprocess.run([sys.executable, __file__, "--one", family, str(p)],
                                          check=True, capture_output=True, text=True).stdout)
                for _ in range(max(1, args.repeat))]
        r = min(runs, key=lambda run: run["cpu_s"])
        rate = r["transfers"] / r["cpu_s"] if r["cpu_s"] > 0 else float("inf")
        ring_rate = ring_rate or rate
        rates[family] = (p, rate)
        print(f"{family:<28} {FAMILIES[family][0]:<14} {p:>5} {r['transfers']:>10} "
              f"{r['ops']:>10} {r['cpu_s']:>8.2f} {rate:>12,.0f} {rate / ring_rate:>8.2f} "
              f"{r['ops'] / r['cpu_s']:>10,.0f}", flush=True)
    slowest = min(rates, key=lambda family: rates[family][1])
    p, rate = rates[slowest]
    print(f"slowest per transfer: {slowest} at p={p}, {rate:,.0f} transfers/s, "
          f"{ring_rate / rate:.2f}x slower than ring")


if __name__ == "__main__":
    main()
