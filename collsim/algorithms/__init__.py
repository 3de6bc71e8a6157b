"""Collective algorithms as per-rank programs; importing this package registers them all."""

from collsim.algorithms import binomial, ring  # noqa: F401
from collsim.algorithms.registry import REGISTRY, Algorithm, algorithms_for, get_algorithm

__all__ = ["REGISTRY", "Algorithm", "algorithms_for", "get_algorithm"]
