"""NCCL's topology search, reduced to arithmetic on a NcclSystem: the graph figures (channels,
bwIntra, bwInter, pattern, path types, sameChannels) of the ring, tree, NVLS and CollNet graphs,
and the channel counts the communicator runs with (docs/nccl.md#topology-search).

NCCL's search (src/graph/search.cc, ncclTopoCompute) walks a speed array from high to low,
finds channels at each speed by a depth-first search that subtracts each channel's bandwidth
from every link it crosses, keeps the best graph, duplicates its channels, then tries higher
speeds at that channel count. This module keeps that outer procedure exactly and replaces the
depth-first search by a count of how many channels fit at a speed, which holds for the regular
machines collsim models (identical GPUs, one NVSwitch or a full NVLink mesh or one PCIe level per
node, NICs on the GPUs' PCIe switches):

- One node, NVSwitch: every channel of a ring (every GPU sends once) or of a tree's chain (the
  same chain replayed) uses one unit of each GPU's NVLink budget: floor(total / speed) channels.
- Full NVLink mesh: a ring uses one directed pair link per GPU; the (n-1) pair links of a GPU
  carry (n-1) x floor(pair / speed) channels (disjoint Hamiltonian cycles).
- PCIe only: each channel crosses each GPU's PCIe link once per direction (x 6/5 through an
  Intel root complex).
- Several nodes: each channel enters and leaves the node through one NIC (NICs taken in turn,
  crossNic pairing the exit with the next channel's entry), so a node carries NICs x
  floor(min(NIC, PCIe) / speed) channels; entries rotate over the GPUs, so a GPU's NVLink budget
  carries n/(n-1) times as many channels as on one node.
- NVLS: channel h has head GPU h, which moves 2 units through the NVSwitch, every other GPU 1;
  with NICs the heads are the GPUs next to a NIC, one per NIC.
- CollNetDirect: head h exchanges 1/(n-1) of a unit with each other GPU; heads as for NVLS (<= 8).

Not modelled: the search's timeouts (it is assumed to find the counts above), NCCL_CROSS_NIC,
PXN path accounting, several CPU sockets and AMD/POWER special cases of path selection.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from collsim.nccl import constants as C
from collsim.nccl.system import NcclSystem
from collsim.nccl.versions import (
    copies_rings_to_nvls,
    doubles_sm90_channels,
    doubles_unpack_channels,
    max_channels,
    sm100_nvls_channels,
)

_ROUNDING = 1e-6  # NCCL subtracts bandwidths rounded to 1e-3; floors here tolerate float error


@dataclass(frozen=True)
class Graph:
    """One of NCCL's search graphs: ``channels`` channels of ``bw_intra`` GB/s inside a node and
    ``bw_inter`` GB/s across nodes, the path types they may use, and whether every channel is
    the same order of GPUs (``same_channels``)."""

    pattern: str
    channels: int
    bw_intra: float
    bw_inter: float
    type_intra: str
    type_inter: str
    same_channels: bool
    latency_inter: float = 0.0  # µs, the NICs' latency attribute

    @property
    def over_nvlink(self) -> bool:
        """The graph's intra-node paths are NVLink (NCCL's hardware row NVLINK, else PCI)."""
        return self.type_intra == "NVL"


@dataclass(frozen=True)
class Graphs:
    """Every graph NCCL builds for a communicator, and its channel counts at run time."""

    ring: Graph
    tree: Graph
    nvls: Graph | None
    collnet_direct: Graph | None
    collnet_chain: Graph | None
    channels: int
    """comm.nChannels: ring/tree channels after ncclTopoPostset (raised to NVLS's on the
    releases that copy them up)."""
    nvls_channels: int
    """Channels an NVLS or NVLSTree call runs on; 0 without an NVLS graph."""
    raised_to_nvls: bool = False
    """``channels`` is NVLS's count, raised from a lower one (NCCL 2.20.3 to 2.27.7)."""

    def of(self, algorithm: str) -> Graph | None:
        """The graph whose figures NCCL's model uses for ``algorithm`` (init.cc's graph table:
        PAT uses the tree's, NVLSTree the NVLS graph)."""
        return {
            "nccl_tree": self.tree, "ring": self.ring, "pat": self.tree,
            "nvls": self.nvls, "nvls_tree": self.nvls,
            "collnet_direct": self.collnet_direct, "collnet_chain": self.collnet_chain,
        }[algorithm]


@lru_cache(maxsize=256)
def search(system: NcclSystem) -> Graphs:
    """NCCL's graphs and run-time channel counts for ``system``."""
    ring = _search(system, "RING", _ring_fit(system), 1, C.SEARCH_MAX_CHANNELS)
    assert ring is not None  # rings and trees fall back to one slow channel
    # init.cc: the tree must have exactly the ring's channel count.
    tree = _search(system, tree_pattern(system), _ring_fit(system), ring.channels, ring.channels)
    assert tree is not None
    nvls = None
    if system.nvls_capable:
        heads = nvls_heads(system.gpus_per_node)
        single = system.nodes == 1
        nvls = _search(system, "NVLS", _nvls_fit(system), heads if single else 1, heads)
    collnet_direct = collnet_chain = None
    if system.collnet_on:
        heads = min(C.COLLNET_DIRECT_MAX_HEADS, system.gpus_per_node)
        collnet_direct = _search(system, "COLLNET_DIRECT", _collnet_direct_fit(system), 1, heads)
        collnet_chain = _search(system, "TREE", _ring_fit(system), ring.channels, ring.channels,
                                fallback=False)
    channels = _runtime_channels(system, ring, tree, collnet_chain)
    nvls_channels, raised = 0, False
    if nvls is not None:
        nvls_channels = system.nvls_channels or default_nvls_channels(system)
        if copies_rings_to_nvls(system.version) and channels < nvls_channels:
            channels, raised = nvls_channels, True  # NCCL 2.20.3 to 2.27.7
    return Graphs(ring, tree, nvls, collnet_direct, collnet_chain, channels, nvls_channels,
                  raised)


def nvls_heads(gpus_per_node: int) -> int:
    """The NVLS heads of a node (the GPUs that reduce a share of every loop): one per GPU, at
    most ``NCCL_MAX_NVLS_ARITY``."""
    return min(C.NVLS_MAX_ARITY, gpus_per_node)


def default_nvls_channels(system: NcclSystem) -> int:
    """NCCL's NVLS channel count (``ncclNvlsTuning`` before its SM100 NVLSTree tuning of 2.30):
    16 before SM100; from SM100 24 on one NVLink domain, 32 across nodes (as the machine's
    release has it: collsim.nccl.versions)."""
    if system.arch < 100:
        return C.NVLS_CHANNELS_SM90
    return sm100_nvls_channels(system.version, one_domain=system.nodes == 1)


def tree_pattern(system: NcclSystem) -> str:
    """The tree graph's pattern: BALANCED_TREE from SM80 (SPLIT_TREE before); one GPU per node
    forces TREE; on SM90+ across nodes the search falls back to TREE unless a second GPU shares
    the NIC's PCIe switch (the balanced tree puts half a NIC's traffic on it)."""
    if system.gpus_per_node == 1:
        return "TREE"
    if system.arch < 80:
        return "SPLIT_TREE"
    if system.nodes > 1 and system.arch >= 90 and system.gpus_per_nic_switch < 2:
        return "TREE"
    return "BALANCED_TREE"


# --- How many channels fit at a speed --------------------------------------------------------

Fit = Callable[[float, float], int]  # (bw_intra, bw_inter) -> channels that fit


def _count(capacity: float, per_channel: float) -> int:
    return max(0, math.floor(capacity / per_channel + _ROUNDING))


def _intra_fit(system: NcclSystem, speed: float) -> int:
    """Ring or chain channels that a node's GPU-to-GPU links carry at ``speed``."""
    n = system.gpus_per_node
    if n == 1:
        return C.MAX_CHANNELS
    if system.gpu_link == "nvlink":
        return (n - 1) * _count(system.peer_bandwidth, speed)
    if system.gpu_link == "pcie":
        overhead = C.INTEL_P2P_OVERHEAD if system.pcie_via_cpu and system.cpu == "intel" else 1
        return _count(system.pcie_bandwidth, speed * overhead)
    per_gpu = _count(system.nvlink_bandwidth, speed)
    if system.nodes == 1:
        return per_gpu
    return per_gpu * n // (n - 1)  # entries rotate: each GPU skips one send in n channels


def _nic_fit(system: NcclSystem, speed: float) -> int:
    """Channels the NICs of a node carry at ``speed`` (each enters and leaves through one)."""
    if speed > system.nic_path_bandwidth + _ROUNDING:
        return 0
    per_nic = _count(system.nic_path_bandwidth, speed)
    per_gpu = _count(system.pcie_bandwidth, speed)
    return min(system.nics_per_node * per_nic, system.gpus_per_node * per_gpu)


def _ring_fit(system: NcclSystem) -> Fit:
    """Rings and trees (chains): the node's links, and the NICs on several nodes."""
    if system.nodes == 1:
        return lambda intra, inter: _intra_fit(system, intra)
    return lambda intra, inter: min(_intra_fit(system, intra), _nic_fit(system, inter))


def _heads(system: NcclSystem, limit: int) -> int:
    if system.nodes == 1:
        return min(limit, system.gpus_per_node)
    return min(limit, system.gpus_per_node, system.nics_per_node)


def _nvls_fit(system: NcclSystem) -> Fit:
    def fit(intra: float, inter: float) -> int:
        if system.nodes > 1 and _nic_fit(system, inter) == 0:
            return 0
        heads = _heads(system, C.NVLS_MAX_ARITY)
        return max(0, min(heads, _count(system.nvlink_bandwidth, intra) - 1))
    return fit


def _collnet_direct_fit(system: NcclSystem) -> Fit:
    budget = max(system.nvlink_bandwidth, system.pcie_bandwidth)
    n = system.gpus_per_node

    def fit(intra: float, inter: float) -> int:
        if _nic_fit(system, inter) == 0:
            return 0
        heads = _heads(system, C.COLLNET_DIRECT_MAX_HEADS)
        if n == 1:
            return heads
        # A head moves intra for its own channel and intra/(n-1) for every other head's.
        fits = [k for k in range(1, heads + 1)
                if intra + (k - 1) * intra / (n - 1) <= budget + _ROUNDING]
        return max(fits, default=0)
    return fit


# --- The search procedure --------------------------------------------------------------------

@dataclass(frozen=True)
class _Found:
    channels: int
    intra: float
    inter: float


def _max_bw(system: NcclSystem) -> float:
    """Per-channel ceiling (ncclTopoSearchInit maxBw): best path to a NIC, or to another GPU."""
    if system.nodes > 1:
        return system.nic_path_bandwidth
    return C.LOC_BW if system.gpus_per_node == 1 else system.peer_bandwidth


def _total_bw(system: NcclSystem) -> float:
    """A GPU's total bandwidth (ncclTopoSearchInit totalBw): its NVLinks, or its PCIe link."""
    if system.nodes == 1 and system.gpus_per_node == 1:
        return C.LOC_BW
    return max(system.nvlink_bandwidth, system.pcie_bandwidth)


def _better(pattern: str, found: _Found, best: _Found | None, minimum: int) -> bool:
    """ncclTopoCompareGraphs: enough channels, then more total bandwidth (NVLS: more heads)."""
    if found.channels < max(1, minimum):
        return False
    if best is None:
        return True
    if pattern == "NVLS":
        return (found.channels > best.channels
                or found.channels * found.inter > best.channels * best.inter)
    return found.channels * found.intra > best.channels * best.intra


def _duplicate(system: NcclSystem, pattern: str, found: _Found, maximum: int) -> _Found:
    """ncclTopoDupChannels: double the channels at half the bandwidth, where NCCL does."""
    if pattern == "NVLS" or found.intra < C.DUP_MIN_BW:
        return found
    if system.arch > 80 and found.intra < C.DUP_MIN_BW_SM90 and found.channels > C.DUP_MAX_CHANNELS:
        return found
    doubled = min(2 * found.channels, maximum)
    share = -(-doubled // found.channels)
    return _Found(doubled, found.intra / share, found.inter / share)


def _search(system: NcclSystem, pattern: str, fit: Fit, minimum: int, maximum: int,
            *, fallback: bool = True) -> Graph | None:
    """ncclTopoCompute's outer procedure over the speed array, with ``fit`` for the inner DFS."""
    with_nics = system.nodes > 1
    speeds = C.search_speeds(system.arch, with_nics)
    last = len(speeds) - 1
    total = _total_bw(system)
    n = system.gpus_per_node
    start_total = total * n / (n - 1) if n > 1 and pattern != "RING" else total
    i = 0
    while i < last and (speeds[i] > _max_bw(system) or speeds[i] * minimum > start_total):
        i += 1

    # Pass 1: from the highest feasible speed down, until the graph is perfect or full.
    best: _Found | None = None
    while True:
        found = _Found(min(fit(speeds[i], speeds[i]), maximum), speeds[i], speeds[i])
        if _better(pattern, found, best, minimum):
            best = found
            if found.channels == maximum:
                break
        if best is not None and best.channels * best.inter >= total:
            break
        if i < last and (best is None
                         or speeds[i + 1] / best.inter > C.SEARCH_SPEED_STEP_RATIO):
            i += 1
            continue
        break
    if best is None:
        if not fallback or pattern in ("NVLS", "COLLNET_DIRECT"):
            return None
        return Graph(pattern, 1, C.FALLBACK_BW, C.FALLBACK_BW, "SYS", "SYS", True,
                     _latency_inter(system))
    same = _same_channels(system, pattern, best)

    # Pass 2: duplicate, then raise speeds at that channel count.
    best = _duplicate(system, pattern, best, maximum)
    if pattern == "NVLS":
        minimum = maximum = best.channels
    else:
        minimum = best.channels
    i = next((k for k, s in enumerate(speeds) if s <= best.inter + _ROUNDING), last)
    intra = inter = speeds[i]
    while i > 0:
        if pattern == "RING":
            i -= 1
            intra = inter = speeds[i]
        elif pattern == "NVLS":
            if not (inter == best.inter and inter < 2 * intra):
                break
            i -= 1
            inter = speeds[i]
        else:  # trees and CollNet: raise the intra-node bandwidth
            if not (intra == best.intra and intra < 2 * inter):
                break
            i -= 1
            intra = speeds[i]
        found = _Found(min(fit(intra, inter), maximum), intra, inter)
        if _better(pattern, found, best, minimum):
            best = found
    return Graph(pattern, best.channels, best.intra, best.inter, _type_intra(system),
                 _type_inter(system), same, _latency_inter(system))


def _same_channels(system: NcclSystem, pattern: str, found: _Found) -> bool:
    """Whether one GPU order (and one NIC) serves every channel: always on one node; across
    nodes only if a single NIC carries all the channels."""
    if pattern in ("NVLS", "COLLNET_DIRECT"):
        return False
    if system.nodes == 1:
        return True
    return found.channels <= _count(system.nic_path_bandwidth, found.inter)


def _type_intra(system: NcclSystem) -> str:
    if system.gpus_per_node == 1:
        return "LOC"
    if system.gpu_link == "pcie":
        return "PHB" if system.pcie_via_cpu else "PIX"
    return "NVL"


def _type_inter(system: NcclSystem) -> str:
    return system.nic_path.upper() if system.nodes > 1 else "PIX"


def _latency_inter(system: NcclSystem) -> float:
    return system.nic_latency_us if system.nodes > 1 else 0.0


def _runtime_channels(system: NcclSystem, ring: Graph, tree: Graph,
                      collnet_chain: Graph | None) -> int:
    """comm.nChannels after ncclTopoPostset: doubled (each channel's copy runs the other tree of
    the double binary tree), x1.5 for CollNet, x2 more on SM90+ clusters with fast rings, x2
    more across nodes of an unpack network (GPUDirect-TCPX) below 16, then
    NCCL_MIN/MAX_NCHANNELS; each step as the machine's NCCL release has it
    (collsim.nccl.versions)."""
    most = max_channels(system.version)  # MAXCHANNELS: 64, 32 before NCCL 2.25.1
    channels = min(most, 2 * min(ring.channels, tree.channels))
    if (collnet_chain is not None and collnet_chain.bw_intra > collnet_chain.bw_inter
            and system.gpus_per_node > 1):
        channels = min(most, channels + channels // 2)
    if (system.nodes > 1 and ring.bw_intra > C.POSTSET_SM90_MIN_RING_BW
            and doubles_sm90_channels(system.version, system.arch, channels)):
        channels = min(most, 2 * channels)
    if (system.net_unpack and system.nodes > 1 and channels < C.POSTSET_UNPACK_MAX_CHANNELS
            and doubles_unpack_channels(system.version)):
        channels = min(most, 2 * channels)
    low = system.min_channels or 0
    high = system.max_channels or most
    channels = min(max(low, high), channels)
    return min(most, max(channels, low))
