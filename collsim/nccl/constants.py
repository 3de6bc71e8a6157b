"""NCCL's constants that its cost model and topology search use, as tables of facts.

Reference version: NCCL 2.29's model (docs/nccl.md#sources), whose tuning constants are
identical to NCCL 2.31's ``src/tuning/cost_model.cc``. Where another version
differs and the difference is cheap to state, a comment says so. Units as in NCCL: bandwidth in
GB/s (1e9 B/s), latency in microseconds. Every table is indexed by collsim's names
(``names.ALGORITHMS``, ``names.PROTOCOLS``), not by NCCL's integer indices.
"""

from __future__ import annotations

NCCL_VERSION = "2.29"  # the model reproduced here; 2.31 has the same constants

# Protocol order inside every (LL, LL128, Simple) triple below.
LL, LL128, SIMPLE = 0, 1, 2

# --- Latencies (docs/nccl.md#tuning-constants; 2.29-era src/graph/tuning.cc
# ncclTunerConstantsDefaults) -------------------------------------------------------------------

# Per-call base latency per algorithm, (LL, LL128, Simple) in µs.
# 2.18 differs (Tree Simple 0, CollNet 6.8/14/0, NVLS 0/0/23); 2.20-2.25 Tree Simple 8.4 as here.
BASE_LATENCY_US: dict[str, tuple[float, float, float]] = {
    "nccl_tree": (6.8, 14.0, 8.4),
    "ring": (6.6, 14.0, 8.4),
    "collnet_direct": (0.0, 0.0, 0.0),
    "collnet_chain": (0.0, 0.0, 0.0),
    "nvls": (0.0, 0.0, 0.0),
    "nvls_tree": (0.0, 0.0, 0.0),
    "pat": (8.0, 8.0, 8.0),
}

# Per-step hardware latency by link class (NVLINK, PCI, NET), algorithm, (LL, LL128, Simple), µs.
# Only Simple exists for CollNet, NVLS and PAT (zeros elsewhere). Versions: NVLINK NVLS was 23 in
# 2.20 (25 from 2.25); NET NVLSTree Simple was 14 in 2.20-2.27 (20.9 in 2.29-era and 2.31).
HW_LATENCY_US: dict[str, dict[str, tuple[float, float, float]]] = {
    "NVLINK": {
        "nccl_tree": (0.6, 1.25, 4.0),
        "ring": (0.6, 1.9, 3.4),
        "collnet_direct": (0.0, 0.0, 3.7),
        "collnet_chain": (0.0, 0.0, 2.8),
        "nvls": (0.0, 0.0, 25.0),
        "nvls_tree": (0.0, 0.0, 25.0),
        "pat": (0.0, 0.0, 4.0),
    },
    "PCI": {
        "nccl_tree": (1.0, 1.9, 4.0),
        "ring": (1.0, 2.5, 5.7),
        "collnet_direct": (0.0, 0.0, 3.7),
        "collnet_chain": (0.0, 0.0, 2.8),
        "nvls": (0.0, 0.0, 0.0),
        "nvls_tree": (0.0, 0.0, 0.0),
        "pat": (0.0, 0.0, 4.0),
    },
    "NET": {
        "nccl_tree": (5.0, 8.5, 14.0),
        "ring": (2.7, 4.0, 14.0),
        "collnet_direct": (0.0, 0.0, 31.0),
        "collnet_chain": (0.0, 0.0, 30.0),
        "nvls": (0.0, 0.0, 18.0),
        "nvls_tree": (0.0, 0.0, 20.9),
        "pat": (0.0, 0.0, 14.0),
    },
}

# Extra per-step latency of a ring step on a multi-node ring ("net overhead"), µs, by CPU vendor;
# multiplied by 3 for Simple; NCCL_NET_OVERHEAD (ns) overrides (2.29-era getNetOverhead).
NET_OVERHEAD_US: dict[str, float] = {"intel": 1.0, "amd": 2.0, "arm": 1.0}
NET_OVERHEAD_SIMPLE_FACTOR = 3.0

# --- Per-architecture bandwidth caps (docs/nccl.md#tuning-constants; same file and version) ---

# Architecture rows of the cap tables (arch_row): minCompCap >= 100 Blackwell, >= 90 Hopper,
# >= 80 Ampere, else Volta.


def arch_row(arch: int) -> int:
    """Index of the cap tables' row for compute capability ``arch`` (x10, e.g. 90)."""
    if arch >= 100:
        return 3
    if arch >= 90:
        return 2
    if arch >= 80:
        return 1
    return 0


# Columns of every cap table: one node, two nodes, more ("N1 / N2 / N4+"): min(nNodes-1, 2).
def nodes_column(nodes: int) -> int:
    """Index of the cap tables' column for a communicator spanning ``nodes`` nodes."""
    return nodes - 1 if nodes <= 2 else 2


# llMaxBws: total LL bandwidth cap. On one node the row is the architecture's; on several nodes
# it is the CPU's: row 1 for AMD CPUs, row 0 otherwise (Intel, ARM).
LL_MAX_BW: tuple[tuple[float, float, float], ...] = (
    (39.0, 39.0, 20.4),     # Volta on one node / Intel or ARM CPUs across nodes
    (87.7, 22.5, 19.0),     # Ampere on one node / AMD CPUs across nodes
    (141.0, 45.0, 35.0),    # Hopper (2.20: same as Ampere)
    (282.0, 90.0, 70.0),    # Blackwell (from 2.25)
)
LL_MAX_BW_AMD_ROW = 1
LL_MAX_BW_OTHER_CPU_ROW = 0

# Per-channel caps by architecture row, (N1, N2, N4+). NCCL's model multiplies them by its
# graph's channels (ncclTopoTuneModel: graphs[a]->nChannels * perChMax...).
PER_CHANNEL_MAX_RING_LL128_BW: tuple[tuple[float, float, float], ...] = (
    (20.0, 20.0, 20.0),
    (20.0, 20.0, 20.0),
    (36.7, 36.7, 36.7),
    (40.0, 40.0, 40.0),     # 2.25: 73.4 (twice Hopper)
)
# Channels NCCL runs per channel of its graph: ncclTopoPostset runs each graph channel c as
# channels c and c + nChannels ("Duplication should be complete now": comm->nChannels =
# nChannels * 2, src/graph/connect.cc), so a graph channel's figure is two channels' worth.
RUN_CHANNELS_PER_GRAPH_CHANNEL = 2
PER_CHANNEL_MAX_TREE_LL128_BW: tuple[tuple[float, float, float], ...] = (
    (20.0, 20.0, 20.0),
    (20.0, 20.0, 20.0),
    (36.7, 36.7, 29.0),
    (55.6, 31.67, 20.0),    # 2.25: 73.4, 73.4, 58.0
)
PER_CHANNEL_MAX_TREE_BW: tuple[tuple[float, float, float], ...] = (
    (26.5, 18.5, 10.0),
    (24.0, 23.6, 17.8),
    (38.7, 41.4, 36.0),
    (70.0, 42.8, 24.0),     # 2.25: 77.4, 82.8, 72.0
)
# Appears after 2.25.1 (docs/nccl.md#sources). Volta/Ampere rows exist but NVLS needs SM90.
PER_CHANNEL_MAX_NVLS_TREE_BW: tuple[tuple[float, float, float], ...] = (
    (26.5, 18.5, 10.0),
    (24.0, 23.6, 17.8),
    (0.0, 57.7, 45.5),
    (0.0, 96.0, 80.0),
)
# Fraction of the NVLS graph's intra-node bandwidth the model credits (2.29-era nvlsEfficiency).
NVLS_EFFICIENCY: tuple[float, float, float, float] = (0.0, 0.0, 0.85, 0.74)

# --- Refinement factors of the bandwidth formulas (docs/nccl.md#tuning-bandwidths; 2.29-era
# ncclTopoTuneModel) ----------------------------------------------------------------------------

RING_LL_FACTOR = 0.5             # Ring LL: half the bus bandwidth (8 data bytes per 16)
LL128_FACTOR = 0.92              # Ring LL128 (and Tree AllReduce): "120/128" rounded down
TREE_LL_DIVISOR = 3.8            # Tree LL: bus bandwidth / 3.8
TREE_LL128_ONE_NODE = 7.0 / 9.0  # Tree LL128 factor on one node
TREE_LL128_NODES = 120.0 / 128.0  # Tree LL128 factor on several nodes
PLAIN_TREE_FACTOR = 0.85         # Tree when the tree graph's pattern is TREE (not balanced/split)
PAT_FACTOR = 0.75
COLLNET_DIRECT_AG_RS_INTER = 0.9  # CollNetDirect AG/RS: ppn * min(bwIntra, 0.9 bwInter)
COLLNET_DIRECT_SM90_FACTOR = 0.85
TREE_ALGBW_RATIO = 0.5           # bus -> algorithm bandwidth for Tree and CollNet (AllReduce)
COLLNET_DIRECT_ARITY_US = 0.4    # CollNetDirect latency per local rank ("arity serialisation")
PAT_LINEAR_US = 2.8              # PAT latency per rank
PAT_LOG_DIVISOR = 3.5            # PAT latency: log2(nodes) * interLat / 3.5

# Ring AllReduce Simple on several nodes: latency x this once each rank's share of a channel
# reaches 64 B ("plateau effect"), 1.9 below SM80 (docs/nccl.md#tuning-time; 2.29-era
# ncclTopoGetAlgoTime).
RING_PLATEAU_MIN_BYTES = 64
RING_PLATEAU_FACTOR = 1.4
RING_PLATEAU_FACTOR_PRE_SM80 = 1.9

# Tree size correction (AllReduce Tree; NVLSTree on SM100+ with an x86 CPU), indexed by
# k = floor(log2(nBytes >> 6)): index 0 covers 64-127 B, 22 covers 256-511 MiB. Tree uses
# k < 23, NVLSTree k < 24. 2.20/2.25 have the first 23 entries only
# (docs/nccl.md#tuning-time).
TREE_CORRECTION: tuple[tuple[float, ...], ...] = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
     1.0, 1.0, 1.0, 1.0),                                              # LL
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9,
     .9, 1.0, 1.0, 1.0),                                               # LL128
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8,
     .9, .9, .9),                                                      # Simple
)
TREE_CORRECTION_LIMIT = 23
NVLS_TREE_CORRECTION_LIMIT = 24

# --- Threads and channels per call (docs/nccl.md#tuning-channels; src/include/device.h, comm.h;
# 2.25 enqueue.cc) ------------------------------------------------------------------------------

WARP_SIZE = 32
MAX_THREADS = 640                # NCCL_MAX_NTHREADS: CollNet, NVLS, and Tree/PAT always
SIMPLE_MAX_THREADS = 512         # NCCL_SIMPLE_MAX_NTHREADS
LL_MAX_THREADS = 512             # NCCL_LL_MAX_NTHREADS
LL128_MAX_THREADS = 640          # NCCL_LL128_MAX_NTHREADS
# Protocols whose every line carries its flag, so a receiver forwards data as it lands (a
# warp's share of a step at a time) with NCCL_STEPS steps in flight per connection: collsim
# pipelines their broadcast, reduce and tree in ordered units, one per warp
# (algorithms/nccl/channels.py pipeline_units).
LINE_FLAGGED = {"LL": LL_MAX_THREADS // WARP_SIZE, "LL128": LL128_MAX_THREADS // WARP_SIZE}
RING_SIMPLE_SLOW_THREADS = 256   # Ring Simple default when the ring graph's total bw <= PCI_BW
MIN_WARPS = 3                    # a call never runs with fewer than 3 warps

# Bytes per thread below which NCCL removes channels, then threads ("thread thresholds").
THREAD_THRESHOLD: tuple[int, int, int] = (8, 8, 64)  # NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD
COLLNET_THREAD_THRESHOLD = 512   # CollNetDirect/Chain Simple
# Ring LL's threshold is multiplied by the number of ranks.

# A channel of a ring/tree/PAT call gets at least this much traffic (2.25 scheduleCollTasksToPlan).
MIN_TRAFFIC_PER_CHANNEL = 16 * 1024
CELL_ALIGN = 16

MAX_CHANNELS = 64                # MAXCHANNELS
SEARCH_MAX_CHANNELS = MAX_CHANNELS // 2  # ring graph's maximum (init.cc); tree = ring's count
NVLS_MAX_ARITY = 32              # NVLS graph: at most 32 heads
COLLNET_DIRECT_MAX_HEADS = 8     # NCCL_MAX_DIRECT_ARITY + 1
NVLS_CHANNELS_SM90 = 16          # NCCL_NVLS_NCHANNELS default (src/transport/nvls.cc)
NVLS_CHANNELS_SM100 = 32         # SM100 across nodes ...
NVLS_CHANNELS_SM100_NVL = 24     # ... and on one NVLink domain (2.27.3+)
NVLS_MAX_SINGLE_NODE_AG_RS_RANKS = 32
POSTSET_SM90_MIN_RING_BW = 45.0  # SM90+ on several nodes: x2 channels if ring bwIntra > 45 ...
POSTSET_SM90_MAX_CHANNELS = 16   # ... and fewer than 16 channels (connect.cc ncclTopoPostset)
POSTSET_UNPACK_MAX_CHANNELS = 16  # unpack networks, several nodes: x2 below 16 (connect.cc,
                                  # NCCL_UNPACK_DOUBLE_NCHANNELS default 1)

# --- Topology figures as NCCL computes them (docs/nccl.md#topology-figures; src/graph/topo.h,
# topo.cc) -------------------------------------------------------------------------------------

# NCCL's path types from closest to farthest (src/graph/topo.h, 2.25+). LL128 is enabled by
# default only up to NVB inside a node and up to PXB (PXN on SM90+) to the NIC
# (docs/nccl.md#tuning-gating).
PATH_TYPES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS")
LL128_MAX_INTRA = "NVB"
LL128_MAX_INTER = "PXB"
LL128_MAX_INTER_SM90 = "PXN"     # with NCCL_LL128_C2C=1, the default from 2.29-era
LL128_MIN_ARCH = 70

LOC_BW = 5000.0                  # a node to itself
PCI_BW = 12.0                    # "PCI Gen3 x16" reference of the thread heuristic
INTEL_P2P_OVERHEAD = 6.0 / 5.0   # PCIe GPU-GPU traffic through an Intel root complex costs x1.2

# Per-NVLink bandwidth by compute capability (ncclTopoNVLinkBw). SM100 is 40.0 in 2.25.
SM60_NVLINK_BW = 18.0
SM70_NVLINK_BW = 20.0
SM80_NVLINK_BW = 20.0
SM86_NVLINK_BW = 12.0            # exactly SM86 (A40, RTX 30x0 bridges)
SM90_NVLINK_BW = 20.6
SM100_NVLINK_BW = 40.1
# Channels NCCL gives a peer per NVLink of the path to it (ncclTopoGetNchannels,
# src/graph/paths.cc: 2 * (path bandwidth / ncclTopoNVLinkBw)).
P2P_CHANNELS_PER_NVLINK = 2


def nvlink_bandwidth(arch: int) -> float:
    """NCCL's bandwidth of one NVLink for compute capability ``arch`` (x10)."""
    if arch >= 100:
        return SM100_NVLINK_BW
    if arch >= 90:
        return SM90_NVLINK_BW
    if arch == 86:
        return SM86_NVLINK_BW
    if arch >= 80:
        return SM80_NVLINK_BW
    if arch >= 70:
        return SM70_NVLINK_BW
    return SM60_NVLINK_BW if arch >= 60 else SM80_NVLINK_BW


# PCIe: link bandwidth = width * code / 80 GB/s, with this code per transfer rate in GT/s.
PCIE_GEN_CODE: dict[float, int] = {2.5: 15, 5.0: 30, 8.0: 60, 16.0: 120, 32.0: 240, 64.0: 480}
PCIE_FALLBACK_CODE = 60


def pcie_bandwidth(rate_gts: float, width: int = 16) -> float:
    """NCCL's bandwidth of a PCIe link of ``width`` lanes at ``rate_gts`` GT/s: Gen4 x16 = 24."""
    return (width or 16) * PCIE_GEN_CODE.get(rate_gts, PCIE_FALLBACK_CODE) / 80.0


def nic_bandwidth(gbps: float) -> float:
    """NCCL's bandwidth of a NIC of ``gbps`` Gb/s (speed in Mb/s / 8000): 400 -> 50 GB/s."""
    return gbps * 1000.0 / 8000.0


# Search speeds (GB/s per channel), tried from high to low (src/graph/search.cc; 2.29-era copies
# and 2.31). Intra arrays on one node (NICs trimmed), inter arrays with NICs. The SM100 inter
# array's third-party copies disagree on an 86.0 entry after 96.0
# (docs/nccl.md#topology-search); left out here.
SPEEDS_INTRA = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
SPEEDS_INTER = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0,
                3.0, 2.4, 1.2, 0.24, 0.12)
SPEEDS_INTRA_SM90 = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
SPEEDS_INTER_SM90 = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
                     2.4, 1.2, 0.24, 0.12)
SPEEDS_INTRA_SM100 = (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)
SPEEDS_INTER_SM100 = (96.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0,
                      12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)
# The search lowers its speed only while next speed / best bandwidth found exceeds this.
SEARCH_SPEED_STEP_RATIO = 0.49
# Channel duplication (ncclTopoDupChannels) is skipped below this per-channel bandwidth, and on
# architectures above SM80 below DUP_MIN_BW_SM90 when there are more than DUP_MAX_CHANNELS.
DUP_MIN_BW = 25.0
DUP_MIN_BW_SM90 = 50.0
DUP_MAX_CHANNELS = 4
FALLBACK_BW = 0.1                # no graph found: one channel at 0.1 GB/s, path type SYS


def search_speeds(arch: int, with_nics: bool) -> tuple[float, ...]:
    """The speed array NCCL's search walks for this architecture, with or without NICs."""
    if arch >= 100:
        return SPEEDS_INTER_SM100 if with_nics else SPEEDS_INTRA_SM100
    if arch >= 90:
        return SPEEDS_INTER_SM90 if with_nics else SPEEDS_INTRA_SM90
    return SPEEDS_INTER if with_nics else SPEEDS_INTRA


# --- Protocol buffers (docs/nccl.md#algorithms-protocols; src/include/device.h, init.cc;
# stable 2.18-2.31) -----------------------------------------------------------------------------

NCCL_STEPS = 8                   # slots per connection buffer
BUFFER_BYTES: tuple[int, int, int] = (  # per connection, (LL, LL128, Simple)
    8 * 512 * NCCL_STEPS * 16,          # LL: 8 lines/thread x 512 threads x 8 steps x 16 B
    120 * 640 * NCCL_STEPS * 8,         # LL128: 120 u64/thread x 640 threads x 8 steps x 8 B
    4 * 1024 * 1024,                    # Simple: DEFAULT_BUFFSIZE (1 MiB on ARM hosts [unverified])
)
DATA_BYTES_PER_LINE: tuple[tuple[int, int], ...] = ((8, 16), (120, 128), (1, 1))  # data, wire
# Ring Simple chunk = CHUNKSTEPS buffer steps, slice = SLICESTEPS (AllReduce/AllGather/
# ReduceScatter 4/2; Broadcast/Reduce 1/1); other algorithms and protocols use 1/1.
CHUNK_STEPS: dict[str, tuple[int, int]] = {
    "allreduce": (4, 2), "allgather": (4, 2), "reducescatter": (4, 2),
    "broadcast": (1, 1), "reduce": (1, 1),
}
# A Simple slice across the network: the proxy posts and receives sliceSteps steps at a time
# (ALLREDUCE_SLICESTEPS = NCCL_STEPS/4, the same for allgather and reduce-scatter; src/include/
# collectives.h); families whose chunk is one step send no message larger than a step.
SLICE_STEPS = 2
# NCCL_NVLS_CHUNKSIZE's default (NCCL src/transport/nvls.cc): NVLS moves a channel's piece in
# chunks of this size.
NVLS_CHUNK_BYTES = 128 * 1024
# How NCCL shrinks the NVLS chunk for smaller calls (enqueue.cc, ncclCalcCollChunking, 2.2x):
# with ops = channels x NVLS heads, a call of fewer than factor x ops x chunk bytes takes the
# smaller chunk, each rule applied to the chunk the previous one left, in order.
NVLS_CHUNK_RULES: tuple[tuple[int, int], ...] = ((64, 64 * 1024), (8, 32 * 1024), (2, 16 * 1024))
# NVLSTree's rules start from NCCL_NVLS_CHUNKSIZE (the first two only act on a larger one
# than the default, as a plugin may set: collsim.nccl.environment).
NVLS_TREE_CHUNK_RULES: tuple[tuple[int, int], ...] = (
    (32, 256 * 1024), (16, 128 * 1024), (4, 64 * 1024), (1, 32 * 1024))
# From 4 nodes on NVLSTree's chunk is at most 64 KiB, unless NCCL_NVLSTREE_MAX_CHUNKSIZE is set.
NVLS_TREE_MAX_CHUNK = (4, 64 * 1024)
