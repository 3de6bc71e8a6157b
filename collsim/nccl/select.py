"""Simulating ``--algorithm auto`` (NCCL's choice of algorithm, protocol and channels) and
``--algorithm best`` (every eligible registered NCCL algorithm and protocol simulated, the
fastest reported with its speedup over auto)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from collsim.engine.costs import CostModel
from collsim.errors import InputError
from collsim.hardware.placement import place_ranks
from collsim.hardware.topology import Topology
from collsim.nccl.call import (
    NCCL_PARAMS,
    auto_choice,
    candidates,
    check_protocol,
    is_nccl,
    takes_channels,
)
from collsim.params import COMMON_PARAMS
from collsim.suggest import did_you_mean


def selector_params(algorithm: str, params: dict[str, Any]) -> dict[str, Any]:
    """The parameters ``auto`` and ``best`` take: the common ones, and for ``auto`` also
    ``protocol`` and ``channels`` (NCCL's choice under NCCL_PROTO, run on that many channels);
    algorithm parameters are theirs to choose."""
    takes = COMMON_PARAMS + (NCCL_PARAMS if algorithm == "auto" else ())
    for name in params:
        if name not in takes:
            why = "they are what it chooses" if name in NCCL_PARAMS else \
                f"it takes {', '.join(takes)}{did_you_mean(name, takes)}"
            raise InputError(f"algorithm {algorithm} takes no parameter {name!r}: {why}",
                             key=f"param.{name}")
    return params


def simulate_selected(topology: Topology, collective: str, selector: str, ranks: int,
                      size_bytes: int, params: dict[str, Any], costs: CostModel | None,
                      observe: Callable[[Any], Any] | None = None, exact: bool = False
                      ) -> Any:
    """The row of ``auto`` or ``best`` for this call: the chosen algorithm's simulation under
    its plan, recorded as ``algorithm`` = the selector and ``selected`` = what ran;
    ``exact`` as :func:`~collsim.simulate.simulate`'s."""
    from collsim.simulate import simulate

    params = dict(selector_params(selector, params))
    protocol = check_protocol(params.pop("protocol", "auto"))
    channels = params.pop("channels", "auto")
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise InputError(f"ranks must be a positive whole number, got {ranks!r}", key="ranks")
    gpus = place_ranks(topology, ranks, params)
    auto = auto_choice(topology, collective, gpus, size_bytes,
                       None if protocol == "auto" else protocol)
    run_auto = simulate(topology, collective, auto.algorithm, ranks, size_bytes,
                        _with(params, collective, auto.algorithm, auto.protocol,
                              auto.channels if channels == "auto" else channels),
                        costs, observe, exact)
    if selector == "auto":
        return replace(run_auto, algorithm="auto", selected=auto.algorithm)
    best = run_auto
    for algorithm, protocol in candidates(topology, collective, gpus, size_bytes):
        if (algorithm, protocol) == (auto.algorithm, auto.protocol):
            continue
        result = simulate(topology, collective, algorithm, ranks, size_bytes,
                          _with(params, collective, algorithm, protocol, "auto"), costs, observe,
                          exact)
        if result.time_s < best.time_s:
            best = result
    speedup = run_auto.time_s / best.time_s if best.time_s > 0 else 1.0
    return replace(best, algorithm="best", selected=best.algorithm, speedup_vs_auto=speedup)


def _with(params: dict[str, Any], collective: str, algorithm: str, protocol: str,
          channels: int | str) -> dict[str, Any]:
    """``params`` with the protocol, and the channels where the algorithm takes them."""
    chosen = {**params, "protocol": protocol} if is_nccl(algorithm) else dict(params)
    if takes_channels(collective, algorithm):
        chosen["channels"] = channels
    return chosen
