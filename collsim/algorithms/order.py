"""Where a rank sits in the topology-aware ring order, and that order rotated to a root."""

from __future__ import annotations

from collsim.program import Job


def ring_position(job: Job, rank: int) -> int:
    """Index of ``rank`` in ``job.ring_order()``."""
    return job.ring_positions[rank] if job.ring else rank


def rooted_order(job: Job, root: int) -> tuple[int, ...]:
    """The ring order rotated so that ``root`` comes first (chains and trees hang from it)."""
    order = job.ring_order()
    start = ring_position(job, root)
    return order[start:] + order[:start]


def rooted_position(job: Job, root: int, rank: int) -> int:
    """Index of ``rank`` in ``rooted_order(job, root)``."""
    return (ring_position(job, rank) - ring_position(job, root)) % job.nranks
