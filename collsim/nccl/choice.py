"""``auto``: what NCCL chooses for one call — algorithm, protocol, channels — from its cost model
under its default gating rules (docs/nccl.md#tuning-gating).

NCCL evaluates its model for every enabled (algorithm, protocol), takes the smallest time
scanning algorithms in index order then protocols (so ties go to the earlier one: Tree before
Ring ..., LL before LL128 before Simple), then sizes the call's channels and threads. Assumed
call: nccl-tests' default float sum (every algorithm supports it), one operation per call, a
host-driven network (PAT allowed), and a uniform architecture.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

from collsim.hardware.nccl_names import (
    ALGORITHMS,
    PROTOCOLS,
    nccl_algorithm_name,
    parse_selection,
)
from collsim.hardware.nccl_release import format_version
from collsim.nccl import constants as C
from collsim.nccl.system import NcclSystem
from collsim.nccl.tuning import SIMPLE_ONLY, Model, call_terms, model, serves
from collsim.nccl.versions import has_pat


@dataclass(frozen=True)
class Candidate:
    """One eligible (algorithm, protocol) with its model figures for this call."""

    algorithm: str
    protocol: str
    time: float       # s
    latency: float    # s, after the per-size corrections
    bandwidth: float  # GB/s that divides the byte count, after the per-size corrections


@dataclass(frozen=True)
class Refusal:
    """An (algorithm, protocol) NCCL would not consider for this call, and why."""

    algorithm: str
    protocol: str
    reason: str


@dataclass(frozen=True)
class Choice:
    """NCCL's pick for one call: collsim's algorithm name, NCCL's protocol name, the channels
    and threads per channel it runs with, its model time (s), every eligible candidate in
    NCCL's scan order and every refused pair with its reason."""

    collective: str
    size: int
    algorithm: str
    protocol: str
    channels: int
    threads: int
    time: float
    candidates: tuple[Candidate, ...]
    refused: tuple[Refusal, ...]


def choose(system: NcclSystem, collective: str, size: int, *,
           algorithms: Collection[str] | None = None,
           protocols: Collection[str] | None = None) -> Choice | None:
    """NCCL's choice for ``collective`` on ``size`` bytes (nccl-tests' size convention).

    ``algorithms`` and ``protocols`` restrict the choice as NCCL_ALGO and NCCL_PROTO do (collsim
    algorithm names, NCCL protocol names; see ``names.parse_selection``); None leaves what the
    machine's environment enables (``system.algorithms_enabled``, ``protocols_enabled``: a
    cloud plugin's or profile's NCCL_ALGO, NCCL_PROTO), else NCCL's defaults. As in NCCL,
    naming LL128 in ``protocols`` lifts its default-enable rule, while the algorithms' hardware
    gating still applies. Returns None when nothing is eligible: a
    collective NCCL's tuner does not model (alltoall), a single rank, or restrictions that
    leave no candidate.
    """
    m = model(system)
    size = int(size)
    if algorithms is None and system.algorithms_enabled is not None:
        algorithms = parse_selection(system.algorithms_enabled, "algorithm", collective)
    if protocols is None and system.protocols_enabled is not None:
        protocols = parse_selection(system.protocols_enabled, "protocol", collective)
    judged = size if system.pick_scale == 1.0 else max(1, round(size * system.pick_scale))
    candidates: list[Candidate] = []
    refused: list[Refusal] = []
    for algorithm in ALGORITHMS:
        for protocol in PROTOCOLS:
            reason = refusal(m, collective, algorithm, protocol, protocols_forced=protocols)
            if reason is None and algorithms is not None and algorithm not in algorithms:
                reason = "not among the requested algorithms (NCCL_ALGO)"
            if reason is None and protocols is not None and protocol not in protocols:
                reason = "not among the requested protocols (NCCL_PROTO)"
            terms = None if reason else call_terms(m, collective, algorithm, protocol, judged)
            if terms is None:
                refused.append(Refusal(algorithm, protocol,
                                       reason or "no bandwidth in NCCL's model"))
                continue
            latency, bandwidth = terms
            if algorithm == "nccl_tree" and system.tree_rating != 1.0:
                bandwidth *= system.tree_rating
                terms = latency, bandwidth
            candidates.append(Candidate(algorithm, protocol, _seconds(terms, judged),
                                        latency * 1e-6, bandwidth))
    best = fastest(candidates)
    if best is None:
        return None
    channel_count, threads = channels(m, collective, best.algorithm, best.protocol, size)
    time = best.time
    if judged != size or (best.algorithm == "nccl_tree" and system.tree_rating != 1.0):
        # the model's time of the pick at the call's own size, its tree as the model rates it
        terms = call_terms(m, collective, best.algorithm, best.protocol, size)
        time = time if terms is None else _seconds(terms, size)
    return Choice(collective, size, best.algorithm, best.protocol, channel_count, threads,
                  time, tuple(candidates), tuple(refused))


def _seconds(terms: tuple[float, float], size: int) -> float:
    """NCCL's model time of ``size`` bytes from (latency µs, bandwidth GB/s)."""
    latency, bandwidth = terms
    return (latency + size / (1000.0 * bandwidth)) * 1e-6


def fastest(candidates: Collection[Candidate]) -> Candidate | None:
    """The candidate NCCL picks: the smallest time; on equal times the first in NCCL's scan
    order (algorithm index, then protocol index)."""
    def order(c: Candidate) -> tuple[int, int]:
        return ALGORITHMS.index(c.algorithm), PROTOCOLS.index(c.protocol)
    best: Candidate | None = None
    for candidate in sorted(candidates, key=order):
        if candidate.time >= 0 and (best is None or candidate.time < best.time):
            best = candidate
    return best


def refusal(m: Model, collective: str, algorithm: str, protocol: str, *,
            protocols_forced: Collection[str] | None = None) -> str | None:
    """Why NCCL would not consider (algorithm, protocol) for ``collective`` on this machine by
    default, or None if it would. ``protocols_forced``: the protocols named by NCCL_PROTO."""
    system, graphs = m.system, m.graphs
    name = nccl_algorithm_name(algorithm)
    if system.ranks == 1:
        return "a single rank: NCCL does not tune a one-rank communicator"
    if not serves(collective, algorithm):
        return f"NCCL's model has no {name} for {collective}"
    if algorithm in SIMPLE_ONLY and protocol != "Simple":
        return f"{name} runs only with Simple"
    if algorithm in ("nvls", "nvls_tree"):
        reason = _nvls_refusal(system, collective, algorithm)
        if reason:
            return reason
    if algorithm in ("collnet_direct", "collnet_chain"):
        reason = _collnet_refusal(m, collective, algorithm)
        if reason:
            return reason
    if algorithm == "pat" and not has_pat(system.version):
        return f"NCCL {format_version(system.version)} has no PAT (it came with 2.23.4)"
    if algorithm == "pat" and not system.pat_on:
        return ("PAT needs SM60+ and, by default (NCCL_PAT_ENABLE auto), one GPU per node"
                if system.pat_enable is None else "PAT disabled (NCCL_PAT_ENABLE=0)")
    if protocol == "LL128" and (protocols_forced is None or "LL128" not in protocols_forced):
        graph = graphs.of(algorithm)
        if graph is not None and not ll128_enabled(system, graph.type_intra, graph.type_inter):
            return ("LL128 is off by default here (NCCL enables it only on NVLink-connected "
                    "GPUs, NICs within PXB, or PXN on SM90+)")
    return None


def ll128_enabled(system: NcclSystem, type_intra: str, type_inter: str) -> bool:
    """NCCL's default LL128 rule for a graph with these path types (2.29-era)."""
    if system.arch < C.LL128_MIN_ARCH:
        return False
    order = C.PATH_TYPES.index
    max_inter = C.LL128_MAX_INTER_SM90 if system.arch >= 90 else C.LL128_MAX_INTER
    return (order(type_inter) <= order(max_inter)
            and order(type_intra) <= order(C.LL128_MAX_INTRA))


def _nvls_refusal(system: NcclSystem, collective: str, algorithm: str) -> str | None:
    if not system.nvls:
        return ("no NVLS on this machine (the NVSwitch cannot reduce and multicast, or its "
                "environment sets NCCL_NVLS_ENABLE=0)")
    if system.arch < 90:
        return "NVLS needs SM90 or newer"
    if system.gpu_link != "nvswitch":
        return "NVLS needs an NVSwitch"
    if system.gpus_per_node <= 2:
        return "NVLS needs more than 2 GPUs per node"
    if algorithm == "nvls_tree" and system.nodes == 1:
        return "NVLSTree runs only across nodes"
    if algorithm == "nvls" and system.nodes > 1 and not system.collnet_on:
        return "NVLS across nodes needs CollNet (SHARP plugin and NCCL_COLLNET_ENABLE)"
    if algorithm == "nvls" and collective in ("allgather", "reducescatter"):
        if system.nodes > 1:
            return f"NVLS {collective} runs only on one node"
        if system.ranks > C.NVLS_MAX_SINGLE_NODE_AG_RS_RANKS:
            return f"NVLS {collective} serves at most {C.NVLS_MAX_SINGLE_NODE_AG_RS_RANKS} ranks"
    return None


def _collnet_refusal(m: Model, collective: str, algorithm: str) -> str | None:
    system = m.system
    if not system.collnet_on:
        return "CollNet needs a SHARP plugin, NCCL_COLLNET_ENABLE and several nodes"
    if algorithm == "collnet_chain" and not system.collnet_chain:
        return "the CollNet plugin does not support CollNetChain"
    if algorithm == "collnet_direct":
        if system.gpu_link != "nvswitch":
            return "CollNetDirect needs an NVSwitch"
        if system.gpus_per_node > C.COLLNET_DIRECT_MAX_HEADS:
            return f"CollNetDirect serves at most {C.COLLNET_DIRECT_MAX_HEADS} GPUs per node"
        if collective in ("allgather", "reducescatter"):
            implemented = (system.collnet_allgather if collective == "allgather"
                           else system.collnet_reducescatter)
            graph = m.graphs.collnet_direct
            heads = graph.channels if graph is not None else 0
            if not implemented:
                return f"the CollNet plugin does not implement {collective}"
            if system.gpus_per_node > heads:
                return f"CollNetDirect {collective} needs one NIC head per GPU"
    return None


def channels(m: Model, collective: str, algorithm: str, protocol: str,
             size: int) -> tuple[int, int]:
    """Channels and threads per channel NCCL runs one call with (docs/nccl.md#tuning-channels):
    start from the communicator's channels (NVLS: its NVLS channels), remove channels then
    threads while the call has fewer than ``threshold`` bytes per thread, then give ring, tree
    and PAT calls at most one channel per 16 KiB of traffic."""
    system, graphs = m.system, m.graphs
    p = PROTOCOLS.index(protocol)
    nc = graphs.channels
    nt = _max_threads(m, algorithm, protocol)
    threshold = _thread_threshold(system, algorithm, protocol)
    if algorithm == "collnet_direct":
        nc = _collnet_direct_channels(m, size, nc, nt, threshold)
    elif algorithm in ("nvls", "nvls_tree"):
        nc = graphs.nvls_channels  # 2.31: min(nvls channels, channels) across nodes
    else:
        while size < nc * nt * threshold and nc >= 2:
            nc -= 1
    if algorithm not in ("nvls", "nvls_tree", "collnet_direct"):
        while size < nc * nt * threshold and nt % 128 == 0:
            nt //= 2
    if p == C.SIMPLE and algorithm == "ring":
        nt += C.WARP_SIZE  # a warp for synchronisation
    if p == C.SIMPLE and algorithm == "nccl_tree":
        nt += 4 * C.WARP_SIZE
    nt = max(nt, C.MIN_WARPS * C.WARP_SIZE)
    if algorithm in ("nccl_tree", "pat"):
        nt = C.MAX_THREADS
    if algorithm in ("ring", "nccl_tree", "pat"):
        nc = min(nc, _cells(collective, size, system.ranks))
    return nc, nt


def _max_threads(m: Model, algorithm: str, protocol: str) -> int:
    """maxThreads[algo][proto] (docs/nccl.md#tuning-channels); PAT is taken as
    NCCL_MAX_NTHREADS [assumption]."""
    if protocol == "LL":
        return C.LL_MAX_THREADS
    if protocol == "LL128":
        return C.LL128_MAX_THREADS
    if algorithm == "ring":
        ring = m.graphs.ring
        slow = ring.bw_intra * ring.channels <= C.PCI_BW
        return C.RING_SIMPLE_SLOW_THREADS if slow else C.SIMPLE_MAX_THREADS
    if algorithm == "nccl_tree":
        return C.SIMPLE_MAX_THREADS
    return C.MAX_THREADS


def _thread_threshold(system: NcclSystem, algorithm: str, protocol: str) -> int:
    """threadThresholds[algo][proto]: bytes per thread below which a call sheds resources."""
    if algorithm in ("collnet_direct", "collnet_chain") and protocol == "Simple":
        return C.COLLNET_THREAD_THRESHOLD
    threshold = C.THREAD_THRESHOLD[PROTOCOLS.index(protocol)]
    if algorithm == "ring" and protocol == "LL":
        threshold *= system.ranks
    return threshold


def _collnet_direct_channels(m: Model, size: int, nc: int, nt: int, threshold: int) -> int:
    """CollNetDirect's staged reduction of channels against nHeads [unverified detail: the
    stages at 16, 8, 4, 2, 1 channels, halving the threshold at 1.5x each stage]."""
    graph = m.graphs.collnet_direct
    heads = graph.channels if graph is not None else 1
    stage = 16
    short = True
    while stage >= 1 and short:
        while True:
            short = size < nc * nt * heads * threshold
            if not (short and nc > stage):
                break
            if nc == stage + stage // 2:
                threshold //= 2
            nc -= 1
        stage //= 2
    return nc


def _cells(collective: str, size: int, ranks: int) -> int:
    """Channels a ring/tree/PAT call can fill with >= 16 KiB of traffic each: the buffer is cut
    in cells of 16 KiB of traffic (16-B aligned), at least one [derived from
    docs/nccl.md#tuning-channels]."""
    per_byte = 2 if collective == "allreduce" else (
        ranks if collective in ("allgather", "reducescatter") else 1)
    per_rank = size // ranks if collective in ("allgather", "reducescatter") else size
    cell = math.ceil(math.ceil(C.MIN_TRAFFIC_PER_CHANNEL / per_byte) / C.CELL_ALIGN) * C.CELL_ALIGN
    return max(1, math.ceil(per_rank / cell))
