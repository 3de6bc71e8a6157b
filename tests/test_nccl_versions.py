"""The NCCL release a machine runs: read as NCCL prints it, and the channel counts gated to the
releases whose source has them (ncclTopoPostset's steps, NVLS's SM100 count, MAXCHANNELS)."""

from __future__ import annotations

import pytest

from collsim.hardware.nccl_release import format_version, parse_version
from collsim.nccl.versions import (
    MODELLED,
    copies_rings_to_nvls,
    doubles_sm90_channels,
    doubles_unpack_channels,
    has_pat,
    max_channels,
    sm100_nvls_channels,
)


@pytest.mark.parametrize("text, version", [("2.27.3", (2, 27, 3)), ("2.27.3-1", (2, 27, 3)),
                                           (" 2.18.5 ", (2, 18, 5)), ("2.30.7", MODELLED)])
def test_releases_are_read_as_nccl_prints_them(text, version):
    assert parse_version(text) == version
    assert parse_version(format_version(version)) == version


@pytest.mark.parametrize("text", ["2.27", 2.27, "2.27.3.1", "v2.27.3", "", "1.3.4", "3.0.0"])
def test_anything_else_is_refused(text):
    with pytest.raises(ValueError):
        parse_version(text)


@pytest.mark.parametrize("version, copies", [
    ((2, 19, 4), False), ((2, 20, 3), True), ((2, 24, 3), True), ((2, 27, 7), True),
    ((2, 28, 3), False), ((2, 29, 2), False), (MODELLED, False)])
def test_only_2_20_3_to_2_27_copy_ring_channels_up_to_nvls(version, copies):
    assert copies_rings_to_nvls(version) is copies


def test_the_sm90_doubling_by_release():
    assert not doubles_sm90_channels((2, 17, 1), 90, 8)       # no such step yet
    assert doubles_sm90_channels((2, 18, 1), 90, 16)          # 2 x 16 <= 32
    assert not doubles_sm90_channels((2, 18, 1), 90, 17)
    assert not doubles_sm90_channels((2, 20, 3), 90, 16)      # below 16 only
    assert doubles_sm90_channels((2, 20, 3), 90, 15)
    assert not doubles_sm90_channels((2, 24, 3), 100, 8)      # SM90 exactly before 2.25.1
    assert doubles_sm90_channels((2, 25, 1), 100, 8)
    assert not doubles_sm90_channels(MODELLED, 80, 8)


def test_nvls_channels_maxchannels_and_unpack_by_release():
    assert [sm100_nvls_channels(v, True) for v in ((2, 24, 3), (2, 26, 6), (2, 27, 3))] == \
        [16, 32, 24]
    assert [sm100_nvls_channels(v, False) for v in ((2, 24, 3), (2, 26, 6), (2, 27, 3))] == \
        [16, 32, 32]
    assert (max_channels((2, 24, 3)), max_channels((2, 25, 1))) == (32, 64)
    assert (doubles_unpack_channels((2, 21, 5)), doubles_unpack_channels((2, 22, 3))) == \
        (False, True)


def test_pat_from_2_23_4():
    assert (has_pat((2, 22, 3)), has_pat((2, 23, 4)), has_pat(MODELLED)) == (False, True, True)
