"""What ``collsim topo show`` prints for a machine that declares NCCL figures: line rate and
reachable bandwidth per link class, the per-call launch, each protocol's figures (per-call base,
per-step latency by class, wire ratio, caps) for the algorithm families the machine can run,
and the graphs NCCL's topology search gives for a call on every GPU."""

from __future__ import annotations

from collections.abc import Mapping

from collsim.calls.plan import registered_nccl
from collsim.hardware.machine import LINK_CLASSES
from collsim.hardware.nccl_names import PROTOCOLS
from collsim.hardware.nccl_release import Version, format_version
from collsim.hardware.topology import Topology
from collsim.nccl import constants as C
from collsim.nccl.adapter import nccl_system
from collsim.nccl.choice import choose
from collsim.nccl.protocols import ProtocolCosts, nccl_figures, protocol_costs
from collsim.nccl.search import Graph, Graphs, search
from collsim.nccl.shm import p2p_level, shm_share, stages_through_host
from collsim.nccl.system import NcclSystem
from collsim.nccl.tuning import SIMPLE_ONLY, TREE_FAMILIES
from collsim.nccl.versions import MODELLED
from collsim.units import format_size


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g}us"


def _gbps(bandwidth: float | None) -> str:
    return "-" if bandwidth is None else f"{bandwidth / 1e9:g} GB/s"


def _release(version: Version | None) -> str:
    """The NCCL release line: the file's ``nccl.version``, or the modelled release."""
    if version is None:
        return f"{format_version(MODELLED)} (the release collsim models; nccl.version unset)"
    return f"{format_version(version)} (nccl.version; the rest follows {format_version(MODELLED)})"


def format_nccl(topology: Topology) -> str | None:
    """The NCCL lines of ``topo show``, or None for a machine without NCCL figures."""
    figures = nccl_figures(topology)
    if figures is None:
        return None
    gpu = topology.machine.gpu
    system = nccl_system(topology)
    graphs = search(system)
    where = (f"{system.ranks} ranks on {system.nodes} node{'s' if system.nodes > 1 else ''}")
    yes = {True: "yes", False: "no"}
    lines = [f"gpu             {gpu.model or '?'} (arch {gpu.arch})",
             f"NCCL            launch {_us(figures.launch)} per call, cpu {figures.cpu}, "
             f"NVLS {yes[figures.nvls]}, SHARP {yes[figures.sharp]}"
             + (f", net plugin latency {_us(figures.net_latency)}" if figures.net_latency
                else ""),
             f"  release       {_release(figures.version)}",
             f"  {'class':<10}{'line rate':<14}reachable"]
    for link_class in LINK_CLASSES:
        reached = figures.reached(link_class)
        if reached is not None:
            line = figures.line[link_class]
            lines.append(f"  {link_class:<10}{_gbps(line):<14}{_gbps(reached)} "
                         f"({100 * reached / line:.3g}%)")
    p2p = figures.p2p_reached()
    if p2p is not None:
        source = ("the file's reachable.p2p" if figures.p2p_reachable is not None
                  else "as the network's")
        lines.append(f"  {'p2p':<10}{'':<14}{_gbps(p2p)} "
                     f"({100 * p2p / figures.line['network']:.3g}%): a NIC under sendrecv "
                     f"and alltoall, {source}")
    intra_class = "nvlink" if graphs.tree.over_nvlink else "pcie"
    if stages_through_host(figures, system.ranks // system.nodes, intra_class):
        share = shm_share(figures)
        lines.append(f"  {'shm':<10}{'':<14}{_gbps(share * (figures.reached('pcie') or 0))} "
                     f"({100 * share:.3g}% of pcie's): GPU pairs across a CPU root complex,")
        lines.append(f"            staged through host memory (NCCL's P2P level "
                     f"{p2p_level(figures, system.ranks // system.nodes)})")
    lines.append(f"  protocols, for {where} (base: per call; nvlink, pcie, network: "
                 "latency per")
    lines.append("  step by the route's slowest class, instead of the links'; wire: bytes per "
                 "payload byte)")
    lines.append(f"  {'family':<15}{'proto':<8}{'base':>7}{'nvlink':>8}{'pcie':>8}"
                 f"{'network':>9}{'wire':>7}  {'channel cap':<13}GPU cap")
    families = _families(topology, graphs)
    halves = []  # (family, protocol, cap) of the channels split between thread groups
    for family in families:
        for protocol in PROTOCOLS:
            if family in SIMPLE_ONLY and protocol != "Simple":
                continue
            costs = protocol_costs(figures, gpu.arch, system.nodes, family, protocol,
                                   system.ranks // system.nodes, intra_class)
            lines.append(_protocol_line(costs, figures.line))
            if costs.group_cap is not None:
                halves.append((family, protocol, costs.group_cap))
    if "nvls" in families and figures.nvls_reachable is not None:
        lines.append(f"  nvls: reaches {figures.nvls_reachable / 1e9:g} GB/s of NVLink (the "
                     "file's reachable.nvls); NCCL's NVLink")
    elif "nvls" in families:
        lines.append(f"  nvls: x{C.NVLS_EFFICIENCY[C.arch_row(gpu.arch)]:g} of NVLink's "
                     "reachable (the switch's reduce and multicast); NCCL's NVLink")
        lines.append("  latency is paid once a call, messages pay the links' own")
    trees = ", ".join(f for f in families if f in TREE_FAMILIES)
    lines.append(f"  {trees}: base includes NCCL's tree latency for this shape (each hop")
    lines.append("  once a call, the pipeline's fill); messages pay the links' own")
    for family, protocol, cap in halves:
        lines.append(f"  {family} {protocol}: each half of a channel (reduce up, broadcast down) "
                     f"moves at most {_gbps(cap)}")
        lines.append("  on threads of its own, busy or not (NCCL's runTreeSplit; "
                     "docs/nccl.md#tree-split)")
    lines.append(f"NCCL graphs     ({where}; NCCL's search, GB/s per channel)")
    lines.append(f"  ring          {_graph(graphs.ring)}")
    lines.append(f"  tree          {_graph(graphs.tree)}")
    if graphs.nvls is not None:
        lines.append(f"  nvls          {graphs.nvls.channels} heads, "
                     f"{graphs.nvls.bw_intra:g} intra / {graphs.nvls.bw_inter:g} inter")
    nvls = f", NVLS {graphs.nvls_channels}" if graphs.nvls_channels else ""
    if graphs.raised_to_nvls:
        nvls += " (ring and tree raised to NVLS's, as NCCL 2.20.3 to 2.27 do)"
    lines.append(f"  channels      {graphs.channels} at run time{nvls}")
    lines += choice_lines(system)
    return "\n".join(lines)


CHOICE_SIZES = tuple(8 ** k for k in range(1, 12))  # 8 B to 8 GiB, as scenarios/nccl-h100.yaml


def choice_lines(system: NcclSystem, collective: str = "allreduce") -> list[str]:
    """NCCL's choice (algorithm, protocol, channels) for ``collective`` on ``system`` from 8 B
    to 8 GiB, sizes with the same choice on one line; ``*`` marks an algorithm collsim has no
    program for (``auto`` then runs the best one it has)."""
    if system.ranks < 2:
        return []
    have = set(registered_nccl(collective))
    picks = []
    for size in CHOICE_SIZES:
        choice = choose(system, collective, size)
        if choice is not None:
            mark = "" if choice.algorithm in have else "*"
            picks.append((size, f"{choice.algorithm}{mark} {choice.protocol}, "
                                f"{choice.channels} channel{'s' if choice.channels > 1 else ''}"))
    lines = [f"NCCL's choice   ({collective} on every GPU; collsim estimate -a auto; * no "
             "program yet)"]
    start = 0
    for i in range(1, len(picks) + 1):
        if i == len(picks) or picks[i][1] != picks[start][1]:
            sizes = format_size(picks[start][0]) + (
                "" if i - 1 == start else f"-{format_size(picks[i - 1][0])}")
            lines.append(f"  {sizes:<12}  {picks[start][1]}")
            start = i
    return lines


def _families(topology: Topology, graphs: Graphs) -> list[str]:
    """The algorithm families worth showing on this machine."""
    families = ["ring", "nccl_tree"]
    if graphs.nvls is not None:
        families.append("nvls")
        if topology.nodes > 1:
            families.append("nvls_tree")
    if nccl_figures(topology).sharp and topology.nodes > 1:
        families += ["collnet_direct", "collnet_chain"]
    return families


def _protocol_line(costs: ProtocolCosts, line: Mapping[str, float]) -> str:
    nvlink, pcie, network = ("-" if c not in line else "links" if c in costs.own_latency
                             else _us(x)
                             for c, x in zip(LINK_CLASSES, costs.step_latency, strict=True))
    base = _us(costs.base + costs.per_call)  # NVLS's and the trees' hops are paid once per call
    return (f"  {costs.family:<15}{costs.protocol:<8}{base:>7}{nvlink:>8}{pcie:>8}"
            f"{network:>9}{costs.wire_ratio:>7.4g}  {_gbps(costs.channel_cap):<13}"
            f"{_gbps(costs.gpu_cap)}")


def _graph(graph: Graph) -> str:
    bws = f"{graph.bw_intra:g}" if graph.bw_intra == graph.bw_inter else \
        f"{graph.bw_intra:g} intra / {graph.bw_inter:g} inter"
    return (f"{graph.pattern}, {graph.channels} x {bws}, paths {graph.type_intra} / "
            f"{graph.type_inter}")
