"""From a collsim machine to what NCCL sees of it: the :class:`NcclSystem` of a call's
communicator, built from the topology's links and its ``gpu`` / ``nccl`` declarations.

NCCL's topology holds only the GPUs of the communicator, so a call on 4 of a node's 8 GPUs is a
4-GPU node to NCCL, and only the NICs those GPUs use count. Figures are NCCL's own
(docs/nccl.md#topology-figures): NVLink as NCCL's per-link constant for the architecture times
the GPU's NVLinks (declared ``nvlink.links``, or the per-GPU line rate over the architecture's
per-link rate: 450 GB/s / 25 GB/s = 18 on H100), PCIe as the machine's reachable PCIe figure
(which presets declare as NCCL computes it, width x rate / 80), a NIC as its line rate (NCCL's
speed / 8000).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from collsim.errors import InputError
from collsim.hardware.cluster import ClusterTopology
from collsim.hardware.topology import Topology
from collsim.hardware.transports import is_unpack_device
from collsim.nccl.system import NcclSystem
from collsim.nccl.versions import MODELLED

GB = 1e9
# One NVLink's line rate per direction by architecture (docs/hardware.md#nvlink: A100 12 x 25 =
# 300 GB/s, H100/H200 18 x 25 = 450 GB/s, B200/GB200 18 x 50 = 900 GB/s per GPU per direction).
NVLINK_LINE_RATE = {80: 25e9, 90: 25e9, 100: 50e9}
_GPU_LINK = {"nvswitch": "nvswitch", "nvlink": "nvlink", "pcie": "pcie"}


def nccl_system(topology: Topology, gpus: Sequence[int] | None = None,
                **settings: Any) -> NcclSystem:
    """The NcclSystem of a call on ``gpus`` (default: every GPU) of ``topology``; ``settings``
    are NcclSystem's NCCL environment fields (``collnet_enable``, ``max_channels``, ...), over
    what the machine's ``nccl.environment`` sets."""
    machine = topology.machine
    figures = machine.nccl if machine is not None else None
    if figures is None or not isinstance(topology, ClusterTopology):
        raise InputError(f"topology '{topology.name}' declares no NCCL figures (no 'nccl' "
                         "section), so NCCL's model has nothing to work from", key="topology")
    used = sorted(set(range(topology.gpus) if gpus is None else gpus))
    if not used:
        raise InputError("a call needs at least one GPU", key="ranks")
    node = topology.node
    spec = node.spec
    per_node = Counter(topology.node_of[g] for g in used)
    environment = figures.environment  # what the plugin or the vendor's profile sets
    local = [g % topology.gpus_per_node for g in used
             if topology.node_of[g] == topology.node_of[used[0]]]
    system: dict[str, Any] = {
        "arch": machine.gpu.arch,
        "nodes": len(per_node),
        "gpus_per_node": max(per_node.values()),
        "gpu_link": _GPU_LINK[spec.kind],
        "cpu": figures.cpu,
        "nvls": figures.nvls and environment.get("NCCL_NVLS_ENABLE", 1) != 0,
        "sharp": figures.sharp,
        "pick_scale": figures.pick_scale or 1.0,
        "tree_rating": figures.tree_rating or 1.0,
        "min_channels": environment.get("NCCL_MIN_NCHANNELS"),
        "algorithms_enabled": environment.get("NCCL_ALGO"),
        "protocols_enabled": environment.get("NCCL_PROTO"),
        "version": figures.version or MODELLED,
    }
    if spec.kind == "nvswitch":
        system["nvlink_links"] = nvlinks_per_gpu(topology)
    elif spec.kind == "nvlink":
        system["nvlink_links"] = _links_per_pair(topology)
    pcie = figures.reached("pcie")
    if pcie is not None:
        system["pcie_bandwidth"] = pcie / GB
    if spec.pcie is not None and spec.kind == "pcie":
        system["pcie_via_cpu"] = len({_switch(topology, g) for g in local}) > 1
    if spec.nics is not None:
        system["nics_per_node"] = len({node.nic_of_gpu[g] for g in local})
        system["nic_bandwidth"] = spec.nics.link.bandwidth / GB
        system["nic_path"] = figures.nic_path or _nic_path(topology, local[0])
        system["gpus_per_nic_switch"] = _gpus_per_nic_switch(topology, local)
        system["nic_latency_us"] = figures.net_latency / 1e-6
        system["net_unpack"] = is_unpack_device(figures.transport)
    return NcclSystem(**{**system, **settings})


def nvlinks_per_gpu(topology: ClusterTopology) -> int:
    """NVLinks from each GPU to the NVSwitches: ``nvlink.links`` if declared, else the per-GPU
    line rate over the architecture's per-link rate."""
    wiring = topology.node.spec.wiring
    if wiring.nvlinks is not None:
        return wiring.nvlinks
    arch = topology.machine.gpu.arch
    rate = NVLINK_LINE_RATE.get(arch)
    links = wiring.link.bandwidth / rate if rate else 0.0
    if rate is None or links < 1 or abs(links - round(links)) > 1e-6 * links:
        known = ", ".join(f"{a} ({r / GB:g} GB/s)" for a, r in NVLINK_LINE_RATE.items())
        raise InputError(
            f"topology '{topology.name}': cannot tell how many NVLinks make "
            f"{wiring.link.bandwidth / GB:g} GB/s per GPU on arch {arch} (per-link rates are "
            f"known for {known}); declare nvlink.links", key="nvlink.links")
    return round(links)


def _links_per_pair(topology: ClusterTopology) -> int:
    """NVLinks between every pair of GPUs of an NVLink mesh (NCCL's ``nvlink`` node)."""
    spec = topology.node.spec
    counts = {(a, b): links for a, b, links in spec.wiring.pairs}
    n = spec.gpus
    if len(counts) != n * (n - 1) // 2 or len(set(counts.values())) > 1:
        raise InputError(f"topology '{topology.name}': NCCL's model here takes NVLink nodes "
                         "whose GPUs are all wired pairwise with the same number of NVLinks "
                         "(wiring: mesh)", key="wiring")
    return next(iter(counts.values()), 1)


def _switch(topology: ClusterTopology, local: int) -> int:
    """The PCIe switch a local GPU sits under (hardware.nodes spreads GPUs evenly)."""
    return local * topology.node.spec.pcie.switches // topology.gpus_per_node


def _nic_switch(topology: ClusterTopology, nic: int) -> int:
    spec = topology.node.spec
    return nic * spec.pcie.switches // spec.nics.count


def _nic_path(topology: ClusterTopology, local: int) -> str:
    """NCCL's path type from a GPU to its NIC: one switch (pix), through the CPU (phb), or
    across sockets (sys)."""
    spec = topology.node.spec
    nic = topology.node.nic_of_gpu[local]
    gpu_switch, nic_switch = _switch(topology, local), _nic_switch(topology, nic)
    if gpu_switch == nic_switch and spec.nics.gpudirect:
        return "pix"
    sockets = spec.pcie.sockets
    same = gpu_switch * sockets // spec.pcie.switches == nic_switch * sockets // spec.pcie.switches
    return "phb" if same else "sys"


def _gpus_per_nic_switch(topology: ClusterTopology, local: list[int]) -> int:
    """GPUs of the call under the PCIe switch of each NIC they use (the fewest)."""
    node = topology.node
    counts = [sum(1 for g in local if _switch(topology, g) == _nic_switch(topology, nic))
              for nic in {node.nic_of_gpu[g] for g in local}]
    return max(1, min(counts))
