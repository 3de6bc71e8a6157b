"""How the fabric recomputes max-min rates after a change: its solver, its shortcuts and
their limits.

Every policy gives the same rates up to rounding (a hypothesis test holds the local updates
equal to whole recomputation, and both to an independent fluid simulation); only the cost
differs. The defaults are the fastest measured on this project's benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass

from collsim.engine.maxmin import MaxMin
from collsim.engine.solver import SolverFactory


@dataclass(frozen=True)
class FabricPolicy:
    """The fabric's tuning knobs, passed to its constructor."""

    # Recompute rates only as far as they change; False: over every transfer connected to
    # a change, the reference the tests compare against.
    local_updates: bool = True
    # Transfers up to which a connected component is refilled whole by a short scan.
    small_component: int = 16
    # Component searches per settle that may find large components before the rest of that
    # settle goes local; after as many settles in a row that found only large ones (a full
    # pipeline), settles skip the search, except one in ``retry_search``.
    large_searches: int = 2
    retry_search: int = 16
    # Rounds of growing a local group, and its size and the transfers on one of its links,
    # beyond which whole components are recomputed instead.
    local_rounds: int = 6
    local_group: int = 256
    crowded_link: int = 8
    # The max-min solver the fabric builds (collsim/engine/solver.py: the protocol it meets).
    solver: SolverFactory = MaxMin
    # Whether a single call may be timed on the lockstep or symmetric path instead of every
    # rank's events, where the fabric allows it (Fabric.replaceable): the same results to
    # the bit; False forces the events (a benchmark of the engine itself).
    shortcuts: bool = True


DEFAULT_POLICY = FabricPolicy()
