"""Derive each preset's per-call launch cost (``nccl.launch``) from published small-size times.

For each published run of a machine like the preset (validation/measurements.csv), take its
rows of at most 16 KiB: the time per call (printed, or from busbw where a source printed only
that: size x busbw factor / busbw), minus what NCCL's model charges for the call NCCL picks at
that size on the preset shaped like the run (collsim.nccl.choice: base latency + per-step
latencies + bytes / bandwidth; the bandwidth term is below 1 us here). The launch cost of a run
is the median over its rows; a preset's is the median over its runs. Presets without a run say
so in their file and take another preset's figure.

    python benchmarks/launch_costs.py
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import find_topology
from collsim.nccl.adapter import nccl_system
from collsim.nccl.choice import choose

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ROOT / "validation" / "measurements.csv"
SMALL = 16 * 1024  # bytes: the bandwidth term stays below 1 us
MIN_BUSBW = 0.1    # GB/s: busbw printed with at least two significant digits
FACTOR = {"allreduce": lambda p: 2 * (p - 1) / p, "allgather": lambda p: (p - 1) / p}


@dataclass(frozen=True)
class Run:
    """A published run and the preset shape it is compared with."""

    run_id: str
    overrides: dict = field(default_factory=dict)
    gpus: tuple[int, ...] | None = None      # GPUs of the call (default: every GPU)
    algorithms: tuple[str, ...] | None = None  # NCCL_ALGO of the run, if forced


RUNS = {
    "dgx-a100": [Run("shared-modal-a100-8g"), Run("shared-azure-nda100v4")],
    "dgx-h100": [Run("vp-h100-1n-ar"), Run("azure-ndh100v5-ar")],
    "dgx-h200": [Run("azure-ndh200v5-ar")],
    "gb200-nvl72": [Run("azure-ndgb200v6-4gpu-ar", gpus=(0, 1, 2, 3))],
    "l40s-pcie": [Run("shared-l40s-2g-ring", {"gpus": 2}, algorithms=("ring",)),
                  Run("shared-l40s-2g-tree", {"gpus": 2}, algorithms=("nccl_tree",))],
    "a100-cluster": [Run("shared-oci-a100-2n-readme", {"nodes": 2})],
    "h100-cluster": [Run("vp-h100-4n-ar", {"nodes": 4})],
    "b200-cluster": [Run("gcp-a4-b200-2x1-ag", {"nodes": 2}, gpus=(0, 8))],
}


def rows_of(run_id: str) -> list[dict]:
    """The run's rows of at most SMALL bytes, out-of-place where the run has both."""
    with MEASUREMENTS.open() as f:
        rows = [r for r in csv.DictReader(f) if r["run_id"] == run_id and
                0 < int(r["bytes"]) <= SMALL]
    placements = {r["in_place"] for r in rows}
    keep = "0" if "0" in placements else min(placements)
    return [r for r in rows if r["in_place"] == keep]


def time_us(row: dict) -> float | None:
    """The row's time per call: printed, or from busbw."""
    if row["time_us"]:
        return float(row["time_us"])
    busbw = float(row["busbw_GBps"] or 0)
    if busbw < MIN_BUSBW:
        return None
    factor = FACTOR[row["collective"]](int(row["gpus"]))
    return int(row["bytes"]) * factor / busbw / 1e3


def derive(preset: str, run: Run) -> tuple[float, float, str, int]:
    """(median measured time, median launch, NCCL's pick, rows) of one run, in µs."""
    topology = load_topology(find_topology(preset), run.overrides)
    system = nccl_system(topology, run.gpus)
    measured, launch, picks = [], [], set()
    for row in rows_of(run.run_id):
        t = time_us(row)
        if t is None:
            continue
        choice = choose(system, row["collective"], int(row["bytes"]),
                        algorithms=run.algorithms)
        measured.append(t)
        launch.append(t - choice.time * 1e6)
        picks.add(f"{choice.algorithm}/{choice.protocol}")
    return (statistics.median(measured), statistics.median(launch), ",".join(sorted(picks)),
            len(measured))


def main() -> None:
    print(f"{'preset':<14}{'run':<28}{'rows':>5}{'time us':>9}  {'NCCL pick':<16}"
          f"{'launch us':>9}")
    for preset, runs in RUNS.items():
        values = []
        for run in runs:
            measured, launch, pick, rows = derive(preset, run)
            values.append(launch)
            print(f"{preset:<14}{run.run_id:<28}{rows:>5}{measured:>9.1f}  {pick:<16}"
                  f"{launch:>9.1f}")
        print(f"{preset:<14}{'-> median':<28}{'':>5}{'':>9}  {'':<16}"
              f"{statistics.median(values):>9.1f}")


if __name__ == "__main__":
    main()
