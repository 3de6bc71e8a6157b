"""The NCCL release a machine runs: read as NCCL prints it, and the copy-up of ring/tree
channels to NVLS's gated to the releases whose ncclTopoPostset does it."""

from __future__ import annotations

import pytest

from collsim.nccl.versions import MODELLED, copies_rings_to_nvls, format_version, parse_version


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
