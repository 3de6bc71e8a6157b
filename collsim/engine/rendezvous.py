"""The rendezvous rule both interpreters follow: a message moves once its send and its
receive are both posted; they match by (source, destination, tag), oldest first.

The timing and the data interpreter each keep a :class:`Rendezvous` of what their ranks have
posted and not yet matched, with whatever they need to remember about each side (the
posting thread and its operation; the data interpreter also a snapshot of the data sent).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from collsim.errors import SimulationError
from collsim.program import Recv, Send

Key = tuple[int, int, int]  # (source rank, destination rank, tag)


class Rendezvous:
    """Posted sends and receives waiting for their partner, by (source, destination, tag),
    oldest first; a key leaves its table when its last waiter is matched.

    :meth:`send` and :meth:`recv` are one rule seen from either side, written out twice
    because they are the timing engine's hot path. Items must not be None.
    """

    __slots__ = ("sends", "recvs")

    def __init__(self) -> None:
        self.sends: dict[Key, list] = {}
        self.recvs: dict[Key, list] = {}

    def send(self, key: Key, item: Any) -> Any:
        """Post a send: the item of the oldest receive waiting under ``key`` (taken out),
        or None once ``item`` waits for one."""
        queue = self.recvs.get(key)
        if queue:
            partner = queue.pop(0)
            if not queue:
                del self.recvs[key]
            return partner
        queue = self.sends.get(key)
        if queue is None:
            self.sends[key] = [item]
        else:
            queue.append(item)
        return None

    def recv(self, key: Key, item: Any) -> Any:
        """Post a receive: the item of the oldest send waiting under ``key`` (taken out),
        or None once ``item`` waits for one."""
        queue = self.sends.get(key)
        if queue:
            partner = queue.pop(0)
            if not queue:
                del self.sends[key]
            return partner
        queue = self.recvs.get(key)
        if queue is None:
            self.recvs[key] = [item]
        else:
            queue.append(item)
        return None

    def waiting(self) -> Iterator[tuple[int, Any]]:
        """(rank that posted it, item) of everything still waiting for its partner, sends
        first."""
        for (src, _, _), queue in self.sends.items():
            for item in queue:
                yield src, item
        for (_, dst, _), queue in self.recvs.items():
            for item in queue:
                yield dst, item


def bad_peer(rank: int, op: Send | Recv) -> SimulationError:
    """The error of a send or receive whose peer is not another rank of the job (the
    interpreters test ``op.peer == rank or not 0 <= op.peer < nranks`` inline)."""
    return SimulationError(f"rank {rank}: {op} names an invalid peer")


def bad_count(sender: int, receiver: int, recv: Recv, count: int) -> SimulationError:
    """The error of a receive that expects other than the ``count`` elements its matching
    send sends."""
    return SimulationError(f"rank {receiver}: {recv} expects {recv.count} elements but "
                           f"rank {sender} sends {count}")


def deadlock_message(stuck: list[int], waits: dict[int, list]) -> str:
    """Which ranks cannot finish and the step each is blocked in."""
    parts = [f"rank {r} is blocked in step {', '.join(map(str, waits.get(r, [])))}"
             for r in stuck[:6]]
    more = f"; and {len(stuck) - 6} more ranks" if len(stuck) > 6 else ""
    return (f"deadlock: {len(stuck)} ranks cannot finish because a send or receive has no "
            f"partner (a message moves only once both its send and its receive are posted): "
            f"{'; '.join(parts)}{more}")
