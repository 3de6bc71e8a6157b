"""The ``nccl`` section of a real machine's file (node kinds and ``cluster``, at the top level)
and the reading of ``gpu`` into a :class:`~collsim.hardware.machine.Machine`::

    gpu: {model: H100-SXM5-80GB, arch: 90}   # arch = compute capability x 10
    nccl:
      version: "2.27.3"         # optional: the NCCL release the machine runs (default: the
                                # one collsim models, 2.30.7; docs/nccl.md#nccl-versions)
      launch: 18us              # per call, before any rank starts
      cpu: intel                # intel | amd | arm
      nvls: true                # the NVSwitch reduces and multicasts (NVLink SHARP)
      sharp: false              # the network switches reduce (CollNet / SHARP)
      nic_path: pxb             # optional: NCCL's GPU-to-NIC path type, if the PCIe tree has
                                # more levels than the file's (else derived from it)
      net_latency: 75us         # optional: the latency the network plugin reports to NCCL
                                # (ncclNetProperties.latency; default: the NICs' transport's)
      reachable:                # what NCCL reaches per class; a bandwidth, or a % of line rate
        nvlink: 370.8GB/s       #   per GPU per direction
        pcie: 48GB/s            #   a GPU's PCIe link (the GPU-NIC path)
        network: 96%            #   a NIC's port (default: the NICs' transport's share)
        nvls: 380GB/s           #   optional: NVLS through the NVSwitch (default: NCCL's
                                #   nvlsEfficiency x the NVLink reach)
        shm: 18GB/s             #   optional: GPU pairs NCCL stages through host memory
                                #   (default: 75% of the pcie reach; collsim.nccl.shm)
        p2p: 88%                #   optional: a NIC's port under NCCL's point-to-point path
                                #   (sendrecv, alltoall; default: the network's reach)
      p2p_level: sys            # optional: NCCL_P2P_LEVEL, pxb | sys (default: NCCL's for the
                                # CPU: pxb, sys on AMD up to 2 GPUs)
      pick_scale: 2             # optional: NCCL chooses algorithm and protocol as for twice
                                # the size (a calibrated machine's switch points)
      tree_rating: 2            # optional: NCCL's model rates its tree's bandwidth at twice
                                # the model's when it chooses (a calibrated machine's NCCL)
      environment:              # optional: NCCL variables the network plugin or the vendor's
                                # profile sets (docs/hardware.md#clouds), in NCCL's syntax
        NCCL_ALGO: Ring,Tree    #   the algorithms NCCL may choose
        NCCL_PROTO: Simple      #   the protocols NCCL may choose
        NCCL_NVLS_ENABLE: 0     #   0: no NVLS, whatever the NVSwitch can do
        NCCL_MIN_NCHANNELS: 4   #   the fewest channels NCCL's search keeps
        NCCL_NVLS_CHUNKSIZE: 524288          # NVLS's chunk per channel (bytes)
        NCCL_NVLSTREE_MAX_CHUNKSIZE: 524288  # NVLSTree's largest chunk (bytes)
        NCCL_BUFFSIZE: 8388608  #   a connection's Simple buffer (bytes; its step is 1/8)
        NCCL_NET_FORCE_FLUSH: 0 #   1: flush every Simple receive from the network, as before
                                #   Hopper (NCCL's default before 2.19.1)
      protocols:                # optional overrides of NCCL's constants, per protocol ...
        LL128:
          latency: {nvlink: 1.9us, pcie: 2.5us, network: 4us}   # NCCL's hwLat, by class
          base: 14us            # per call
          channel_cap: 36.7GB/s # payload per channel
          gpu_cap: 141GB/s      # payload per GPU, all channels
          efficiency: 90%       # share of NCCL's caps the protocol reaches (of the links'
                                # reach: at most 100%); up to 200%
          ring: {base: 12us}    # ... or per algorithm family (wins over the protocol's)

A file without ``nccl`` declares nothing and is simulated with the ideal cost model.
"""

from __future__ import annotations

import math
from typing import Any

from collsim.errors import InputError
from collsim.hardware.kinds.keys import count
from collsim.hardware.machine import LINK_CLASSES, Gpu, Machine, NcclFigures, ProtocolOverride
from collsim.hardware.nccl_names import (
    ALGORITHMS,
    CPUS,
    MODELLED_COLLECTIVES,
    NIC_PATHS,
    P2P_LEVELS,
    PROTOCOLS,
    parse_selection,
)
from collsim.hardware.nccl_release import Version, parse_version
from collsim.hardware.nodes import NodeSpec
from collsim.hardware.transports import transport
from collsim.schema import QUANTITY, at, quantity
from collsim.units import parse_bandwidth, parse_time
from collsim.yamlfile import Document, KeyPath

SIMPLE_ONLY = ("collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
_BY_CLASS = {"type": "object", "properties": {c: QUANTITY for c in LINK_CLASSES},
             "additionalProperties": False}
_SHARE = {"type": ["string", "number"]}
_OVERRIDE = {"latency": _BY_CLASS, "base": QUANTITY, "channel_cap": QUANTITY,
             "gpu_cap": QUANTITY, "efficiency": _SHARE}
_REACHABLE = {"type": "object",
              "properties": {**{c: QUANTITY for c in LINK_CLASSES}, "nvls": QUANTITY,
                             "shm": QUANTITY, "p2p": QUANTITY},
              "additionalProperties": False}
_FAMILY = {"type": "object", "properties": _OVERRIDE, "additionalProperties": False}
# NCCL variables a plugin or a vendor's profile sets that collsim models; the lists are NCCL's
# own syntax (checked by ``parse_selection``).
_ENVIRONMENT = {"type": "object",
                "properties": {"NCCL_ALGO": {"type": "string"}, "NCCL_PROTO": {"type": "string"},
                               "NCCL_NVLS_ENABLE": {"enum": [0, 1]},
                               "NCCL_MIN_NCHANNELS": {"type": "integer", "minimum": 1,
                                                      "maximum": 64},
                               **{name: {"type": "integer", "minimum": 16384,
                                         "maximum": 8 << 20}
                                  for name in ("NCCL_NVLS_CHUNKSIZE",
                                               "NCCL_NVLSTREE_MAX_CHUNKSIZE")},
                               "NCCL_BUFFSIZE": {"type": "integer", "minimum": 1 << 16,
                                                 "maximum": 1 << 30},
                               "NCCL_NET_FORCE_FLUSH": {"enum": [0, 1]}},
                "additionalProperties": False}
_PROTOCOL = {"type": "object",
             "properties": {**_OVERRIDE, **{family: _FAMILY for family in ALGORITHMS}},
             "additionalProperties": False}
NCCL_SCHEMA = {
    "type": "object",
    "properties": {
        "version": {"type": ["string", "number"]},  # a number is refused with a hint
        "launch": QUANTITY, "cpu": {"enum": list(CPUS)}, "nvls": {"type": "boolean"},
        "sharp": {"type": "boolean"}, "nic_path": {"enum": list(NIC_PATHS)},
        "net_latency": QUANTITY, "p2p_level": {"enum": list(P2P_LEVELS)},
        "reachable": _REACHABLE, "pick_scale": {"type": "number"},
        "tree_rating": {"type": "number"},
        "environment": _ENVIRONMENT,
        "protocols": {"type": "object", "properties": {p: _PROTOCOL for p in PROTOCOLS},
                      "additionalProperties": False},
    },
    "required": ["launch", "cpu"],
    "additionalProperties": False,
}
_LINE_KEYS = {"nvlink": "nvlink.bandwidth", "pcie": "pcie.link.bandwidth",
              "network": "nics.link.bandwidth"}


def read_machine(doc: Document, spec: NodeSpec, node: KeyPath = ()) -> Machine:
    """The file's ``gpu`` and ``nccl`` declarations; ``spec`` is the node (at ``node``) whose
    links give each class's line rate."""
    arch = at(doc.data, ("gpu", "arch"))
    gpu = Gpu(at(doc.data, ("gpu", "model")),
              count(doc, ("gpu", "arch")) if arch is not None else None)
    if "nccl" not in doc.data:
        return Machine(gpu)
    if gpu.arch is None:
        raise doc.error(("gpu", "arch"), "required with an 'nccl' section: NCCL's constants "
                        "depend on the GPU's compute capability x 10 (80 A100, 90 H100)")
    data = doc.data["nccl"]
    line = line_rates(spec)
    reachable = {c: _reachable(doc, ("nccl", "reachable", c), line.get(c), node)
                 for c in LINK_CLASSES if at(data, ("reachable", c)) is not None}
    nvls = (_reachable(doc, ("nccl", "reachable", "nvls"), line.get("nvlink"), node, "nvlink")
            if at(data, ("reachable", "nvls")) is not None else None)
    carrier = transport(spec.nics.transport) if spec.nics is not None else None
    declared = frozenset(key for key, given in (
        ("net_latency", data.get("net_latency") is not None),
        ("reachable.network", at(data, ("reachable", "network")) is not None)) if given)
    shm = _shm_reachable(doc, line.get("pcie"), reachable.get("pcie"), node)
    p2p = (_reachable(doc, ("nccl", "reachable", "p2p"), line.get("network"), node, "network")
           if at(data, ("reachable", "p2p")) is not None else None)
    return Machine(gpu, NcclFigures(
        launch=quantity(doc, ("nccl", "launch"), parse_time),
        cpu=data["cpu"], nvls=bool(data.get("nvls", False)),
        sharp=bool(data.get("sharp", False)), nic_path=data.get("nic_path"),
        net_latency=(quantity(doc, ("nccl", "net_latency"), parse_time)
                     if "net_latency" in declared
                     else float(carrier.net_latency.value) if carrier else 0.0),
        line=line, reachable={c: r for c, r in reachable.items() if r is not None},
        overrides=_overrides(doc), nvls_reachable=nvls, pick_scale=_pick_scale(doc),
        tree_rating=_tree_rating(doc),
        transport=carrier.name if carrier else None,
        transport_reach=float(carrier.reachable.value) if carrier else 1.0,
        declared=declared, p2p_level=data.get("p2p_level"), shm_reachable=shm,
        p2p_reachable=p2p,
        environment=_environment(doc), version=_version(doc)))


def _version(doc: Document) -> Version | None:
    """``nccl.version``, a release NCCL prints (``2.27.3``); None when the file sets none."""
    text = at(doc.data, ("nccl", "version"))
    if text is None:
        return None
    try:
        return parse_version(text)
    except ValueError as error:
        raise doc.error(("nccl", "version"), str(error)) from None


def _environment(doc: Document) -> dict[str, str | int]:
    """``nccl.environment``, its NCCL_ALGO and NCCL_PROTO checked for every collective (an
    unknown name, or a list that leaves a collective nothing, is an error at that key)."""
    environment = dict(at(doc.data, ("nccl", "environment")) or {})
    for name, kind in (("NCCL_ALGO", "algorithm"), ("NCCL_PROTO", "protocol")):
        if name not in environment:
            continue
        path = ("nccl", "environment", name)
        for collective in MODELLED_COLLECTIVES:
            try:
                enabled = parse_selection(environment[name], kind, collective)
            except InputError as error:
                raise doc.error(path, error.message) from None
            if not enabled:
                raise doc.error(path, f"{environment[name]!r} leaves NCCL no {kind} for "
                                f"{collective}: name at least one")
    return environment


def _shm_reachable(doc: Document, line: float | None, pcie: float | None,
                   node: KeyPath) -> float | None:
    """``reachable.shm``: a bandwidth or a share of the PCIe line rate, at most what P2P
    reaches there (staging through host memory crosses the same links and more)."""
    path = ("nccl", "reachable", "shm")
    if at(doc.data, path) is None:
        return None
    shm = _reachable(doc, path, line, node, "pcie")
    p2p = pcie if pcie is not None else line
    if shm is not None and p2p is not None and shm > p2p * (1 + 1e-9):
        raise doc.error(path, f"{shm / 1e9:g} GB/s is more than the PCIe reach of "
                        f"{p2p / 1e9:g} GB/s (reachable.pcie): a transfer staged through host "
                        "memory crosses the same PCIe links as a direct one, and host memory "
                        "besides; lower it")
    return shm


CHOICE_FACTORS = (1 / 16, 16)  # beyond these NCCL's model would not be describing the machine


def _choice_factor(doc: Document, name: str, what: str) -> float | None:
    """``nccl.<name>``, a factor on ``what`` in NCCL's choice (pick_scale, tree_rating), or
    None when the file sets none."""
    value = at(doc.data, ("nccl", name))
    if value is None:
        return None
    if isinstance(value, bool) or not CHOICE_FACTORS[0] <= float(value) <= CHOICE_FACTORS[1]:
        raise doc.error(("nccl", name), f"expected a factor on {what} from 1/16 to 16, got "
                        f"{value!r}")
    return float(value)


def _pick_scale(doc: Document) -> float | None:
    return _choice_factor(doc, "pick_scale", "the size")


def _tree_rating(doc: Document) -> float | None:
    return _choice_factor(doc, "tree_rating", "NCCL's tree bandwidth")


def line_rates(spec: NodeSpec) -> dict[str, float]:
    """The reference line rate (B/s) of each link class a node has: a GPU's NVLink bandwidth
    (all its NVLinks, one direction), its PCIe link, a NIC's port."""
    line = {}
    nvlink = spec.wiring.nvlink_per_gpu(spec.gpus)
    if nvlink:
        line["nvlink"] = nvlink
    if spec.pcie is not None:
        line["pcie"] = spec.pcie.link.bandwidth
    if spec.nics is not None:
        line["network"] = spec.nics.link.bandwidth
    return line


def _reachable(doc: Document, path: KeyPath, line: float | None, node: KeyPath,
               link_class: str | None = None) -> float | None:
    """A class's reachable bandwidth: a bandwidth at most the line rate, or a percentage of
    it (``96%``); None when the machine has no link of the class (``link_class``, default
    the key's own)."""
    value = at(doc.data, path)
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            share = float(value.strip()[:-1])
        except ValueError:
            share = math.nan
        if not 0 < share <= 100:
            raise doc.error(path, f"expected a share of the line rate above 0% and at most "
                            f"100% (or a bandwidth such as '48GB/s'), got {value!r}")
        return None if line is None else line * share / 100
    reached = quantity(doc, path, parse_bandwidth)
    if line is not None and reached > line * (1 + 1e-9):
        key = _LINE_KEYS[link_class or path[-1]]
        where = ".".join(filter(None, (".".join(map(str, node)), key)))
        raise doc.error(path, f"{reached / 1e9:g} GB/s is more than the line rate of "
                        f"{line / 1e9:g} GB/s ({where}): NCCL cannot reach more than the link "
                        "carries; lower it, or give a share of the line rate such as '80%'")
    return None if line is None else reached


def _overrides(doc: Document) -> dict[tuple[str, str | None], ProtocolOverride]:
    overrides: dict[tuple[str, str | None], ProtocolOverride] = {}
    for protocol, entry in (at(doc.data, ("nccl", "protocols")) or {}).items():
        path = ("nccl", "protocols", protocol)
        overrides[(protocol, None)] = _override(doc, path)
        for family in ALGORITHMS:
            if family in entry:
                if protocol != "Simple" and family in SIMPLE_ONLY:
                    raise doc.error(path + (family,), f"NCCL runs {family} with the Simple "
                                    f"protocol only, so {protocol} has nothing to override "
                                    "there")
                overrides[(protocol, family)] = _override(doc, path + (family,))
    return overrides


def _override(doc: Document, path: KeyPath) -> ProtocolOverride:
    data: dict[str, Any] = at(doc.data, path) or {}

    def optional(key: str, parse: Any) -> float | None:
        return quantity(doc, path + (key,), parse) if data.get(key) is not None else None

    latency = {c: quantity(doc, path + ("latency", c), parse_time)
               for c in LINK_CLASSES if at(data, ("latency", c)) is not None}
    return ProtocolOverride(latency, optional("base", parse_time),
                            optional("channel_cap", parse_bandwidth),
                            optional("gpu_cap", parse_bandwidth),
                            _share(doc, path + ("efficiency",)) if "efficiency" in data else None)


MAX_SHARE = 2.0  # a protocol's caps may be twice NCCL's estimate; its links never exceed 1


def _share(doc: Document, path: KeyPath) -> float:
    """A share above 0 and at most ``MAX_SHARE``: ``90%`` or ``0.9``."""
    value = at(doc.data, path)
    text = str(value).strip()
    try:
        share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        share = math.nan
    if isinstance(value, bool) or not 0 < share <= MAX_SHARE:
        raise doc.error(path, f"expected a share above 0 and at most {MAX_SHARE:.0%} (such as "
                        f"'90%' or 0.9; above 100% only NCCL's caps rise), got {value!r}")
    return share
