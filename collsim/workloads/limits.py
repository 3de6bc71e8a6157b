"""The largest step collsim plans, checked from a workload's numbers before any task is built
(as :mod:`collsim.hardware.limits` checks a machine before building it).

- ``MAX_PLAN_TASKS`` = 4,194,304 (2^22) tasks over all ranks: LLaMA-7B's DDP step with 1,000
  micro-batches on 64 GPUs plans 4.1 million tasks in 97 s and 1.45 GB (peak RSS of
  ``build_plan`` on a shared 2-core machine), before any of them is simulated. A DDP step of
  32 layers and 4 micro-batches on 16,384 GPUs stays below it.
- A plan's ranks are GPUs: at most :data:`~collsim.hardware.limits.MAX_GPUS`.

The count is an upper bound computed from the workload alone (micro-batches, layers per
stage, the tasks of one layer's pass, gradient buckets), so an enormous model, micro-batch
count, GPU count or a one-byte bucket is refused in microseconds with the key that makes it
so, instead of ending in a MemoryError.
"""

from __future__ import annotations

from collsim.errors import InputError
from collsim.hardware.limits import MAX_GPUS, count_text
from collsim.units import format_size
from collsim.workloads.formats import ceil_div
from collsim.workloads.groups import Layout
from collsim.workloads.model import Workload

MAX_PLAN_TASKS = 4_194_304


def check_world(workload: Workload, world: int, key: str) -> None:
    """Refuse a step on more GPUs than collsim builds, at ``key``."""
    if world > MAX_GPUS:
        raise InputError(f"the step runs on {count_text(world)} GPUs, more than collsim "
                         f"builds: at most {count_text(MAX_GPUS)}", file=workload.file,
                         key=key, line=workload.lines.get(tuple(key.split("."))))


def check_plan(workload: Workload, layout: Layout) -> None:
    """Refuse a step whose plan would hold more than MAX_PLAN_TASKS tasks, naming the key
    that makes it large (micro-batches, layers or the gradient bucket)."""
    check_world(workload, layout.world, "parallelism")
    passes, buckets = _per_rank(workload, layout)
    total = layout.world * (passes + buckets + 4 * workload.parallelism.micro_batches + 1)
    if total <= MAX_PLAN_TASKS:
        return
    par = workload.parallelism
    if buckets > passes:
        small = workload.gradients.bucket < 2**20
        key = "gradients.bucket" if small else "model.parameters"
        why = (f"{count_text(buckets // 4)} gradient buckets per GPU of "
               f"{format_size(workload.gradients.bucket)}")
    elif par.micro_batches >= workload.model.layers // par.pipeline:
        key = "parallelism.micro_batches"
        why = f"{count_text(par.micro_batches)} micro-batches"
    else:
        key = "model.layers"
        why = f"{count_text(workload.model.layers // par.pipeline)} layers per stage"
    about = "" if count_text(total).startswith("about") else "about "
    raise InputError(f"one step on {count_text(layout.world)} GPUs would plan {about}"
                     f"{count_text(total)} tasks ({why}); collsim plans at most "
                     f"{count_text(MAX_PLAN_TASKS)} (4 million take about 100 s and 1.5 GB "
                     f"to plan)", file=workload.file, key=key,
                     line=workload.lines.get(tuple(key.split("."))))


def _per_rank(workload: Workload, layout: Layout) -> tuple[int, int]:
    """Upper bounds on one rank's tasks: (layer passes with their collectives, gradient
    bucket tasks)."""
    par = workload.parallelism
    model = workload.model
    layers = model.layers // max(1, par.pipeline)
    # A layer's pass: at most 6 steps (compute, tensor allreduces, expert all-to-alls), and
    # under ZeRO-3 two gathers and two reduce-scatters (dense and expert groups).
    per_layer = 6 + (4 if par.zero == 3 else 0)
    passes = 2 * par.micro_batches * layers * per_layer
    capacity = max(1, workload.dtypes.gradients.elements_in(workload.gradients.bucket))
    values = layers * ceil_div(model.parameters_per_layer, par.tensor)
    experts = model.experts
    if experts and experts.parameters:
        values += layers * ceil_div(experts.count // par.expert * experts.parameters,
                                    par.tensor)
    # Each bucket: encode, collective, decode, and a gather under ZeRO-1/2; a bucket is also
    # cut where a layer's gradients end, at most once per layer and group.
    buckets = 4 * (values // capacity + 2 * layers + 2)
    return passes, buckets
