"""How close collsim's presets come to published nccl-tests measurements (validation/), per
machine and overall: median and 90th percentile of |simulated busbw / measured busbw - 1| over
rows of 1 MiB and more, for

  (a) auto:        the preset as shipped, NCCL's pick (collsim.calibrate.predict) under the
                   run's environment: its NCCL_ALGO where the source says one was set (rows.csv
                   names that algorithm in `forced`), and its NCCL release (`nccl.version`)
                   where the source names one (validation/measurements.csv `nccl_version`);
  (b) calibrated:  leave-one-out: calibrate the preset on every other size of the run
                   (collsim.calibrate.fit), predict the held-out sizes; both halves; runs
                   of up to 32 GPUs (--max-ranks), those over 8 in fewer steps (LARGE_*);
  (c) NCCL model:  NCCL's own analytic time of its pick (collsim.nccl.tuning), for comparison;
  (d) scale-up:    calibrate on a machine's smaller run (1 node, or 1 GPU per node), predict
                   its larger one (SCALE_UP), printed per pair;
  (e) from p2p:    calibrate on a machine's p2p run across nodes (alltoall_perf, sendrecv_perf:
                   the network's figures, docs/calibration.md#log-kinds), predict its
                   collectives (FROM_P2P), printed per pair.

Writes plots/fidelity/table.md (the table), rows.csv (every row's errors) and, from rows.csv,
busbw.png (benchmarks/fidelity_figure.py, which redraws it alone). Fits are cached in
.cache/fidelity.json (delete it after changing the model).

    python benchmarks/fidelity.py [--no-calibrate] [--max-ranks 8]
    python benchmarks/fidelity.py --no-calibrate --runs a3mega --runs aws-p   # a few runs,
        per run, printed only (the table, rows.csv and the figure are left as they are); without
        --no-calibrate also the pairs (d, e) whose two runs are among them
    python benchmarks/fidelity.py --pairs --runs ntc-h100-2x1 --runs ntc-h100-10x1   # the
        pairs (d, e) among the runs alone, without the runs' leave-one-out fits
    python benchmarks/fidelity.py --shard 0/2 & python benchmarks/fidelity.py --shard 1/2; \
        wait; python benchmarks/fidelity.py        # the fits on two cores, then the table
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import fidelity_figure
import numpy as np

from collsim.calibrate.cases import Case, repicked, shape
from collsim.calibrate.figures import calibrated as calibrated_figures
from collsim.calibrate.fit import PICK_SCALES, TREE_RATINGS, calibrate
from collsim.calibrate.predict import pick, simulate_pick, with_figures
from collsim.collectives import COLLECTIVES
from collsim.errors import InputError
from collsim.hardware.shipped import find_topology

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ROOT / "validation" / "measurements.csv"
OUT = ROOT / "plots" / "fidelity"
CACHE = ROOT / ".cache" / "fidelity.json"
MIN_SIZE = 2**20
MAX_SIM_RANKS = 128  # larger runs take minutes per point to simulate: left out, and said so
# Runs whose simulation as recorded is too slow for this table, left out and said so: the full
# engine's time, not the error, decides (docs/misses.md#provenance).
TOO_SLOW = {"coreweave-gb200-nvl72-2rack-ar":
            "a ring on 128 GPUs in 32 lanes that share NVLink: under LL128 (512 MiB, 1 GiB) "
            "the shared-lanes path times it in under a second, but under Simple (2-16 GiB) "
            "NVLink binds lanes that move out of step, and the event engine takes them: "
            "217 s of CPU at 2 GiB, more for each size up to 16 GiB"}
# Leave-one-out fits on runs of more than 8 GPUs: fewer steps, the sizes up to 1 GiB (the
# larger ones, all bandwidth-bound, take most of the simulation time and add little), and no
# search for NCCL's switch sizes (pick_scale: each candidate is a fit of its own).
LARGE_RUN, LARGE_ITERATIONS, LARGE_FIT_MAX = 8, 6, 2**30
FORCED = {"ring": "ring", "tree": "nccl_tree"}
# NCCL_ALGO's value for a forced algorithm: `auto` then picks under the run's own environment,
# as NCCL did, so a row is compared with what ran rather than with NCCL's default.
NCCL_ALGO_OF = {"ring": "Ring", "nccl_tree": "Tree"}
# (fitted on, predicted) runs of one machine and source, fewer GPUs -> more: 1 node -> 2-4
# (the H100 node's allreduce also predicts the 4 nodes' other collectives; the NDm A100 v4
# node predicts each collective on 2 nodes), 2 H100 nodes on InfiniBand -> 4 and 8 (and
# 4 -> 8), one GPU per node -> eight (B200, NDm A100 v4), a GB300 or GB200 tray (4 GPUs) ->
# 2 trays, a rack (16 trays) and two racks, and one H100 cluster of 10 nodes (p2p on 2 nodes ->
# 10 at 1, 2, 4 and 8 GPUs per node, one node -> 2 and 10, and its 10 nodes at 1 -> 2 -> 4
# GPUs per node; 4 -> 8 is left out for its cost: a fit at 40 GPUs up to 16 GiB, then 80-GPU
# predictions).
SCALE_UP = (*(("vp-h100-1n-ar", f"vp-h100-4n-{c}") for c in ("ar", "ag", "bcast", "reduce")),
            ("h100-ib-2n-ar-issue309", "h100-ib-4n-ar-issue309"),
            ("h100-ib-2n-ar-issue309", "h100-ib-8n-ar-issue309"),
            ("h100-ib-4n-ar-issue309", "h100-ib-8n-ar-issue309"),
            *((f"azure-ndmv4-{small}-{c}", f"azure-ndmv4-2n-{c}")
              for small in ("1n", "2x1") for c in ("ar", "ag", "a2a")),
            ("gcp-a4-b200-2x1-ag", "gcp-a4-b200-2n-ag"),
            ("aws-p4dn-1n-ar-issue527", "aws-p4dn-2n-ar-issue527"),
            ("aws-p4dn-1n-ar-issue527", "aws-p4dn-4n-ar-issue527"),
            ("gb200-3xnvl4-ring-issue1801", "gb200-3xnvl8-ring-issue1801"),
            ("gb200-3xnvl4-tree-issue1801", "gb200-3xnvl8-tree-issue1801"),
            *((f"oci-{gpu}-{c}-1tray", f"oci-{gpu}-{c}-{n}tray")
              for gpu, c, trays in (("gb300", "ar", (2, 16, 32)), ("gb300", "a2a", (2, 16, 32)),
                                    ("gb200", "ar", (32,)), ("gb200", "a2a", (2, 16, 32)))
              for n in trays),
            # one H100 cluster (nccl-tests-cluster's example): p2p on 2 nodes -> 10, 1 node ->
            # 2 and 10, and 10 nodes at twice the GPUs per node
            *((f"ntc-h100-{small}-{c}", f"ntc-h100-{large}-{c}")
              for small, large, c in (("2x1", "10x1", "sendrecv"), ("2n", "10n", "sendrecv"),
                                      ("2x1", "10x1", "a2a"), ("2n", "10n", "a2a"),
                                      ("1n", "2n", "a2a"),
                                      ("2x2", "10x2", "sendrecv"), ("2x4", "10x4", "sendrecv"),
                                      ("2x2", "10x2", "a2a"), ("2x4", "10x4", "a2a"))),
            *((f"ntc-h100-1n-{c}", f"ntc-h100-10n-{c}") for c in ("ar", "ag", "rs")),
            *((f"ntc-h100-{small}-{c}", f"ntc-h100-{large}-{c}")
              for small, large in (("10x1", "10x2"), ("10x2", "10x4"))
              for c in ("ar", "ag", "rs")))
# (fitted on, predicted) runs of one machine and source: a p2p run across nodes (sendrecv or
# alltoall, whose fit frees only the network's figures and the launch) -> the collectives the
# same source measured on the same machine, at its node count or more. NDm A100 v4: 2 x 1 GPU
# (every peer across the network) and 2 x 8 GPUs -> allreduce and allgather on 2 nodes; an
# H100 cluster (nccl-tests-cluster's example): sendrecv on 2 nodes of 1, 2, 4 and 8 GPUs, and
# alltoall on 2 x 1 -> allreduce, allgather and reducescatter on 10 nodes of as many GPUs.
# OCI's 2-rack alltoall (128 GPUs) is left out for its cost: a fit simulates every size of
# the run for each trial of the figures, here at 128 GPUs (an 80-GPU 16 GiB call takes 30 s).
FROM_P2P = (*((f"azure-ndmv4-{p2p}-a2a", f"azure-ndmv4-{target}-{c}")
              for p2p, target in (("2x1", "2x1"), ("2x1", "2n"), ("2n", "2n"))
              for c in ("ar", "ag")),
            *((f"ntc-h100-{p2p}", f"ntc-h100-{target}-{c}")
              for p2p, target in (("2x1-sendrecv", "10x1"), ("2x1-a2a", "10x1"),
                                  ("2x2-sendrecv", "10x2"), ("2x4-sendrecv", "10x4"),
                                  ("2n-sendrecv", "10n"))
              for c in ("ar", "ag", "rs")))


@dataclass
class RunSpec:
    run_id: str
    preset: str
    overrides: dict
    nodes: int
    per_node: int
    collective: str
    algorithm: str            # auto, or what the run forced
    rows: list[dict]          # every timed size of the run, one placement
    network: str = ""         # a network no preset describes (undescribed_network)


# Runs whose network the GPU's default cluster does not describe: run -> (preset, overrides,
# why). The presets' figures come from the vendors' pages and plugins, not from these rows.
RUN_PRESETS: dict[str, tuple[str, dict, str]] = {
    # The NCCL variables aws-ofi-nccl sets (nccl.environment) by the plugin the run used: the
    # presets hold today's (docs/hardware.md#clouds). The README of the p4de and p5 examples
    # builds them with aws-ofi-nccl 1.8.1 (NCCL_PROTO=simple on p4d, NVLSTree's 512 KiB cap on
    # p5; NCCL_BUFFSIZE and NCCL_NVLS_CHUNKSIZE came with 1.16.0); its EKS excerpt names
    # v1.7.3-aws, and issue 527 (July 2022) predates v1.6.0: neither set any. 1.8.1 sets
    # NCCL_NET_FORCE_FLUSH=0 on Hopper (aws-ofi-nccl commit 74fd41a6, in v1.8.0-aws), v1.7.3
    # does not, and the EKS run's NCCL 2.18.5 defaults it to 1 (NCCL src/graph/paths.cc at
    # v2.18.5-1; 0 from v2.19.1-1): that run flushes every Simple receive.
    "aws-p4de-2n-ar": ("p4d-efa-cluster", {"nccl.environment": {"NCCL_PROTO": "simple"}},
                       "p4d/p4de: 4x 100G EFA through aws-ofi-nccl 1.8.1"),
    # Issue 527's plugin reports the latency from before the per-platform table (v1.7.0-aws,
    # commit d87d61e0): v1.4.0-aws tells NCCL 2.12 and later 150 us (src/nccl_ofi_net.c,
    # "props->latency = 150"; the run's log prints NCCL 2.12's "Channel 03/0" and "NET/AWS
    # Libfabric/0/GDRDMA"). Assumption: its v1.4.0 is the AWS release (the general one reports
    # none).
    **{run: ("p4d-efa-cluster", {"nccl.environment": {}, "nccl.net_latency": "150us"},
             "p4d/p4de: 4x 100G EFA through aws-ofi-nccl 1.4.0-aws (150 us reported)")
       for run in ("aws-p4dn-2n-ar-issue527", "aws-p4dn-3n-ar-issue527",
                   "aws-p4dn-4n-ar-issue527")},
    # Both p5 runs ran with NVLS on (docs/misses.md#efa-nvls): neither plugin disables it at
    # NCCL 2.18.5 or later (src/platform-aws.c at v1.7.3-aws and v1.8.1-aws, version < 21805),
    # and the EKS run's MPIJob forces it (nccl-test-eks.yaml at awsome-distributed-training
    # 0900f63c: -x NCCL_NVLS_ENABLE=1, with which NCCL 2.18.5 fails its init where multicast
    # is missing). The Slurm run's sbatch sets NCCL_BUFFSIZE=8388608 (slurm/nccl-tests.sbatch
    # at 88c2e71b, the commit that adds the p5 output). Their NCCLs start NVLSTree's chunk at
    # a Simple step, NCCL_BUFFSIZE / 8 (computeColl* in src/enqueue.cc at v2.18.5-1 and
    # v2.20.3-1; NCCL_NVLS_CHUNKSIZE, 128 KiB, from v2.21.5-1): 512 KiB on the EKS run (4 MiB),
    # 1 MiB capped at 1.8.1's 512 KiB on the Slurm run; NCCL_NVLS_CHUNKSIZE stands for it.
    "aws-p5-2n-ar": ("p5-efa-cluster",
                     {"nccl.environment": {"NCCL_NVLSTREE_MAX_CHUNKSIZE": 524288,
                                           "NCCL_NET_FORCE_FLUSH": 0,
                                           "NCCL_BUFFSIZE": 8388608,
                                           "NCCL_NVLS_CHUNKSIZE": 524288}},
                     "p5: 32x 100G EFAv2, 4 rails per NCCL NIC (aws-ofi-nccl 1.8.1)"),
    "aws-p5-2n-eks-nccl2185-ar": ("p5-efa-cluster",
                                  {"nccl.environment": {"NCCL_NET_FORCE_FLUSH": 1,
                                                        "NCCL_NVLS_ENABLE": 1,
                                                        "NCCL_NVLS_CHUNKSIZE": 524288}},
                                  "p5: 32x 100G EFAv2, 4 rails per NCCL NIC (aws-ofi-nccl "
                                  "v1.7.3-aws)"),
    # The servers: "3 servers x 8 A100-SXM4-40GB, 4 HDR IB cards each".
    "a100-3n-hdr-issue119": ("a100-cluster", {"node.nics.count": 4},
                             "4x 200G HDR per node (the issue's servers)"),
    # The run's repository installs TCPXO plugin image v1.0.4 (startup_script_ubuntu.sh, which
    # its set_envs.sh selects; v1.0.3 for Debian: the same NCCL configs, NCCL 2.21.5)
    # and sources the profile it ships, which sets NCCL_ALGO=Ring,Tree, NCCL_PROTO=Simple and
    # NCCL_NVLS_ENABLE=0 (Google's release notes for that image, container-engine-accelerators
    # gpudirect-tcpxo/README.md); the preset holds today's profile.
    "gcp-a3mega-h100-2n-ar": ("a3-mega-cluster",
                              {"nccl.environment.NCCL_ALGO": "Ring,Tree",
                               "nccl.environment.NCCL_PROTO": "Simple",
                               "nccl.environment.NCCL_NVLS_ENABLE": 0},
                              "A3 Mega: 8x 200G GPUDirect-TCPXO (the repository's name), under "
                              "the profile of the plugin image the run's repository installs"),
    # One shared RDMA interface a node, and RoCE, not sockets: the run's container installs
    # Mellanox/nccl-rdma-sharp-plugins as libnccl-net.so, which NCCL 2.27.3 loads before its own
    # IB and socket transports (src/plugin/net.cc at v2.27.3-1), and NCCL_IB_DISABLE=1 leaves
    # the plugin's verbs transport on (only NCCL_IBEXT_DISABLE turns it off, src/ib_plugin.c;
    # nccl#676). The speed is not stated: the preset's 400 Gb/s ConnectX-7 stands
    # (docs/misses.md#ocp-h200).
    "ocp-h200-2x8-socket-ring-ar": ("h100-cluster", {"node.nics.count": 1,
                                                     "node.nics.transport": "roce"},
                                    "RoCE (RDMA SHARP plugin) over one shared interface"),
}

# Runs on their GPU's default preset under NCCL variables their source sets: run ->
# (overrides, why). CoreWeave's GB200 tables were published (coreweave/nccl-tests@bee97e71,
# README.md) with job files that set NCCL_NVLS_ENABLE=0 ("per NV ask", commit a736384b) and
# NCCL_COLLNET_ENABLE=0 (the default); NVLS came back in them only in August 2025 (3042386c).
RUN_ENVIRONMENT: dict[str, tuple[dict, str]] = {
    run: ({"nccl.environment.NCCL_NVLS_ENABLE": 0},
          "NVLS off, as the job files of the commit that publishes the table set it")
    for run in ("coreweave-gb200-nvl72-1rack-ar", "coreweave-gb200-nvl72-2rack-ar",
                "coreweave-gb200-nvl72-20rack-ar")
}


def preset_of(row: dict) -> tuple[str, dict] | None:
    """The shipped preset a published machine is simulated on, and its overrides."""
    model, nodes, per_node = row["gpu_model"], int(row["nodes"]), int(row["gpus_per_node"])
    if row["run_id"] in RUN_PRESETS:
        name, overrides, _ = RUN_PRESETS[row["run_id"]]
        return name, dict(overrides)
    single = {"H100-SXM-80GB": "dgx-h100", "H200-SXM-141GB": "dgx-h200",
              "A100-SXM4-80GB": "dgx-a100", "A100-SXM4-40GB": "dgx-a100", "B200": "dgx-b200",
              "GB200": "gb200-nvl72", "GB300": "gb300-nvl72", "L40S-PCIe-48GB": "l40s-pcie"}
    cluster = {"H100-SXM-80GB": "h100-cluster", "H200-SXM-141GB": "h100-cluster",
               "A100-SXM4-80GB": "a100-cluster", "A100-SXM4-40GB": "a100-cluster",
               "B200": "b200-cluster", "GB200": "gb200-nvl72-cluster",
               "GB300": "gb300-nvl72-cluster"}
    environment = dict(RUN_ENVIRONMENT.get(row["run_id"], ({}, ""))[0])
    if nodes == 1 and model in single:
        return single[model], ({"gpus": per_node} if model.startswith("L40S") else {}) | environment
    if nodes > 1 and model in cluster:
        return cluster[model], environment
    return None


def forced(text: str) -> str:
    lowered = text.lower()
    if "ncclalgo" in lowered.replace("_", "") or lowered.startswith(("ring", "tree")):
        for key, name in FORCED.items():
            if lowered.startswith(key) or f"nccl_algo={key}" in lowered:
                return name
    return "auto"


def measured_time(row: dict) -> float | None:
    """Seconds per call: printed, or from busbw."""
    if row["time_us"] and float(row["time_us"]) > 0:
        return float(row["time_us"]) * 1e-6
    busbw = float(row["busbw_GBps"] or 0)
    if busbw <= 0:
        return None
    factor = COLLECTIVES[row["collective"]].busbw_factor(int(row["gpus"]))
    return int(row["bytes"]) * factor / busbw / 1e9


def undescribed_network(row: dict) -> str:
    """The network of a multi-node run when no preset describes it (AWS EFA, GCP's
    GPUDirect-TCPXO, TCP sockets, unless RUN_PRESETS maps the run), else ''. Those rows stay
    in the table; the line 'described' leaves them out."""
    if int(row["nodes"]) < 2 or row["run_id"] in RUN_PRESETS:
        return ""
    text = f"{row['fabric']} {row['notes']}"
    for marker, name in (("EFA", "AWS EFA"), ("TCPXO", "GCP GPUDirect-TCPXO"),
                         ("TCP sockets", "TCP sockets")):
        if marker in text:
            return name
    return ""


def load_runs() -> tuple[list[RunSpec], list[str]]:
    by_run: dict[str, list[dict]] = defaultdict(list)
    with MEASUREMENTS.open() as f:
        for row in csv.DictReader(f):
            by_run[row["run_id"]].append(row)
    runs, skipped = [], []
    for run_id, rows in by_run.items():
        first = rows[0]
        if "DOUBTFUL" in first["notes"]:
            skipped.append(f"{run_id}: marked DOUBTFUL in validation/")
            continue
        if first["collective"] not in COLLECTIVES:
            skipped.append(f"{run_id}: {first['collective']} is not a collective collsim has")
            continue
        mapped = preset_of(first)
        if mapped is None:
            skipped.append(f"{run_id}: no preset for {first['gpu_model']} on "
                           f"{first['nodes']} node(s)")
            continue
        if int(first["gpus"]) > MAX_SIM_RANKS:
            skipped.append(f"{run_id}: {first['gpus']} GPUs, above {MAX_SIM_RANKS}")
            continue
        if run_id in TOO_SLOW:
            skipped.append(f"{run_id}: {TOO_SLOW[run_id]}")
            continue
        placements = {r["in_place"] for r in rows}
        keep = "0" if "0" in placements else min(placements)
        timed = {}
        for r in rows:
            t = measured_time(r) if r["in_place"] == keep else None
            if t is not None and int(r["bytes"]) > 0:
                timed.setdefault(int(r["bytes"]), {**r, "time_s": t})
        if not any(s >= MIN_SIZE for s in timed):
            continue
        algorithm = forced(first["algo_proto"])
        overrides = dict(mapped[1])
        if algorithm in NCCL_ALGO_OF:
            overrides.setdefault("nccl.environment.NCCL_ALGO", NCCL_ALGO_OF[algorithm])
        if first["nccl_version"]:  # the release the source names; unset: the modelled one
            overrides.setdefault("nccl.version", first["nccl_version"])
        runs.append(RunSpec(run_id, mapped[0], overrides, int(first["nodes"]),
                            int(first["gpus_per_node"]), first["collective"],
                            algorithm, [timed[s] for s in sorted(timed)],
                            undescribed_network(first)))
    return runs, skipped


def case_of(spec: RunSpec, rows: list[dict], algorithm: str = "auto") -> Case:
    preset = find_topology(spec.preset)
    topology, gpus = shape(preset, spec.nodes, spec.per_node, dict(spec.overrides),
                           spec.run_id)
    sizes = [int(r["bytes"]) for r in rows]
    picks = [pick(topology, spec.collective, s, gpus, algorithm) for s in sizes]
    return Case(spec.run_id, topology, gpus, spec.collective, sizes,
                [r["time_s"] for r in rows], picks, spec.nodes, spec.per_node, algorithm)


SIMULATED: dict = {}  # the cache's "sim" part: busbw by (run, size, pick) as shipped
PREDICTED: dict = {}  # its "pred" part: busbw by (fit, run, size, pick) on fitted figures


def busbw(case: Case, index: int, topology=None, fit: str = "") -> float:  # noqa: ANN001
    """Simulated busbw of the case's ``index``-th size: on the preset, or on ``topology``
    (the preset under the figures of the cached fit ``fit``, which names it in the cache)."""
    chosen = case.picks[index]
    key = f"{case.label}/{case.sizes[index]}/{chosen.algorithm}/{chosen.protocol}"
    store = SIMULATED if topology is None else PREDICTED if fit else None
    if store is not None:
        key = f"{fit}|{key}" if fit else key
        if key in store:
            return store[key]
    value = simulate_pick(topology or case.topology, case.collective, case.sizes[index],
                          case.gpus, chosen).busbw_GBps
    if store is not None:
        store[key] = value
    return value


def source_stamp() -> str:
    """A hash of the code, presets and run mappings the figures depend on: the cache is kept
    while it holds."""
    digest = hashlib.sha256()
    for path in sorted([*(ROOT / "collsim").rglob("*.py"), *(ROOT / "topologies").glob("*.yaml"),
                        MEASUREMENTS]):
        digest.update(path.read_bytes())
    digest.update(repr(sorted(RUN_PRESETS.items())).encode())
    digest.update(repr(sorted(RUN_ENVIRONMENT.items())).encode())
    return digest.hexdigest()[:16]


def loo(spec: RunSpec, cache: dict) -> dict[int, tuple[float, dict]]:
    """busbw of each size >= MIN_SIZE predicted by a fit on the other half of the sizes, and
    the fitted factors that predicted it."""
    out = {}
    for half in (0, 1):
        large = spec.nodes * spec.per_node > LARGE_RUN
        fit_rows = [r for i, r in enumerate(spec.rows) if i % 2 != half
                    and (not large or int(r["bytes"]) <= LARGE_FIT_MAX)]
        held = [r for i, r in enumerate(spec.rows) if i % 2 == half and
                int(r["bytes"]) >= MIN_SIZE]
        if len(fit_rows) < 3 or not held:
            continue
        key = f"{spec.run_id}/{half}/{spec.algorithm}"
        if key not in cache:
            cache[key] = calibrate([case_of(spec, fit_rows, spec.algorithm)],
                                   max_iterations=LARGE_ITERATIONS if large else None,
                                   pick_scales=() if large else PICK_SCALES,
                                   tree_ratings=TREE_RATINGS).factors
        factors = cache[key]
        case = repicked(case_of(spec, held, spec.algorithm), factors.get("pick_scale", 1.0),
                        factors.get("tree_rating", 1.0))
        topology = with_figures(case.topology, calibrated_figures(case.topology.machine, factors))
        for i, size in enumerate(case.sizes):
            out[size] = busbw(case, i, topology, key), factors
    return out


def scale_fit(fit_on: RunSpec, target: RunSpec, cache: dict) -> str:
    """The cache key of the fit on ``fit_on`` (on ``target``'s preset), fitted if missing."""
    key = f"scale/{fit_on.run_id}/{target.preset}/{fit_on.algorithm}"
    if key not in cache:
        fit_case = case_of(RunSpec(**{**fit_on.__dict__, "preset": target.preset}),
                           fit_on.rows, fit_on.algorithm)
        cache[key] = calibrate([fit_case]).factors
    return key


def fit_shard(shard: int, shards: int, runs: list[RunSpec], max_ranks: int,
              cache: dict) -> None:
    """Every ``shards``-th piece of work from the ``shard``-th (leave-one-out halves, scale-up
    and p2p pairs, each fitted and predicted, then each run simulated on its preset), into
    ``cache``: shards run side by side, one a core, and the table's run reads them all."""
    by_id = {r.run_id: r for r in runs}
    work = [(loo, (spec, cache)) for spec in runs if spec.nodes * spec.per_node <= max_ranks]
    work += [(pair_errors, (runs, cache, ((small, large),)))
             for small, large in (*SCALE_UP, *FROM_P2P) if small in by_id and large in by_id]
    work += [(simulate_run, (spec,)) for spec in runs]
    for index, (step, args) in enumerate(work):
        if index % shards == shard:
            step(*args)
            print(f"shard {shard}/{shards}: {index + 1} of {len(work)} pieces", file=sys.stderr)


def simulate_run(spec: RunSpec) -> None:
    """The run's sizes >= MIN_SIZE simulated as shipped (``auto``) into SIMULATED."""
    case = case_of(spec, spec.rows)
    for i, size in enumerate(case.sizes):
        if size >= MIN_SIZE:
            busbw(case, i)


def stats(errors: list[float]) -> str:
    if not errors:
        return f"{'-':>5} {'-':>6} {'-':>6}"
    e = np.abs(errors)
    return f"{len(e):>5} {100 * np.median(e):>5.1f}% {100 * np.percentile(e, 90):>5.1f}%"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-calibrate", action="store_true", help="skip (b)")
    parser.add_argument("--max-ranks", type=int, default=32,
                        help="leave-one-out fits only for runs of at most this many GPUs")
    parser.add_argument("--worst", type=int, default=0, metavar="N",
                        help="print each machine's N worst held-out rows (pick, fitted figures)")
    parser.add_argument("--out", type=Path, default=OUT, help="where the table and figure go")
    parser.add_argument("--shard", metavar="K/N", help="only fit the K-th of N shares of the "
                        "fits (K = 0..N-1), into a cache of its own that a later run without "
                        "--shard reads: N processes fit side by side")
    parser.add_argument("--runs", action="append", metavar="SUBSTRING",
                        help="only the runs whose id contains SUBSTRING (repeatable): their "
                        "errors per run are printed, and no file but the cache is written")
    parser.add_argument("--pairs", action="store_true",
                        help="with --runs: fit and print the pairs (d, e) among the runs, "
                        "without the runs' leave-one-out fits (b)")
    args = parser.parse_args()
    if args.pairs and (args.no_calibrate or not args.runs):
        parser.error("--pairs takes --runs and fits the pairs: leave out --no-calibrate")
    started = time.time()
    cache = json.loads(CACHE.read_text()) if CACHE.is_file() else {}
    stamp = source_stamp()
    if cache.get("_stamp") != stamp:
        cache = {"_stamp": stamp, "sim": {}}
    for part in sorted(CACHE.parent.glob("fidelity-shard*.json")):
        shard_cache = json.loads(part.read_text())
        if shard_cache.get("_stamp") == stamp:
            cache["sim"].update(shard_cache.pop("sim", {}))
            cache.setdefault("pred", {}).update(shard_cache.pop("pred", {}))
            cache.update(shard_cache)
    SIMULATED.update(cache["sim"])
    PREDICTED.update(cache.get("pred", {}))
    runs, skipped = load_runs()
    if args.runs:
        runs = [r for r in runs if any(part in r.run_id for part in args.runs)]
        if not runs:
            print(f"no run's id contains {' or '.join(args.runs)}", file=sys.stderr)
            return 2
    if args.shard:
        shard, shards = (int(part) for part in args.shard.split("/"))
        path = CACHE.parent / f"fidelity-shard{shard}.json"
        mine = {"_stamp": stamp, "sim": {}}
        fit_shard(shard, shards, runs, args.max_ranks, mine)
        mine["sim"], mine["pred"] = SIMULATED, PREDICTED
        CACHE.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(mine, indent=1, sort_keys=True))
        print(f"{time.time() - started:.1f} s", file=sys.stderr)
        return 0
    table: list[dict] = []
    for spec in runs:
        try:
            auto = case_of(spec, spec.rows)
        except InputError as exc:
            skipped.append(f"{spec.run_id}: {exc}")
            continue
        calibrated = {}
        if not args.no_calibrate and not args.pairs \
                and spec.nodes * spec.per_node <= args.max_ranks:
            calibrated = loo(spec, cache)
        factor = COLLECTIVES[spec.collective].busbw_factor(spec.nodes * spec.per_node)
        for i, row in enumerate(spec.rows):
            size = int(row["bytes"])
            if size < MIN_SIZE:
                continue
            measured = size / row["time_s"] / 1e9 * factor
            chosen = auto.picks[i]
            record = {"machine": spec.preset, "run_id": spec.run_id, "network": spec.network,
                      "size_bytes": size,
                      "ranks": spec.nodes * spec.per_node, "nodes": spec.nodes,
                      "collective": spec.collective,
                      "measured_busbw": measured, "auto_busbw": busbw(auto, i),
                      "auto_pick": f"{chosen.algorithm}/{chosen.protocol}",
                      "forced": "" if spec.algorithm == "auto" else spec.algorithm,
                      "calibrated_busbw": calibrated[size][0] if size in calibrated else None,
                      "factors": calibrated[size][1] if size in calibrated else None,
                      "nccl_model_busbw": (size / chosen.model_time / 1e9 * factor
                                           if chosen.model_time else None)}
            table.append(record)
        cache["sim"], cache["pred"] = SIMULATED, PREDICTED
        CACHE.parent.mkdir(exist_ok=True)
        CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True))
        print(f"{spec.run_id:<34} {spec.preset:<20} {time.time() - started:6.1f} s",
              file=sys.stderr)
    if args.runs:
        print(per_run(table))
        if not args.no_calibrate:
            for title, pairs, fitted in (("scale-up", SCALE_UP, "the smaller run"),
                                         ("from p2p", FROM_P2P, "the p2p run")):
                lines = pair_errors(runs, cache, pairs, fitted)
                if lines:
                    print(f"{title}:", *lines, sep="\n")
            CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True))
        print(f"{time.time() - started:.1f} s", file=sys.stderr)
        return 0
    scale = pair_errors(runs, cache, SCALE_UP)
    p2p = pair_errors(runs, cache, FROM_P2P, "the p2p run")
    CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True))
    write(table, skipped, scale, args.max_ranks, args.out, p2p)
    if args.worst:
        print(worst(table, args.worst))
    print(f"{time.time() - started:.1f} s", file=sys.stderr)
    return 0


def pair_errors(runs: list[RunSpec], cache: dict, pairs: tuple[tuple[str, str], ...],
                fitted: str = "the smaller run") -> list[str]:
    """(d), (e): each pair's busbw error on the predicted run's sizes >= 1 MiB, the preset's
    and calibrated on the other run of the pair; pairs with a run not loaded are left out."""
    by_id = {r.run_id: r for r in runs}
    lines = []
    for small, large in pairs:
        if small not in by_id or large not in by_id:
            continue
        fit_on, target = by_id[small], by_id[large]
        preset = find_topology(target.preset)
        key = scale_fit(fit_on, target, cache)
        held = [r for r in target.rows if int(r["bytes"]) >= MIN_SIZE]
        case = case_of(target, held, target.algorithm)
        moved = repicked(case, cache[key].get("pick_scale", 1.0),
                         cache[key].get("tree_rating", 1.0))
        calibrated = with_figures(case.topology, calibrated_figures(case.topology.machine,
                                                                    cache[key]))
        factor = COLLECTIVES[target.collective].busbw_factor(target.nodes * target.per_node)
        errors: dict[str, list[float]] = {"preset": [], "calibrated": []}
        for i, row in enumerate(held):
            measured = int(row["bytes"]) / row["time_s"] / 1e9 * factor
            errors["preset"].append(busbw(case, i) / measured - 1)
            errors["calibrated"].append(busbw(moved, i, calibrated, key) / measured - 1)
        lines.append(f"{small} -> {large} ({preset.stem}): preset {stats(errors['preset'])}, "
                     f"calibrated on {fitted} {stats(errors['calibrated'])}")
    return lines


KINDS = (("auto", "auto_busbw"), ("calibrated (LOO)", "calibrated_busbw"),
         ("NCCL model", "nccl_model_busbw"))


def error(record: dict, column: str) -> float | None:
    value = record[column]
    return None if value is None else value / record["measured_busbw"] - 1


def per_run(table: list[dict]) -> str:
    """Each run's rows, median and p90 of |busbw error| per kind, and its picks (--runs)."""
    lines = [f"{'run':<30} {'machine':<16}" + "".join(f" | {name:>19}" for name, _ in KINDS)]
    for run in dict.fromkeys(r["run_id"] for r in table):
        mine = [r for r in table if r["run_id"] == run]
        cells = [stats([e for r in mine if (e := error(r, column)) is not None])
                 for _, column in KINDS]
        lines.append(f"{run:<30} {mine[0]['machine']:<16}" + "".join(f" | {c:>19}"
                                                                    for c in cells))
        picks = dict.fromkeys(r["auto_pick"] for r in mine)
        lines.append(f"{'':<30} picks: {', '.join(picks)}")
    return "\n".join(lines)


def worst(table: list[dict], count: int) -> str:
    """Each machine's ``count`` worst held-out rows: where the calibrated residual comes from."""
    lines = ["worst held-out rows (calibrated on the other half of the run's sizes):"]
    for machine in sorted({r["machine"] for r in table}):
        mine = sorted((r for r in table if r["machine"] == machine and r["factors"]),
                      key=lambda r: -abs(error(r, "calibrated_busbw")))[:count]
        for r in mine:
            figures = " ".join(f"{k}={v:.3g}" for k, v in sorted(r["factors"].items()))
            ran = f"{r['forced']} (forced)" if r["forced"] else r["auto_pick"]
            lines.append(f"  {machine:<14} {r['run_id']:<26} {r['size_bytes'] / 2**20:>7g} MiB "
                         f"{ran:<18} {100 * error(r, 'calibrated_busbw'):+6.1f}%  "
                         f"{figures}")
    return "\n".join(lines)


def write(table: list[dict], skipped: list[str], scale: list[str], max_ranks: int,
          out: Path = OUT, p2p: tuple[str, ...] | list[str] = ()) -> None:
    out.mkdir(parents=True, exist_ok=True)
    machines = sorted({r["machine"] for r in table})
    head = f"{'machine':<20}" + "".join(f" | {name:>19}" for name, _ in KINDS)
    sub = f"{'':<20}" + "".join(f" | {'rows':>5} {'median':>6} {'p90':>6}" for _ in KINDS)
    lines = [head, sub]
    undescribed_rows = any(r["network"] for r in table)
    # NCCL's nodes: an NVL72 rack (one NVLink domain) is one node, however many trays.
    groups = {"1 node": lambda r: r["nodes"] == 1, "2+ nodes": lambda r: r["nodes"] >= 2,
              "all": lambda r: True, "described": lambda r: not r["network"]}
    for machine in [*machines, "1 node", "2+ nodes", "all",
                    *(["described"] if undescribed_rows else [])]:
        keep = groups.get(machine)
        mine = [r for r in table if (keep(r) if keep else r["machine"] == machine)]
        cells = []
        for _, column in KINDS:
            errors = [e for r in mine if (e := error(r, column)) is not None]
            cells.append(stats(errors))
        lines.append(f"{machine:<20}" + "".join(f" | {c:>19}" for c in cells))
    lines += ["", "scale-up (rows, median, p90 of |busbw error|, sizes >= 1 MiB):", *scale]
    if p2p:
        lines += ["", "from p2p: calibrated on a p2p run across nodes, its machine's collectives "
                  "(rows, median, p90 of |busbw error|, sizes >= 1 MiB):", *p2p]
    text = "\n".join(lines)
    print(text)
    notes = "\n".join(f"- {s}" for s in skipped)
    undescribed = sorted({(r["network"], r["run_id"], r["machine"]) for r in table
                          if r["network"]})
    networks = "\n".join(f"- {run} ({machine}): {network}, "
                         f"{sum(r['run_id'] == run for r in table)} rows"
                         for network, run, machine in undescribed)
    mapped = "\n".join(f"- {run}: `{name}`"
                       + (" with " + ", ".join(f"{k}={v}" for k, v in over.items())
                          if over else "") + f" ({why})"
                       for run, (name, over, why) in RUN_PRESETS.items())
    (out / "table.md").write_text(
        "# busbw error against published measurements (rows >= 1 MiB)\n\n"
        "|error| = |simulated busbw / measured busbw - 1|, per machine (the preset each run "
        f"is simulated on); `calibrated (LOO)` for runs of at most {max_ranks} GPUs (a fit "
        "on a 32-GPU run takes 1-7 minutes a half); `auto` picks under a run's own "
        "NCCL_ALGO where its source says one was set; "
        "`1 node` and `2+ nodes` split `all` by NCCL's nodes (an NVL72 rack is one node); "
        "`python benchmarks/fidelity.py` (about 4 minutes with the cache of fits, "
        "about an hour without)."
        + (" `described` is `all` without the rows on networks no preset describes (listed "
           "below; they stay in their machine's line and in `all`)." if undescribed_rows
           else "")
        + "\n\n"
        f"```\n{text}\n```\n\nRuns simulated on a preset chosen by run (`RUN_PRESETS`):\n\n"
        f"{mapped}\n\nOn networks no preset describes:\n\n{networks or '- none'}\n\n"
        f"Left out:\n\n{notes}\n")
    columns = ["machine", "run_id", "collective", "ranks", "nodes", "size_bytes",
               "measured_busbw", "auto_pick", "auto_busbw", "auto_error", "forced",
               "calibrated_busbw", "calibrated_error", "nccl_model_busbw",
               "nccl_model_error"]
    with (out / "rows.csv").open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(columns)
        for r in table:
            full = {**r, **{f"{k.split('_')[0]}_error" if k != "nccl_model_busbw" else
                            "nccl_model_error": error(r, k) for _, k in KINDS}}
            writer.writerow(["" if full.get(c) is None else
                             (f"{full[c]:.4g}" if isinstance(full[c], float) else full[c])
                             for c in columns])
    fidelity_figure.draw(fidelity_figure.read_rows(out / "rows.csv"), out)


if __name__ == "__main__":
    sys.exit(main())
