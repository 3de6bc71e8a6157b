"""How long ``collsim calibrate`` takes: the README's walkthrough log (one Voltage Park node of
8 H100s, 31 sizes) and the 4-node run of the same machine, each fitted on ``h100-cluster``
as the CLI fits it (the ``pick_scale`` search included), with the wall seconds, the worker
processes (``COLLSIM_JOBS``; the CPU seconds of the fit's own process are its whole CPU only
with one), the simulations run, the fits tried and the fitted error.

    python benchmarks/calibration.py [--logs validation/logs/vp-h100-1n-ar.txt ...]
        [--fixed-picks] [--jobs N] [--figures]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from collsim.calibrate import workers
from collsim.calibrate.cases import case_from_run
from collsim.calibrate.fit import PICK_SCALES, TREE_RATINGS, FitProgress, calibrate
from collsim.hardware.shipped import find_topology
from collsim.nccltests import read_logs
from collsim.watch import FitWatch

ROOT = Path(__file__).resolve().parent.parent
LOGS = [ROOT / "validation" / "logs" / name for name in ("vp-h100-1n-ar.txt",
                                                         "vp-h100-4n-ar.txt")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", nargs="+", type=Path, default=LOGS)
    parser.add_argument("--fixed-picks", action="store_true", help="skip the pick_scale search")
    parser.add_argument("--tree-rating", action="store_true",
                        help="search nccl.tree_rating too (collsim calibrate --tree-rating)")
    parser.add_argument("--jobs", type=int, help="worker processes (default: COLLSIM_JOBS, "
                        "else the cores this process may use)")
    parser.add_argument("--figures", action="store_true",
                        help="print each log's fitted figures (to compare two commits' fits)")
    args = parser.parse_args()
    if args.jobs:
        os.environ["COLLSIM_JOBS"] = str(args.jobs)
    jobs = workers.jobs()
    preset = find_topology("h100-cluster")
    print(f"{'log':<24} {'GPUs':>5} {'sizes':>5} {'fits':>4} {'simulations':>11} {'jobs':>4} "
          f"{'cpu s':>7} {'wall s':>7}  median error before -> after, pick_scale")
    for log in args.logs:
        cases = [case_from_run(run, preset) for run in read_logs(log)]
        progress = FitProgress()
        cpu, wall = time.process_time(), time.perf_counter()
        with FitWatch(progress) as watch:
            watch.start()
            result = calibrate(cases, pick_scales=() if args.fixed_picks else PICK_SCALES,
                               tree_ratings=TREE_RATINGS if args.tree_rating else (),
                               progress=progress)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        errors = ", ".join(f"{100 * e.before_median:.1f}% -> {100 * e.after_median:.1f}%"
                           for e in result.errors)
        pick = next(f for f in result.figures if f.name == "pick_scale")
        print(f"{log.name:<24} {sum(c.ranks for c in cases):>5} "
              f"{sum(len(c.sizes) for c in cases):>5} {progress.fit:>4} "
              f"{progress.simulations:>11,} {jobs:>4} {cpu:>7.1f} {wall:>7.1f}  {errors}, "
              f"{pick.value:g}", flush=True)
        if args.figures:
            print("  " + ", ".join(f"{f.name} {f.value:.6g}" for f in result.figures
                                   if f.determined), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
