"""How long ``collsim replay`` takes on a traced job scaled out to many ranks of an H100
cluster: wall time and peak memory of each run, in a fresh process each, isolated calls
and the shared simulation of every transfer.

    python benchmarks/replay.py [--trace tests/fixtures/traces/DIR] [--ranks 64 512]
                                [--shared 64 512]
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "tests" / "fixtures" / "traces" / "ddp"


def one(trace: str, ranks: int, shared: bool) -> dict:
    """Replay ``trace`` scaled out to ``ranks`` on h100-cluster in this process."""
    from collsim.cli import main

    argv = ["replay", trace, "-t", "h100-cluster", "--set", f"nodes={max(1, ranks // 8)}",
            "--scale-out", str(ranks), "--json"] + ([] if shared else ["--isolated"])
    out = io.StringIO()
    cpu = time.process_time()
    start = time.perf_counter()
    with redirect_stdout(out):
        status = main(argv)
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu
    if status:
        raise SystemExit(f"collsim {' '.join(argv)} exited {status}")
    result = json.loads(out.getvalue())
    return {"ranks": ranks, "calls": "shared" if shared else "isolated", "wall_s": wall,
            "cpu_s": cpu,
            "peak_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "records": len(result["calls"]), "step_s": result["simulated"]["step_s"],
            "measured_step_s": result["measured"]["step_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=str(TRACE), help="traced job (default: %(default)s)")
    parser.add_argument("--ranks", type=int, nargs="*", default=[64, 512])
    parser.add_argument("--shared", type=int, nargs="*", default=[64, 512],
                        help="rank counts also replayed on the shared simulation")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.trace, *json.loads(args.one))))
        return
    print(f"{'ranks':>6}{'calls':>10}{'records':>9}{'wall s':>9}{'cpu s':>8}{'peak MiB':>10}"
          f"{'step (sim)':>13}{'step (measured)':>17}")
    cases = [(r, False) for r in args.ranks] + [(r, True) for r in args.shared]
    for ranks, shared in cases:
        out = subprocess.run([sys.executable, __file__, "--trace", args.trace, "--one",
                              json.dumps([ranks, shared])], capture_output=True, text=True,
                             check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{row['ranks']:>6}{row['calls']:>10}{row['records']:>9}{row['wall_s']:>9.2f}"
              f"{row['cpu_s']:>8.2f}"
              f"{row['peak_MiB']:>10.0f}{row['step_s'] * 1e3:>10.3f} ms"
              f"{row['measured_step_s'] * 1e3:>14.3f} ms", flush=True)


if __name__ == "__main__":
    main()
