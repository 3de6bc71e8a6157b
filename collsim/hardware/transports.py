"""The network transports NCCL moves inter-node data through, one record each (a registry,
read by the topology files' ``nics.transport`` key, shown by ``collsim topo show``, iterated
by the tests): NCCL's own InfiniBand verbs and sockets, RoCE, AWS EFA through aws-ofi-nccl and
Google's GPUDirect-TCPX and TCPXO plugins.

Each record holds the figures NCCL's model and collsim's engine take from the transport, each
with its source or the word "assumption" (docs/hardware.md#transports):

- ``net_latency``: the latency the plugin reports to NCCL (``ncclNetProperties.latency``),
  added to every network step (``nccl.net_latency`` in a file overrides it);
- ``gpudirect``: whether the NIC reads and writes GPU memory (GPUDirect RDMA or a
  device-memory receive path) or data is staged through host memory (``nics.gpudirect``);
- ``reachable``: the share of a NIC's line rate NCCL reaches (``nccl.reachable.network``);
- ``clear_to_send``: whether a sender may write a slot across the network only once its
  receiver has cleared it (a receive posted for it, written back into the sender's memory),
  so that a slot is free a network latency after its message was consumed
  (docs/nccl.md#algorithms-buffers); without it the plugin pushes data into the network's
  buffers and a slot is free once its bytes have left;
- ``routing``: how a fat-tree or rail fabric of this network picks among equal-cost spines,
  ``dmodk`` (InfiniBand's subnet manager writes destination-based tables) or ``ecmp`` (Ethernet
  switches hash each flow); ``fabric.routing`` in a file overrides it;
- ``unpack``: whether the plugin is an unpack network device (``NCCL_NET_DEVICE_UNPACK``): the
  NIC leaves received payload in bounce pages of GPU memory and the receiving GPU's thread block
  copies each slice out of them before it reads the slice (docs/hardware.md#transports); the
  engine charges that copy as one more read of the slice (:func:`collsim.nccl.protocols.
  slice_staging`).

and, shown only: the ``flush`` of one received Simple message (NCCL flushes each one before
Hopper, or with ``NCCL_NET_FORCE_FLUSH=1``: the receiving NIC reads a few bytes of the receive
buffer back, which makes its writes into GPU memory visible to the GPU; the cost model charges
NCCL's own stand-in for it, the plugin's latency once more, docs/misses.md#efa-flush),
NCCL_STEPS slots per connection (the engine's own constant), the
NCCL_BUFFSIZE the plugin or its vendor sets and the channel floor the vendor's settings impose
(what NCCL runs with is the preset's ``nccl.environment``, set per instance type and plugin
release, docs/hardware.md#environment), and the streams (queue pairs, TCP sockets or flows)
per connection (collsim's engine has no place for them). A
per-message overhead is not a transport figure here: its only source (AWS's model of NCCL on
EFA) gives it per instance type, so the preset carries it (``nccl.protocols``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType

from collsim.errors import InputError

NCCL_VERSION = "2.30.7"
_NCCL = f"NCCL {NCCL_VERSION} (github.com/NVIDIA/nccl@5067397c)"
_AWS = "aws-ofi-nccl (github.com/aws/aws-ofi-nccl@2daf7d30)"
_TCPX = "GPUDirect-TCPX plugin (github.com/google/nccl-plugin-gpudirecttcpx@4b8ea7f2)"
_GKE_TCPX = ("Google's GKE TCPX config (github.com/GoogleCloudPlatform/container-engine-"
             "accelerators@992db812 gpudirect-tcpx/nccl-config.yaml)")
_TCPXO = "GPUDirect-TCPXO plugin (github.com/google/nccl-plugin-gpudirect-tcpxo@04815d1b)"
_STEPS = f"{_NCCL} src/include/device.h: NCCL_STEPS, the same for every transport"
_BUFFSIZE = f"{_NCCL} src/init.cc: DEFAULT_BUFFSIZE 4 MiB (a Simple step of 512 KiB)"
_IB_REACH = ("nccl-tests#267 (48-49 of 50 GB/s on 400 Gb/s NDR) and nccl-tests#119 (24 of 25 "
             "GB/s on 200 Gb/s HDR, NCCL maintainer's figure)")
MiB = 1 << 20

# The figures collsim's engine and NCCL's model use; the others are shown only.
MODELLED = ("net_latency", "gpudirect", "reachable", "routing", "unpack",
            "clear_to_send")


@dataclass(frozen=True)
class Sourced:
    """One figure and where it comes from: a source (file at a version or commit, a vendor
    document, an issue), or text starting with "assumption"; ``value`` None: not set by the
    transport (NCCL's own choice applies)."""

    value: float | int | bool | str | None
    source: str

    @property
    def assumed(self) -> bool:
        return self.source.startswith("assumption")


@dataclass(frozen=True)
class Transport:
    """One network transport: its name (``nics.transport``), what it is, the plugin NCCL
    loads for it, and its figures (see the module's docstring)."""

    name: str
    title: str
    plugin: str
    net_latency: Sourced        # seconds, reported by the plugin
    gpudirect: Sourced          # bool: GPU memory <-> NIC directly, or through host memory
    reachable: Sourced          # share of a NIC's line rate NCCL reaches, 0 < r <= 1
    steps: Sourced              # NCCL_STEPS slots in flight per connection
    buffsize: Sourced           # bytes of a connection's Simple buffer (NCCL_BUFFSIZE)
    streams: Sourced            # queue pairs, TCP sockets or flows per connection
    min_channels: Sourced       # NCCL_MIN_NCHANNELS the vendor sets; None: NCCL's search
    routing: Sourced            # "dmodk" or "ecmp": among a fat-tree's equal-cost spines
    unpack: Sourced             # bool: the receiving GPU copies payload out of bounce pages
    clear_to_send: Sourced      # bool: a slot is reused only once the receiver cleared it
    flush: Sourced              # seconds: the plugin's flush of one received Simple message

    def figures(self) -> dict[str, Sourced]:
        """Every figure by field name, in declaration order."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if isinstance(getattr(self, f.name), Sourced)}


_NO_FLOOR = Sourced(None, f"{_NCCL}: the channel count is NCCL's own search's")
_SLOTS = Sourced(8, _STEPS)  # every transport: NCCL's, not the plugin's
# Among a fat-tree's equal-cost spines (docs/hardware.md#fabrics).
_OPENSM = "OpenSM (github.com/linux-rdma/opensm@a54fbec4) doc/current-routing.txt"
_DMODK = Sourced("dmodk", f"{_OPENSM}: the subnet manager fills each switch's forwarding "
                          "table, one port per destination LID; its fat-tree engine (ftree) "
                          "is D-mod-k (Zahavi et al., Concurrency Computat. 22(2), 2010, "
                          "doi:10.1002/cpe.1527); adaptive routing not modelled")
_ECMP = Sourced("ecmp", "RFC 2992: Ethernet/IP switches spread flows over equal-cost next "
                        "hops by a hash of each packet's headers, so one flow keeps one path "
                        "and flows may collide")
_EFA_ROUTING = Sourced("dmodk", "assumption: SRD sprays each flow's packets over up to 64 "
                               "paths (Shalev et al., IEEE Micro 40(6), 2020), so flows do not "
                               "collide as hashed flows do; D-mod-k is the nearer of the two "
                               "static schemes")
# EFA: what a GPUDirect RDMA program reaches over all of a p5's EFA devices. AWS's model of
# NCCL on p5 (aws-ofi-nccl src/tuner/nccl_ofi_model.cpp) puts a rail at 12.5 GiB/s, above the
# line rate, and so bounds nothing.
_EFA_REACH = ("L. Chen, \"Harnessing 3200 Gbps Network: A Journey with RDMA, EFA, and "
              "libfabric\" (le.qun.ch/en/blog/2024/12/25/libfabric-efa-0-intro, 2024): RDMA "
              "writes from GPU memory over a p5's 32 EFA devices reach 97 % of 3,200 Gb/s; "
              "p4d and p4de (EFA v1): taken as p5's (assumption)")
_UNPACK_SRC = (f"{_NCCL} src/device/prims_simple.h: with an unpack device the receiving "
               "thread block copies each slice out of the bounce pages "
               "(src/device/network/unpack/unpack.h) before its own copy of it")
_HOST_DEVICE = "reports NCCL_NET_DEVICE_HOST: received data lands where NCCL reads it"
_IB_QPS = Sourced(1, f"{_NCCL} src/transport/net_ib/connect.cc: NCCL_IB_QPS_PER_CONNECTION "
                     "default 1")  # InfiniBand and RoCE: the same verbs plugin

# Whether the receiver clears each slot for its sender across the network. NCCL's proxy posts
# a receive for a slot only once the GPU has consumed the slot's last message (recvProxyProgress
# in src/transport/net.cc: posted < done + NCCL_STEPS, done following the GPU's head); the verbs
# plugin's receive writes a clear-to-send entry into the sender's FIFO and its send waits for it.
_IB_CTS = Sourced(True, f"{_NCCL} src/transport/net_ib/p2p.cc: ncclIbIrecv posts the CTS FIFO "
                        "entry (ncclIbPostFifo, an RDMA write into the sender's memory); "
                        "ncclIbIsend returns no request until it has arrived")
_PUSHED = ("the sender writes each message into the connection's sockets without waiting "
           "for its receive; the receiver reads it from the socket's buffers (not modelled: "
           "TCP's window)")

# A flush: NCCL's proxy, once a Simple receive has completed and before it tells the GPU, asks
# the plugin to read back a few bytes of the receive buffer through the receiving NIC
# (recvProxyProgress in src/transport/net.cc, one iflush per received message or group of
# them); the GPU waits for that read, the next receives do not.
_PCIE_READ = ("Neugebauer et al., \"Understanding PCIe performance for end host networking\", "
              "SIGCOMM 2018 (doi:10.1145/3230543.3230560): a NIC's DMA read of a cache line "
              "takes about 0.5-1 us")
_VERBS_FLUSH = Sourced(2e-6, "assumption: one RDMA read of 1 byte of the receive buffer on a "
                             f"loopback queue pair ({_NCCL} src/transport/net_ib/p2p.cc: "
                             "ncclIbIflush), i.e. the NIC's read of GPU memory over PCIe "
                             f"({_PCIE_READ}) and the post and completion of one work request; "
                             "no measured figure of it found")
_EFA_FLUSH = Sourced(3e-6, f"{_AWS} include/nccl_ofi_param.h: TUNER_NET_COMP_OVERHEAD, 3 us for "
                           "an EFA operation (about 2 in the device, 1 to write its completion "
                           "to the host), what AWS's model of NCCL adds to a Simple network "
                           "step (src/tuner/nccl_ofi_model.cpp); the flush is one such "
                           "operation, a loopback fi_read of a few bytes of the receive buffer "
                           "(src/nccl_ofi_sendrecv.cpp and src/nccl_ofi_rdma.cpp: flush; "
                           "cuda_flush off by default)")
_NO_FLUSH = "NCCL flushes only receives that land in GPU memory by GPUDirect RDMA"

TRANSPORTS: Mapping[str, Transport] = MappingProxyType({t.name: t for t in (
    Transport(
        "ib", "InfiniBand verbs", "NCCL's net_ib (built in)",
        Sourced(0.0, f"{_NCCL} src/transport/net_ib/init.cc: reports latency 0"),
        Sourced(True, f"{_NCCL} src/transport/net_ib/init.cc: NCCL_PTR_CUDA or DMA-BUF "
                      "where the GPUDirect RDMA driver is loaded, as on ConnectX NICs"),
        Sourced(0.96, _IB_REACH),
        _SLOTS,
        Sourced(4 * MiB, _BUFFSIZE),
        _IB_QPS,
        _NO_FLOOR,
        _DMODK,
        Sourced(False, f"{_NCCL} src/transport/net_ib/init.cc: {_HOST_DEVICE}"),
        _IB_CTS,
        _VERBS_FLUSH),
    Transport(
        "roce", "RoCE (verbs over Ethernet)", "NCCL's net_ib (built in)",
        Sourced(0.0, f"{_NCCL} src/transport/net_ib/init.cc: reports latency 0 (the same "
                     "plugin as InfiniBand)"),
        Sourced(True, f"{_NCCL} src/transport/net_ib/init.cc: as on InfiniBand"),
        Sourced(0.96, "assumption: as InfiniBand (the same verbs plugin and ConnectX NICs); "
                      "no published share for RoCE"),
        _SLOTS,
        Sourced(4 * MiB, _BUFFSIZE),
        _IB_QPS,
        _NO_FLOOR,
        _ECMP,
        Sourced(False, f"{_NCCL} src/transport/net_ib/init.cc: {_HOST_DEVICE}"),
        _IB_CTS,
        _VERBS_FLUSH),
    Transport(
        "efa", "AWS Elastic Fabric Adapter", "aws-ofi-nccl (AWS's libfabric plugin)",
        Sourced(75e-6, f"{_AWS} src/platform-aws.cpp: 75 us on p4d, p4de, p5, p5e (35 us on "
                       "p5en and p6: set nccl.net_latency there)"),
        Sourced(True, f"{_AWS} src/platform-aws.cpp: gdr_required on p4d, p4de, p5, p5e"),
        Sourced(0.97, _EFA_REACH),
        _SLOTS,
        Sourced(8 * MiB, f"{_AWS} src/platform-aws.cpp: NCCL_BUFFSIZE=8388608 on p4d, p5"),
        Sourced(None, f"{_AWS} include/nccl_ofi_rdma.h, src/nccl_ofi_rdma.cpp: up to 4 EFA "
                      "rails striped per NCCL NIC, per instance type (the preset's NIC "
                      "speed)"),
        _NO_FLOOR,
        _EFA_ROUTING,
        Sourced(False, f"{_AWS} src/nccl_ofi_interface_nvidia.cpp: {_HOST_DEVICE}"),
        Sourced(True, f"{_AWS} src/nccl_ofi_rdma.cpp: the RDMA protocol's receive writes "
                      "a control message into the sender's mailbox (rdma_recv_req::post); "
                      "a send above the eager size (OFI_NCCL_EAGER_MAX_SIZE, 8 KiB) waits "
                      "for it (has_ctrl_msg)"),
        _EFA_FLUSH),
    Transport(
        "tcpx", "GCP GPUDirect-TCPX", "Google's GPUDirect-TCPX plugin",
        Sourced(0.0, f"{_TCPX} src/net_tcpx.cc: reports latency 0"),
        Sourced(True, f"{_TCPX} src/net_tcpx.cc: NCCL_PTR_CUDA, received into GPU memory "
                      "and unpacked there"),
        Sourced(0.96, "assumption: no published share for TCPX; taken as InfiniBand's"),
        _SLOTS,
        Sourced(4 * MiB, f"{_GKE_TCPX}: NCCL_BUFFSIZE=4194304 (NCCL's default)"),
        Sourced(4, f"{_GKE_TCPX}: NCCL_NSOCKS_PERTHREAD=4, NCCL_SOCKET_NTHREADS=1 (the "
                   f"plugin's own default 1 x 1, {_TCPX} src/flags.cc)"),
        _NO_FLOOR,
        _ECMP,
        Sourced(True, f"{_TCPX} src/net_tcpx.cc: netDeviceType DEV_UNPACK; {_UNPACK_SRC}"),
        Sourced(False, f"{_TCPX} src/net_tcpx.cc: {_PUSHED}; its control socket carries "
                       "each message's header from sender to receiver"),
        Sourced(0.0, f"{_TCPX} src/net_tcpx.cc: tcpxIflush_v5 returns at once (\"Iflush "
                     "unused\")")),
    Transport(
        "tcpxo", "GCP GPUDirect-TCPXO", "Google's GPUDirect-TCPXO plugin (FasTrak)",
        Sourced(0.0, f"{_TCPXO} tcpdirect_plugin/fastrak_offload/nccl_shim.cc: reports "
                     "latency 0"),
        Sourced(True, f"{_TCPXO} tcpdirect_plugin/fastrak_offload/nccl_shim.cc: "
                      "NCCL_PTR_CUDA, the receive path offloaded into GPU memory"),
        Sourced(0.96, "assumption: no published share for TCPXO; taken as InfiniBand's, "
                      "what NCCL reaches with an offloaded data path"),
        _SLOTS,
        Sourced(8 * MiB, f"{_TCPXO} tcpxo_scripts/nccl-env-profile.sh: NCCL_BUFFSIZE="
                         "8388608"),
        Sourced(2, f"{_TCPXO} tcpxo_scripts/nccl-env-profile.sh: NCCL_FASTRAK_NUM_FLOWS=2"),
        Sourced(4, f"{_TCPXO} tcpxo_scripts/nccl-env-profile.sh: NCCL_MIN_NCHANNELS=4"),
        _ECMP,
        Sourced(False, f"{_TCPXO} tcpdirect_plugin/fastrak_offload/nccl_shim.cc: "
                       f"{_HOST_DEVICE}"),
        Sourced(False, "assumption: as TCPX (the same push model; the receive path is "
                       "offloaded to a daemon whose source is not published)"),
        Sourced(0.0, "assumption: as TCPX, whose iflush does nothing; TCPXO runs on Hopper, "
                     "which NCCL does not flush by default")),
    Transport(
        "socket", "TCP sockets", "NCCL's net_socket (built in)",
        Sourced(0.0, f"{_NCCL} src/transport/net_socket.cc: reports latency 0"),
        Sourced(False, f"{_NCCL} src/transport/net_socket.cc: NCCL_PTR_HOST only, data "
                       "staged through host memory"),
        Sourced(0.96, "assumption: no published share for NCCL's sockets at these speeds; "
                      "taken as InfiniBand's (the staging through host memory is modelled "
                      "on its own, by the route)"),
        _SLOTS,
        Sourced(4 * MiB, _BUFFSIZE),
        Sourced(1, f"{_NCCL} src/transport/net_socket.cc: one socket on the proxy thread "
                   "by default (2 threads x 8 sockets on AWS NICs, 4 x 1 on Google's)"),
        _NO_FLOOR,
        _ECMP,
        Sourced(False, f"{_NCCL} src/transport/net_socket.cc: {_HOST_DEVICE}"),
        Sourced(False, f"{_NCCL} src/transport/net_socket.cc: {_PUSHED}; each message's "
                       "size goes ahead of its data"),
        Sourced(0.0, f"{_NCCL} src/transport/net_socket.cc: host memory only, and {_NO_FLUSH} "
                     "(src/transport/net.cc: useGdr)")),
)})
DEFAULT = "ib"  # a node with NICs whose file names no transport: NCCL's own InfiniBand verbs


def is_unpack_device(name: str | None) -> bool:
    """Whether transport ``name`` (None: a machine without one) is an unpack network device,
    whose received payload NCCL's kernel copies out of bounce pages (GPUDirect-TCPX)."""
    return bool(name and TRANSPORTS[name].unpack.value)


def transport(name: str, *, key: str = "nics.transport") -> Transport:
    """The record of transport ``name``; an unknown name is an InputError at ``key``."""
    if name not in TRANSPORTS:
        raise InputError(f"unknown network transport {name!r}: expected one of "
                         f"{', '.join(TRANSPORTS)}", key=key)
    return TRANSPORTS[name]
