"""The algorithms the pipeline path times (:mod:`collsim.calls.pipeline`) and how: each one's
chunk count, and its reference runs on the machine's first nodes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from collsim.algorithms.nccl.nvls import lane_chunks
from collsim.algorithms.nccl.switches import node_groups
from collsim.algorithms.registry import Algorithm
from collsim.calls.pipeline import REFERENCE_NODES, pipeline_time, tree_depth
from collsim.callspec import CallSpec
from collsim.engine.costs import CostModel
from collsim.engine.timing import TimingEngine
from collsim.hardware.topology import Topology
from collsim.params import PLANNED_ONLY
from collsim.program import Job


def nvls_tree_chunks(job: Job) -> int:
    """Chunks of NVLSTree's pipeline across nodes (capped by its trees' depth)."""
    nodes = len(node_groups(job))
    return len(lane_chunks(job, 4 + 2 * tree_depth(nodes)))


# (collective, algorithm) -> the pipeline's chunk count of a job.
PIPELINED: dict[tuple[str, str], Callable[[Job], int]] = {
    ("allreduce", "nvls_tree"): nvls_tree_chunks,
}


MakeCall = Callable[[CallSpec, Algorithm], tuple[Job, list[int], Any]]


def pipeline_for(topology: Topology, algorithm: Algorithm, job: Job, gpus: list[int],
                 size_bytes: int, costs: CostModel, make_call: MakeCall
                 ) -> Callable[[Callable[[TimingEngine], Any]], tuple[float, int]] | None:
    """The pipeline path's run of this call (given what to tell of each reference engine
    before it runs: a progress display), or None where the algorithm has none or the call
    is no larger than the references (it runs in full, with nothing to explain).
    ``make_call`` is :func:`collsim.simulate.make_call` (passed, not imported, so that the
    path stays below the simulator)."""
    chunks = PIPELINED.get((algorithm.collective, algorithm.name))
    if chunks is None or len(set(job.nodes)) <= REFERENCE_NODES[1]:
        return None

    def run(observe: Callable[[TimingEngine], Any]) -> tuple[float, int]:
        placed: dict[int, list[int]] = {}

        def reference(ranks: int, count: int) -> Job:
            # the call's parameters as planned (channels, chunk_size), so that its chunks
            # are the call's whatever the reference's size; not its placement, which lists
            # the call's GPUs (the path runs only where they are the first, in order, and a
            # reference takes the first of them by default)
            size = size_bytes if count == job.count else count * job.itemsize
            params = {name: value for name, value in job.params.items()
                      if name != "placement" and name not in PLANNED_ONLY}
            spec = CallSpec(topology, algorithm.collective, algorithm.name, ranks, size,
                            params, costs)
            ref_job, ref_gpus, _ = make_call(spec, algorithm)
            planned = {name: job.params[name] for name in PLANNED_ONLY if name in job.params}
            if planned:  # the plan's own figures, which a caller's cost model does not imply
                ref_job = replace(ref_job, params={**ref_job.params, **planned})
            placed[id(ref_job)] = ref_gpus
            return ref_job

        def run_reference(ref_job: Job) -> tuple[float, int]:
            engine = TimingEngine(topology, placed[id(ref_job)], ref_job, algorithm.program,
                                  costs, symmetric=algorithm.symmetric)
            observe(engine)
            result = engine.run()
            return result.time, result.transfers

        return pipeline_time(topology, costs, job, gpus, chunks, reference, run_reference)

    return run
