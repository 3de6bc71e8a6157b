"""What one call runs with on a machine: its cost model, NCCL protocol and channel count, in
one place (:func:`plan_call`), and what ``--algorithm auto`` (NCCL's choice) and ``best``
(the fastest simulated) pick (:func:`auto_choice`, :func:`candidates`).

On a machine that declares ``nccl:`` figures an NCCL algorithm (``ring``, ``nccl_tree``,
``nvls``, ...) runs under :func:`collsim.nccl.protocols.cost_model` of its family and protocol,
and any other algorithm under the ring family's Simple costs (a textbook program moves whole
buffers as NCCL's Simple protocol does); what the protocol implies for an algorithm's own
parameters (NCCL's chunk, window, units) is the algorithm's ``protocol_params``, declared on
its registry record. Without ``nccl:`` figures (the canonical kinds)
every call runs under the ideal model: no protocol, one channel unless asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from collsim.algorithms.registry import REGISTRY, Algorithm, algorithms_for
from collsim.callspec import CallSpec
from collsim.engine.costs import IDEAL, CostModel
from collsim.errors import InputError
from collsim.hardware.nccl_names import (
    ALGORITHMS,
    MODELLED_COLLECTIVES,
    PROTOCOLS,
    algorithm_name,
    parse_selection,
    protocol_name,
)
from collsim.hardware.topology import Topology
from collsim.nccl.adapter import nccl_system
from collsim.nccl.choice import channels as nccl_channels
from collsim.nccl.choice import choose
from collsim.nccl.p2p import chunk_bytes, operation_channels, p2p_channels
from collsim.nccl.p2p_schedule import PER_BATCH
from collsim.nccl.protocols import (
    cost_model,
    nccl_figures,
    p2p_network_cap,
    p2p_nvlink_cap,
    p2p_reach,
    p2p_slices,
    with_ring_chunk_slots,
)
from collsim.nccl.ring_block import with_ring_send_cap
from collsim.nccl.system import NcclSystem
from collsim.nccl.tuning import model as tuning_model
from collsim.params import CallParams

SELECTORS = ("auto", "best")   # algorithm names that pick a registered algorithm
# NCCL runs alltoall and sendrecv as grouped sends and receives, which its tuner does not
# model; auto runs collsim's program of them when it is registered, under Simple costs: for
# sendrecv on the channels NCCL's p2p path gives one operation (collsim.nccl.p2p), for
# alltoall on NCCL's p2p channels, each operation cut into the parts NCCL gives it and each
# channel running NCCL's batches of operations at once (collsim.nccl.p2p_schedule).
POINT_TO_POINT = {"alltoall": "nccl_p2p", "sendrecv": "nccl_p2p"}
NCCL_PARAMS = ("protocol", "channels")
TEXTBOOK_FAMILY, TEXTBOOK_PROTOCOL = "ring", "Simple"


@dataclass(frozen=True)
class Plan:
    """How a call runs: its checked parameters (``protocol`` removed, ``channels`` a number
    where the algorithm takes it), its cost model, and the NCCL protocol (None under the
    ideal model or a model the caller gave) and channels (None for algorithms without)."""

    params: CallParams
    costs: CostModel
    protocol: str | None
    channels: int | None


def canonical_algorithm(collective: str, name: Any) -> Any:
    """collsim's name for an algorithm as a user typed it: ``auto`` and ``best`` in any case,
    and NCCL's ``NCCL_ALGO`` spellings of its algorithms (``Tree``, ``NVLSTree``, ``RING``);
    a registered name, or anything else, as given."""
    if not isinstance(name, str) or (collective, name) in REGISTRY:
        return name
    lowered = name.strip().lower()
    if lowered in SELECTORS:
        return lowered
    try:
        return algorithm_name(name)
    except InputError:
        return name


def is_nccl(name: str) -> bool:
    """Whether ``name`` is one of NCCL's algorithms (it then takes ``protocol``)."""
    return name in ALGORITHMS


def check_protocol(value: Any) -> str:
    """``auto`` or NCCL's spelling of a protocol given in any case; InputError otherwise."""
    if not isinstance(value, str):
        raise InputError(f"protocol must be one of {', '.join(PROTOCOLS)} or auto, got "
                         f"{value!r}", key="param.protocol")
    return "auto" if value.strip().lower() == "auto" else \
        protocol_name(value, key="param.protocol")


def plan(topology: Topology, collective: str, algorithm: str, gpus: Sequence[int], size: int,
         params: CallParams, costs: CostModel | None = None) -> Plan:
    """:func:`plan_call` of the call given apart."""
    return plan_call(CallSpec(topology, collective, algorithm, len(gpus), size,
                              params, costs), gpus)


def plan_call(call: CallSpec, gpus: Sequence[int]) -> Plan:
    """The plan of ``call`` (its parameters checked) on ``gpus``; ``call.costs``, if given,
    replaces the machine's cost model (the protocol is then not recorded)."""
    topology, collective, algorithm, costs = call.topology, call.collective, call.algorithm, \
        call.costs
    params: dict[str, Any] = dict(call.params)
    protocol = params.pop("protocol", "auto")
    has_channels = "channels" in params or takes_channels(collective, algorithm)
    channels = params.get("channels", "auto")
    figures = nccl_figures(topology)
    if figures is None:
        if protocol != "auto":
            raise InputError(f"topology '{topology.name}' declares no NCCL figures (no 'nccl' "
                             f"section), so it has no protocol {protocol!r}; leave protocol "
                             "unset or auto", key="param.protocol")
        if has_channels:
            params["channels"] = 1 if channels == "auto" else channels
        return Plan(params, IDEAL if costs is None else costs, None,
                    params.get("channels") if has_channels else None)
    if not is_nccl(algorithm):
        if protocol not in ("auto", TEXTBOOK_PROTOCOL):
            raise InputError(f"{collective}/{algorithm} is not one of NCCL's algorithms; it runs "
                             f"under the {TEXTBOOK_PROTOCOL} protocol's costs only",
                             key="param.protocol")
        # sent as NCCL's point-to-point path sends (its p2p chunks across the network, at
        # what that path reaches of a NIC)
        model = p2p_reach(p2p_slices(cost_model(topology, TEXTBOOK_FAMILY, TEXTBOOK_PROTOCOL,
                                                gpus), chunk_bytes(nccl_system(topology, gpus))),
                          figures)
        if collective == "sendrecv" and algorithm == POINT_TO_POINT["sendrecv"]:
            # its lane stands for NCCL's channels of the operation, each at NCCL's p2p
            # figure across the network (an alltoall lane can stand for several of NCCL's
            # channels at once, so it is not capped)
            model = p2p_network_cap(model)
        if collective == "alltoall" and algorithm == POINT_TO_POINT["alltoall"] \
                and nccl_system(topology, gpus).gpu_link != "pcie":
            # on one node over NVLink, every peer at once: each channel at NCCL's figure
            model = p2p_nvlink_cap(model, topology.machine.gpu.arch)
        if has_channels:
            params["channels"] = textbook_channels(call, gpus) if channels == "auto" \
                else channels
            for name, value in p2p_layout(call, gpus, params["channels"]).items():
                params.setdefault(name, value)
        return Plan(params, model if costs is None else costs,
                    None if costs is not None else TEXTBOOK_PROTOCOL,
                    params.get("channels") if has_channels else None)
    if protocol == "auto" or (has_channels and channels == "auto"):
        picked_protocol, picked_channels = nccl_defaults(
            topology, collective, algorithm, gpus, call.size_bytes,
            None if protocol == "auto" else protocol)
        protocol = picked_protocol if protocol == "auto" else protocol
        if has_channels and channels == "auto":
            channels = picked_channels
    if has_channels:
        params["channels"] = channels
    registered = REGISTRY.get((collective, algorithm))
    if costs is None and registered is not None and registered.protocol_params is not None:
        # What NCCL's protocol implies for this algorithm (its chunk, window, units); a
        # caller's cost model has no protocol, and a parameter the caller gave wins.
        implied = registered.protocol_params(replace(call, params=params), gpus, protocol,
                                             channels)
        for name, value in implied.items():
            params.setdefault(name, value)
    try:
        model = cost_model(topology, algorithm, protocol, gpus)
    except InputError as exc:  # a protocol the family does not run (NVLS: Simple only)
        raise InputError(exc.message, key="param.protocol") from None
    if algorithm == "ring" and protocol == "Simple" and len(gpus) > 1:
        # a Simple ring's blocks send in only some of their primitives (on 2 GPUs, half)
        graph = tuning_model(nccl_system(topology, gpus)).graphs.ring
        if graph.over_nvlink:
            model = with_ring_send_cap(model, collective, len(gpus),
                                       topology.machine.gpu.arch, graph.channels,
                                       graph.bw_intra)
        # a chunk holds CHUNKSTEPS of the connection's slots, however small
        model = with_ring_chunk_slots(model, collective)
    return Plan(params, model if costs is None else costs, None if costs is not None else protocol,
                channels if has_channels else None)


def takes_channels(collective: str, algorithm: str) -> bool:
    """Whether the registered ``collective``/``algorithm`` takes a ``channels`` parameter."""
    registered = REGISTRY.get((collective, algorithm))
    return registered is not None and "channels" in registered.params


def textbook_channels(call: CallSpec, gpus: Sequence[int]) -> int:
    """The channels a program outside NCCL's tuner runs on when none are given: NCCL's p2p
    channels of one operation for its sendrecv program, the communicator's p2p channels for
    its alltoall program, else 1."""
    if call.algorithm != POINT_TO_POINT.get(call.collective) or len(gpus) < 2:
        return 1
    system = nccl_system(call.topology, gpus)
    if call.collective == "alltoall":
        return p2p_channels(system)[0]
    return operation_channels(system, call.size_bytes)


def p2p_layout(call: CallSpec, gpus: Sequence[int], channels: int) -> CallParams:
    """What NCCL's p2p path implies for its alltoall program on ``channels`` channels: each
    operation (size / ranks bytes) cut into the parts NCCL gives it, and NCCL's batch of
    operations a channel runs at once (on one node too, where over NVLink the cost model caps
    each channel at NCCL's per-channel figure: :func:`p2p_nvlink_cap`). Nothing for other
    programs."""
    if call.collective != "alltoall" or call.algorithm != POINT_TO_POINT["alltoall"] \
            or len(gpus) < 2:
        return {}
    system = nccl_system(call.topology, gpus)
    parts = operation_channels(system, call.size_bytes // len(gpus))
    return {"peer_channels": min(parts, channels), "batch": PER_BATCH}


def nccl_defaults(topology: Topology, collective: str, algorithm: str, gpus: Sequence[int],
                  size: int, protocol: str | None = None) -> tuple[str, int]:
    """(protocol, channels) NCCL would run ``algorithm`` with for this call: its choice
    restricted to the algorithm (and ``protocol`` if given). Where NCCL's model has nothing
    to say (one rank, a collective it does not tune, an algorithm it would not run here)
    Simple and NCCL's channel sizing for it."""
    system = nccl_system(topology, gpus)
    if collective in MODELLED_COLLECTIVES:
        choice = choose(system, collective, size, algorithms={algorithm},
                        protocols=None if protocol is None else {protocol})
        if choice is not None:
            return choice.protocol, choice.channels
    protocol = protocol or TEXTBOOK_PROTOCOL
    if len(gpus) < 2 or collective not in MODELLED_COLLECTIVES:
        return protocol, 1
    return protocol, nccl_channels(tuning_model(system), collective, algorithm, protocol, size)[0]


def registered_nccl(collective: str) -> list[str]:
    """NCCL's algorithms registered for ``collective``, in NCCL's order."""
    names = {a.name for a in algorithms_for(collective)}
    return [name for name in ALGORITHMS if name in names]


def environment_allows(system: NcclSystem, collective: str,
                       registered: Sequence[str]) -> set[str]:
    """The registered NCCL algorithms the machine's NCCL_ALGO (``nccl.environment``) leaves
    NCCL for ``collective``: all of them where it sets none. Naming the algorithms to
    :func:`~collsim.nccl.choice.choose` replaces the environment's NCCL_ALGO there, so the
    restriction is applied here."""
    names = set(registered)
    if system.algorithms_enabled is not None:
        names &= parse_selection(system.algorithms_enabled, "algorithm", collective)
    return names


@dataclass(frozen=True)
class AutoChoice:
    """What ``auto`` runs: algorithm, protocol, channels (NCCL's pick among the registered
    algorithms)."""

    algorithm: str
    protocol: str
    channels: int


def auto_choice(topology: Topology, collective: str, gpus: Sequence[int],
                size: int, protocol: str | None = None) -> AutoChoice:
    """NCCL's choice of algorithm, protocol and channels for this call among the NCCL
    algorithms collsim has programs for, under ``protocol`` if given (as with NCCL_PROTO set
    and NCCL_ALGO not); InputError when the machine declares no NCCL figures or nothing
    registered serves the collective."""
    if nccl_figures(topology) is None:
        raise InputError(f"auto and best are NCCL's choice, and topology '{topology.name}' "
                         "declares no NCCL figures (no 'nccl' section); name an algorithm "
                         "or use a machine with them (`collsim list` shows the shipped ones)",
                         key="algorithm")
    registered = registered_nccl(collective)
    if not registered:
        program = POINT_TO_POINT.get(collective)
        if program is not None and (collective, program) in REGISTRY \
                and protocol in (None, TEXTBOOK_PROTOCOL):
            call = CallSpec(topology, collective, program, len(gpus), size, {})
            return AutoChoice(program, TEXTBOOK_PROTOCOL, textbook_channels(call, gpus))
        if program is not None and (collective, program) in REGISTRY:
            raise InputError(f"auto {collective} runs NCCL's point-to-point program, which "
                             f"collsim times under {TEXTBOOK_PROTOCOL} only", key="param.protocol")
        raise InputError(f"no NCCL algorithm for {collective} is implemented, so auto has "
                         "nothing to choose from", key="algorithm")
    choice = None
    if collective in MODELLED_COLLECTIVES:
        system = nccl_system(topology, gpus)
        choice = choose(system, collective, size,
                        algorithms=environment_allows(system, collective, registered),
                        protocols=None if protocol is None else {protocol})
    if choice is None:
        # NCCL's tuner says nothing (one rank, alltoall): its first registered program, Simple.
        algorithm = registered[0] if "ring" not in registered else "ring"
        protocol, channels = nccl_defaults(topology, collective, algorithm, gpus, size,
                                           protocol)
        return AutoChoice(algorithm, protocol, channels)
    return AutoChoice(choice.algorithm, choice.protocol, choice.channels)


def candidates(topology: Topology, collective: str, gpus: Sequence[int], size: int
               ) -> list[tuple[str, str]]:
    """The (algorithm, protocol) pairs ``best`` simulates: every registered NCCL algorithm with
    every protocol NCCL would consider for this call (its gating rules), in NCCL's order; the
    auto choice is always among them."""
    if nccl_figures(topology) is None:
        raise InputError(f"algorithm best compares NCCL's algorithms and protocols, and "
                         f"topology '{topology.name}' declares no NCCL figures (no 'nccl' "
                         "section); name an algorithm or use a machine with them",
                         key="algorithm")
    registered = registered_nccl(collective)
    pairs: list[tuple[str, str]] = []
    if collective in MODELLED_COLLECTIVES:
        system = nccl_system(topology, gpus)
        choice = choose(system, collective, size,
                        algorithms=environment_allows(system, collective, registered))
        if choice is not None:
            pairs = [(c.algorithm, c.protocol) for c in choice.candidates]
    if not pairs:
        auto = auto_choice(topology, collective, gpus, size)
        pairs = [(auto.algorithm, auto.protocol)]
    return pairs


def selector(collective: str, name: str) -> Algorithm:
    """A registry record standing for ``auto`` or ``best`` (what a scenario sweep checks:
    any rank count, the common parameters only); it has no program of its own."""
    summary = ("NCCL's choice of algorithm, protocol and channels" if name == "auto" else
               "the fastest of NCCL's algorithms and protocols, simulated")
    return Algorithm(collective, name, _no_program, "", None, "collsim.calls.plan", summary)


def _no_program(rank: int, job: Any) -> Any:
    raise AssertionError("auto and best run the algorithm they select")
