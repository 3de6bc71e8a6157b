"""The machine figures calibration may fit, one record each (a registry, iterated by the fit,
the writer and the tests).

Every figure is fitted as a factor on the preset's value, bounded to a physical range, and
stands for one mechanism, so that a figure fitted where it is seen does not move what it does
not describe (a one-node fit leaves the network as the preset has it):

- ``launch``: the per-call cost (s) paid before any rank starts;
- ``latency.LL``/``LL128``/``Simple``: a scale on NCCL's per-step latencies of the protocol
  inside a node (NVLink and PCIe classes): flag or FIFO signalling between GPUs;
- ``latency.network``: a scale on every protocol's per-step latency on the network class (the
  network stack's per-message overhead: the proxy, the NIC, TCP sockets or EFA);
- ``reachable.nvlink``/``pcie``/``network``: what NCCL's rings and trees reach on the class
  (at most its line rate);
- ``reachable.p2p``: what NCCL's point-to-point path (sendrecv, alltoall) reaches of a NIC,
  apart from the rings' (smaller messages from slots its peers share; docs/nccl.md#p2p-reach):
  a p2p log fits it and leaves the rings' network as it was;
- ``reachable.nvls``: what NVLS reaches through the NVSwitch's reduce and multicast, apart
  from the rings' NVLink (at most NVLink's line rate);
- ``efficiency.LL``/``LL128``: the share of NCCL's bandwidth figures the protocol reaches:
  its per-channel and per-GPU caps (the SMs' throughput polling flags, which NCCL's constants
  estimate) scale by it, the links' reach by at most 1, and across nodes (where NCCL's tables
  hold other caps) the caps by at most 1 too;
- ``pick_scale``: NCCL chooses algorithm and protocol as for this multiple of the size: the
  machine's NCCL (its version, its tuning) switches at other sizes than the model says. It is
  discrete (logs step sizes by 2): each of ``fit.PICK_SCALES`` is a fit of its own;
- ``tree_rating``: NCCL's choice rates its tree's bandwidth at this multiple of the model's:
  the machine's NCCL (its version's tree search and tuning) takes the tree where the model
  takes the ring, or the reverse. Only the choice moves (the simulated tree is the links'); the
  fit, where asked, tries the ratings of ``fit.TREE_RATINGS`` that change a pick and fits
  the best of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from collsim.hardware.machine import LINK_CLASSES, Machine, NcclFigures, ProtocolOverride
from collsim.hardware.nccl_names import ALGORITHMS, PROTOCOLS
from collsim.nccl import constants as C
from collsim.nccl.protocols import HW_ROW, nvls_efficiency
from collsim.nccl.tuning import SIMPLE_ONLY

MIN_LAUNCH = 1e-6  # s: a preset declaring no launch cost is fitted from 1 us
INTRA = ("nvlink", "pcie")  # the classes inside a node, whose latencies latency.<P> scales
MIN_EFFICIENCY = 0.2  # a protocol reaching less than a fifth of NCCL's figures: implausible
MAX_EFFICIENCY = 2.0  # NCCL's caps (llMaxBw, per-channel LL128) are its model's estimates


@dataclass(frozen=True)
class Figure:
    """One fitted figure: its name, what it is, the bounds of its factor, and how a factor
    is read and applied (``bounds`` takes the preset's figures: reachable caps at line)."""

    name: str
    what: str
    unit: str
    value: Callable[[NcclFigures], float | None]
    bounds: Callable[[NcclFigures], tuple[float, float]]
    kind: str  # "launch", "latency", "reachable" or "efficiency"


def _launch(figures: NcclFigures) -> float:
    return max(figures.launch, MIN_LAUNCH)


def _reachable_value(link_class: str) -> Callable[[NcclFigures], float | None]:
    return lambda figures: figures.reached(link_class)


def _reachable_bounds(link_class: str) -> Callable[[NcclFigures], tuple[float, float]]:
    def bounds(figures: NcclFigures) -> tuple[float, float]:
        reached = figures.reached(link_class)
        if reached is None:
            return 1.0, 1.0
        return 0.05, figures.line[link_class] / reached  # 5% of line rate .. line rate
    return bounds


def _p2p_bounds(figures: NcclFigures) -> tuple[float, float]:
    reached = figures.p2p_reached()
    if reached is None:
        return 1.0, 1.0
    return 0.05 * figures.line["network"] / reached, figures.line["network"] / reached


def _nvls_value(figures: NcclFigures) -> float | None:
    return figures.nvls_reachable if figures.nvls else None


def _nvls_bounds(figures: NcclFigures) -> tuple[float, float]:
    reached = _nvls_value(figures)
    if reached is None or "nvlink" not in figures.line:
        return 1.0, 1.0
    return 0.05 * figures.line["nvlink"] / reached, figures.line["nvlink"] / reached


FIGURES: tuple[Figure, ...] = (
    Figure("launch", "per-call cost before any rank starts", "us", _launch,
           lambda f: (1e-6 / _launch(f), 500e-6 / _launch(f)), "launch"),
    *(Figure(f"latency.{p}", f"scale on NCCL's per-step latencies of {p} inside a node",
             "x", lambda f: 1.0, lambda f: (0.1, 10.0), "latency") for p in PROTOCOLS),
    Figure("latency.network", "scale on every protocol's per-step latency on the network "
           "(per-message overhead of the network stack)", "x", lambda f: 1.0,
           lambda f: (0.1, 30.0), "latency"),
    *(Figure(f"reachable.{c}", f"bandwidth NCCL reaches on {c} (per GPU / port)", "GB/s",
             _reachable_value(c), _reachable_bounds(c), "reachable")
      for c in ("nvlink", "network", "pcie")),  # network before pcie: on a tie it is named
    Figure("reachable.p2p", "bandwidth NCCL's point-to-point path reaches on a NIC (per port)",
           "GB/s", lambda f: f.p2p_reached(), _p2p_bounds, "reachable"),
    Figure("reachable.nvls", "bandwidth NVLS reaches through the NVSwitch (per GPU)", "GB/s",
           _nvls_value, _nvls_bounds, "reachable"),
    *(Figure(f"efficiency.{p}", f"share of NCCL's bandwidth figures {p} reaches (its caps; "
             "the links' reach at most)", "x", lambda f: 1.0,
             lambda f: (MIN_EFFICIENCY, MAX_EFFICIENCY), "efficiency")
      for p in ("LL", "LL128")),
    Figure("pick_scale", "NCCL chooses algorithm and protocol as for this multiple of the "
           "size (where it switches)", "x", lambda f: f.pick_scale or 1.0,
           lambda f: (0.25, 4.0), "pick"),  # chosen among fit.PICK_SCALES, not by steps
    Figure("tree_rating", "NCCL's choice rates its tree's bandwidth at this multiple of the "
           "model's (whether it takes the tree)", "x", lambda f: f.tree_rating or 1.0,
           lambda f: (0.25, 4.0), "pick"),  # chosen among fit.TREE_RATINGS
)
BY_NAME: Mapping[str, Figure] = {f.name: f for f in FIGURES}


def families(protocol: str) -> tuple[str, ...]:
    """The algorithm families that run ``protocol`` (the in-switch ones run only Simple)."""
    return ALGORITHMS if protocol == "Simple" else tuple(
        a for a in ALGORITHMS if a not in SIMPLE_ONLY)


def step_latency(figures: NcclFigures, protocol: str, family: str, link_class: str) -> float:
    """NCCL's per-step latency (s) the figures charge, before any in-switch halving."""
    latency = C.HW_LATENCY_US[HW_ROW[link_class]][family][PROTOCOLS.index(protocol)] * 1e-6
    for key in ((protocol, None), (protocol, family)):
        override = figures.overrides.get(key)
        if override is not None and link_class in override.latency:
            latency = override.latency[link_class]
    return latency


def resolved(figures: NcclFigures, arch: int | None) -> NcclFigures:
    """The same machine with NVLS's reach declared (NCCL's default for ``arch`` where the
    file gives none), so that fitting the rings' NVLink does not move NVLS's."""
    if not figures.nvls or figures.nvls_reachable is not None or arch is None \
            or "nvlink" not in figures.line:
        return figures
    share = nvls_efficiency(figures, C.arch_row(arch))
    return dataclasses.replace(figures, nvls_reachable=share * figures.line["nvlink"])


def calibrated(machine: Machine, factors: Mapping[str, float]) -> NcclFigures:
    """The machine's NCCL figures under the fitted ``factors`` (the determined figures only):
    NVLS's reach stays as the preset's rule has it unless ``reachable.nvls`` was fitted."""
    figures = apply(resolved(machine.nccl, machine.gpu.arch), factors)
    if "pick_scale" in factors:
        figures = dataclasses.replace(figures, pick_scale=factors["pick_scale"])
    if "tree_rating" in factors:
        figures = dataclasses.replace(figures, tree_rating=factors["tree_rating"])
    if "reachable.nvls" in factors:
        return figures
    return dataclasses.replace(figures, nvls_reachable=machine.nccl.nvls_reachable)


def apply(figures: NcclFigures, factors: Mapping[str, float]) -> NcclFigures:
    """The figures with each named factor applied (names of ``FIGURES``; 1 leaves it).
    ``reachable.nvls`` needs the figures ``resolved``."""
    changes: dict = {}
    if factors.get("launch", 1.0) != 1.0:
        changes["launch"] = _launch(figures) * factors["launch"]
    reachable = dict(figures.reachable)
    for c in LINK_CLASSES:
        factor = factors.get(f"reachable.{c}", 1.0)
        if factor != 1.0 and figures.reached(c) is not None:
            reachable[c] = min(figures.reached(c) * factor, figures.line[c])
    changes["reachable"] = reachable
    p2p = factors.get("reachable.p2p", 1.0)
    if p2p != 1.0 and figures.p2p_reached() is not None:
        changes["p2p_reachable"] = min(figures.p2p_reached() * p2p, figures.line["network"])
    nvls = factors.get("reachable.nvls", 1.0)
    if nvls != 1.0 and figures.nvls_reachable is not None:
        changes["nvls_reachable"] = min(figures.nvls_reachable * nvls, figures.line["nvlink"])
    network = factors.get("latency.network", 1.0)
    overrides = dict(figures.overrides)
    for p in PROTOCOLS:
        scale = factors.get(f"latency.{p}", 1.0)
        share = factors.get(f"efficiency.{p}", 1.0)
        if scale == 1.0 and network == 1.0 and share == 1.0:
            continue
        if share != 1.0:
            old = overrides.get((p, None)) or ProtocolOverride()
            overrides[(p, None)] = dataclasses.replace(
                old, efficiency=min(MAX_EFFICIENCY, (old.efficiency or 1.0) * share))
        if scale == 1.0 and network == 1.0:
            continue
        for family in families(p):
            latency = {c: step_latency(figures, p, family, c)
                       * (network if c == "network" else scale) for c in LINK_CLASSES}
            old = overrides.get((p, family)) or ProtocolOverride()
            overrides[(p, family)] = dataclasses.replace(old, latency=latency)
    changes["overrides"] = overrides
    return dataclasses.replace(figures, **changes)
