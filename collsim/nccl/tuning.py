"""NCCL's analytic cost model: the per-communicator bandwidth and latency tables
(ncclTopoTuneModel, docs/nccl.md#tuning-bandwidths, docs/nccl.md#tuning-latencies) and the time
of one call (ncclTopoGetAlgoTime, docs/nccl.md#tuning-time), 2.29-era formulas.

Sizes follow nccl-tests' "size" column, which is NCCL's byte count: the per-rank buffer for
allreduce, broadcast and reduce, the whole gathered buffer for allgather and reducescatter.
The model covers broadcast, reduce, allgather, reducescatter and allreduce; alltoall and
send/receive are grouped point-to-point calls that NCCL's tuner does not model, so every
function here returns None for them. Times are returned in seconds (NCCL's model works in µs).

The tables contain every (collective, algorithm, protocol) the formulas give a bandwidth for.
Whether NCCL enables it by default (LL128's rule, NVLS and CollNet gating, PAT) is decided in
``choice``, so a caller can still ask for the model time of a pair NCCL would not pick.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

from collsim.hardware.nccl_names import ALGORITHMS, MODELLED_COLLECTIVES, PROTOCOLS
from collsim.nccl import constants as C
from collsim.nccl.search import Graph, Graphs, search
from collsim.nccl.system import NcclSystem

# Families whose chunks pipeline through a tree: NCCL's model pays each hop's latency once a call.
TREE_FAMILIES = ("nccl_tree", "nvls_tree", "collnet_chain")
SIMPLE_ONLY = ("collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
_AG_RS = ("allgather", "reducescatter")
_SERVES: dict[str, tuple[str, ...]] = {  # which algorithms NCCL's model has per collective
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "allgather": ("ring", "collnet_direct", "nvls", "pat"),
    "reducescatter": ("ring", "collnet_direct", "nvls", "pat"),
    "allreduce": ("nccl_tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree"),
}


def serves(collective: str, algorithm: str) -> bool:
    """NCCL's model has ``algorithm`` for ``collective``."""
    return algorithm in _SERVES.get(collective, ())


@dataclass(frozen=True)
class Entry:
    """One cell of NCCL's tables: the bandwidth that divides the byte count (GB/s) and the
    latency (µs) of a call, before the per-size corrections."""

    bandwidth: float
    latency: float


@dataclass(frozen=True)
class Model:
    """NCCL's cost tables for one communicator, with the graphs they were computed from."""

    system: NcclSystem
    graphs: Graphs
    entries: Mapping[tuple[str, str, str], Entry]

    def entry(self, collective: str, algorithm: str, protocol: str) -> Entry | None:
        """The table cell, or None where the model has no bandwidth for it."""
        return self.entries.get((collective, algorithm, protocol))


@lru_cache(maxsize=256)
def model(system: NcclSystem) -> Model:
    """NCCL's bandwidth and latency tables for ``system`` (empty for a single rank)."""
    graphs = search(system)
    entries: dict[tuple[str, str, str], Entry] = {}
    if system.ranks > 1:
        for collective in MODELLED_COLLECTIVES:
            for algorithm in ALGORITHMS:
                graph = graphs.of(algorithm)
                if not serves(collective, algorithm) or graph is None:
                    continue
                if algorithm in ("nvls", "nvls_tree") and graph.channels < 2:
                    continue
                for protocol in PROTOCOLS:
                    if algorithm in SIMPLE_ONLY and protocol != "Simple":
                        continue
                    bandwidth = _bandwidth(system, graphs, graph, collective, algorithm,
                                           protocol)
                    if bandwidth > 0:
                        latency = _latency(system, graph, collective, algorithm, protocol)
                        entries[(collective, algorithm, protocol)] = Entry(bandwidth, latency)
    return Model(system, graphs, MappingProxyType(entries))


def log2i(value: int) -> int:
    """floor(log2 value), and -1 for values below 1 (NCCL's log2i)."""
    return value.bit_length() - 1 if value > 0 else -1


def tree_hops_us(algorithm: str, nodes: int, ppn: int, intra: float, inter: float) -> float:
    """The latency NCCL's model charges a call of a tree family (``TREE_FAMILIES``) beyond its
    base, from the per-hop figures ``intra`` and ``inter``: each hop once, the pipeline's fill."""
    if algorithm == "nccl_tree":
        return 2 * ((ppn - 1) * intra + log2i(nodes) * inter)
    if algorithm == "nvls_tree":
        return intra + 2 * log2i(nodes) * inter
    if algorithm == "collnet_chain":
        return 2 * (ppn - 1) * intra + inter
    raise ValueError(f"{algorithm} is not a tree family")


def steps(collective: str, ranks: int) -> int:
    """A ring's steps for the collective: 2(n-1) for allreduce, n-1 for allgather and
    reducescatter, n for broadcast and reduce."""
    if collective == "allreduce":
        return 2 * (ranks - 1)
    return ranks - 1 if collective in _AG_RS else ranks


def _bandwidth(system: NcclSystem, graphs: Graphs, graph: Graph, collective: str,
               algorithm: str, protocol: str) -> float:
    """bandwidths[coll][algo][proto] (docs/nccl.md#tuning-bandwidths): per-channel figure, bus
    bandwidth with the refinements in NCCL's order, then the bus-to-algorithm ratio."""
    nodes, ranks = system.nodes, system.ranks
    ppn = ranks / nodes
    row = C.arch_row(system.arch)
    column = C.nodes_column(nodes)
    p = PROTOCOLS.index(protocol)
    collnet = algorithm in ("collnet_direct", "collnet_chain")

    # 2.31 instead: Ring uses bwIntra only on one node (or <= 2 nodes below SM100), Tree and
    # PAT min(bwIntra, bwInter).
    bw = graph.bw_intra if nodes <= 2 or collnet else graph.bw_inter
    if algorithm in ("nvls", "nvls_tree"):
        # 2.20-2.25: min(bwIntra, bwInter), no efficiency factor.
        intra = (graph.bw_intra * C.NVLS_EFFICIENCY[row] * (graph.channels - 1)
                 / graph.channels)
        intra *= 2.0 if collective == "allreduce" else (ppn - 1) / ppn
        inter = graph.bw_inter * (2 if algorithm == "nvls_tree" and nodes <= 2 else 1)
        cap = C.PER_CHANNEL_MAX_NVLS_TREE_BW[row][column] if algorithm == "nvls_tree" else math.inf
        bw = min(intra, inter, cap)
    bus = graph.channels * bw

    if algorithm == "ring" and p == C.LL:
        bus = min(_ll_max_bw(system), bus * C.RING_LL_FACTOR)
    if algorithm == "ring" and p == C.LL128:
        bus = min(bus * C.LL128_FACTOR,
                  graph.channels * C.PER_CHANNEL_MAX_RING_LL128_BW[row][column])
    if algorithm == "nccl_tree" and collective == "allreduce":
        bus = min(bus * C.LL128_FACTOR, graph.channels * C.PER_CHANNEL_MAX_TREE_BW[row][column])
    if algorithm == "nccl_tree" and p == C.LL:
        bus = min(bus / C.TREE_LL_DIVISOR, _ll_max_bw(system))
    if algorithm == "nccl_tree" and p == C.LL128:
        factor = C.TREE_LL128_ONE_NODE if nodes == 1 else C.TREE_LL128_NODES
        bus = min(bus * factor, graph.channels * C.PER_CHANNEL_MAX_TREE_LL128_BW[row][column])
    if algorithm == "nccl_tree" and graphs.tree.pattern == "TREE":
        bus *= C.PLAIN_TREE_FACTOR
    if algorithm == "pat":
        bus *= C.PAT_FACTOR
    if algorithm == "collnet_direct":
        if collective in _AG_RS:
            bus = ppn * min(graph.bw_intra, graph.bw_inter * C.COLLNET_DIRECT_AG_RS_INTER)
        else:
            ratio = ppn / graph.channels  # GPUs per NIC head
            ratio -= (ratio - 1) / 2
            bus /= ratio
            if system.arch >= 90:
                bus *= C.COLLNET_DIRECT_SM90_FACTOR

    if algorithm != "ring" and collective in _AG_RS:
        return bus  # no conversion: the bus figure is used as algorithm bandwidth
    if algorithm in ("ring", "nvls", "nvls_tree"):
        return bus * ranks / steps(collective, ranks)
    return bus * C.TREE_ALGBW_RATIO


def _ll_max_bw(system: NcclSystem) -> float:
    """llMaxBw: the architecture's row on one node, the CPU's row across nodes."""
    if system.nodes == 1:
        row = C.arch_row(system.arch)
    else:
        row = C.LL_MAX_BW_AMD_ROW if system.cpu == "amd" else C.LL_MAX_BW_OTHER_CPU_ROW
    return C.LL_MAX_BW[row][C.nodes_column(system.nodes)]


def _latency(system: NcclSystem, graph: Graph, collective: str, algorithm: str,
             protocol: str) -> float:
    """latencies[coll][algo][proto] in µs (docs/nccl.md#tuning-latencies)."""
    nodes, ranks = system.nodes, system.ranks
    ppn_int = ranks // nodes
    p = PROTOCOLS.index(protocol)
    intra_hw = "NVLINK" if graph.over_nvlink else "PCI"
    hw = intra_hw if nodes == 1 else "NET"
    base = C.BASE_LATENCY_US[algorithm][p]
    intra = C.HW_LATENCY_US[intra_hw][algorithm][p]
    # One rank per node: nothing hides the network latency, so NCCL takes the tree's.
    inter = C.HW_LATENCY_US["NET"]["nccl_tree" if ranks == nodes else algorithm][p]
    inter += graph.latency_inter * (2 if p == C.SIMPLE else 1)  # Simple adds a flush
    nsteps = steps(collective, ranks)

    if algorithm == "ring":
        step = C.HW_LATENCY_US[hw]["ring"][p]
        if collective in ("broadcast", "reduce"):
            if graph.same_channels:
                return base + step
            if p == C.SIMPLE:
                step = C.HW_LATENCY_US[hw]["nccl_tree"][p]
            return base + nsteps * step
        overhead = 0.0
        if nodes > 1:
            overhead = (system.net_overhead_us if system.net_overhead_us is not None
                        else C.NET_OVERHEAD_US[system.cpu])
            if p == C.SIMPLE:
                overhead *= C.NET_OVERHEAD_SIMPLE_FACTOR
        inter_steps = 0 if nodes == 1 else (2 * (nodes - 1) if collective == "allreduce"
                                            else nodes - 1)
        return base + (nsteps - inter_steps) * max(intra, overhead) + inter_steps * inter
    if algorithm in TREE_FAMILIES:
        return base + tree_hops_us(algorithm, nodes, ppn_int, intra, inter)
    if algorithm == "collnet_direct":
        return base + 2 * (min(1, ppn_int - 1) * intra
                           + (ppn_int - 1) * C.COLLNET_DIRECT_ARITY_US) + inter
    if algorithm == "nvls":
        return intra + (inter if nodes > 1 else 0.0)  # replaces the base latency
    # PAT (allgather, reducescatter)
    return base + log2i(nodes) * inter / C.PAT_LOG_DIVISOR + C.PAT_LINEAR_US * ranks


def call_terms(m: Model, collective: str, algorithm: str, protocol: str,
               size: int) -> tuple[float, float] | None:
    """The latency (µs) and bandwidth (GB/s) of one call of ``size`` bytes after NCCL's per-size
    corrections (tree correction, NVLSTree correction on SM100+ x86, ring plateau); None where
    the model has no bandwidth for the (collective, algorithm, protocol)."""
    entry = m.entry(collective, algorithm, protocol)
    if entry is None:
        return None
    size = int(size)
    system = m.system
    bw, lat = entry.bandwidth, entry.latency
    k = log2i(size >> 6)
    p = PROTOCOLS.index(protocol)
    if (algorithm == "nccl_tree" and collective == "allreduce"
            and 0 <= k < C.TREE_CORRECTION_LIMIT):
        bw *= C.TREE_CORRECTION[p][k]
    if (algorithm == "nvls_tree" and collective == "allreduce"
            and 0 <= k < C.NVLS_TREE_CORRECTION_LIMIT and system.arch >= 100
            and system.cpu in ("intel", "amd")):
        bw *= C.TREE_CORRECTION[p][k]
    if (algorithm == "ring" and p == C.SIMPLE and system.nodes > 1
            and collective == "allreduce"
            and size // (m.graphs.channels * system.ranks) >= C.RING_PLATEAU_MIN_BYTES):
        lat *= C.RING_PLATEAU_FACTOR if system.arch >= 80 else C.RING_PLATEAU_FACTOR_PRE_SM80
    return lat, bw


def call_time_us(m: Model, collective: str, algorithm: str, protocol: str,
                 size: int) -> float | None:
    """ncclTopoGetAlgoTime for one call of ``size`` bytes, in µs: latency + bytes / (1000 bw)
    (one operation per call, as nccl-tests issues); None as for ``call_terms``."""
    terms = call_terms(m, collective, algorithm, protocol, size)
    if terms is None:
        return None
    latency, bandwidth = terms
    return latency + int(size) / (1000.0 * bandwidth)


def call_time(m: Model, collective: str, algorithm: str, protocol: str,
              size: int) -> float | None:
    """NCCL's model time of one call, in seconds (None as for ``call_terms``)."""
    us = call_time_us(m, collective, algorithm, protocol, size)
    return None if us is None else us * 1e-6
