"""``-a auto --param protocol=LL``: what nccl-tests users run most (NCCL_PROTO set, NCCL_ALGO
not), NCCL's choice of algorithm and channels among the algorithms that run that protocol;
``channels=N`` runs NCCL's choice on N channels. Times in µs in the comments, worked by hand
as in tests/test_nccl_choice.py."""

from __future__ import annotations

import pytest

from collsim.cli import main
from collsim.errors import InputError
from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import find_topology
from collsim.nccl.adapter import nccl_system
from collsim.nccl.choice import choose
from collsim.simulate import simulate
from tests.nccl_machines import DGX_H100

DGX = load_topology(find_topology("dgx-h100"))
MiB = 2**20


def time_of(choice, algorithm, protocol):
    return next(c.time for c in choice.candidates
                if (c.algorithm, c.protocol) == (algorithm, protocol)) * 1e6


def test_nccls_model_under_ll_on_an_h100_node_at_2_mib():
    """Unrestricted, NVLS Simple wins: 25 + 2097152 / 272000 = 32.71 µs. NVLS runs Simple
    only, so under LL the choice is between Ring LL, 15.0 + 2097152 / (141 x 8/14 x 1000) =
    41.03, and Tree LL, whose bandwidth NCCL's tree correction cuts to .6 at this size:
    15.2 + 2097152 / (331.2 / 3.8 / 2 x .6 x 1000) = 95.41: Ring LL. Its
    channels: the ring graph's 24, as 2 MiB >= 24 x 512 threads x 64 B a thread."""
    free = choose(DGX_H100, "allreduce", 2 * MiB)
    assert (free.algorithm, free.protocol) == ("nvls", "Simple")
    ll = choose(DGX_H100, "allreduce", 2 * MiB, protocols={"LL"})
    assert time_of(ll, "ring", "LL") == pytest.approx(15.0 + 2 * MiB / (1000 * 141 * 8 / 14))
    assert time_of(ll, "nccl_tree", "LL") == pytest.approx(
        15.2 + 2 * MiB / (1000 * 331.2 / 3.8 / 2 * 0.6))
    assert {c.protocol for c in ll.candidates} == {"LL"}
    assert (ll.algorithm, ll.protocol, ll.channels) == ("ring", "LL", 24)


def test_auto_under_a_protocol_runs_what_nccls_model_picks_among_its_algorithms():
    auto = simulate(DGX, "allreduce", "auto", 8, 2 * MiB, {"protocol": "LL"})
    assert (auto.algorithm, auto.selected, auto.protocol, auto.channels) == \
        ("auto", "ring", "LL", 24)
    assert auto.time_s == simulate(DGX, "allreduce", "ring", 8, 2 * MiB,
                                   {"protocol": "LL", "channels": 24}).time_s
    assert simulate(DGX, "allreduce", "auto", 8, 2 * MiB).selected == "nvls"


@pytest.mark.parametrize("protocol", ["LL", "LL128", "Simple"])
@pytest.mark.parametrize("size", [8, 2 * MiB, 256 * MiB])
def test_auto_under_each_protocol_is_the_restricted_choice(protocol, size):
    choice = choose(nccl_system(DGX, list(range(8))), "allreduce", size,
                    algorithms={"ring", "nccl_tree", "nvls", "nvls_tree"},
                    protocols={protocol})
    auto = simulate(DGX, "allreduce", "auto", 8, size, {"protocol": protocol.lower()})
    assert (auto.selected, auto.protocol, auto.channels) == \
        (choice.algorithm, choice.protocol, choice.channels)


def test_auto_on_n_channels_runs_nccls_choice_on_that_many():
    auto = simulate(DGX, "allreduce", "auto", 8, 256 * MiB, {"channels": 4})
    assert (auto.selected, auto.protocol, auto.channels) == ("nvls", "Simple", 4)
    assert auto.time_s == simulate(DGX, "allreduce", "nvls", 8, 256 * MiB,
                                   {"channels": 4}).time_s
    assert simulate(DGX, "allreduce", "auto", 8, 256 * MiB).channels == 16


def test_the_command_line_says_what_auto_ran(capsys):
    assert main(["estimate", "-t", "dgx-h100", "-c", "allreduce", "-a", "auto", "-p", "8",
                 "-s", "2MiB", "--param", "protocol=ll", "--param", "channels=2"]) == 0
    assert capsys.readouterr().out.startswith("allreduce auto (ring, LL, 2 channels) on ")


def test_best_still_chooses_the_protocol_itself_and_alltoall_runs_simple_only():
    with pytest.raises(InputError, match="they are what it chooses"):
        simulate(DGX, "allreduce", "best", 8, MiB, {"protocol": "LL"})
    with pytest.raises(InputError, match="point-to-point program") as caught:
        simulate(DGX, "alltoall", "auto", 8, MiB, {"protocol": "LL"})
    assert caught.value.key == "param.protocol"
    assert simulate(DGX, "alltoall", "auto", 8, MiB, {"protocol": "Simple"}).protocol == \
        "Simple"


def test_a_misspelt_parameter_of_auto_gets_a_suggestion():
    with pytest.raises(InputError, match="did you mean 'protocol'"):
        simulate(DGX, "allreduce", "auto", 8, MiB, {"protocl": "LL"})
