"""How many channels NCCL gives one send or receive between two ranks (its p2p path:
``ncclSend``/``ncclRecv``, nccl-tests' sendrecv_perf), and its p2p chunk.

From NCCL 2.30's source (docs/nccl.md#algorithms-p2p):

- ``src/graph/paths.cc`` ``ncclTopoGetNchannels``: channels per peer, 2 x (the NVLink path's
  bandwidth / one NVLink's) to a GPU of the node over NVLink, 2 over PCIe; to a rank on another
  node max(NICs, ceil(NICs' GB/s / ``NCCL_P2P_PER_CHANNEL_NET_BW`` = 14)), the NICs local to
  the GPU counted until they carry what the GPU's PCIe link does
  (``src/graph/topo.cc`` ``ncclTopoGetLocalNetCountByBw``). ``ncclTopoComputeP2pChannels
  PerPeer`` takes the least over every rank, ``ncclTopoComputeP2pChannels`` rounds it and the
  communicator's p2p channels (its channels, at most ``MAXCHANNELS`` = 64) up to powers of
  two, and across nodes halves the per-peer count while
  per-peer x ceil(ranks / ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH`` = 8) exceeds the p2p channels.
- ``src/enqueue.cc`` ``scheduleP2pTasksToPlan``: the fewest channels of one operation are the
  per-peer count halved while it times the ranks exceeds the p2p channels; ``addP2pToPlan``
  then splits an operation of b bytes into min(fewest, ceil(b / least part)) parts and
  doubles them (up to the per-peer count) while a part exceeds the largest part: parts of
  chunk/2 .. chunk across nodes, chunk/8 .. 32 x chunk on one node.
- ``src/init.cc`` ``computeBuffSizes``: the p2p chunk is 128 KiB across nodes
  (``NCCL_P2P_NET_CHUNKSIZE``; twice that on Arm hosts of SM100 and later), 512 KiB on an
  all-NVLink node (``NCCL_P2P_NVL_CHUNKSIZE``), 128 KiB over PCIe (``NCCL_P2P_PCI_CHUNKSIZE``),
  at most the Simple buffer's NCCL_STEPS-th.

Not modelled: NCCL's choice of LL for operations of at most 16 KiB per channel
(``NCCL_P2P_LL_THRESHOLD``); every operation runs under Simple's costs.
"""

from __future__ import annotations

import math

from collsim.nccl import constants as C
from collsim.nccl.search import search
from collsim.nccl.system import NcclSystem

P2P_PER_CHANNEL_NET_GBPS = 14    # NCCL_P2P_PER_CHANNEL_NET_BW (paths.cc)
MAX_P2P_PER_BATCH = 8            # NCCL_MAX_DEV_WORK_P2P_PER_BATCH (device.h)
NET_CHUNK = 1 << 17              # NCCL_P2P_NET_CHUNKSIZE (init.cc)
NVL_CHUNK = 1 << 19              # NCCL_P2P_NVL_CHUNKSIZE
PCI_CHUNK = 1 << 17              # NCCL_P2P_PCI_CHUNKSIZE


def pow2_up(n: int) -> int:
    """The least power of two >= n (NCCL's pow2Up)."""
    return 1 << max(0, n - 1).bit_length()


def chunk_bytes(system: NcclSystem) -> int:
    """NCCL's p2p chunk (comm->p2pChunkSize) on ``system``."""
    if system.nodes > 1:
        chunk = NET_CHUNK * (2 if system.cpu == "arm" and system.arch >= 100 else 1)
    elif system.gpu_link != "pcie":
        chunk = NVL_CHUNK
    else:
        chunk = PCI_CHUNK
    return min(chunk, C.BUFFER_BYTES[2] // C.NCCL_STEPS)


def _net_channels(system: NcclSystem) -> int:
    """Channels to a rank on another node: at least one per local NIC, enough at 14 GB/s each
    to carry the NICs the GPU uses."""
    per_gpu = max(1, system.nics_per_node // system.gpus_per_node)
    count, total = 0, 0.0
    while count < per_gpu:
        count += 1
        total += system.nic_bandwidth
        if total >= system.pcie_bandwidth:
            break
    return max(count, math.ceil(total / P2P_PER_CHANNEL_NET_GBPS))


def _local_channels(system: NcclSystem) -> int:
    """Channels to another GPU of the node."""
    if system.gpu_link == "pcie":
        return 2
    return 2 * max(1, int(system.peer_bandwidth / system.link_bandwidth))


def p2p_channels(system: NcclSystem) -> tuple[int, int]:
    """(comm->p2pnChannels, comm->p2pnChannelsPerPeer) of the communicator."""
    total = pow2_up(min(search(system).channels, C.MAX_CHANNELS))
    least = C.MAX_CHANNELS
    if system.gpus_per_node > 1:
        least = min(least, _local_channels(system))
    if system.nodes > 1:
        least = min(least, _net_channels(system))
    per_peer = pow2_up(least)
    if system.nodes > 1:
        batches = -(-system.ranks // MAX_P2P_PER_BATCH)
        while per_peer * batches > total and per_peer > 1:
            per_peer //= 2
    else:
        per_peer = min(total, per_peer)
    return total, per_peer


def operation_channels(system: NcclSystem, size: int) -> int:
    """The channels one send (or receive) of ``size`` bytes runs on (addP2pToPlan)."""
    total, most = p2p_channels(system)
    fewest = most
    while fewest * system.ranks > total and fewest > 1:
        fewest //= 2
    if size <= 0:
        return 1
    step = chunk_bytes(system)
    least_part, largest_part = (step // 2, step) if system.nodes > 1 else (step // 8, step * 32)
    channels = min(fewest, -(-size // least_part))
    part = max(least_part, -(-size // channels))
    while part > largest_part and channels <= most // 2:
        channels *= 2
        part = -(-size // channels)
    return channels
