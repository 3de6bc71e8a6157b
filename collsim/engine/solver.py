"""The seam between the fabric and its max-min rate solver: what a solver must offer.

:class:`~collsim.engine.fabric.Fabric` builds its solver with the factory its
:class:`~collsim.engine.policy.FabricPolicy` names (``policy.solver``), so a faster solver
(compiled, or incremental) plugs in without touching the fabric. Any solver must give the
rates :class:`~collsim.engine.maxmin.MaxMin` gives, up to the rounding rule of
:func:`~collsim.engine.maxmin.same_rate`; tests/test_fabric.py runs the fabric with a solver
passed through the policy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from collsim.engine.maxmin import Channel, Member


class RateSolver(Protocol):
    """Max-min fair rates over :class:`~collsim.engine.maxmin.Channel` scratch: the calls
    the fabric makes (see :class:`~collsim.engine.maxmin.MaxMin` for each one's contract)."""

    def mark(self) -> int:
        """A fresh mark for channels' ``fill`` field, never used before by this solver."""

    def fill(self, flows: Sequence[Member], background: bool = False) -> dict[Member, float]:
        """Rates for ``flows``; with ``background`` other flows on their links keep theirs."""

    def fill_component(self, flows: Sequence[Member], links: Sequence[Channel]
                       ) -> dict[Member, float]:
        """Rates for a whole component whose links' ``users`` the caller counted."""

    def fill_small(self, flows: Sequence[Member], channels: Sequence[Channel]
                   ) -> dict[Member, float]:
        """Rates for a whole small component, in the order the flows were frozen."""

    def all_bottlenecked(self, flows: Iterable[Member]) -> bool:
        """Whether every flow of ``flows`` has a bottleneck at its current rate."""

    def without_bottleneck(self, group: dict[Member, None], rates: dict[Member, float]
                           ) -> dict[Member, None]:
        """Flows beside ``group`` that break max-min fairness when ``group`` takes ``rates``."""


SolverFactory = Callable[[], RateSolver]
"""What ``FabricPolicy.solver`` holds: called once per fabric, with no arguments."""
