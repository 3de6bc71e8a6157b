"""Collective algorithms as per-rank programs; importing this package registers them all."""

from collsim.algorithms import (  # noqa: F401
    barrier,
    binary_tree,
    binomial,
    bruck,
    chain,
    composite,
    direct,
    double_binary_tree,
    hierarchical,
    nccl,
    pairwise,
    recursive,
    ring,
    scan,
    sendrecv,
)
from collsim.algorithms.registry import REGISTRY, Algorithm, algorithms_for, get_algorithm

__all__ = ["REGISTRY", "Algorithm", "algorithms_for", "get_algorithm"]
