"""Rebuild measurements.csv from the published texts kept in logs/ and sources/.

Each run in runs.csv names the text it came from (verbatim copy of the published
table), the lines of it that hold the run, and the machine facts its source states.
The shared rows of ../shared/measurements/nccl_tests_public.csv are appended with a
run_id each.  Standard library only; run from anywhere:

    python3 validation/build.py [--shared PATH]
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLUMNS = [
    "system", "gpus", "nodes", "gpus_per_node", "collective", "bytes", "time_us",
    "algbw_GBps", "busbw_GBps", "nccl_version", "algo_proto", "source", "run_id",
    "gpu_model", "interconnect", "nics", "fabric", "in_place", "notes",
]
DTYPES = {"float", "half", "bfloat16", "double", "int8", "uint8", "int32", "uint32",
          "int64", "uint64", "fp8_e4m3", "fp8_e5m2"}
LINE_PREFIX = re.compile(r"^\s*(\d+:\s|\[\d+,\d+\]<stdout>:|\[\d+\])")


def table_rows(lines: list[str]) -> list[dict]:
    """Rows of an nccl-tests table: size, count, type, redop[, root], then two halves."""
    rows = []
    for line in lines:
        text = LINE_PREFIX.sub("", line).strip()
        if not text or text.startswith("#"):
            continue
        tokens = text.split()
        at = next((i for i, t in enumerate(tokens) if t in DTYPES), None)
        if at is None or at < 2:
            continue
        rest = tokens[at + 2:]
        if len(rest) == 9:  # newer nccl-tests print a root column
            rest = rest[1:]
        if len(rest) != 8:
            continue
        rows.append({
            "bytes": int(tokens[at - 2]),
            "out": (rest[0], rest[1], rest[2]),
            "in": (rest[4], rest[5], rest[6]),
        })
    return rows


def label_bytes(label: str) -> int:
    """A rounded decimal size label such as '65K' or '8G' read as the nearest power of two."""
    scale = {"K": 1e3, "M": 1e6, "G": 1e9}[label[-1]]
    return 2 ** round(math.log2(float(label[:-1]) * scale))


def azure_rows(lines: list[str]) -> list[dict]:
    rows = []
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and re.fullmatch(r"\d+[KMG]", cells[0]):
            rows.append({"bytes": label_bytes(cells[0]), "in": ("", "", cells[1])})
    return rows


def select(lines: list[str], spec: str) -> list[str]:
    if not spec:
        return lines
    first, _, last = spec.partition("-")
    return lines[int(first) - 1:int(last or first)]


def manual_rows() -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    with open(HERE / "sources" / "manual_rows.csv", newline="") as f:
        for r in csv.DictReader(f):
            rows.setdefault(r["run_id"], []).append(r)
    return rows


def number(text: str) -> str:
    """Printed figure kept as printed, without padding; empty stays empty."""
    return text.strip()


def run_rows(run: dict, manual: dict[str, list[dict]]) -> list[dict]:
    base = {k: run[k] for k in ("system", "gpus", "nodes", "gpus_per_node", "collective",
                                "nccl_version", "algo_proto", "source", "run_id", "gpu_model",
                                "interconnect", "nics", "fabric")}
    out = []
    if run["parse"] == "manual":
        for r in manual[run["run_id"]]:
            notes = "; ".join(n for n in (run["notes"], r["notes"]) if n)
            out.append({**base, "bytes": r["bytes"], "time_us": r["time_us"],
                        "algbw_GBps": r["algbw_GBps"], "busbw_GBps": r["busbw_GBps"],
                        "in_place": r["in_place"], "notes": notes})
        return out
    lines = (HERE / run["file"]).read_text().splitlines()
    chosen = select(lines, run["lines"])
    parsed = azure_rows(chosen) if run["parse"] == "azure_md" else table_rows(chosen)
    if not parsed:
        where = run["lines"] or "all"
        sys.exit(f"{run['file']}: no table rows for run {run['run_id']} (lines {where})")
    for r in parsed:
        if r["bytes"] == 0:
            continue
        time_us, algbw, busbw = r[run["half"]]
        out.append({**base, "bytes": r["bytes"], "time_us": number(time_us),
                    "algbw_GBps": number(algbw), "busbw_GBps": number(busbw),
                    "in_place": "1" if run["half"] == "in" else "0", "notes": run["notes"]})
    return out


# The shared file's runs, keyed by (start of source, start of algo_proto).
SHARED_RUNS = [
    ("github.com/oracle-quickstart/oci-hpc-oke@1402938d", "", "shared-oci-a100-2n-readme",
     "A100-SXM4-40GB", "NVSwitch NVLink3", "16x100", "RoCE"),
    ("github.com/oracle-quickstart/oci-hpc-oke@3e5d61bd", "", "shared-oci-a100-2n-rdmadoc",
     "A100-SXM4-40GB", "NVSwitch NVLink3", "16x100", "RoCE"),
    ("github.com/oracle-quickstart/oci-hpc-oke@7381eeb7", "", "shared-oci-b4-a100-2n-slurmop",
     "A100-SXM4-40GB", "NVSwitch NVLink3", "16x100", "RoCE"),
    ("github.com/yumibyte/CS244C-Research", "", "shared-modal-a100-8g",
     "A100-SXM4-40GB", "NVSwitch NVLink3", "", ""),
    ("github.com/yumibyte/CS244C-Research", "Ring", "shared-l40s-2g-ring",
     "L40S-PCIe-48GB", "PCIe Gen4 x16", "", ""),
    ("github.com/yumibyte/CS244C-Research", "Tree", "shared-l40s-2g-tree",
     "L40S-PCIe-48GB", "PCIe Gen4 x16", "", ""),
    ("github.com/Azure/AI-benchmarking-guide@8fd0c6e", "", "shared-azure-nda100v4",
     "A100-SXM4-80GB", "NVSwitch NVLink3", "", ""),
    ("github.com/li-plus/playground", "", "shared-a100-8g-sendrecv",
     "A100-SXM", "NVSwitch NVLink3", "", ""),
    ("https://github.com/NVIDIA/nccl-tests/issues/194", "", "shared-h100pcie-2g-nvlbridge",
     "H100-PCIe", "NVLink bridge pair", "", ""),
    ("github.com/stas00/ml-engineering@744d01e", "Ring (default", "shared-h200-4g-default",
     "H200-SXM-141GB", "NVSwitch NVLink4", "", ""),
    ("github.com/stas00/ml-engineering@744d01e", "Ring (NCCL_NVLS", "shared-h200-4g-nvls0",
     "H200-SXM-141GB", "NVSwitch NVLink4", "", ""),
]


def shared_run(row: dict) -> tuple:
    matches = [s for s in SHARED_RUNS
               if row["source"].startswith(s[0]) and row["algo_proto"].startswith(s[1])]
    if not matches:
        sys.exit(f"shared row without a run: {row['source']} / {row['algo_proto']}")
    return max(matches, key=lambda s: len(s[1]))


def shared_rows(path: Path) -> list[dict]:
    out = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            _, _, run_id, gpu_model, interconnect, nics, fabric = shared_run(row)
            in_place = ("1" if "in-place" in row["algo_proto"] else
                        "" if not row["time_us"] else "0")
            out.append({**row, "run_id": run_id, "gpu_model": gpu_model,
                        "interconnect": interconnect, "nics": nics, "fabric": fabric,
                        "in_place": in_place,
                        "notes": "from ../shared/measurements/nccl_tests_public.csv"})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    shared = HERE.parent.parent / "shared" / "measurements" / "nccl_tests_public.csv"
    parser.add_argument("--shared", type=Path, default=shared)
    parser.add_argument("--out", type=Path, default=HERE / "measurements.csv")
    args = parser.parse_args()
    if not args.shared.is_file():
        sys.exit(f"{args.shared}: shared measurements not found; pass --shared PATH")
    manual = manual_rows()
    rows = []
    with open(HERE / "runs.csv", newline="") as f:
        for run in csv.DictReader(f):
            rows.extend(run_rows(run, manual))
    rows.extend(shared_rows(args.shared))
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} rows -> {args.out}")


if __name__ == "__main__":
    main()
