"""A workload as the planner sees it: every quantity parsed, every default applied."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from collsim.workloads.compression import NONE, Compression
from collsim.workloads.formats import Format, parse_format

# Megatron-LM's rank layout, innermost first: tensor-parallel ranks are consecutive (inside a
# node), then data-parallel replicas, then pipeline stages (megatron/core/parallel_state.py,
# initialize_model_parallel: with 16 GPUs, tensor 2 and pipeline 4 its data-parallel groups
# are [g0, g2], [g1, g3], ... and its pipeline groups [g0, g4, g8, g12], ...).
MEGATRON_ORDER = ("tensor", "data", "pipeline")
SCHEDULES = ("gpipe", "1f1b")
# Algorithms used when the workload names none; any registered name may replace them.
DEFAULT_ALGORITHMS = MappingProxyType({
    "allreduce": "ring", "allgather": "ring", "reducescatter": "ring", "alltoall": "pairwise",
})
# Pipeline sends are one transfer: a broadcast from the sender to the receiver (2 ranks).
SEND_ALGORITHM = ("broadcast", "binomial")


@dataclass(frozen=True)
class Experts:
    """Mixture-of-experts layers: every ``every``-th layer (1-based) routes each token to
    ``top_k`` of ``count`` experts of ``parameters`` values each."""

    count: int
    every: int = 1
    top_k: int = 1
    parameters: int = 0

    def is_moe(self, layer: int) -> bool:
        return (layer + 1) % self.every == 0


@dataclass(frozen=True)
class Model:
    """Layers, dense parameters per layer (values of the whole layer, before any split) and
    the activation of one layer for one micro-batch in bytes (None if never needed)."""

    layers: int
    parameters_per_layer: int
    activation_bytes: int | None = None
    experts: Experts | None = None


@dataclass(frozen=True)
class Parallelism:
    data: int | None = None  # None: whatever the GPU count leaves
    tensor: int = 1
    pipeline: int = 1
    expert: int = 1
    zero: int = 0
    micro_batches: int = 1
    schedule: str = "1f1b"
    order: tuple[str, ...] = MEGATRON_ORDER


@dataclass(frozen=True)
class Compute:
    """Seconds of one whole layer for one micro-batch on one GPU (a GPU with tensor degree t
    spends 1/t of it), the optimizer's seconds for the whole model on one GPU, and the
    layer's forward FLOPs and the GPU's peak where known (for MFU)."""

    forward: float
    backward: float
    optimizer: float = 0.0
    flops: float | None = None
    peak: float | None = None


@dataclass(frozen=True)
class Gradients:
    bucket: int = 25 * 2**20  # bytes: PyTorch DDP's default bucket_cap_mb = 25 (MiB)
    overlap: bool = True


@dataclass(frozen=True)
class Dtypes:
    parameters: Format = parse_format("bf16")
    gradients: Format = parse_format("bf16")
    activations: Format = parse_format("bf16")
    optimizer: Format = parse_format("fp32")


@dataclass(frozen=True)
class Noise:
    """Stragglers and noise: start offsets drawn uniformly in [0, spread] per rank plus
    explicit ``offsets``; compute times scaled by a mean-one log-normal factor whose
    coefficient of variation is ``jitter``; all drawn from numpy's Generator at ``seed``."""

    seed: int = 0
    jitter: float = 0.0
    spread: float = 0.0
    offsets: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class Workload:
    name: str
    model: Model
    parallelism: Parallelism
    compute: Compute
    gradients: Gradients = Gradients()
    dtypes: Dtypes = Dtypes()
    compression: Compression = NONE
    algorithms: MappingProxyType = field(default_factory=lambda: DEFAULT_ALGORITHMS)
    noise: Noise = Noise()
    description: str = ""
    file: str = ""
    lines: dict[Any, int] = field(default_factory=dict, compare=False, repr=False)

    def algorithm(self, collective: str) -> str:
        return self.algorithms.get(collective, DEFAULT_ALGORITHMS.get(collective, "ring"))
