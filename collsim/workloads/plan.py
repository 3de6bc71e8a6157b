"""The plan of one training step: for every rank, the ordered tasks it runs.

A task is a compute span (seconds on the GPU) or a rank's part in a collective call
(:class:`~collsim.workloads.service.Call`). Each task names a *stream* and the tasks of
the same rank it waits for (``deps``). A stream runs its tasks one at a time in plan order,
as a CUDA stream does: ``compute`` for every compute task, and one stream per process-group
kind for communication (``tensor``, ``data``, ``expert``, ``expert_data``; ZeRO-3's gathers
and reductions each have their own) that runs beside compute when ``gradients.overlap`` is
true. Without overlap every task of a rank is on one stream, ``serial``. A pipeline receive
belongs to no stream: it is posted when the step starts and waits for its sender. A send
starts when the forward or backward that produced it ends, beside everything else with
overlap, and holding the rank until it is delivered without.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass

from collsim.algorithms.registry import get_algorithm
from collsim.errors import InputError
from collsim.params import DTYPES
from collsim.workloads.formats import Format, ceil_div
from collsim.workloads.groups import KINDS, Layout
from collsim.workloads.limits import check_plan
from collsim.workloads.model import SEND_ALGORITHM, Workload
from collsim.workloads.schedule import stage_order
from collsim.workloads.service import Call


@dataclass(frozen=True)
class Task:
    """One thing a rank does in the step."""

    name: str
    stream: str | None
    deps: tuple[int, ...] = ()
    seconds: float = 0.0
    call: Call | None = None
    category: str = "comm"  # forward, backward, optimizer, encode, decode or comm
    preposted: bool = False  # a receive posted at the start: it waits for its sender

    @property
    def is_compute(self) -> bool:
        return self.call is None


@dataclass
class Plan:
    """Every rank's tasks, the layout of ranks, and the step's model FLOPs (all GPUs; None
    when the workload gives no FLOPs) and the GPU's peak FLOP/s (None if not given)."""

    workload: Workload
    layout: Layout
    tasks: list[list[Task]]
    model_flops: float | None = None
    peak: float | None = None

    @property
    def world(self) -> int:
        return self.layout.world

    def calls(self) -> dict[Hashable, Call]:
        """Every distinct call of the step, by key, in the order ranks first meet them."""
        return distinct_calls(self.tasks)


def distinct_calls(tasks: list[list[Task]]) -> dict[Hashable, Call]:
    """Every distinct call of ranks' task lists, by key, in the order ranks first meet them."""
    out: dict[Hashable, Call] = {}
    for rank_tasks in tasks:
        for task in rank_tasks:
            if task.call is not None:
                out.setdefault(task.call.key, task.call)
    return out


def build_layout(workload: Workload, gpus: int | None) -> Layout:
    """The rank layout for ``gpus`` GPUs (None: the data degree the workload names)."""
    par = workload.parallelism
    model_parallel = par.tensor * par.pipeline
    where = {"file": workload.file}
    if par.data is None:
        if gpus is None:
            raise InputError("give parallelism.data or a GPU count", **where,
                             key="parallelism.data")
        if gpus % model_parallel:
            raise InputError(f"{gpus} GPUs are not a whole number of tensor x pipeline = "
                             f"{model_parallel} groups", **where, key="parallelism",
                             line=workload.lines.get(("parallelism",)))
        data = gpus // model_parallel
    else:
        data = par.data
        if gpus is not None and data * model_parallel != gpus:
            raise InputError(f"data x tensor x pipeline = {data * model_parallel} GPUs, but "
                             f"the run has {gpus}", **where, key="parallelism.data",
                             line=workload.lines.get(("parallelism", "data")))
    if data % par.expert:
        raise InputError(f"expert degree {par.expert} does not divide the data degree "
                         f"{data}", **where, key="parallelism.expert",
                         line=workload.lines.get(("parallelism", "expert")))
    return Layout(par.tensor, data, par.pipeline, par.expert, par.order)


def build_plan(workload: Workload, gpus: int | None = None) -> Plan:
    """Plan one training step of ``workload`` on ``gpus`` GPUs (global ranks 0..gpus-1)."""
    layout = build_layout(workload, gpus)
    check_plan(workload, layout)  # before any task is built: an enormous step is refused
    for rank, _ in workload.noise.offsets:
        if not 0 <= rank < layout.world:
            raise InputError(f"rank {rank} is not one of the step's {layout.world} ranks",
                             file=workload.file, key=f"noise.offsets.{rank}",
                             line=workload.lines.get(("noise", "offsets")))
    tasks = [_RankPlanner(workload, layout, rank).plan() for rank in range(layout.world)]
    plan = Plan(workload, layout, tasks, peak=workload.compute.peak)
    if workload.compute.flops is not None:
        # Model FLOPs: forward plus a backward of twice the forward (the MFU convention,
        # whatever the backward's time), every layer, micro-batch and replica.
        plan.model_flops = (3 * workload.compute.flops * workload.model.layers
                            * workload.parallelism.micro_batches * layout.data)
    _check_algorithms(plan)
    return plan


def unserved_call(calls: Iterable[Call]) -> tuple[Call, InputError] | None:
    """The first call whose algorithm does not exist or cannot serve its group's size, and
    why; each (collective, algorithm, group size) is checked once."""
    seen = set()
    for call in calls:
        shape = (call.collective, call.algorithm, len(call.group))
        if shape in seen:
            continue
        seen.add(shape)
        try:
            get_algorithm(call.collective, call.algorithm).check_ranks(len(call.group))
        except InputError as exc:
            return call, exc
    return None


def _check_algorithms(plan: Plan) -> None:
    """Every collective's algorithm exists and can serve its group's size."""
    unserved = unserved_call(plan.calls().values())
    if unserved is not None:
        call, exc = unserved
        path = ("algorithms", call.collective)
        raise InputError(f"{exc.message} (the {call.label} groups have "
                         f"{len(call.group)} ranks)", file=plan.workload.file,
                         key=".".join(path), line=plan.workload.lines.get(path))


@dataclass(frozen=True)
class _Gradients:
    """Gradients reduced over one kind of group: dense ones over ``data``, the experts'
    over ``expert_data``; ``share[layer]`` is this GPU's values of that layer (0: none)."""

    group: str
    share: dict[int, int]


class _Buckets:
    """Fills gradient buckets in the order backward produces the values (last layer first)
    and yields each bucket when it is full, as (layer, values, layer's share) pieces."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self.pieces: list[tuple[int, int, int]] = []
        self.fill = 0

    def add(self, layer: int, share: int) -> Iterator[list[tuple[int, int, int]]]:
        left = share
        while left:
            take = min(left, self.capacity - self.fill)
            self.pieces.append((layer, take, share))
            self.fill += take
            left -= take
            if self.fill == self.capacity:
                yield self.flush()

    def flush(self) -> list[tuple[int, int, int]]:
        pieces, self.pieces, self.fill = self.pieces, [], 0
        return pieces


def whole(size: int, dtype: str) -> int:
    """``size`` bytes rounded up to whole elements of ``dtype``."""
    item = DTYPES[dtype]
    return ceil_div(size, item) * item


class _RankPlanner:
    """Builds one rank's task list."""

    def __init__(self, workload: Workload, layout: Layout, rank: int) -> None:
        self.w = workload
        self.layout = layout
        self.rank = rank
        par = workload.parallelism
        self.stage = layout.coords(rank)["pipeline"]
        per_stage = workload.model.layers // par.pipeline
        self.layers = range(self.stage * per_stage, (self.stage + 1) * per_stage)
        self.groups = {kind: layout.group(kind, rank) for kind in KINDS}
        self.tasks: list[Task] = []
        self.forward_end: dict[int, int] = {}
        self.use_ends: list[int] = []  # last compute of each ZeRO-3 parameter use
        self.reductions: list[int] = []  # what the optimizer waits for
        self.buckets: list[tuple[_Gradients, list[tuple[int, int, int]], int]] = []
        self.filled = {"data": 0, "expert_data": 0}  # buckets reduced so far, per group kind
        experts = workload.model.experts
        tensor = par.tensor
        self.gradients = [_Gradients("data", {layer: ceil_div(
            workload.model.parameters_per_layer, tensor) for layer in self.layers})]
        if experts and experts.parameters:
            share = ceil_div(experts.count // par.expert * experts.parameters, tensor)
            self.gradients.append(_Gradients("expert_data", {
                layer: share for layer in self.layers if experts.is_moe(layer)}))
        self.fillers = [_Buckets(workload.dtypes.gradients.elements_in(
            workload.gradients.bucket)) for _ in self.gradients]

    # -- adding tasks -----------------------------------------------------------------

    def add(self, task: Task) -> int:
        self.tasks.append(task)
        return len(self.tasks) - 1

    def stream(self, name: str) -> str:
        return name if self.w.gradients.overlap else "serial"

    def compute(self, name: str, seconds: float, deps: list[int], category: str) -> int:
        return self.add(Task(name, self.stream("compute"), tuple(deps), seconds,
                             category=category))

    def collective(self, group_kind: str, collective: str, size: int, dtype: str,
                   key: tuple, deps: list[int], stream: str | None = None) -> int | None:
        """This rank's part in a collective over its group of ``group_kind``; None (no
        task) when the group is this rank alone."""
        group = self.groups[group_kind]
        if len(group) == 1:
            return None
        call = Call((group_kind, group[0], *key), group_kind, collective, group,
                    whole(size, dtype), self.w.algorithm(collective), dtype)
        name = f"{group_kind} {collective} " + " ".join(map(str, key))
        return self.add(Task(name, self.stream(stream or group_kind), tuple(deps), call=call))

    def p2p(self, what: str, micro_batch: int, peer_stage: int, sending: bool,
            deps: list[int]) -> int:
        """A pipeline send to, or receive from, the same position of ``peer_stage``."""
        c = self.layout.coords(self.rank)
        peer = self.layout.rank(c["tensor"], c["data"], peer_stage)
        src, dst = (self.rank, peer) if sending else (peer, self.rank)
        fmt = self.w.dtypes.activations
        dtype = fmt.engine_dtype
        collective, algorithm = SEND_ALGORITHM
        call = Call(("pipeline", src, dst, what, micro_batch), "pipeline", collective,
                    (src, dst), whole(self.w.model.activation_bytes or 0, dtype), algorithm,
                    dtype)
        if not sending:
            return self.add(Task(f"pipeline recv {what} mb{micro_batch}", None, call=call,
                                 preposted=True))
        # Without overlap a send holds the rank until it is delivered; it cannot deadlock,
        # since every receive is posted when the step starts.
        stream = None if self.w.gradients.overlap else "serial"
        return self.add(Task(f"pipeline send {what} mb{micro_batch}", stream, tuple(deps),
                             call=call))

    # -- the step ---------------------------------------------------------------------

    def plan(self) -> list[Task]:
        par = self.w.parallelism
        for phase, micro_batch in stage_order(par.schedule, par.pipeline, par.micro_batches,
                                              self.stage):
            if phase == "F":
                self.forward(micro_batch)
            else:
                self.backward(micro_batch)
        self.finish()
        return self.tasks

    def steps(self, layer: int, phase: str) -> list[str]:
        """What one layer's pass does: compute halves ("c"), tensor allreduces ("ar"),
        expert all-to-alls ("a2a"), in order (Megatron: an allreduce after attention and
        after the MLP in each direction; dispatch and combine around the experts)."""
        par = self.w.parallelism
        experts = self.w.model.experts
        ar = ["ar"] if par.tensor > 1 else []
        if experts and experts.is_moe(layer) and par.expert > 1:
            if phase == "F":
                return ["c", *ar, "a2a", "c", "a2a", *ar]
            return ["a2a", "c", *ar, "a2a", "c", *ar]
        return ["c", "ar", "c", "ar"] if ar else ["c"]

    def layer_pass(self, layer: int, phase: str, micro_batch: int, gate: list[int]
                   ) -> tuple[list[int], int]:
        """One layer's forward or backward; returns (what the next task waits for, the id
        of the layer's last compute task)."""
        compute = self.w.compute
        tensor = self.w.parallelism.tensor
        seconds = (compute.forward if phase == "F" else compute.backward) / tensor
        steps = self.steps(layer, phase)
        part = seconds / steps.count("c")
        activation = self.w.model.activation_bytes or 0
        dtype = self.w.dtypes.activations.engine_dtype
        last_compute = -1
        for index, step in enumerate(steps):
            key = (phase, layer, micro_batch, index)
            if step == "c":
                name = f"{'forward' if phase == 'F' else 'backward'} L{layer} mb{micro_batch}"
                made: int | None = self.compute(name, part, gate,
                                                "forward" if phase == "F" else "backward")
                last_compute = made
            elif step == "ar":
                made = self.collective("tensor", "allreduce", activation, dtype, key, gate)
            else:
                top_k = self.w.model.experts.top_k
                made = self.collective("expert", "alltoall", activation * top_k, dtype, key,
                                       gate)
            if made is not None:
                gate = [made]
        return gate, last_compute

    def gather(self, layer: int, phase: str, micro_batch: int) -> list[int]:
        """ZeRO-3: gather the layer's parameters before its pass, at most one use ahead of
        the compute (a gather waits for the use two before it to finish)."""
        if self.w.parallelism.zero < 3:
            return []
        deps = [self.use_ends[-2]] if len(self.use_ends) >= 2 else []
        fmt = self.w.dtypes.parameters
        made = []
        for grads in self.gradients:
            share = grads.share.get(layer, 0)
            if share:
                task = self.collective(grads.group, "allgather", fmt.nbytes(share),
                                       fmt.engine_dtype, ("gather", phase, layer, micro_batch),
                                       deps, stream=f"{grads.group}.gather")
                made += [task] if task is not None else []
        return made

    def forward(self, micro_batch: int) -> None:
        gate: list[int] = []
        if self.stage > 0:
            gate.append(self.p2p("activation", micro_batch, self.stage - 1, False, []))
        for layer in self.layers:
            gate, last = self.layer_pass(layer, "F", micro_batch,
                                         gate + self.gather(layer, "F", micro_batch))
            self.use_ends.append(last)
        self.forward_end[micro_batch] = gate[0]
        if self.stage < self.w.parallelism.pipeline - 1:
            self.p2p("activation", micro_batch, self.stage + 1, True, gate)

    def backward(self, micro_batch: int) -> None:
        gate = [self.forward_end[micro_batch]]
        if self.stage < self.w.parallelism.pipeline - 1:
            gate.append(self.p2p("gradient", micro_batch, self.stage + 1, False, []))
        last_micro_batch = micro_batch == self.w.parallelism.micro_batches - 1
        last = gate[0]
        for layer in reversed(self.layers):
            gate, last = self.layer_pass(layer, "B", micro_batch,
                                         gate + self.gather(layer, "B", micro_batch))
            self.use_ends.append(last)
            if self.w.parallelism.zero == 3:
                self.reduce_layer(layer, micro_batch, last)
            elif last_micro_batch:
                for grads, filler in zip(self.gradients, self.fillers, strict=True):
                    for pieces in filler.add(layer, grads.share.get(layer, 0)):
                        self.reduce_bucket(grads, pieces, last)
        if last_micro_batch and self.w.parallelism.zero < 3:
            for grads, filler in zip(self.gradients, self.fillers, strict=True):
                if filler.pieces:
                    self.reduce_bucket(grads, filler.flush(), last)
        if self.stage > 0:
            self.p2p("gradient", micro_batch, self.stage - 1, True, gate)

    def reduce_layer(self, layer: int, micro_batch: int, after: int) -> None:
        """ZeRO-3: reduce-scatter the layer's gradients after every backward of it."""
        fmt = self.w.dtypes.gradients
        for grads in self.gradients:
            share = grads.share.get(layer, 0)
            if share:
                task = self.collective(grads.group, "reducescatter", fmt.nbytes(share),
                                       fmt.engine_dtype, ("reduce", layer, micro_batch),
                                       [after], stream=f"{grads.group}.reduce")
                self.reductions += [task] if task is not None else []

    def reduce_bucket(self, grads: _Gradients, pieces: list[tuple[int, int, int]],
                      after: int) -> None:
        """A full bucket: allreduce it (encoded if compressed), or reduce-scatter it under
        ZeRO-1/2."""
        index = self.filled[grads.group]
        self.filled[grads.group] += 1
        fmt = self.w.dtypes.gradients
        values = sum(part for _, part, _ in pieces)
        deps = [after]
        if self.w.parallelism.zero:
            task = self.collective(grads.group, "reducescatter", fmt.nbytes(values),
                                   fmt.engine_dtype, ("bucket", index), deps)
        else:
            comp = self.w.compression
            size_of_group = len(self.groups[grads.group])
            if comp.kind != "none" and size_of_group > 1:
                deps = [self.compute(f"encode {grads.group} bucket {index}",
                                     comp.encode.time(fmt.nbytes(values)), deps, "encode")]
            contribution = comp.contribution([(part, share) for _, part, share in pieces], fmt,
                                             self.w.parallelism.tensor)
            task = self.collective(grads.group, comp.collective,
                                   comp.call_size(contribution, size_of_group),
                                   comp.engine_dtype(fmt), ("bucket", index), deps)
        if task is not None:
            self.reductions.append(task)
            self.buckets.append((grads, pieces, task))

    def finish(self) -> None:
        """Decode compressed buckets, step the optimizer once every reduction is done, and
        under ZeRO-1/2 gather the updated parameters bucket by bucket."""
        comp = self.w.compression
        fmt = self.w.dtypes.gradients
        waits = list(self.reductions)
        if comp.kind != "none":
            for grads, pieces, task in self.buckets:
                values = sum(part for _, part, _ in pieces)
                waits.append(self.compute(f"decode {grads.group}", comp.decode.time(
                    fmt.nbytes(values)), [task], "decode"))
        par = self.w.parallelism
        share = self.w.compute.optimizer * len(self.layers) / self.w.model.layers / par.tensor
        if par.zero:
            share /= self.layout.data
        optimizer = self.compute("optimizer", share, waits, "optimizer")
        if par.zero in (1, 2):
            params: Format = self.w.dtypes.parameters
            for index, (grads, pieces, _) in enumerate(self.buckets):
                values = sum(part for _, part, _ in pieces)
                self.collective(grads.group, "allgather", params.nbytes(values),
                                params.engine_dtype, ("parameters", index), [optimizer])
