"""NCCL's spellings of algorithms and protocols, and NCCL_ALGO / NCCL_PROTO values."""

from __future__ import annotations

import pytest

from collsim.errors import InputError
from collsim.hardware.nccl_names import (
    ALGORITHMS,
    algorithm_name,
    nccl_algorithm_name,
    parse_selection,
    protocol_name,
)


@pytest.mark.parametrize("text, name", [
    ("Ring", "ring"), ("TREE", "nccl_tree"), ("tree", "nccl_tree"), ("NVLS", "nvls"),
    ("nvlstree", "nvls_tree"), ("CollNetDirect", "collnet_direct"),
    ("COLLNETCHAIN", "collnet_chain"), ("pat", "pat"), ("nccl_tree", "nccl_tree"),
    (" NVLSTree ", "nvls_tree"),
])
def test_algorithm_spellings(text, name):
    assert algorithm_name(text) == name


def test_collsim_and_nccl_names_round_trip():
    assert [algorithm_name(nccl_algorithm_name(a)) for a in ALGORITHMS] == list(ALGORITHMS)
    assert nccl_algorithm_name("nvls_tree") == "NVLSTree"


@pytest.mark.parametrize("text, name", [("ll", "LL"), ("LL128", "LL128"), ("simple", "Simple"),
                                        ("SIMPLE", "Simple")])
def test_protocol_spellings(text, name):
    assert protocol_name(text) == name


def test_unknown_names_are_input_errors_naming_the_key():
    with pytest.raises(InputError) as caught:
        algorithm_name("hierarchical", key="algorithm")
    assert caught.value.key == "algorithm" and "NVLSTree" in str(caught.value)
    with pytest.raises(InputError) as caught:
        protocol_name("LL64", key="protocol")
    assert "LL128" in str(caught.value)


def test_nccl_algo_lists():
    assert parse_selection("ring,tree", "algorithm", "allreduce") == {"ring", "nccl_tree"}
    assert parse_selection("^nvls,nvlstree", "algorithm", "allreduce") == \
        set(ALGORITHMS) - {"nvls", "nvls_tree"}
    # Per-collective entries: the prefixed one replaces the first for its collective.
    text = "ring,tree;allreduce:nvls"
    assert parse_selection(text, "algorithm", "allreduce") == {"nvls"}
    assert parse_selection(text, "algorithm", "broadcast") == {"ring", "nccl_tree"}
    assert parse_selection("^LL128", "protocol", "allreduce") == {"LL", "Simple"}


def test_nccl_algo_list_errors():
    with pytest.raises(InputError, match="prefix"):
        parse_selection("ring;tree", "algorithm", "allreduce")
    with pytest.raises(InputError, match="unknown collective"):
        parse_selection("alltoall:ring", "algorithm", "allreduce")
    with pytest.raises(InputError, match="unknown NCCL algorithm"):
        parse_selection("ring,mesh", "algorithm", "allreduce")
