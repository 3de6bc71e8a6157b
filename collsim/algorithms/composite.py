"""Long-message rooted algorithms built from two phases: a binomial tree for the part that
starts or ends at the root, a ring for the part that every rank shares."""

from __future__ import annotations

from collsim.algorithms.binomial import binomial_gather_steps, binomial_scatter_steps
from collsim.algorithms.registry import register
from collsim.algorithms.ring import ring_allgather_steps, ring_reducescatter_steps
from collsim.program import Job, Program
from collsim.tags import TAGS


@register(
    "broadcast", "scatter_allgather",
    formula="(⌈log p⌉ + p-1)·α + 2(p-1)/p·n·β",
    cost=lambda c: (c.log_p + c.p - 1) * c.alpha + 2 * (c.p - 1) / c.p * c.n * c.beta,
    source="van de Geijn et al. 1997; Chan et al. 2007; Thakur, Rabenseifner & Gropp 2005",
    summary="binomial scatter from the root, then ring allgather",
    params=("root",),
)
def scatter_allgather_broadcast(rank: int, job: Job) -> Program:
    """Van de Geijn broadcast. A rank that finishes the scatter early waits at its first ring
    step for its neighbours, so every rank ends (p-1) ring steps after the root's scatter."""
    yield from binomial_scatter_steps(rank, job, tags=TAGS.phase(0))
    yield from ring_allgather_steps(rank, job, TAGS.phase(1))


@register(
    "reduce", "reducescatter_gather",
    formula="(p-1 + ⌈log p⌉)·α + 2(p-1)/p·n·β + (p-1)/p·n·γ",
    cost=lambda c: (c.p - 1 + c.log_p) * c.alpha + 2 * (c.p - 1) / c.p * c.n * c.beta
    + (c.p - 1) / c.p * c.n * c.gamma,
    source="Rabenseifner 2004; Chan et al. 2007 (ring reduce-scatter + MST gather)",
    summary="ring reduce-scatter, then binomial gather to the root",
    params=("root",),
)
def reducescatter_gather_reduce(rank: int, job: Job) -> Program:
    """Rabenseifner-style reduce with a ring reduce-scatter (every rank ends it at once)."""
    yield from ring_reducescatter_steps(rank, job, TAGS.phase(0))
    yield from binomial_gather_steps(rank, job, tags=TAGS.phase(1))
