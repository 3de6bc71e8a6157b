"""NcclSystem: the facts about a machine (and NCCL's environment) that NCCL's topology search
and cost model need, in the figures NCCL itself computes (docs/nccl.md#topology-figures).

One NcclSystem describes one communicator: ``nodes`` identical nodes of ``gpus_per_node`` ranks.
A multi-node NVLink domain (GB200 NVL72) is one node, as NCCL counts it. The adapter from a collsim
Topology fills these fields from the topology's node kinds (an NVSwitch node -> ``nvswitch``, GPUs
with NVLinks to each other -> ``nvlink``, PCIe only -> ``pcie``), its NICs and its node count.
"""

from __future__ import annotations

from dataclasses import dataclass

from collsim.errors import InputError
from collsim.hardware.nccl_names import CPUS, NIC_PATHS
from collsim.nccl import constants as C
from collsim.nccl.versions import MODELLED, Version, has_pat

GPU_LINKS = ("nvswitch", "nvlink", "pcie")


@dataclass(frozen=True)
class NcclSystem:
    """What NCCL sees of a machine, and the NCCL settings that change its choices.

    Bandwidths are GB/s (1e9 B/s) as NCCL computes them, not line rates: an NVLink's figure is
    NCCL's per-link constant for the architecture, a PCIe link is width x rate code / 80
    (Gen4 x16 = 24, Gen5 x16 = 48) and a NIC is its speed in Mb/s / 8000 (400 Gb/s = 50).
    """

    arch: int
    """Compute capability x 10 of every GPU: 70 V100, 80 A100, 86 A40, 89 L40S, 90 H100/H200,
    100 B200/GB200."""
    nodes: int = 1
    """Nodes of the communicator (hosts; an NVLink domain spanning hosts counts as one)."""
    gpus_per_node: int = 8
    """Ranks (GPUs) of the communicator on each node (NCCL's ppn)."""
    gpu_link: str = "nvswitch"
    """How a node's GPUs reach each other: ``nvswitch`` (every GPU's NVLinks go to NVSwitches,
    which NCCL merges into one switch), ``nvlink`` (NVLinks straight between every pair of GPUs)
    or ``pcie`` (no NVLink)."""
    nvlink_links: int = 0
    """NVLinks per GPU: to the NVSwitches for ``nvswitch``, to each other GPU for ``nvlink``."""
    nvlink_link_bandwidth: float | None = None
    """GB/s of one NVLink as NCCL counts it; None: NCCL's figure for ``arch`` (20.6 on SM90)."""
    pcie_bandwidth: float = 24.0
    """GB/s of each GPU's PCIe link (also taken for each NIC's PCIe link); 24 = Gen4 x16."""
    pcie_via_cpu: bool = False
    """GPU-to-GPU PCIe traffic crosses a CPU root complex (path PHB) instead of a PCIe switch;
    on Intel CPUs NCCL then charges it 6/5 (only matters for ``pcie`` nodes)."""
    nics_per_node: int = 0
    """NICs per node the communicator may use (ignored on one node: NCCL trims NICs there)."""
    nic_bandwidth: float = 0.0
    """GB/s of each NIC as NCCL computes it (speed/8000: 200 Gb/s = 25, 400 Gb/s = 50)."""
    nic_path: str = "pix"
    """NCCL's path type from a GPU to its nearest NIC: ``pix`` (one PCIe switch), ``pxb``
    (several switches), ``phb`` (through the CPU), ``sys`` (across sockets). Decides LL128."""
    gpus_per_nic_switch: int = 1
    """GPUs under each NIC's PCIe switch (DGX A100: 2, DGX H100: 1). With two or more, NCCL's
    balanced tree can split a NIC's traffic over two GPUs; with one, SM90+ falls back to the
    plain tree pattern, which the model charges x0.85."""
    cpu: str = "intel"
    """CPU vendor: ``intel``, ``amd`` or ``arm`` (LL bandwidth row across nodes, net overhead)."""
    nvls: bool = False
    """The NVSwitches can reduce and multicast (NVLink SHARP, CUDA multicast): H100/H200/B200
    NVSwitch systems. NCCL still needs SM90+, an NVSwitch and more than 2 GPUs per node."""
    sharp: bool = False
    """A CollNet network plugin with in-network reduction (SHARP) is present."""
    collnet_enable: bool = False
    """NCCL_COLLNET_ENABLE=1: CollNet algorithms (and multi-node NVLS) may be used."""
    collnet_chain: bool = True
    """The CollNet plugin supports CollNetChain."""
    collnet_allgather: bool = False
    """The CollNet plugin implements iallgather (multi-node NVLS/CollNetDirect allgather)."""
    collnet_reducescatter: bool = False
    """The CollNet plugin implements ireducescatter."""
    pat_enable: bool | None = None
    """NCCL_PAT_ENABLE: None = auto (one rank per node only), True forces, False disables."""
    nvls_channels: int | None = None
    """NCCL_NVLS_NCHANNELS; None: NCCL's default, 16 on SM90 and 32 on SM100."""
    min_channels: int | None = None
    """NCCL_MIN_NCHANNELS; None: unset."""
    max_channels: int | None = None
    """NCCL_MAX_NCHANNELS; None: unset."""
    algorithms_enabled: str | None = None
    """NCCL_ALGO as the machine's plugin or vendor profile sets it, in NCCL's syntax
    (``Ring,Tree``); None: unset, every algorithm NCCL's gating allows."""
    protocols_enabled: str | None = None
    """NCCL_PROTO likewise (``Simple,LL128``); None: unset."""
    net_overhead_us: float | None = None
    """NCCL_NET_OVERHEAD in µs (NCCL takes ns); None: 1 µs, 2 µs on AMD CPUs."""
    nic_latency_us: float = 0.0
    """The NICs' ``latency`` attribute of NCCL's topology (graph latencyInter), normally 0."""
    net_unpack: bool = False
    """The network plugin is an unpack device (``NCCL_NET_DEVICE_UNPACK``: GPUDirect-TCPX), for
    which NCCL doubles the channels across nodes (``src/graph/connect.cc``)."""
    pick_scale: float = 1.0
    """NCCL's choice of algorithm and protocol is made as for this multiple of the size: where a
    machine's NCCL (its version, its tuning) switches at other sizes than the model says, as a
    calibration measures it (``nccl.pick_scale``). 1: as the model says."""
    tree_rating: float = 1.0
    """NCCL's choice rates its tree's (``nccl_tree``) bandwidth at this multiple of the model's:
    where a machine's NCCL (its version's tree search and tuning) takes the tree at sizes the
    model gives the ring, as a calibration measures it (``nccl.tree_rating``). 1: the model's."""
    version: Version = MODELLED
    """The NCCL release the machine runs (``nccl.version``): the behaviours collsim follows by
    release (collsim.nccl.versions) take it; the rest is the modelled release's."""

    def __post_init__(self) -> None:
        problems = [
            ("arch", self.arch >= 60, "a compute capability x 10 of at least 60 (e.g. 80, 90)"),
            ("nodes", self.nodes >= 1, "at least 1"),
            ("gpus_per_node", self.gpus_per_node >= 1, "at least 1"),
            ("gpu_link", self.gpu_link in GPU_LINKS, f"one of {', '.join(GPU_LINKS)}"),
            ("nvlink_links", self.gpu_link == "pcie" or self.nvlink_links >= 1,
             "at least 1 NVLink per GPU when gpu_link is nvswitch or nvlink"),
            ("nvlink_link_bandwidth",
             self.nvlink_link_bandwidth is None or self.nvlink_link_bandwidth > 0, "positive"),
            ("pcie_bandwidth", self.pcie_bandwidth > 0, "positive"),
            ("nics_per_node", self.nics_per_node >= (1 if self.nodes > 1 else 0),
             "at least 1 NIC per node when there are several nodes"),
            ("nic_bandwidth", self.nodes == 1 or self.nic_bandwidth > 0,
             "positive when there are several nodes"),
            ("nic_path", self.nic_path in NIC_PATHS, f"one of {', '.join(NIC_PATHS)}"),
            ("gpus_per_nic_switch", self.gpus_per_nic_switch >= 1, "at least 1"),
            ("cpu", self.cpu in CPUS, f"one of {', '.join(CPUS)}"),
            ("nvls_channels", self.nvls_channels is None or self.nvls_channels >= 1,
             "at least 1"),
            ("min_channels", self.min_channels is None or self.min_channels >= 1, "at least 1"),
            ("pick_scale", self.pick_scale > 0, "positive"),
            ("tree_rating", self.tree_rating > 0, "positive"),
            ("max_channels", self.max_channels is None or self.max_channels >= 1, "at least 1"),
            ("net_overhead_us", self.net_overhead_us is None or self.net_overhead_us >= 0,
             "not negative"),
            ("nic_latency_us", self.nic_latency_us >= 0, "not negative"),
        ]
        for key, ok, expected in problems:
            if not ok:
                raise InputError(f"NCCL system: {key} = {getattr(self, key)!r}, expected "
                                 f"{expected}", key=key)

    @property
    def ranks(self) -> int:
        """Ranks of the communicator."""
        return self.nodes * self.gpus_per_node

    @property
    def link_bandwidth(self) -> float:
        """GB/s of one NVLink as NCCL counts it."""
        if self.nvlink_link_bandwidth is not None:
            return self.nvlink_link_bandwidth
        return C.nvlink_bandwidth(self.arch)

    @property
    def nvlink_bandwidth(self) -> float:
        """Total NVLink GB/s of one GPU (NCCL's sum over its NVLinks); 0 without NVLink."""
        if self.gpu_link == "nvswitch":
            return self.nvlink_links * self.link_bandwidth
        if self.gpu_link == "nvlink":
            return self.nvlink_links * self.link_bandwidth * (self.gpus_per_node - 1)
        return 0.0

    @property
    def peer_bandwidth(self) -> float:
        """GB/s of NCCL's best path from one GPU to another of its node."""
        if self.gpu_link == "nvswitch":
            return self.nvlink_bandwidth
        if self.gpu_link == "nvlink":
            return self.nvlink_links * self.link_bandwidth
        return self.pcie_bandwidth

    @property
    def nic_path_bandwidth(self) -> float:
        """GB/s of the path from a GPU to its NIC: its PCIe link, the NIC's PCIe link, the NIC."""
        return min(self.pcie_bandwidth, self.nic_bandwidth)

    @property
    def nvls_capable(self) -> bool:
        """NCCL builds an NVLS graph: NVLS support, SM90+, an NVSwitch, more than 2 GPUs."""
        return (self.nvls and self.arch >= 90 and self.gpu_link == "nvswitch"
                and self.gpus_per_node > 2)

    @property
    def collnet_on(self) -> bool:
        """CollNet usable: a SHARP plugin, NCCL_COLLNET_ENABLE, and several nodes [the last is
        an assumption: in-network reduction across one node has nothing to reduce]."""
        return self.sharp and self.collnet_enable and self.nodes > 1

    @property
    def pat_on(self) -> bool:
        """NCCL's ncclPatEnable: SM60+, and (auto) one rank per node; no PAT before NCCL
        2.23.4."""
        if self.arch < 60 or not has_pat(self.version):
            return False
        if self.pat_enable is not None:
            return self.pat_enable
        return self.gpus_per_node == 1
