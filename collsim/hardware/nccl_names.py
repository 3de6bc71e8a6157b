"""Names of NCCL's algorithms, protocols and modelled collectives, in collsim's spelling and
NCCL's, and the parsing of NCCL's spellings (NCCL_ALGO / NCCL_PROTO, matched case-insensitively);
the CPU kinds, NIC paths and P2P levels a machine's ``nccl`` section may name. They sit with the
hardware because a machine file is checked against them; NCCL's model (collsim.nccl) imports
them.

Tuples are in NCCL's index order, which is its tie-break order (docs/nccl.md#tuning-channels):
on equal model times the earlier algorithm wins, then the earlier protocol.
"""

from __future__ import annotations

from collsim.errors import InputError

# collsim's names (docs/design.md#real-machines), in NCCL's algorithm index order 0..6.
ALGORITHMS = ("nccl_tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
NCCL_ALGORITHM_NAMES = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTOCOLS = ("LL", "LL128", "Simple")
# What NcclSystem.cpu and NcclSystem.nic_path may be (collsim.nccl.system).
CPUS = ("intel", "amd", "arm")
NIC_PATHS = ("pix", "pxb", "phb", "sys")
# NCCL_P2P_LEVEL values a machine may name: NCCL's default (P2P through PCIe switches, host
# memory across a CPU's root complex) and P2P everywhere (collsim.nccl.shm).
P2P_LEVELS = ("pxb", "sys")

# The collectives NCCL's tuner models. Alltoall and send/receive are grouped point-to-point
# calls that do not go through the tuner (docs/nccl.md#tuning), so the model has nothing to
# say on them.
MODELLED_COLLECTIVES = ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")

_ALGORITHM_BY_SPELLING = {
    **{nccl.lower(): ours for nccl, ours in zip(NCCL_ALGORITHM_NAMES, ALGORITHMS, strict=True)},
    **{ours: ours for ours in ALGORITHMS},
}
_PROTOCOL_BY_SPELLING = {name.lower(): name for name in PROTOCOLS}


def algorithm_name(text: str, *, key: str = "algorithm") -> str:
    """collsim's name for an NCCL algorithm spelled as NCCL_ALGO does (``NVLSTree``, ``tree``)
    or as collsim does (``nvls_tree``), in any case."""
    name = _ALGORITHM_BY_SPELLING.get(text.strip().lower())
    if name is None:
        raise InputError(
            f"unknown NCCL algorithm {text!r}: expected one of "
            f"{', '.join(NCCL_ALGORITHM_NAMES)} (any case) or {', '.join(ALGORITHMS)}",
            key=key)
    return name


def protocol_name(text: str, *, key: str = "protocol") -> str:
    """NCCL's protocol name (``LL``, ``LL128``, ``Simple``) for a spelling in any case."""
    name = _PROTOCOL_BY_SPELLING.get(text.strip().lower())
    if name is None:
        raise InputError(
            f"unknown NCCL protocol {text!r}: expected one of {', '.join(PROTOCOLS)} (any case)",
            key=key)
    return name


def nccl_algorithm_name(name: str) -> str:
    """NCCL's spelling of one of collsim's NCCL algorithm names (``nvls_tree`` -> ``NVLSTree``)."""
    return NCCL_ALGORITHM_NAMES[ALGORITHMS.index(name)]


def parse_selection(text: str, kind: str, collective: str, *,
                    key: str | None = None) -> frozenset[str]:
    """What an NCCL_ALGO (``kind="algorithm"``) or NCCL_PROTO (``kind="protocol"``) value
    enables for ``collective``: comma lists, a leading ``^`` to exclude, and ``;``-separated
    per-collective entries with a ``collective:`` prefix (only the first may omit it), e.g.
    ``ring,tree;allreduce:nvls`` (NCCL 2.22+ syntax)."""
    key = key or kind
    every = ALGORITHMS if kind == "algorithm" else PROTOCOLS
    parse = algorithm_name if kind == "algorithm" else protocol_name
    enabled = frozenset(every)
    for index, entry in enumerate(part for part in text.split(";")):
        prefix, colon, items = entry.partition(":")
        if not colon:
            if index > 0:
                raise InputError(f"{text!r}: every entry after the first needs a "
                                 "'collective:' prefix", key=key)
            prefix, items = "", entry
        prefix = prefix.strip().lower()
        if prefix and prefix not in MODELLED_COLLECTIVES:
            raise InputError(f"{text!r}: unknown collective prefix {prefix!r}, expected one "
                             f"of {', '.join(MODELLED_COLLECTIVES)}", key=key)
        if prefix and prefix != collective:
            continue
        items = items.strip()
        exclude = items.startswith("^")
        names = frozenset(parse(item, key=key) for item in items.lstrip("^").split(",")
                          if item.strip())
        enabled = frozenset(every) - names if exclude else names
    return enabled
