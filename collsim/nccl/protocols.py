"""The per-message cost model of an NCCL protocol (LL, LL128, Simple) for one algorithm family on
one machine: what the engine charges a call and its messages (the ``CostModel`` seam of
:mod:`collsim.engine.costs`), built from the machine's ``nccl`` declarations and NCCL's constants
(:mod:`collsim.nccl.constants`, docs/nccl.md#tuning-constants).

What goes in (physical, or NCCL's measured engine limits):

- ``launch`` = the machine's per-call ``launch`` + NCCL's ``baseLat[family][protocol]`` + what
  the family pays once per call (``per_call``): NVLS's NVLink figure, and the tree families'
  (``nccl_tree``, ``nvls_tree``, ``collnet_chain``) whole hop latency as NCCL's model charges
  it for the call's nodes and GPUs per node (:func:`collsim.nccl.tuning.tree_hops_us`): NCCL
  pipelines their chunks through 8 slots, so a hop's latency is paid once, for the fill.
- ``latency(links)`` = NCCL's ``hwLat[class][family][protocol]``, where ``class`` is the slowest
  class the route crosses (network > pcie > nvlink). It **replaces** the links' own latencies:
  NCCL's per-step figures were measured end to end (flag or FIFO signalling, the proxy for the
  network, and the wires), so adding the wires' latency would count them twice. On the
  network NCCL adds the latency the net plugin reports (``nccl.net_latency``), and so does the
  cost model; a file's ``protocols`` latency replaces the sum. A Simple receive that NCCL
  flushes (:func:`flushes`) pays the plugin's latency once more, as NCCL's model charges it
  ("the flush extra latency", ``src/graph/tuning.cc``), on NCCL's figure or the file's.
  In-switch families: NCCL charges one latency for a round trip through a reducing switch
  (NVLS: ``hwLat[NVLINK][nvls]`` once per call; CollNet: the network figure once per call).
  NVLS programs pipeline up to 64 chunks through the NVSwitch, so the NVLink figure is charged
  once per call (``per_call``, part of ``launch``) and each NVLink message pays only its links'
  own latency; a message on the network (``nvls`` across nodes, ``collnet_direct``) pays half
  NCCL's figure, one message up and one down. Every message of a tree family pays its links'
  own latency, on every class: its per-call term covers all its hops.
- ``send_buffer``: the payload bytes of one connection's ``NCCL_STEPS`` slots (256 KiB LL,
  4.4 MiB LL128, 4 MiB Simple; ``constants.BUFFER_BYTES``): a sender writes into them before
  its receiver reaches the message, so a send that fits starts when posted and completes
  when its bytes have left (:mod:`collsim.engine.costs`).
- ``slice_bytes``, ``write_seconds``, ``read_seconds``: a message across the network waits
  for the GPU's write of its first slice into the connection's buffer and (Simple) its read of
  the last one, at NCCL's per-channel figure (:func:`slice_staging`,
  :mod:`collsim.engine.staging`, docs/nccl.md#algorithms-staging).
- ``slot_credit``: on a machine whose transport makes the receiver clear each slot for its
  sender (``clear_to_send``, :mod:`collsim.hardware.transports`), a connection across the
  network holds at most ``NCCL_STEPS`` messages, and a slot its receiver has taken is free
  for the sender this many seconds later: NCCL's network step latency (the same figure a
  message across the network pays, before halving for a reducing switch), the clear-to-send
  crossing back (:func:`slot_credit`, docs/nccl.md#algorithms-buffers). None elsewhere.
- ``slots``, ``slices``: the messages such a connection holds (``NCCL_STEPS``) and the slices
  a message is cut into (1); a Simple ring chunk of allreduce, allgather or reducescatter
  takes 4 slots whatever its bytes and is 2 slices of half its bytes
  (:func:`with_ring_chunk_slots`, set by :mod:`collsim.calls.plan`; docs/nccl.md#chunk-slots).
- ``wire_ratio``: LL sends 8 data bytes per 16-byte line (2.0), LL128 120 per 128 (128/120),
  Simple 1.0.
- ``bandwidth(link)`` = the link's line rate x the class's efficiency (the machine's reachable /
  line rate); under NVLS on NVLink the machine's ``reachable.nvls``, by default NCCL's
  ``nvlsEfficiency`` x the NVLink reach (0.85 Hopper, 0.74 Blackwell: the NVSwitch's reduce
  and multicast do not reach the NVLink rate), and for NVLSTree across nodes x
  :func:`nvls_tree_share`, as NCCL's model prices its in-node part; on a PCIe switch's
  uplink, where NCCL stages GPU pairs through host memory (:mod:`collsim.nccl.shm`), x SHM's
  share; x the protocol's declared ``efficiency`` (at most 1 on the links).
- ``channel_cap`` of an alltoall on one node over NVLink (:func:`p2p_nvlink_cap`): half
  NCCL's figure for one NVLink, the rate by which NCCL gives a peer its channels.
- ``net_channel_cap`` (point-to-point sends only, :func:`p2p_network_cap`): the payload B/s
  one channel moves on a route across the network, NCCL's ``NCCL_P2P_PER_CHANNEL_NET_BW``.
- ``channel_cap`` (payload B/s one channel moves, per GPU) and ``gpu_cap`` (payload B/s a GPU
  moves over all channels): NCCL's per-architecture limits of one SM running a protocol
  (``perChMaxRingLL128Bw``, ``perChMaxTreeLL128Bw``, ``perChMaxTreeBw``, ``perChMaxNVLSTreeBw``)
  and LL's total (``llMaxBw``; across nodes the CPU's row), from NCCL's table column for the call's
  node count (1, 2, more); x the protocol's declared ``efficiency`` (above 1 on one node only).

What stays out (NCCL's model fudge, kept in :mod:`collsim.nccl.tuning` only, where NCCL uses it
to choose): LL128's 0.92 (the wire ratio is 0.9375), Tree LL's /3.8 and LL128's 7/9 on one node,
the plain tree's x0.85, PAT's x0.75, CollNet's head ratios, NVLS's (nch - 1)/nch, the tree
correction by size, the ring plateau x1.4, and the multi-node ring's ``netOverhead`` floor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from collsim.engine.costs import IDEAL, CostModel
from collsim.errors import InputError
from collsim.hardware.machine import CLASS_OF_KIND, LINK_CLASSES, NcclFigures
from collsim.hardware.nccl_names import PROTOCOLS, algorithm_name, protocol_name
from collsim.hardware.topology import Link, Topology
from collsim.hardware.transports import TRANSPORTS, is_unpack_device
from collsim.nccl import constants as C
from collsim.nccl.p2p import P2P_PER_CHANNEL_NET_GBPS
from collsim.nccl.shm import shm_share, stages_through_host
from collsim.nccl.tuning import SIMPLE_ONLY, TREE_FAMILIES, tree_hops_us

GB = 1e9
US = 1e-6
HW_ROW = {"nvlink": "NVLINK", "pcie": "PCI", "network": "NET"}  # NCCL's hwLat rows
TREE_THREAD_GROUPS = 2  # runTreeSplit's reduce-up and broadcast-down groups of a tree channel
WIRE_RATIO = {"LL": 16 / 8, "LL128": 128 / 120, "Simple": 1.0}
# Classes on which a family's messages reach a reducing switch: each pays half NCCL's figure.
# (collnet_chain's network figure is in its per-call tree term.)
ROUND_TRIP = {"nvls": ("network",), "collnet_direct": ("network",)}
# Classes whose NCCL figure a family pays once per call; its messages there pay the links' own.
PER_CALL = {"nvls": ("nvlink",)}
_RANK = {kind: LINK_CLASSES.index(c) for kind, c in CLASS_OF_KIND.items()}


@dataclass(frozen=True)
class ProtocolCosts:
    """The cost model of one (family, protocol) on a machine (see the module docstring).
    Times in seconds, bandwidths in bytes/s."""

    family: str
    protocol: str
    machine_launch: float
    base: float
    step_latency: tuple[float, float, float]   # by class: nvlink, pcie, network
    efficiency: Mapping[str, float]             # by link kind
    wire_ratio: float
    channel_cap: float | None = None
    gpu_cap: float | None = None
    nodes: int = 1
    per_call: float = 0.0                        # NCCL figures charged once per call
    own_latency: tuple[str, ...] = ()           # classes whose messages pay the links' own
    send_buffer: float = 0.0    # payload bytes of a connection's slots (NCCL's buffer size)
    slice_bytes: float = 0.0    # payload bytes the proxy forwards whole, per channel
    write_seconds: float = 0.0  # seconds per byte of a channel's write of a network slice
    read_seconds: float = 0.0   # seconds per byte of a channel's read of a network slice
    net_channel_cap: float | None = None  # payload B/s of one channel across the network
    slot_credit: float | None = None  # seconds a taken slot across the network takes to free
    slots: int = C.NCCL_STEPS           # messages a connection across the network holds
    group_cap: float | None = None  # payload B/s a channel's thread group moves (tree_group_cap)
    slices: int = 1                     # slices a message is cut into (NCCL's SlicePerChunk)

    @property
    def launch(self) -> float:
        """Seconds before any rank starts: the machine's launch, NCCL's base latency and
        the figures the family pays once per call."""
        return self.machine_launch + self.base + self.per_call

    def latency(self, links: Sequence[Link]) -> float:
        """NCCL's per-step latency of the slowest class the route crosses (the links' own
        latencies on a class whose figure is charged per call)."""
        worst = 0
        for link in links:
            rank = _RANK.get(link.kind, 0)
            if rank > worst:
                worst = rank
        if self.own_latency and LINK_CLASSES[worst] in self.own_latency:
            return sum(link.latency for link in links)
        return self.step_latency[worst]

    def bandwidth(self, link: Link) -> float:
        """The link's line rate scaled to what NCCL reaches on its class."""
        return link.bandwidth * self.efficiency.get(link.kind, 1.0)

    def after_launch(self) -> tuple:
        """Every figure a call's time after its launch depends on, as a hashable key: all
        but the launch terms (paid before any rank starts, so they only shift the finish)
        and the step latencies of classes whose messages pay the links' own instead."""
        steps = tuple(None if c in self.own_latency else s
                      for c, s in zip(LINK_CLASSES, self.step_latency, strict=True))
        return (self.family, self.protocol, steps, tuple(sorted(self.efficiency.items())),
                self.wire_ratio, self.channel_cap, self.gpu_cap, self.nodes, self.own_latency,
                self.send_buffer, self.slice_bytes, self.write_seconds, self.read_seconds,
                self.net_channel_cap, self.group_cap, self.slots, self.slices)


def nccl_figures(topology: Topology) -> NcclFigures | None:
    """The topology's ``nccl`` declarations, or None (canonical kinds, files without them)."""
    machine = topology.machine
    return None if machine is None else machine.nccl


def cost_model(topology: Topology, family: str, protocol: str,
               gpus: Sequence[int] | None = None) -> CostModel:
    """The cost model of NCCL's ``protocol`` for algorithm ``family`` (collsim's or NCCL's
    spelling: ``ring``, ``nccl_tree``/``Tree``, ``nvls``, ...) on ``topology``, for a call on
    ``gpus`` (default: every GPU; the node count picks NCCL's cap column). A machine that
    declares no NCCL figures gets the ideal model."""
    figures = nccl_figures(topology)
    if figures is None:
        return IDEAL
    family = algorithm_name(family, key="family")
    protocol = protocol_name(protocol)
    if family in SIMPLE_ONLY and protocol != "Simple":
        raise InputError(f"NCCL runs {family} with the Simple protocol only, not {protocol}",
                         key="protocol")
    arch = topology.machine.gpu.arch
    used = range(topology.gpus) if gpus is None else gpus
    nodes = len({topology.node_of[g] for g in used}) or 1
    nvlink = any(CLASS_OF_KIND.get(link.kind) == "nvlink" for link in topology.links)
    return protocol_costs(figures, arch, nodes, family, protocol, max(1, len(used) // nodes),
                          "nvlink" if nvlink else "pcie")


def flushes(figures: NcclFigures, arch: int) -> bool:
    """NCCL flushes a Simple receive from the network before the GPU reads it: always before
    Hopper (SM90), from Hopper on only when ``NCCL_NET_FORCE_FLUSH=1`` (``ncclTopoNeedFlush``
    in NCCL src/graph/paths.cc), NCCL's default up to 2.18 (tag v2.18.5-1: 1; v2.19.1-1: 0).
    Host-staged sockets, which NCCL does not flush, report no latency, so the answer costs
    them nothing."""
    return arch < 90 or figures.environment.get("NCCL_NET_FORCE_FLUSH") == 1


def protocol_costs(figures: NcclFigures, arch: int, nodes: int, family: str,
                   protocol: str, ppn: int = 1, intra_class: str = "nvlink") -> ProtocolCosts:
    """:func:`cost_model` from the declarations themselves (``family`` and ``protocol`` in
    collsim's spelling; ``ppn`` GPUs per node, ``intra_class`` the class inside a node)."""
    p = PROTOCOLS.index(protocol)
    family_override = figures.overrides.get((protocol, family))
    protocol_override = figures.overrides.get((protocol, None))

    def overridden(name: str, default: float | None) -> float | None:
        for override in (family_override, protocol_override):
            value = getattr(override, name, None) if override is not None else None
            if value is not None:
                return value
        return default

    def figure(link_class: str) -> float:
        """NCCL's figure for the class (or the file's, which replaces it)."""
        latency = C.HW_LATENCY_US[HW_ROW[link_class]][family][p] * US
        if link_class == "network":  # the plugin's latency
            latency += figures.net_latency
        for override in (protocol_override, family_override):
            if override is not None and link_class in override.latency:
                latency = override.latency[link_class]
        if link_class == "network" and protocol == "Simple" and flushes(figures, arch):
            latency += figures.net_latency  # the receive's flush
        return latency

    def step(link_class: str) -> float:
        """What one message on the class pays."""
        latency = figure(link_class)
        return latency / 2 if link_class in ROUND_TRIP.get(family, ()) else latency

    row, column = C.arch_row(arch), C.nodes_column(nodes)
    efficiency = {kind: figures.efficiency(c) for kind, c in CLASS_OF_KIND.items()}
    if family in ("nvls", "nvls_tree"):
        efficiency["nvlink"] = nvls_efficiency(figures, row)
    if family == "nvls_tree":
        efficiency["nvlink"] *= nvls_tree_share(nodes, ppn)
    if stages_through_host(figures, ppn, intra_class):
        efficiency["pcie_uplink"] *= shm_share(figures)
    channel_cap, gpu_cap = _caps(figures, row, column, nodes, family, protocol)
    channel_cap = overridden("channel_cap", channel_cap)
    gpu_cap = overridden("gpu_cap", gpu_cap)
    share = overridden("efficiency", None)
    if share is not None:  # a share of NCCL's caps; of the links, at most all they reach
        efficiency = {kind: e * min(share, 1.0) for kind, e in efficiency.items()}
        # above 1 only NCCL's one-node caps rise: across nodes its tables hold other figures
        # (LL's is the CPU's row), which a one-node measurement says nothing about
        raised = share if nodes == 1 else min(share, 1.0)
        channel_cap = None if channel_cap is None else channel_cap * raised
        gpu_cap = None if gpu_cap is None else gpu_cap * raised
    if family in TREE_FAMILIES:
        per_call = tree_hops_us(family, nodes, ppn, figure(intra_class) / US,
                                figure("network") / US) * US
        own: tuple[str, ...] = LINK_CLASSES
    else:
        per_call = sum(figure(c) for c in PER_CALL.get(family, ()))
        own = PER_CALL.get(family, ())
    buffer = buffer_payload(protocol, figures.environment.get("NCCL_BUFFSIZE"))
    return ProtocolCosts(
        family, protocol, figures.launch,
        overridden("base", C.BASE_LATENCY_US[family][p] * US),
        tuple(step(c) for c in LINK_CLASSES), efficiency, WIRE_RATIO[protocol],
        channel_cap, gpu_cap, nodes, per_call, own, buffer,
        *slice_staging(protocol, row, buffer, is_unpack_device(figures.transport)),
        slot_credit=slot_credit(figures, family, figure("network")),
        group_cap=tree_group_cap(family, protocol, row))


def tree_group_cap(family: str, protocol: str, row: int) -> float | None:
    """Payload B/s one thread group of a Simple tree channel moves at most, or None. NCCL's
    kernel runs the tree's reduce up and broadcast down on thread groups of their own
    (``runTreeSplit`` in src/device/all_reduce.h: ``nthreads/2 + 64`` of the 640 threads up,
    the rest down), so a chunk going up moves at its group's rate even while nothing goes
    down. Each group is given half a channel's copy rate: NCCL's model gives a tree direction
    half the channel's figure (the tree's algorithm bandwidth is half its bus bandwidth,
    ``ratio *= .5`` in ``ncclTopoTuneModel``, src/graph/tuning.cc), and the channel's copy
    rate is ``perChMaxTreeBw``'s one-node column, as for the slice copies
    (:func:`slice_staging`; an assumption there too). The threads' own split (384 and 256) is
    not modelled. Simple only: collsim's LL and LL128 trees relay a whole chunk a hop where
    NCCL passes lines on as they land (docs/nccl.md#algorithms-tree), a fill already slower
    than NCCL's. None for every other family: their channels are one group."""
    if family != "nccl_tree" or protocol != "Simple":
        return None
    return C.PER_CHANNEL_MAX_TREE_BW[row][0] * GB / TREE_THREAD_GROUPS


def slot_credit(figures: NcclFigures, family: str, network_step: float) -> float | None:
    """Seconds from a receiver's taking a slot across the network to its sender's reusing
    it, or None where the slot is free once taken. NCCL's receiving proxy posts a receive
    for a slot once the GPU has consumed it (``recvProxyProgress``, src/transport/net.cc),
    and where the transport makes that receive clear the slot for the sender (IB and RoCE's
    clear-to-send FIFO, EFA's control message: ``clear_to_send``) the sender's next write
    into it waits for that message to cross the network: a network step, the figure a data
    message pays (``network_step``; NCCL's ``hwLat[NET]`` and the plugin's latency, or the
    file's). Families whose network messages meet a reducing switch (``ROUND_TRIP``) keep
    their rule."""
    if figures.transport is None or family in ROUND_TRIP:
        return None
    if not TRANSPORTS[figures.transport].clear_to_send.value:
        return None
    return network_step


def with_ring_chunk_slots(model: CostModel, collective: str) -> CostModel:
    """``model`` with a Simple ring chunk counted as the slots NCCL gives it: ``CHUNKSTEPS``
    of the connection's ``NCCL_STEPS`` whatever its bytes, so a connection across the
    network holds ``NCCL_STEPS / CHUNKSTEPS`` chunks (2 for allreduce, allgather and
    reducescatter), each cut into ``CHUNKSTEPS / SLICESTEPS`` slices (2). The kernel's
    ``genericOp`` runs ``SlicePerChunk`` slices a chunk, of half its bytes and empty ones
    too, and each moves the connection's step by ``StepPerSlice`` however few bytes it
    carries (``waitPeer``, ``postPeer`` in src/device/prims_simple.h); a sender waits until
    its step is within ``NCCL_STEPS`` of the slots given back. Unchanged elsewhere: other
    protocols and families send one step a message, which ``slots`` already counts."""
    if not isinstance(model, ProtocolCosts) or model.family != "ring" \
            or model.protocol != "Simple" or collective not in C.CHUNK_STEPS:
        return model
    chunk_steps, slice_steps = C.CHUNK_STEPS[collective]
    return replace(model, slots=C.NCCL_STEPS // chunk_steps, slices=chunk_steps // slice_steps)


def slice_staging(protocol: str, row: int, buffer: float,
                  unpack: bool = False) -> tuple[float, float, float]:
    """(slice payload bytes, seconds per byte of a channel's write of it, of its read) that
    a message crossing the network waits for (:mod:`collsim.engine.staging`,
    docs/nccl.md#algorithms-staging), for a connection of ``buffer`` payload bytes on the
    cap tables' architecture ``row``; ``unpack``: the plugin leaves received payload in bounce
    pages, which the receiving thread block copies into the slot before it reads the slot
    (NCCL's ``src/device/prims_simple.h``, the Simple protocol only), so a Simple read takes
    two copies of the slice at the same rate.

    NCCL's proxy posts a slice to the NIC once the GPU has written all of it, and with
    Simple the receiving GPU reads a slice once all of it has arrived (``sendProxyProgress``,
    ``recvProxyProgress`` in src/transport/net.cc); LL and LL128 receivers read each line as
    its flag lands. Simple: a slice of ``SLICE_STEPS`` steps, written and read at NCCL's
    per-channel figure for Simple (``perChMaxTreeBw``, its one-node column: as a copy rate
    an assumption, NCCL uses it as a tree channel's cap); LL128: one step, written at an
    LL128 ring channel's rate (:func:`ring_ll128_channel_rate`). LL (32 KiB steps) is not
    charged: NCCL has no per-channel figure for it (``llMaxBw`` is a GPU's total)."""
    step = buffer / C.NCCL_STEPS
    if protocol == "Simple":
        per_byte = 1 / (C.PER_CHANNEL_MAX_TREE_BW[row][0] * GB)
        return step * C.SLICE_STEPS, per_byte, (2 if unpack else 1) * per_byte
    if protocol == "LL128":
        return step, 1 / ring_ll128_channel_rate(row, 0), 0.0
    return 0.0, 0.0, 0.0


def ring_ll128_channel_rate(row: int, column: int) -> float:
    """Payload B/s one channel of an LL128 ring moves at most: NCCL's ``perChMaxRingLL128Bw``
    is its model's figure for a channel of the ring graph (busbw at most graph channels x
    the figure), and NCCL runs each graph channel as two channels
    (:data:`~collsim.nccl.constants.RUN_CHANNELS_PER_GRAPH_CHANNEL`), so each gets half."""
    return C.PER_CHANNEL_MAX_RING_LL128_BW[row][column] * GB / C.RUN_CHANNELS_PER_GRAPH_CHANNEL


def p2p_slices(model: CostModel, chunk: int) -> CostModel:
    """``model`` for point-to-point sends, which cross the network in NCCL's p2p chunks
    (``chunk``: ``NCCL_P2P_NET_CHUNKSIZE``, one step each, ``sliceSteps`` 1 outside rings): a
    message waits for one chunk's copies, not a ring slice's (docs/nccl.md#algorithms-staging)."""
    if not isinstance(model, ProtocolCosts) or model.slice_bytes <= 0:
        return model
    return replace(model, slice_bytes=min(model.slice_bytes, float(chunk)))


def p2p_network_cap(model: CostModel) -> CostModel:
    """``model`` for NCCL's point-to-point operations across nodes, whose every channel
    drives the network at ``NCCL_P2P_PER_CHANNEL_NET_BW`` (14 GB/s) at most: NCCL's own
    figure for one p2p channel, by which it gives a peer on another node as many channels as
    its NICs need (``ncclTopoGetNchannels``, src/graph/paths.cc; docs/nccl.md#algorithms-p2p).
    On one node ``model`` as is."""
    if not isinstance(model, ProtocolCosts) or model.nodes <= 1:
        return model
    return replace(model, net_channel_cap=P2P_PER_CHANNEL_NET_GBPS * GB)


def p2p_nvlink_cap(model: CostModel, arch: int) -> CostModel:
    """``model`` for NCCL's grouped point-to-point operations on one node over NVLink
    (alltoall), each channel moving at most half of NCCL's figure for one NVLink
    (``ncclTopoNVLinkBw``), shared by the operations its thread block runs at once. NCCL gives
    a peer over NVLink two channels per NVLink of the path between them
    (``ncclTopoGetNchannels``, src/graph/paths.cc), as it gives a peer across the network
    channels of ``NCCL_P2P_PER_CHANNEL_NET_BW`` each (:func:`p2p_network_cap`); reading that
    as a channel's rate is an assumption (docs/nccl.md#p2p-nvlink). Across nodes ``model``
    as is."""
    if not isinstance(model, ProtocolCosts) or model.nodes > 1:
        return model
    rate = C.nvlink_bandwidth(arch) / C.P2P_CHANNELS_PER_NVLINK * GB
    cap = rate if model.channel_cap is None else min(model.channel_cap, rate)
    return replace(model, channel_cap=cap)


def p2p_reach(model: CostModel, figures: NcclFigures) -> CostModel:
    """``model`` for point-to-point sends, whose network links carry what NCCL's p2p path
    reaches of them (``reachable.p2p``) rather than what its rings reach: the p2p path sends
    128 KiB chunks from slots its peers share, the rings 1 MiB slices from a buffer of their
    own (docs/nccl.md#p2p-reach). The same model where the two reach alike."""
    ring, p2p = figures.reached("network"), figures.p2p_reached()
    if not isinstance(model, ProtocolCosts) or not ring or p2p is None or p2p == ring:
        return model
    efficiency = dict(model.efficiency)
    for kind, link_class in CLASS_OF_KIND.items():
        if link_class == "network":
            efficiency[kind] = efficiency.get(kind, 1.0) * p2p / ring
    return replace(model, efficiency=efficiency)


def buffer_payload(protocol: str, simple_buffer: int | None = None) -> float:
    """Payload bytes the slots of one NCCL connection hold: the protocol's buffer (LL's and
    LL128's lines carry flags beside their data); Simple's is NCCL_BUFFSIZE where the machine's
    environment sets it (``simple_buffer``)."""
    p = PROTOCOLS.index(protocol)
    data, wire = C.DATA_BYTES_PER_LINE[p]
    buffer = simple_buffer if protocol == "Simple" and simple_buffer else C.BUFFER_BYTES[p]
    return buffer * data / wire


def nvls_tree_share(nodes: int, ppn: int) -> float:
    """The share of NVLS's one-node NVLink reach NVLSTree's in-node part gets on ``nodes``
    nodes of ``ppn`` GPUs: NCCL's model gives NVLSTree the bus bandwidth of NVLS on one node
    (the same NVLink term, ``src/graph/tuning.cc``) and turns it into time with the busbw factor
    2(n-1)/n of all n ranks, so the node's part takes (n-1)/n x p/(p-1) of NVLS's time on one
    node of p GPUs for the same bytes (docs/misses.md#nvls-tree-nodes); 1 on one node."""
    ranks = nodes * ppn
    if nodes <= 1 or ppn <= 1:
        return 1.0
    return (ppn - 1) / ppn * ranks / (ranks - 1)


def nvls_efficiency(figures: NcclFigures, row: int) -> float:
    """The share of NVLink's line rate NVLS reaches: the declared ``reachable.nvls``, else
    NCCL's ``nvlsEfficiency`` of the architecture x the NVLink reach."""
    line = figures.line.get("nvlink")
    if figures.nvls_reachable is not None and line:
        return figures.nvls_reachable / line
    return figures.efficiency("nvlink") * C.NVLS_EFFICIENCY[row]


def _caps(figures: NcclFigures, row: int, column: int, nodes: int, family: str,
          protocol: str) -> tuple[float | None, float | None]:
    """NCCL's (per-channel, per-GPU) limits for the family and protocol, payload B/s."""
    ll_max = ll_max_bandwidth(figures.cpu, row, column, nodes)
    if family == "ring":
        if protocol == "LL":
            return None, ll_max
        if protocol == "LL128":
            return ring_ll128_channel_rate(row, column), None
        return None, None
    if family == "nccl_tree":
        tree = C.PER_CHANNEL_MAX_TREE_BW[row][column] * GB
        if protocol == "LL":
            return tree, ll_max
        if protocol == "LL128":
            return min(tree, C.PER_CHANNEL_MAX_TREE_LL128_BW[row][column] * GB), None
        return tree, None
    if family == "nvls_tree" and nodes > 1 and C.PER_CHANNEL_MAX_NVLS_TREE_BW[row][column]:
        return C.PER_CHANNEL_MAX_NVLS_TREE_BW[row][column] * GB, None
    return None, None


def ll_max_bandwidth(cpu: str, row: int, column: int, nodes: int) -> float:
    """NCCL's llMaxBw (B/s): the architecture's row on one node, the CPU's across nodes."""
    if nodes > 1:
        row = C.LL_MAX_BW_AMD_ROW if cpu == "amd" else C.LL_MAX_BW_OTHER_CPU_ROW
    return C.LL_MAX_BW[row][column] * GB
