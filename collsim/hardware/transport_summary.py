"""What ``collsim topo show`` prints of a machine's network transport: its name, each figure
with its value and where that value came from (the transport's record and its source, or the
file's own key, which overrides it); and the NCCL variables its plugin or vendor profile sets
(``nccl.environment``)."""

from __future__ import annotations

import textwrap

from collsim.hardware.machine import NcclFigures
from collsim.hardware.nodes import NicSpec
from collsim.hardware.topology import Topology
from collsim.hardware.transports import MODELLED, TRANSPORTS, Sourced

# The file key that overrides each modelled figure (a cluster's file has its NICs under node).
OVERRIDE_KEYS = {"net_latency": "nccl.net_latency", "gpudirect": "nics.gpudirect",
                 "reachable": "nccl.reachable.network", "routing": "fabric.routing"}
_LABELS = {"net_latency": "net latency", "gpudirect": "gpudirect", "reachable": "reachable",
           "steps": "NCCL_STEPS", "buffsize": "NCCL_BUFFSIZE", "streams": "streams/conn",
           "min_channels": "min channels", "routing": "routing", "unpack": "GPU unpack",
           "clear_to_send": "clear to send", "flush": "flush"}
WIDTH = 100


def _value(name: str, value: float | int | bool | None) -> str:
    if value is None:
        return "-"
    if name in ("net_latency", "flush"):
        return f"{float(value) * 1e6:g} us"
    if name == "gpudirect":
        return "yes" if value else "no (host memory)"
    if name in ("unpack", "clear_to_send"):
        return "yes" if value else "no"
    if name == "reachable":
        return f"{100 * float(value):g}%"
    if name == "buffsize":
        return f"{int(value) >> 20} MiB"
    return str(value)


def _actual(name: str, nics: NicSpec, nccl: NcclFigures | None,
            topology: Topology) -> tuple[object, bool] | None:
    """The value the machine runs with and whether the file set it; None where the machine has
    no use for the figure (a file without an ``nccl`` section has no NCCL model, a fabric
    without spines to choose among no routing)."""
    if name == "routing":
        routing = getattr(topology, "routing", None)
        return None if routing is None else (routing, topology.routing_declared)
    if name == "gpudirect":
        return nics.gpudirect, "gpudirect" in nics.declared
    if nccl is None:
        return None
    if name == "unpack":  # the plugin's device type: no file key sets it
        return TRANSPORTS[nics.transport].unpack.value, False
    if name == "net_latency":
        return nccl.net_latency, "net_latency" in nccl.declared
    network = nccl.reached("network")
    share = network / nccl.line["network"] if network is not None else None
    return share, "reachable.network" in nccl.declared


def transport_lines(topology: Topology) -> list[str]:
    """The transport block of ``topo show``; empty for a machine without NICs."""
    node = getattr(topology, "node", None)
    nics = getattr(getattr(node, "spec", None), "nics", None)
    if nics is None:
        return []
    carrier = TRANSPORTS[nics.transport]
    nccl = topology.machine.nccl
    node_key = "node." if topology.kind == "cluster" else ""
    lines = [f"transport       {carrier.name}: {carrier.title}, through {carrier.plugin}",
             f"  {'figure':<15}{'value':<18}from"]
    for name, figure in carrier.figures().items():
        lines += _figure_lines(name, figure, nics, nccl, node_key, topology)
    return lines


def _figure_lines(name: str, figure: Sourced, nics: NicSpec, nccl: NcclFigures | None,
                  node_key: str, topology: Topology) -> list[str]:
    label = _LABELS[name]
    if name not in MODELLED:
        use = {"steps": "the engine's own constant",
               "buffsize": "shown; NCCL runs the preset's nccl.environment",
               "min_channels": "shown; NCCL runs the preset's nccl.environment",
               "flush": "shown; the cost model charges NCCL's stand-in, the net latency once "
                        "more"}.get(
                   name, "not modelled")
        origin = f"transport ({use}): {figure.source}"
        value = _value(name, figure.value)
    else:
        actual = _actual(name, nics, nccl, topology) if name != "clear_to_send" else \
            None if nccl is None else (figure.value, False)  # no file key overrides it
        if actual is None and name == "routing":
            value, origin = "-", ("unused: no fat-tree or rails of several spines here; the "
                                  f"transport's: {figure.value}")
        elif actual is None:
            value, origin = "-", "unused: no 'nccl' section (the ideal cost model)"
        elif actual[1]:
            value = _value(name, actual[0])
            key = (node_key if name == "gpudirect" else "") + OVERRIDE_KEYS[name]
            origin = (f"preset override ({key}); the transport's: "
                      f"{_value(name, figure.value)}")
        else:
            value, origin = _value(name, actual[0]), f"transport: {figure.source}"
    first = f"  {label:<15}{value:<18}"
    return textwrap.wrap(origin, WIDTH, initial_indent=first, subsequent_indent=" " * len(first),
                         break_on_hyphens=False, break_long_words=False)


def environment_lines(topology: Topology) -> list[str]:
    """The ``nccl.environment`` block of ``topo show``; empty when the file sets none."""
    nccl = topology.machine.nccl if topology.machine is not None else None
    if nccl is None or not nccl.environment:
        return []
    lines = ["NCCL env        nccl.environment: set by the network plugin or the vendor's "
             "profile"]
    width = max(len(name) for name in nccl.environment) + 2
    lines += [f"  {name:<{width}}{value}" for name, value in nccl.environment.items()]
    return lines
