"""The algorithm registry: every algorithm under a stable name, with what it serves
(collective, rank counts) and its closed-form alpha-beta-gamma cost."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from collsim.callspec import CallSpec
from collsim.collectives import COLLECTIVES
from collsim.engine.lanes import LanesForm
from collsim.engine.lockstep import LockstepForm
from collsim.errors import InputError
from collsim.params import CallParams
from collsim.program import Job, ProgramFactory
from collsim.suggest import did_you_mean


@dataclass(frozen=True)
class Cost:
    """Inputs of a closed form: ranks, size in bytes (docs/design.md#collectives), the uniform
    per-message latency alpha (s), per-byte time beta (s/B), per-byte reduction gamma (s/B)."""

    p: int
    n: float
    alpha: float
    beta: float
    gamma: float = 0.0
    params: CallParams = field(default_factory=dict)

    @property
    def log_p(self) -> int:
        """ceil(log2 p): the number of rounds of a binomial tree."""
        return lg(self.p)


def lg(p: int) -> int:
    """ceil(log2 p), 0 for p = 1."""
    return max(0, math.ceil(math.log2(p))) if p > 1 else 0


def any_ranks(p: int) -> str | None:
    """Accepts every rank count."""
    return None


def even_blocks(job: Job, shift: int) -> str | None:
    """A ``symmetric`` declaration: programs that treat every rank alike (peers at offsets,
    tags by round) are equivariant under every shift when the buffer cuts into p equal
    blocks."""
    return None if job.count % job.nranks == 0 else "blocks of uneven length"


def half_shift(job: Job, shift: int) -> str | None:
    """A ``symmetric`` declaration for partners ``r xor 2^k`` on p = 2^j ranks: the shift by
    p/2 is ``r xor p/2``, which commutes with every such partner map; buffers cut into
    blocks must cut evenly."""
    p = job.nranks
    if p & (p - 1) or 2 * shift != p:
        return "partners r xor 2^k move together only under the shift by p/2 on 2^j ranks"
    return even_blocks(job, shift)


def power_of_two(p: int) -> str | None:
    """Accepts powers of two only."""
    return None if p & (p - 1) == 0 else "needs a power-of-two number of ranks"


@dataclass(frozen=True)
class Algorithm:
    """One algorithm for one collective.

    ``exact`` says for which rank counts the simulated time on ``switch`` equals ``cost``
    (relative error below 1e-9, for sizes that divide evenly): "any", "pow2" (the closed form
    holds only there), or "contention" (the schedule shares ports by design and ``cost`` is a
    model of it, not the simulated time).
    """

    collective: str
    name: str
    program: ProgramFactory
    formula: str
    cost: Callable[[Cost], float] | None
    source: str
    summary: str = ""
    exact: str = "any"
    accepts: Callable[[int], str | None] = any_ranks
    ranks_text: str = "any"
    scratch: Callable[[Job], int] = lambda job: 0
    params: tuple[str, ...] = ()
    # Called by the simulator with (job, topology, GPU of each rank) before the call: the
    # job to run, with whatever the algorithm lays out from the machine (NCCL's channels).
    prepare: Callable[[Job, Any, list[int]], Job] | None = None
    # (job, shift) -> None when rank r + shift runs rank r's program with every peer moved
    # by shift (same tags, counts, combines, lanes), else why not: the engine may then
    # simulate one rank per orbit (collsim.engine.symmetry). None: never declared.
    symmetric: Callable[[Job, int], str | None] | None = None
    # (call with its parameters so far, GPU of each rank, NCCL protocol, channels) -> the
    # parameters that protocol implies for this algorithm (NCCL's chunk, window, units),
    # called when the call runs under NCCL's protocol costs; a parameter the caller gave
    # wins (collsim.calls.plan). None: the protocol implies nothing.
    protocol_params: Callable[[CallSpec, Sequence[int], str, int | str], CallParams] | None = None
    # job -> the program's steps as whole steps of every rank (or None where it has none
    # for this job): the engine may time them at once (collsim.engine.lockstep). None:
    # the engine traces the programs instead.
    lockstep: LockstepForm | None = None
    # job -> each lane's ring and steps, for lanes that share links (collsim.engine.lanes),
    # or None where it has none for this job. None: never offered.
    lanes: LanesForm | None = None

    def check_ranks(self, p: int) -> None:
        """Raise InputError when this algorithm cannot serve ``p`` ranks."""
        reason = self.accepts(p) if p >= 1 else "needs at least one rank"
        if reason:
            raise InputError(f"{self.collective} algorithm '{self.name}' cannot run on {p} "
                             f"ranks: it {reason}", key="ranks")


EXACT_TEXT = {"any": "any p", "pow2": "p = 2^k", "contention": "no (contended; a model)"}

REGISTRY: dict[tuple[str, str], Algorithm] = {}


def register(collective: str, name: str, **fields: Any) -> Callable[[ProgramFactory],
                                                                    ProgramFactory]:
    """Decorator: register the per-rank program it decorates as ``collective``/``name``."""
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}")

    def decorate(program: ProgramFactory) -> ProgramFactory:
        if (collective, name) in REGISTRY:
            raise ValueError(f"{collective}/{name} registered twice")
        REGISTRY[collective, name] = Algorithm(collective, name, program, **fields)
        return program

    return decorate


def get_algorithm(collective: str, name: str) -> Algorithm:
    """The registered algorithm, or an InputError that lists what exists."""
    import collsim.algorithms  # noqa: F401  (registers every algorithm module)

    if collective not in COLLECTIVES:
        raise InputError(f"unknown collective {collective!r}; choose one of "
                         f"{', '.join(COLLECTIVES)}{did_you_mean(collective, COLLECTIVES)}",
                         key="collective")
    algorithm = REGISTRY.get((collective, name))
    if algorithm is None:
        known = [a.name for a in algorithms_for(collective)]
        raise InputError(f"no {collective} algorithm named {name!r}; choose one of "
                         f"{', '.join(known) or 'none yet'}{did_you_mean(name, known)}",
                         key="algorithm")
    return algorithm


def algorithms_for(collective: str) -> list[Algorithm]:
    """Every algorithm registered for ``collective``, in registration order."""
    import collsim.algorithms  # noqa: F401  (registers every algorithm module)

    return [a for (c, _), a in REGISTRY.items() if c == collective]
