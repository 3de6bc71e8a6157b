"""What-if changes to a trace before it is replayed: another number format for its calls,
and data parallelism grown to more ranks.

Scale-out: the data-parallel (DP) groups are the process groups that partition the world
into groups of equal size, one rank of each per position of the other parallelisms; with
only the world group, the whole world is data-parallel. Growing to N ranks adds DP
replicas: replica ``d`` of the traced rank at DP position ``d % D`` runs that rank's program
(its compute and calls, same sizes), its DP groups grow to every replica, and its other
groups (tensor, pipeline) are copied inside the replica. New ranks are numbered after the
traced ones, replica by replica.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from collsim.errors import InputError
from collsim.replay.model import ComputeSpan, ProcessGroup, Trace, TracedCall
from collsim.workloads.formats import parse_format

# Process-group descriptions that name data parallelism (pg_desc as frameworks set it).
DP_WORDS = ("dp", "data", "ddp", "replicate", "fsdp")
FLOATS = ("float32", "float16", "bfloat16", "float64")


def with_format(trace: Trace, name: str) -> Trace:
    """Every floating-point call carried in number format ``name`` (bf16, fp8_e4m3, ...):
    the same elements, their bytes at the new width; integer calls are left as they are."""
    try:
        target = parse_format(name)
    except ValueError as exc:
        raise InputError(str(exc), key="--format") from None
    calls = {}
    for rank, rank_calls in trace.calls.items():
        changed = []
        for call in rank_calls:
            if call.dtype in FLOATS:
                source = parse_format(call.dtype)
                elements = call.size_bytes * 8 // source.bits
                call = dataclasses.replace(call, size_bytes=target.nbytes(elements),
                                           dtype=target.engine_dtype)
            changed.append(call)
        calls[rank] = tuple(changed)
    return dataclasses.replace(trace, calls=calls)


def data_parallel_groups(trace: Trace) -> list[ProcessGroup]:
    """The trace's DP groups (module docstring), each once, ordered by first rank; an
    InputError when the groups leave it ambiguous."""
    world = set(range(trace.world_size))
    by_ranks: dict[frozenset[int], ProcessGroup] = {}
    for group in trace.groups.values():
        by_ranks.setdefault(frozenset(group.ranks), group)
    # A family: the groups of one size and one description (tensor and data groups may be
    # the same size); a family that partitions the world is a candidate.
    families: dict[tuple[int, str], list[ProcessGroup]] = {}
    for members, group in by_ranks.items():
        families.setdefault((len(members), group.description), []).append(group)
    partitions = {key: sorted(groups, key=lambda g: min(g.ranks))
                  for key, groups in families.items()
                  if key[0] > 1 and key[0] * len(groups) == len(world)
                  and set().union(*(set(g.ranks) for g in groups)) == world}
    if not partitions:
        raise InputError("no process groups partition the ranks, so none can be the "
                         "data-parallel ones to grow", key="--scale-out")
    named = [groups for (_, description), groups in partitions.items()
             if set(description.lower().replace("-", "_").split("_")) & set(DP_WORDS)]
    if len(named) == 1:
        return named[0]
    inner = [groups for (size, _), groups in partitions.items() if size < len(world)]
    if not inner:
        return next(iter(partitions.values()))
    if len(inner) == 1 and not named:
        return inner[0]
    shown = "; ".join(f"{len(groups)} groups of {size} ({description or 'no description'})"
                      for (size, description), groups in sorted(partitions.items()))
    raise InputError(f"more than one family of process groups partitions the ranks ({shown}) "
                     f"and not exactly one is described as data-parallel (a pg_desc with "
                     f"{', '.join(DP_WORDS)}), so which to grow is ambiguous",
                     key="--scale-out")


def scale_out(trace: Trace, ranks: int) -> Trace:
    """``trace`` grown to ``ranks`` ranks by adding data-parallel replicas (module
    docstring); every call keeps its size."""
    dp_groups = data_parallel_groups(trace)
    degree = len(dp_groups[0].ranks)
    model = len(dp_groups)  # ranks of one replica: one per other-parallel position
    if ranks < trace.world_size or ranks % model:
        raise InputError(f"--scale-out {ranks}: give a multiple of {model} (the ranks of one "
                         f"data-parallel replica) of at least {trace.world_size}, the "
                         f"traced world", key="--scale-out")
    replicas = ranks // model
    position: dict[int, tuple[int, int]] = {}  # traced rank -> (replica, slot in replica)
    for slot, group in enumerate(dp_groups):
        for replica, rank in enumerate(group.ranks):
            position[rank] = (replica, slot)

    def new_rank(replica: int, slot: int) -> int:
        if replica < degree:
            return dp_groups[slot].ranks[replica]
        return trace.world_size + (replica - degree) * model + slot

    dp_names = {g.name for g in trace.groups.values()
                if frozenset(g.ranks) in {frozenset(d.ranks) for d in dp_groups}}
    groups: dict[str, ProcessGroup] = {}
    # The group each (traced group, replica) becomes, by name.
    renamed: dict[tuple[str, int], str] = {}
    for group in trace.groups.values():
        replicas_in = {position[r][0] for r in group.ranks}
        slots_in = {position[r][1] for r in group.ranks}
        if group.name in dp_names or len(replicas_in) == degree and \
                len(group.ranks) == degree * len(slots_in):
            # A DP group, or a union of whole DP groups (the world): it grows.
            grown = tuple(new_rank(d, position[r][1]) for r in group.ranks
                          if position[r][0] == 0 for d in range(replicas))
            grown = tuple(sorted(grown)) if len(slots_in) > 1 else grown
            groups[group.name] = dataclasses.replace(group, ranks=grown)
            for d in range(replicas):
                renamed[(group.name, d)] = group.name
        elif len(replicas_in) == 1:
            (home,) = replicas_in
            for d in range(replicas):
                if d % degree != home:
                    continue
                name = group.name if d == home else f"{group.name}.r{d}"
                groups[name] = dataclasses.replace(group, name=name, ranks=tuple(
                    new_rank(d, position[r][1]) for r in group.ranks))
                renamed[(group.name, d)] = name
        else:
            raise InputError(f"process group {group.name!r} spans some data-parallel "
                             f"replicas but not all, so it cannot be grown",
                             key="--scale-out")
    calls: dict[int, tuple[TracedCall, ...]] = {}
    compute: dict[int, tuple[ComputeSpan, ...]] = {}
    files: dict[int, str] = {}
    for replica in range(replicas):
        for slot in range(model):
            rank = new_rank(replica, slot)
            source = dp_groups[slot].ranks[replica % degree]
            calls[rank] = tuple(_moved(call, rank, renamed[(call.group, replica)],
                                       lambda r, d=replica: new_rank(d, position[r][1]))
                                for call in trace.calls.get(source, ()))
            compute[rank] = tuple(dataclasses.replace(span, rank=rank)
                                  for span in trace.compute.get(source, ()))
            files[rank] = trace.files.get(source, f"rank {source}") + (
                "" if rank == source else f" (as rank {rank})")
    return dataclasses.replace(trace, world_size=ranks, groups=groups, calls=calls,
                               compute=compute, files=files)


def _moved(call: TracedCall, rank: int, group: str, peer_of: Callable[[int], int]
           ) -> TracedCall:
    """``call`` as the copy on ``rank`` issues it."""
    peer = None if call.peer is None else peer_of(call.peer)
    return dataclasses.replace(call, rank=rank, group=group, peer=peer)

