"""What the progress line of ``collsim estimate`` costs the engine: one point simulated
alternately with and without a :class:`~collsim.watch.Watch` drawing to a buffer, the
fastest of several runs of each reported. The default algorithm is the double binary tree,
which runs on the events (a one-channel ring takes the lockstep path, in a fraction of a
second, with nothing for the line to watch).

    python benchmarks/watch_overhead.py              # double binary tree, 512 ranks, 64 MiB
    python benchmarks/watch_overhead.py --ranks 1024 --repeat 5 --algorithm binomial
"""

from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

from collsim.hardware.loader import load_topology
from collsim.simulate import simulate
from collsim.watch import Watch

ROOT = Path(__file__).resolve().parents[1]


def timed(topology, algorithm: str, ranks: int, size: int, watched: bool) -> float:
    start = time.perf_counter()
    if watched:
        with Watch(expected_s=1.0, stream=io.StringIO(), enabled=True) as watch:
            simulate(topology, "allreduce", algorithm, ranks, size, observe=watch)
    else:
        simulate(topology, "allreduce", algorithm, ranks, size)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=512)
    parser.add_argument("--size", type=int, default=64 * 2**20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--algorithm", default="double_binary_tree")
    args = parser.parse_args()
    topology = load_topology(ROOT / "topologies" / "switch-64.yaml", {"gpus": args.ranks})
    plain, watched = [], []
    for _ in range(args.repeat):
        plain.append(timed(topology, args.algorithm, args.ranks, args.size, False))
        watched.append(timed(topology, args.algorithm, args.ranks, args.size, True))
    print(f"{args.algorithm} allreduce, {args.ranks} ranks, {args.size} B, best of {args.repeat}: "
          f"unwatched {min(plain):.3f} s, watched {min(watched):.3f} s "
          f"({100 * (min(watched) / min(plain) - 1):+.1f}%)")


if __name__ == "__main__":
    main()
