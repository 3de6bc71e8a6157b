"""The layer-periodic path of a training step: a few layers simulated, the rest extended.

Under ZeRO-3 every layer gathers its parameters and reduces its gradients in calls of its own,
so a step's calls overlap (the next layer's gather beside this one's reduction) and the
alone path (:mod:`collsim.workloads.alone`) runs most of them on the shared simulation, every
transfer of every call. Yet identical layers give identical intervals once the layer
pipeline is in its steady state: every time of the result (the step, each GPU's compute,
exposed communication and bubble, each kind of call) then grows by the same amount per layer
of a stage. So the step is run with ``FIRST``, ``FIRST + 1`` and ``FIRST + 2`` layers per
stage, all else equal; the last two give each time's growth per layer, and the full step is
the last run extended by that growth for each further layer. The first run is the check:
where the growth from it to the second differs from the growth after by more than ``CHECK``
of the step (for any time, over the layers extended), the steady state was not reached and
the step runs on the alone path instead. docs/engine.md#step-paths gives the measured error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from collsim.workloads.model import Noise, Workload
from collsim.workloads.plan import build_layout
from collsim.workloads.results import KindStats, RankTimes, StepResult

FIRST = 2
"""Layers per stage of the smallest run; the runs have FIRST, FIRST + 1 and FIRST + 2."""

LEAST = 12
"""Layers per stage from which the path is taken: the three runs then simulate at most
three quarters of the step's layers."""

CHECK = 1e-3
"""How far, as a fraction of the step, the extension may move any time because the growth
per layer was still changing between the runs; beyond it the step runs on the alone path."""

Run = Callable[[Workload], StepResult]


def declines(workload: Workload, gpus: int | None) -> str | None:
    """Why the layer-periodic path does not apply to ``workload`` (None: it does)."""
    par, model = workload.parallelism, workload.model
    if par.zero != 3:
        return "not ZeRO-3 (buckets span layers)"
    if model.experts is not None:
        return "experts make layers differ"
    if workload.noise != Noise():
        return "noise makes layers differ"
    if model.layers // par.pipeline < LEAST:
        return f"fewer than {LEAST} layers per stage"
    build_layout(workload, gpus)  # a bad layout is the caller's error, not a decline
    return None


def with_layers(workload: Workload, per_stage: int) -> Workload:
    """``workload`` with ``per_stage`` layers on each pipeline stage, each layer as before."""
    layers = per_stage * workload.parallelism.pipeline
    return dataclasses.replace(workload, model=dataclasses.replace(workload.model,
                                                                   layers=layers))


def extend(first: StepResult, second: StepResult, third: StepResult, extra: int
           ) -> tuple[StepResult, float]:
    """``third`` extended by ``extra`` layers per stage at the growth from ``second`` to
    ``third``, and the most any time would move (as a fraction of the step) had the growth
    from ``first`` to ``second`` been taken instead."""
    worst = 0.0

    def grow(a: float, b: float, c: float) -> float:
        nonlocal worst
        worst = max(worst, abs((c - b) - (b - a)) * extra)
        return c + (c - b) * extra

    if not (first.kinds.keys() == second.kinds.keys() == third.kinds.keys()):
        return third, float("inf")
    kinds = {kind: KindStats(*(grow(getattr(first.kinds[kind], f.name),
                                        getattr(second.kinds[kind], f.name),
                                        getattr(third.kinds[kind], f.name))
                               for f in dataclasses.fields(KindStats)))
             for kind in third.kinds}
    ranks = [RankTimes(*(grow(getattr(a, f.name), getattr(b, f.name), getattr(c, f.name))
                         for f in dataclasses.fields(RankTimes)))
             for a, b, c in zip(first.ranks, second.ranks, third.ranks, strict=True)]
    step = grow(first.step_s, second.step_s, third.step_s)
    result = dataclasses.replace(
        third, step_s=step,
        compute_s=grow(first.compute_s, second.compute_s, third.compute_s),
        exposed_s=grow(first.exposed_s, second.exposed_s, third.exposed_s),
        bubble_s=grow(first.bubble_s, second.bubble_s, third.bubble_s),
        kinds=kinds, ranks=ranks)
    return result, worst / step if step > 0 else float("inf")


def run_periodic(workload: Workload, run: Run) -> StepResult | str:
    """The step of ``workload`` from three runs of a few layers per stage (``run`` times
    each), or why not (the caller then runs the whole step)."""
    per_stage = workload.model.layers // workload.parallelism.pipeline
    first, second, third = (run(with_layers(workload, FIRST + k)) for k in range(3))
    result, moved = extend(first, second, third, per_stage - FIRST - 2)
    if moved > CHECK:
        return (f"periodic: the growth per layer still changed by {moved:.1e} of the step "
                f"over {FIRST} to {FIRST + 2} layers per stage")
    mfu = None
    if third.mfu is not None and result.step_s > 0:
        # MFU is model FLOPs over step x GPUs x peak; the FLOPs grow with the layers.
        mfu = third.mfu * third.step_s / result.step_s * per_stage / (FIRST + 2)
    return dataclasses.replace(result, mfu=mfu, path="periodic", fallback="")
