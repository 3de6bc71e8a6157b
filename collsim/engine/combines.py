"""Combining received data on the GPU's reduction unit: each lane of a job combines on its
own share of the unit (lane k of weight w_k gets ``w_k / sum(w)`` of it), one combine after
another on each share, whichever call it belongs to. :class:`Combines` is that part of
:class:`collsim.engine.simulation.Call`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from collsim.engine.loop import call_later

if TYPE_CHECKING:
    import simpy

    from collsim.engine.simulation import RankState, Simulation


class Combines:
    """Queueing combines on reduction units (a mixin of
    :class:`~collsim.engine.simulation.Call`, which holds the state named below)."""

    simulation: Simulation
    env: simpy.Environment
    itemsize: int
    _lane_share: list[float]
    _op_done: Callable[[RankState], None]  # the call's

    def _combine(self, state: RankState, count: int, lane: int = 0) -> None:
        """Occupy ``state``'s share of its reduction unit for lane ``lane`` for combining
        ``count`` elements, after the combines already queued there."""
        shares = self._lane_share
        share = shares[lane] if 0 <= lane < len(shares) else 1.0
        cost = count * self.itemsize * state.gamma / share
        if cost <= 0:
            self._op_done(state)
            return
        now = self.env.now
        free_at = self.simulation.reduce_free_at
        unit = (state.gpu, lane)
        free = free_at.get(unit, 0.0)
        start = free if free > now else now
        free_at[unit] = start + cost
        if self.simulation.observer is not None:
            self.simulation.observer.combine(self, state, start, start + cost)
        call_later(self.env, free_at[unit] - now, self._op_done, state)
