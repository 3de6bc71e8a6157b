"""NCCL releases: the release a machine runs (``nccl.version``), and the behaviours collsim
follows by release (docs/nccl.md#nccl-versions).

collsim models NCCL 2.30.7 (github.com/NVIDIA/nccl@5067397c); a machine that declares no
release runs that one. A behaviour gated here was read in NCCL's source at each release's tag
(``git show v2.27.3-1:src/graph/connect.cc``); everything else follows 2.30.7 whatever the
release.
"""

from __future__ import annotations

import re

Version = tuple[int, int, int]

MODELLED: Version = (2, 30, 7)
"""The release collsim's constants, search and cost model are read from."""

_PATTERN = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:-\d+)?")

# ncclTopoPostset (src/graph/connect.cc) raises the ring/tree channel count to the NVLS channel
# count ("Support maximal channel usage for aggregation": if (comm->nChannels <
# comm->nvlsChannels) nChannels = comm->nChannels = copyChannels(comm, comm->nChannels,
# comm->nvlsChannels, ...)) from v2.20.3-1 (line 473) to v2.27.7-1 (line 493); v2.19.4-1 and
# v2.28.3-1 onwards have no such copy (v2.30.7-1 lines 508-515). Ring and tree calls run on
# comm->nChannels (getAlgoInfo's "int nc = comm->nChannels", src/enqueue.cc).
_RING_COPY_UP = ((2, 20, 3), (2, 28, 3))


def parse_version(text: str) -> Version:
    """``"2.27.3"`` (or NCCL's tag form ``"2.27.3-1"``) as (2, 27, 3); ValueError saying what is
    expected otherwise."""
    match = _PATTERN.fullmatch(str(text).strip())
    if match is None:
        raise ValueError(f"{text!r} is not an NCCL release: expected MAJOR.MINOR.PATCH as NCCL "
                         "prints it (e.g. '2.27.3'), quoted in YAML")
    version = (int(match[1]), int(match[2]), int(match[3]))
    if version[0] != 2:
        raise ValueError(f"{text!r}: collsim models NCCL 2.x releases (e.g. '2.27.3')")
    return version


def format_version(version: Version) -> str:
    """(2, 27, 3) as ``2.27.3``."""
    return ".".join(str(part) for part in version)


def copies_rings_to_nvls(version: Version) -> bool:
    """Whether ``version`` raises the ring/tree channels to the NVLS channel count where NVLS
    is on (2.20.3 up to, not including, 2.28.3)."""
    low, high = _RING_COPY_UP
    return low <= version < high
