"""Pipelining: how a region is cut into chunks, shared by the programs and their closed forms.

A region of ``count`` elements is cut into ``k = ceil(count / chunk)`` balanced chunks, so
that every chunk is the same size whenever the size divides evenly and the closed forms can
use ``n / k`` for the chunk size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from collsim.params import DEFAULT_CHUNK_BYTES
from collsim.program import Job, block


def chunk_count(job: Job, count: int) -> int:
    """Number of chunks (at least one) a region of ``count`` elements is pipelined in."""
    return max(1, -(-count // job.chunk_elements(DEFAULT_CHUNK_BYTES)))


def chunk_region(offset: int, count: int, chunks: int, index: int) -> tuple[int, int]:
    """(offset, length) of chunk ``index`` of the region ``[offset, offset + count)``."""
    start, length = block(count, chunks, index)
    return offset + start, length


def cost_chunks(n_bytes: float, params: Mapping[str, Any]) -> int:
    """The closed forms' chunk count for ``n_bytes``: ``max(1, ceil(n / chunk_size))``."""
    chunk = float(params.get("chunk_size", DEFAULT_CHUNK_BYTES))
    return max(1, math.ceil(n_bytes / chunk))
