"""Where a rank sits in the topology-aware ring order, and that order rotated to a root."""

from __future__ import annotations

from collsim.program import Job


def ring_position(job: Job, rank: int) -> int:
    """Index of ``rank`` in ``job.ring_order()``."""
    return job.ring.index(rank) if job.ring else rank


def rooted_order(job: Job, root: int) -> tuple[int, ...]:
    """The ring order rotated so that ``root`` comes first (chains and trees hang from it)."""
    order = job.ring_order()
    start = ring_position(job, root)
    return order[start:] + order[:start]
