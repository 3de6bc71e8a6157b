"""Runs of consecutive blocks that wrap around the end of the buffer.

Rooted tree algorithms number ranks relative to the root, so the blocks of a subtree are
consecutive modulo p: at most two regions of the buffer. Both ends of a transfer compute the
same regions, and send one message per region.
"""

from __future__ import annotations

from collsim.program import block, span


def wrapped_regions(count: int, parts: int, first: int, number: int) -> list[tuple[int, int]]:
    """(offset, length) regions holding blocks ``first .. first+number-1`` (mod ``parts``).

    Empty regions are dropped, but at least one region is returned so that every logical
    transfer is one message even when it carries no data.
    """
    first %= parts
    if first + number <= parts:
        pieces = [span(count, parts, first, number)] if number else []
    else:
        pieces = [span(count, parts, first, parts - first),
                  span(count, parts, 0, first + number - parts)]
    regions = [piece for piece in pieces if piece[1] > 0]
    return regions or [(block(count, parts, first)[0], 0)]
