"""NCCL releases: the release a machine runs (``nccl.version``), and the behaviours collsim
follows by release (docs/nccl.md#nccl-versions).

collsim models NCCL 2.30.7 (github.com/NVIDIA/nccl@5067397c); a machine that declares no
release runs that one. A behaviour gated here was read in NCCL's source at each release's tag
(``git show v2.27.3-1:src/graph/connect.cc``); everything else follows 2.30.7 whatever the
release.
"""

from __future__ import annotations

from collsim.hardware.nccl_release import Version
from collsim.nccl import constants as C

MODELLED: Version = (2, 30, 7)
"""The release collsim's constants, search and cost model are read from."""

# ncclTopoPostset (src/graph/connect.cc) raises the ring/tree channel count to the NVLS channel
# count ("Support maximal channel usage for aggregation": if (comm->nChannels <
# comm->nvlsChannels) nChannels = comm->nChannels = copyChannels(comm, comm->nChannels,
# comm->nvlsChannels, ...)) from v2.20.3-1 (line 473) to v2.27.7-1 (line 493); v2.19.4-1 and
# v2.28.3-1 onwards have no such copy (v2.30.7-1 lines 508-515). Ring and tree calls run on
# comm->nChannels (getAlgoInfo's "int nc = comm->nChannels", src/enqueue.cc).
_RING_COPY_UP = ((2, 20, 3), (2, 28, 3))


def copies_rings_to_nvls(version: Version) -> bool:
    """Whether ``version`` raises the ring/tree channels to the NVLS channel count where NVLS
    is on (2.20.3 up to, not including, 2.28.3)."""
    low, high = _RING_COPY_UP
    return low <= version < high


# NVLS channels by default (src/transport/nvls.cc): NCCL_NVLS_NCHANNELS 16 for every GPU up to
# v2.24.3-1 (line 146); NVLS_NCHANNELS_SM100 32 on SM100 wherever it runs from v2.25.1-1 (lines
# 144-178) through v2.26.6-1; from v2.27.3-1 24 on one NVLink domain (NVLS_NCHANNELS_SM100_NVL,
# lines 149-195), 32 across nodes.
_SM100_NVLS_CHANNELS = (2, 25, 1)
_SM100_NVLS_ONE_DOMAIN = (2, 27, 3)


def sm100_nvls_channels(version: Version, one_domain: bool) -> int:
    """NVLS's default channel count on SM100 under ``version`` (``one_domain``: the
    communicator is one NVLink domain)."""
    if version < _SM100_NVLS_CHANNELS:
        return C.NVLS_CHANNELS_SM90
    if one_domain and version >= _SM100_NVLS_ONE_DOMAIN:
        return C.NVLS_CHANNELS_SM100_NVL
    return C.NVLS_CHANNELS_SM100


# ncclTopoPostset's "Use 4 compute channels per search channel to reach peak BW on <8 PPN"
# (src/graph/connect.cc): absent at v2.17.1-1; from v2.18.1-1 (line 403) on SM90 exactly
# (minCompCap == 90) while 2 x nChannels <= MAXCHANNELS; from v2.20.3-1 (line 456) while
# nChannels < 16; from v2.25.1-1 (line 466) on SM90 and later (minCompCap >= 90). MAXCHANNELS is
# 32 up to v2.24.3-1 and 64 from v2.25.1-1 (src/include/device.h).
_POSTSET_SM90 = (2, 18, 1)
_POSTSET_SM90_BELOW_16 = (2, 20, 3)
_SM100_AND_64_CHANNELS = (2, 25, 1)


def max_channels(version: Version) -> int:
    """NCCL's MAXCHANNELS under ``version``: 32 before 2.25.1, 64 from it."""
    return C.MAX_CHANNELS if version >= _SM100_AND_64_CHANNELS else C.MAX_CHANNELS // 2


def doubles_sm90_channels(version: Version, arch: int, channels: int) -> bool:
    """Whether ncclTopoPostset doubles ``channels`` across nodes of ``arch`` GPUs whose rings
    run faster than 45 GB/s a channel, under ``version``."""
    if version < _POSTSET_SM90:
        return False
    if arch != 90 and not (arch > 90 and version >= _SM100_AND_64_CHANNELS):
        return False
    if version < _POSTSET_SM90_BELOW_16:
        return 2 * channels <= max_channels(version)
    return channels < C.POSTSET_SM90_MAX_CHANNELS


# ncclTopoPostset doubles the channels of an unpack network (GPUDirect-TCPX) across nodes
# below 16 ("Double the number of channels when using unpack networking", src/graph/connect.cc)
# from v2.22.3-1 (line 472); v2.21.5-1 has no such step.
_UNPACK_DOUBLING = (2, 22, 3)


def doubles_unpack_channels(version: Version) -> bool:
    """Whether ``version`` doubles the channels of an unpack network across nodes."""
    return version >= _UNPACK_DOUBLING


# PAT (NCCL_ALGO_PAT, allgather and reducescatter) first appears at v2.23.4-1
# (src/include/device.h; NCCL_PAT_ENABLE in src/graph/tuning.cc line 108); v2.22.3-1 has none.
_PAT = (2, 23, 4)


def has_pat(version: Version) -> bool:
    """Whether ``version`` has the PAT algorithm."""
    return version >= _PAT
