"""The machine figures calibration may fit, one record each (a registry, iterated by the fit,
the writer and the tests).

Every figure is fitted as a factor on the preset's value, bounded to a physical range:
``launch`` (the per-call cost, s), ``latency.LL``/``LL128``/``Simple`` (a scale on NCCL's
per-step latencies of the protocol, every class and family), ``latency.network`` (a further
scale on the network class: the per-message overhead of the network stack), and
``reachable.nvlink``/``pcie``/``network`` (what NCCL reaches on the class, at most its line
rate)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from collsim.hardware.machine import LINK_CLASSES, NcclFigures, ProtocolOverride
from collsim.nccl import constants as C
from collsim.nccl.names import ALGORITHMS, PROTOCOLS
from collsim.nccl.protocols import HW_ROW
from collsim.nccl.tuning import SIMPLE_ONLY

MIN_LAUNCH = 1e-6  # s: a preset declaring no launch cost is fitted from 1 us


@dataclass(frozen=True)
class Figure:
    """One fitted figure: its name, what it is, the bounds of its factor, and how a factor
    is read and applied (``bounds`` takes the preset's figures: reachable caps at line)."""

    name: str
    what: str
    unit: str
    value: Callable[[NcclFigures], float | None]
    bounds: Callable[[NcclFigures], tuple[float, float]]
    kind: str  # "launch", "latency" or "reachable": how factors are applied together


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


FIGURES: tuple[Figure, ...] = (
    Figure("launch", "per-call cost before any rank starts", "us", _launch,
           lambda f: (1e-6 / _launch(f), 500e-6 / _launch(f)), "launch"),
    *(Figure(f"latency.{p}", f"scale on NCCL's per-step latencies of {p}", "x",
             lambda f: 1.0, lambda f: (0.1, 10.0), "latency") for p in PROTOCOLS),
    Figure("latency.network", "further scale on network per-step latencies "
           "(per-message overhead of the network stack)", "x", lambda f: 1.0,
           lambda f: (0.1, 30.0), "latency"),
    *(Figure(f"reachable.{c}", f"bandwidth NCCL reaches on {c} (per GPU / port)", "GB/s",
             _reachable_value(c), _reachable_bounds(c), "reachable")
      for c in ("nvlink", "network", "pcie")),  # network before pcie: on a tie it is named
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


def apply(figures: NcclFigures, factors: Mapping[str, float]) -> NcclFigures:
    """The figures with each named factor applied (names of ``FIGURES``; 1 leaves it)."""
    changes: dict = {}
    if factors.get("launch", 1.0) != 1.0:
        changes["launch"] = _launch(figures) * factors["launch"]
    reachable = dict(figures.reachable)
    for c in LINK_CLASSES:
        factor = factors.get(f"reachable.{c}", 1.0)
        if factor != 1.0 and figures.reached(c) is not None:
            reachable[c] = min(figures.reached(c) * factor, figures.line[c])
    changes["reachable"] = reachable
    network = factors.get("latency.network", 1.0)
    overrides = dict(figures.overrides)
    for p in PROTOCOLS:
        scale = factors.get(f"latency.{p}", 1.0)
        if scale == 1.0 and network == 1.0:
            continue
        for family in families(p):
            latency = {c: step_latency(figures, p, family, c) * scale
                       * (network if c == "network" else 1.0) for c in LINK_CLASSES}
            old = overrides.get((p, family)) or ProtocolOverride()
            overrides[(p, family)] = dataclasses.replace(old, latency=latency)
    changes["overrides"] = overrides
    return dataclasses.replace(figures, **changes)
