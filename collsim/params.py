"""The parameters every algorithm takes and their defaults, in one place: the simulator, the
scenario loader and sweep, the crossover search and the closed forms all import them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

# Bytes per element of the data types a collective can carry (bfloat16 as in NCCL).
DTYPES = {"int8": 1, "uint8": 1, "float16": 2, "bfloat16": 2, "int32": 4, "uint32": 4,
          "float32": 4, "int64": 8, "uint64": 8, "float64": 8}
DEFAULT_DTYPE = "float32"  # as nccl-tests
# The pipelining chunk of chain, binary_tree, double_binary_tree and scan's chain.
DEFAULT_CHUNK_BYTES = 512 * 1024
# Parameters every algorithm accepts, besides the ones its registration declares.
COMMON_PARAMS = ("root", "dtype", "placement")
# Parameters only a plan under NCCL's costs sets (no caller gives them): NVLS's seconds a
# head on its scatter and gather. A run of the call at another size carries them over.
PLANNED_ONLY = ("arity_us",)


class CallParams(TypedDict, total=False):
    """The parameters a call may carry, as a user gives them (sizes as text, ``auto``) or
    as checked (sizes in bytes, channels a number). An algorithm registered from Python may
    declare others of its own; they travel alongside these."""

    root: int                        # the rooted collectives' root rank
    dtype: str                       # one of DTYPES
    placement: str | Sequence[int]   # packed, spread, or the GPU of each rank
    chunk_size: int | str            # the pipelining chunk, bytes
    channels: int | str              # NCCL's channels, or auto
    protocol: str                    # NCCL's protocol, or auto
    window: int                      # chunks in flight on a connection
    units: int                       # units a chunk is forwarded in inside a node
    inter: str                       # hierarchical: the algorithm between nodes
    peer_channels: int               # NCCL's alltoall: channels one peer's data is cut over
    batch: int                       # NCCL's alltoall: operations a channel runs at once


def dtype_name(params: Mapping[str, Any]) -> str:
    """The data type the parameters ask for (the default when they name none)."""
    return params.get("dtype", DEFAULT_DTYPE)


def itemsize(params: Mapping[str, Any]) -> int:
    """Bytes per element under the parameters' data type (already checked to be known)."""
    return DTYPES[dtype_name(params)]
