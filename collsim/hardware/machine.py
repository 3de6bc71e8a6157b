"""What a real machine declares beside its links: its GPU (model and compute capability) and,
in its ``nccl`` section, the figures NCCL pays on it: a per-call launch cost, the CPU vendor,
whether the NVSwitch (NVLS) or the network switches (SHARP) reduce, what NCCL can reach on
each class of link, and overrides of NCCL's per-protocol constants.

Links fall in three classes, by kind: ``nvlink``; ``pcie`` (``pcie``, ``pcie_uplink``,
``inter_socket``); ``network`` (``nic``, ``fabric``, ``torus``). A class's reachable
bandwidth is given against one reference line rate (per GPU per direction for NVLink, the
GPU's PCIe link, a NIC's port), and every link of the class is scaled by the same efficiency,
reachable / line. The files are read by :mod:`collsim.hardware.kinds.declarations`; the cost
models are built by :mod:`collsim.nccl.protocols`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from collsim.hardware.nccl_release import Version

LINK_CLASSES = ("nvlink", "pcie", "network")  # fastest to slowest
CLASS_OF_KIND: Mapping[str, str] = MappingProxyType({
    "nvlink": "nvlink",
    "pcie": "pcie", "pcie_uplink": "pcie", "inter_socket": "pcie",
    "nic": "network", "fabric": "network", "torus": "network",
})


@dataclass(frozen=True)
class Gpu:
    """The ``gpu`` section: a model name and the compute capability x 10 (80 A100, 90 H100)."""

    model: str | None = None
    arch: int | None = None


@dataclass(frozen=True)
class ProtocolOverride:
    """One entry of ``nccl.protocols``: figures that replace NCCL's defaults for a protocol
    (in every algorithm family, or in one). Latencies are seconds per step by link class;
    caps are payload bytes/s; ``efficiency`` (0 < e <= 2) is the share of NCCL's caps the
    protocol reaches and, up to 1, of the links' reach (its flag and polling overhead beyond
    the wire format); None keeps NCCL's figure (1 for ``efficiency``)."""

    latency: Mapping[str, float] = field(default_factory=dict)
    base: float | None = None
    channel_cap: float | None = None
    gpu_cap: float | None = None
    efficiency: float | None = None


@dataclass(frozen=True)
class NcclFigures:
    """The ``nccl`` section, read and checked.

    ``line`` holds the reference line rate (B/s) of each class the machine has, ``reachable``
    what NCCL reaches there (B/s; a class not declared reaches its line rate, the network
    its transport's share of it).
    ``nvls_reachable`` is the NVLink bandwidth (B/s per GPU per direction) NVLS reaches through
    the NVSwitch's reduce and multicast; None: NCCL's ``nvlsEfficiency`` x the NVLink reach.
    ``overrides`` is keyed by (protocol, family), family None for every family.
    ``net_latency`` (seconds) is the latency the network plugin reports to NCCL
    (``ncclNetProperties.latency``), which NCCL adds to its network step latency.
    ``pick_scale``: NCCL's choice is made as for this multiple of a call's size (None: 1).
    ``tree_rating``: NCCL's choice rates its tree's bandwidth at this multiple of the model's
    (None: 1); the simulated tree is unchanged.
    ``transport`` names the NICs' transport (collsim.hardware.transports; None without NICs):
    ``net_latency`` is its figure unless the file declares one, and the network reaches
    ``transport_reach`` of its line rate unless ``reachable`` holds the class. ``declared``
    names those of the two the file sets itself (``net_latency``, ``reachable.network``).
    ``p2p_level``: NCCL_P2P_LEVEL, ``pxb`` or ``sys`` (None: NCCL's default for the CPU);
    ``shm_reachable``: what NCCL reaches between GPUs it stages through host memory (B/s on
    the PCIe reference link; None: ``collsim.nccl.shm.SHM_SHARE`` of the PCIe reach).
    ``p2p_reachable``: what NCCL's point-to-point path (sendrecv, alltoall) reaches of a NIC
    (B/s on the network reference link; None: what the rings reach, ``reached("network")``):
    it sends in smaller messages from a pool of slots shared by its peers (docs/nccl.md#p2p-reach).
    ``environment``: the NCCL variables the machine's network plugin or its vendor's profile
    sets (``nccl.environment``: NCCL_ALGO, NCCL_PROTO as text, NCCL_NVLS_ENABLE,
    NCCL_MIN_NCHANNELS, NCCL_NVLS_CHUNKSIZE, NCCL_NVLSTREE_MAX_CHUNKSIZE, NCCL_BUFFSIZE,
    NCCL_NET_FORCE_FLUSH as integers), which restrict NCCL's choice on it, size its chunks and
    buffers and decide whether it flushes network receives on Hopper and later.
    ``version``: the NCCL release the machine runs (``nccl.version``, as (2, 27, 3)); None: the
    release collsim models (collsim.nccl.versions.MODELLED).
    """

    launch: float
    cpu: str
    nvls: bool = False
    sharp: bool = False
    nic_path: str | None = None
    net_latency: float = 0.0
    line: Mapping[str, float] = field(default_factory=dict)
    reachable: Mapping[str, float] = field(default_factory=dict)
    overrides: Mapping[tuple[str, str | None], ProtocolOverride] = field(default_factory=dict)
    nvls_reachable: float | None = None
    pick_scale: float | None = None
    tree_rating: float | None = None
    transport: str | None = None
    transport_reach: float = 1.0
    declared: frozenset[str] = frozenset()
    p2p_level: str | None = None
    shm_reachable: float | None = None
    p2p_reachable: float | None = None
    environment: Mapping[str, str | int] = field(default_factory=dict)
    version: Version | None = None

    def reached(self, link_class: str) -> float | None:
        """Bytes/s NCCL reaches on the class's reference link; None if the machine has none."""
        if link_class not in self.line:
            return None
        share = self.transport_reach if link_class == "network" else 1.0
        return self.reachable.get(link_class, self.line[link_class] * share)

    def p2p_reached(self) -> float | None:
        """Bytes/s NCCL's point-to-point path reaches on a NIC; None without a network."""
        if "network" not in self.line:
            return None
        return self.p2p_reachable if self.p2p_reachable is not None else self.reached("network")

    def efficiency(self, link_class: str) -> float:
        """Reachable over line rate for ``link_class`` (1 where nothing is declared)."""
        reached = self.reached(link_class)
        return 1.0 if reached is None else reached / self.line[link_class]


@dataclass(frozen=True)
class Machine:
    """A topology's declarations: its GPU, and its NCCL figures if the file has ``nccl``."""

    gpu: Gpu = Gpu()
    nccl: NcclFigures | None = None
