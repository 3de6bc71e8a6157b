"""NCCL speed: wall time to simulate ``auto`` allreduce (NCCL's choice of algorithm, protocol and
channels) on N nodes of topologies/h100-cluster.yaml, and each NCCL algorithm forced with the
protocol and channels NCCL would give it, with the simulated time, channels and transfers.

    python benchmarks/nccl.py                       # 16, 8, 2 nodes (128, 64, 16 GPUs), 1 GiB
    python benchmarks/nccl.py --nodes 8,2 --algorithms nccl_tree
    python benchmarks/nccl.py --nodes 4 --size 64MiB --algorithms auto,ring
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from collsim.hardware.loader import load_topology
from collsim.simulate import simulate
from collsim.units import format_size, parse_size

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="16,8,2", help="comma-separated node counts")
    parser.add_argument("--size", default="1GiB", help="comma-separated sizes")
    parser.add_argument("--file", default=str(ROOT / "topologies" / "h100-cluster.yaml"))
    parser.add_argument("--algorithms", default="auto,ring")
    args = parser.parse_args()
    print(f"{'nodes':>5}{'algorithm':>11}{'size':>6}{'selected':>11}{'protocol':>9}"
          f"{'channels':>9}{'simulated':>13}{'busbw GB/s':>11}{'transfers':>10}{'wall s':>8}")
    for nodes in (int(n) for n in args.nodes.split(",")):
        topology = load_topology(args.file, {"nodes": nodes})
        for size in (parse_size(s) for s in args.size.split(",")):
            for name in args.algorithms.split(","):
                start = time.perf_counter()
                result = simulate(topology, "allreduce", name, topology.gpus, size)
                wall = time.perf_counter() - start
                print(f"{nodes:>5}{name:>11}{format_size(size):>6}{result.selected:>11}"
                      f"{result.protocol or '':>9}{result.channels or '':>9}"
                      f"{result.time_s * 1e3:>10.3f} ms{result.busbw_GBps:>11.1f}"
                      f"{result.transfers:>10}{wall:>8.2f}", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory {peak:.0f} MiB")


if __name__ == "__main__":
    main()
