"""Machines of the NCCL tests, as NcclSystem figures (NCCL's own per-link numbers: NVLink per
arch, PCIe width x rate / 80, NIC speed / 8000)."""

from __future__ import annotations

from collsim.nccl.system import NcclSystem

# DGX A100: 12 NVLink3 per GPU to NVSwitches (12 x 20 = 240 GB/s as NCCL counts).
DGX_A100 = NcclSystem(arch=80, gpus_per_node=8, nvlink_links=12)
# DGX H100: 18 NVLink4 per GPU (18 x 20.6 = 370.8), NVSwitch with NVLS.
DGX_H100 = NcclSystem(arch=90, gpus_per_node=8, nvlink_links=18, nvls=True)
# DGX B200: 18 NVLink5 per GPU (18 x 40.1 = 721.8), NVLS.
DGX_B200 = NcclSystem(arch=100, gpus_per_node=8, nvlink_links=18, nvls=True)
# Two L40S on PCIe Gen4 x16 (24), no NVLink.
L40S_PAIR = NcclSystem(arch=89, gpus_per_node=2, gpu_link="pcie", pcie_bandwidth=24)


def h100_cluster(nodes: int, nics: int = 8, nic_bandwidth: float = 50.0) -> NcclSystem:
    """DGX-H100-like nodes, each GPU with its own 400 Gb/s NIC on a PCIe Gen5 x16 switch."""
    return NcclSystem(arch=90, nodes=nodes, gpus_per_node=8, nvlink_links=18, nvls=True,
                      pcie_bandwidth=48, nics_per_node=nics, nic_bandwidth=nic_bandwidth)


def a100_cluster(nodes: int) -> NcclSystem:
    """DGX-A100-like nodes: 8 HDR 200 Gb/s NICs (25), PCIe Gen4 (24), 2 GPUs per NIC switch."""
    return NcclSystem(arch=80, nodes=nodes, gpus_per_node=8, nvlink_links=12,
                      pcie_bandwidth=24, nics_per_node=8, nic_bandwidth=25, nic_path="pxb",
                      gpus_per_nic_switch=2)


def h100_one_per_node(nodes: int) -> NcclSystem:
    """One H100 per node with one 400 Gb/s NIC: where PAT is enabled."""
    return NcclSystem(arch=90, nodes=nodes, gpus_per_node=1, nvlink_links=18,
                      pcie_bandwidth=48, nics_per_node=1, nic_bandwidth=50)


def system_strategy():
    """Hypothesis strategy over NcclSystems: architectures, node and GPU counts, link kinds,
    NIC counts and speeds, CPUs, NVLS and CollNet settings."""
    from hypothesis import strategies as st

    from collsim.hardware.nccl_names import CPUS, NIC_PATHS
    from collsim.nccl.system import GPU_LINKS

    return st.builds(
        NcclSystem,
        arch=st.sampled_from([70, 80, 86, 89, 90, 100]),
        nodes=st.integers(1, 64),
        gpus_per_node=st.sampled_from([1, 2, 3, 4, 5, 8, 16, 72]),
        gpu_link=st.sampled_from(GPU_LINKS),
        nvlink_links=st.integers(1, 18),
        pcie_bandwidth=st.sampled_from([12.0, 24.0, 48.0]),
        pcie_via_cpu=st.booleans(),
        nics_per_node=st.integers(1, 9),
        nic_bandwidth=st.sampled_from([3.0, 12.5, 25.0, 50.0, 100.0]),
        nic_path=st.sampled_from(NIC_PATHS),
        gpus_per_nic_switch=st.integers(1, 2),
        cpu=st.sampled_from(CPUS),
        nvls=st.booleans(),
        sharp=st.booleans(),
        collnet_enable=st.booleans(),
        collnet_allgather=st.booleans(),
    )
