"""Which GPU pairs NCCL stages through host memory (its SHM transport) instead of writing
straight into the peer over PCIe (P2P), and what a staged transfer reaches.

NCCL uses P2P between two GPUs only when their PCIe path is no longer than its P2P level
(``NCCL_P2P_LEVEL``; ``ncclTopoCheckP2p`` in NCCL 2.29's ``src/graph/paths.cc``). The default
level is PXB, through PCIe switches but not through a CPU's root complex; on AMD CPUs it is
SYS when the communicator has at most 2 GPUs. A pair further apart takes SHM
(``src/transport/shm.cc``): the sender's SMs write into a pinned host buffer on the
receiver's NUMA node (``NCCL_SHM_LOCALITY`` 2) and the receiver's SMs read it back over PCIe.
In collsim's PCIe tree a GPU pair crosses a root complex exactly when its route takes a
switch's uplink, so SHM is charged on ``pcie_uplink`` links (docs/nccl.md#misses). A GPU's
traffic to a NIC across the root complex takes the same uplinks and is staged through host
memory too: NCCL's GPUDirect RDMA level (``NCCL_NET_GDR_LEVEL``) also defaults to PXB.

What SHM reaches is a share of what P2P reaches on the same links: 0.75, the ratio NCCL's
maintainers give for SHM on one socket against P2P under one switch (9 against 12 GB/s on
PCIe Gen3, NVIDIA/nccl#406) and that 4 RTX 4090s on PCIe Gen4 showed with P2P off (18 GB/s
allreduce busbw against NCCL's 24 GB/s figure, NVIDIA/nccl#1603). A file replaces it with
``nccl.reachable.shm``.
"""

from __future__ import annotations

from collsim.hardware.machine import NcclFigures

SHM_SHARE = 0.75  # SHM over P2P on the same PCIe links (NVIDIA/nccl#406, #1603)
AMD_P2P_MAX_GPUS = 2  # ncclTopoCheckP2p: AMD CPUs allow P2P at SYS for at most 2 GPUs


def p2p_level(figures: NcclFigures, ppn: int) -> str:
    """The farthest PCIe path NCCL takes P2P over for ``ppn`` GPUs of a node: the file's
    ``nccl.p2p_level``, else NCCL's default (SYS on AMD CPUs up to 2 GPUs, else PXB)."""
    if figures.p2p_level is not None:
        return figures.p2p_level
    return "sys" if figures.cpu == "amd" and ppn <= AMD_P2P_MAX_GPUS else "pxb"


def stages_through_host(figures: NcclFigures, ppn: int, intra_class: str) -> bool:
    """True when GPU pairs across a CPU root complex use SHM: GPUs that talk over PCIe
    (``intra_class``) and a P2P level that stops short of the root complex."""
    return intra_class == "pcie" and p2p_level(figures, ppn) == "pxb"


def shm_share(figures: NcclFigures) -> float:
    """What SHM reaches as a share of P2P's reach on the same PCIe links."""
    reached = figures.reached("pcie")
    if figures.shm_reachable is None or not reached:
        return SHM_SHARE
    return figures.shm_reachable / reached
