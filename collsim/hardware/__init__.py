"""Machines: GPUs, links, switches and the routes between GPUs."""

from collsim.hardware.loader import load_topology
from collsim.hardware.topology import Link, Topology

__all__ = ["Link", "Topology", "load_topology"]
