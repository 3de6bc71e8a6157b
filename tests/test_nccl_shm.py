"""GPU pairs NCCL stages through host memory (SHM) instead of P2P: across a CPU root complex
under NCCL's default P2P level, at 75% of the PCIe reach; P2P under one switch, on AMD with two
GPUs, or at ``nccl.p2p_level: sys``."""

from __future__ import annotations

import pytest

from collsim.api import estimate
from collsim.calls.report import format_nccl
from collsim.errors import InputError
from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import find_topology
from collsim.nccl.protocols import cost_model
from collsim.nccl.shm import SHM_SHARE, p2p_level, stages_through_host

GB = 1e9
PCIE_REACH = 24e9  # l40s-pcie's reachable.pcie: Gen4 x16 as NCCL computes it


def preset(name, **overrides):
    return load_topology(find_topology(name), overrides)


def uplink_and_link(topology, protocol="Simple"):
    """(uplink, GPU link) bandwidths the ring's cost model gives, B/s."""
    model = cost_model(topology, "ring", protocol)
    uplink = next(link for link in topology.links if link.kind == "pcie_uplink")
    gpu_link = next(link for link in topology.links if link.kind == "pcie")
    return model.bandwidth(uplink), model.bandwidth(gpu_link)


@pytest.mark.parametrize("protocol", ["LL", "LL128", "Simple"])
def test_root_complex_crossings_reach_three_quarters_of_p2p(protocol):
    # 31 GB/s line x (24 / 31) reachable x 0.75 SHM = 18 GB/s on the uplinks, under every
    # protocol; a GPU's own link keeps P2P's 24 (its switch-local traffic is P2P)
    uplink, gpu_link = uplink_and_link(preset("l40s-pcie", gpus=2), protocol)
    assert uplink == pytest.approx(0.75 * PCIE_REACH)
    assert gpu_link == pytest.approx(PCIE_REACH)


def test_nccl_p2p_level_follows_the_cpu_and_the_gpu_count():
    intel = preset("l40s-pcie", gpus=2).machine.nccl
    amd = preset("l40s-pcie", gpus=2, **{"nccl.cpu": "amd"}).machine.nccl
    assert p2p_level(intel, 2) == "pxb"
    assert p2p_level(amd, 2) == "sys" and p2p_level(amd, 3) == "pxb"
    assert stages_through_host(intel, 2, "pcie")
    assert not stages_through_host(intel, 2, "nvlink")  # GPU pairs on NVLink never cross


@pytest.mark.parametrize("overrides", [
    {"nccl.cpu": "amd"},              # NCCL allows P2P through the CPU for 2 GPUs on AMD
    {"nccl.p2p_level": "sys"},        # NCCL_P2P_LEVEL=SYS
])
def test_p2p_through_the_cpu_keeps_the_pcie_reach(overrides):
    uplink, _ = uplink_and_link(preset("l40s-pcie", gpus=2, **overrides))
    assert uplink == pytest.approx(PCIE_REACH)


def test_amd_with_four_gpus_stages_through_host_again():
    uplink, _ = uplink_and_link(preset("l40s-pcie", gpus=4, **{"nccl.cpu": "amd"}))
    assert uplink == pytest.approx(SHM_SHARE * PCIE_REACH)


def test_a_declared_shm_reach_replaces_the_share():
    uplink, _ = uplink_and_link(preset("l40s-pcie", gpus=2, **{"nccl.reachable.shm": "12GB/s"}))
    assert uplink == pytest.approx(12 * GB)
    uplink, _ = uplink_and_link(preset("l40s-pcie", gpus=2, **{"nccl.reachable.shm": "50%"}))
    assert uplink == pytest.approx(0.5 * 31 * GB)  # a share of the PCIe line rate


def test_an_shm_reach_above_p2p_is_refused():
    with pytest.raises(InputError, match="more than the PCIe reach of 24 GB/s"):
        preset("l40s-pcie", gpus=2, **{"nccl.reachable.shm": "30GB/s"})
    with pytest.raises(InputError, match="pxb, sys"):
        preset("l40s-pcie", gpus=2, **{"nccl.p2p_level": "phb"})


def test_two_gpus_on_root_ports_run_a_ring_at_the_shm_rate_under_a_switch_at_p2p():
    # 2-rank ring allreduce: each GPU sends S/2 twice, so busbw = S / time -> the route's
    # bandwidth at a large size (less NCCL's per-step latency, ~2% here): 18 GB/s staged
    # through host memory, 24 GB/s P2P; the same steps on both, so the ratio is SHM's 0.75
    size = 512 << 20
    ports = estimate("l40s-pcie", "allreduce", "ring", 2, size, {"protocol": "Simple"},
                     set={"gpus": 2})
    switch = estimate("l40s-pcie", "allreduce", "ring", 2, size, {"protocol": "Simple"},
                      set={"gpus": 2, "pcie.gpus_per_switch": 2})
    assert ports.busbw_GBps == pytest.approx(18, rel=0.03)
    assert switch.busbw_GBps == pytest.approx(24, rel=0.03)
    assert ports.busbw_GBps / switch.busbw_GBps == pytest.approx(SHM_SHARE, rel=0.01)


def test_topo_show_prints_the_shm_line_where_nccl_stages_through_host():
    shown = format_nccl(preset("l40s-pcie", gpus=2))
    assert "shm" in shown and "18 GB/s (75% of pcie's)" in shown and "P2P level pxb" in shown
    assert "staged through host" not in format_nccl(preset("l40s-pcie", gpus=2,
                                                           **{"nccl.cpu": "amd"}))
