"""Across ranks: the process groups every file must agree on, the group of each call, and
the check that each group's members issued the same calls in the same order.

NCCL traces name each call's group (record_param_comms). gloo traces do not: a c10d op's
process-group argument is blank. A call's group is then the one group of its rank that
fits it (its size for gathered buffers and all-to-all splits, its root or peer); failing
that, the group whose worker thread ran it (gloo gives each group its own threads) where
another call already tied that thread to a group; failing that, the one whose members all
issue a matching call next, the smallest such group when several do (the trace cannot tell
two-rank data-parallel allreduces from one of the same size on all ranks); failing that,
the smallest group that fits."""

from __future__ import annotations

from collections.abc import Mapping

from collsim.errors import InputError
from collsim.replay.model import ProcessGroup
from collsim.replay.rankfile import RankFile, RawCall

P2P = ("send", "recv")


def merge_groups(files: Mapping[int, RankFile]) -> dict[str, ProcessGroup]:
    """Every group any file lists; the same name with other ranks in another file is an
    error naming both files."""
    groups: dict[str, ProcessGroup] = {}
    seen_in: dict[str, str] = {}
    for rank in sorted(files):
        rf = files[rank]
        for name, group in rf.groups.items():
            known = groups.get(name)
            if known is None:
                groups[name], seen_in[name] = group, rf.name
            elif known.ranks != group.ranks:
                raise InputError(
                    f"process group {name!r} has ranks {list(group.ranks)} here but "
                    f"{list(known.ranks)} in {seen_in[name]}: the traces are not of one job",
                    file=rf.name, key="distributedInfo.pg_config")
            elif not known.description and group.description:
                groups[name] = group
    return groups


def _sort_key(name: str) -> tuple[int, int | str]:
    return (0, int(name)) if name.isdigit() else (1, name)


def _fits(call: RawCall, group: ProcessGroup, rank: int) -> bool:
    n = len(group.ranks)
    if rank not in group.ranks:
        return False
    if call.group_size is not None and call.group_size != n:
        return False
    if call.root is not None and not 0 <= call.root < n:
        return False
    return not (call.collective in P2P and call.root is not None
                and group.ranks[call.root] == rank)


def resolve_groups(files: Mapping[int, RankFile], groups: Mapping[str, ProcessGroup]) -> None:
    """Set ``group`` on every call (see the module docstring for how, on gloo traces)."""
    # groups with the same ranks are one for this purpose: keep the first by name
    distinct: dict[tuple[int, ...], str] = {}
    for name in sorted(groups, key=_sort_key):
        distinct.setdefault(groups[name].ranks, name)
    by_size = sorted(distinct.values(), key=lambda n: (len(groups[n].ranks), _sort_key(n)))
    ambiguous = False
    for rank, rf in files.items():
        thread_groups: dict[object, set[str]] = {}
        for call in rf.calls:
            if call.group is not None:
                if call.group not in groups:
                    raise InputError(f"event {call.event}: names process group "
                                     f"{call.group!r}, which no trace's distributedInfo lists",
                                     file=rf.name, key="Process Group Name")
                call.candidates = (call.group,)
                continue
            call.candidates = tuple(n for n in by_size if _fits(call, groups[n], rank))
            if not call.candidates:
                raise InputError(f"event {call.event}: no process group of rank {rank} fits "
                                 f"this {call.collective} (group size {call.group_size}, "
                                 f"root or peer {call.root})", file=rf.name,
                                 key="distributedInfo.pg_config")
            if len(call.candidates) == 1 and call.collective not in P2P:
                thread_groups.setdefault(call.backend_tid, set()).add(call.candidates[0])
        for call in rf.calls:
            if len(call.candidates) > 1 and call.collective not in P2P:
                owner = thread_groups.get(call.backend_tid, set())
                if call.backend_tid is not None and len(owner) == 1:
                    only = next(iter(owner))
                    if only in call.candidates:
                        call.candidates = (only,)
            if len(call.candidates) > 1 and call.collective in P2P:
                call.candidates = call.candidates[:1]  # the smallest group with the peer
            ambiguous = ambiguous or len(call.candidates) > 1
    if ambiguous:
        _match_heads(files, groups)
    for rf in files.values():
        for call in rf.calls:
            call.group = call.candidates[0]


def _same(a: RawCall, b: RawCall) -> bool:
    """The same collective on two members: kind, dtype (where known), root, and size (an
    all-to-all's per-rank sizes may differ)."""
    return (a.collective == b.collective and (a.dtype == b.dtype or "" in (a.dtype, b.dtype))
            and a.root == b.root
            and (a.collective == "alltoall"
                 or (a.local_elements, a.rule) == (b.local_elements, b.rule)))


def _describe(call: RawCall) -> str:
    size = f"{call.local_elements} elements" + (" per rank" if call.rule == "times_group"
                                                 else "")
    root = f" from root {call.root}" if call.root is not None else ""
    return f"{call.collective} of {size} {call.dtype}".rstrip() + root


def _match_heads(files: Mapping[int, RankFile], groups: Mapping[str, ProcessGroup]) -> None:
    """Decide ambiguous calls by walking every rank's collectives in order: a call goes to
    the smallest of its candidate groups whose members all issue a matching call next."""
    seqs = {r: [c for c in rf.calls if c.collective not in P2P] for r, rf in files.items()}
    pos = dict.fromkeys(seqs, 0)

    def advance(rank: int) -> bool:
        head = seqs[rank][pos[rank]]
        for name in head.candidates:
            members = groups[name].ranks
            if all(m in seqs and pos[m] < len(seqs[m]) and _same(seqs[m][pos[m]], head)
                   and name in seqs[m][pos[m]].candidates for m in members):
                for m in members:
                    seqs[m][pos[m]].candidates = (name,)
                    pos[m] += 1
                return True
        return False

    progress = True
    while progress:
        progress = False
        for rank in seqs:
            while pos[rank] < len(seqs[rank]) and advance(rank):
                progress = True
    # Past a point where no rank's next call matches (async calls on different groups
    # issued in different orders), each call left keeps its smallest candidate group, and
    # check_agreement says whether the members agree.
    for rank, calls in seqs.items():
        for call in calls[pos[rank]:]:
            call.candidates = call.candidates[:1]


def check_agreement(files: Mapping[int, RankFile], groups: Mapping[str, ProcessGroup]) -> None:
    """Each group's members issued the same collectives in the same order, and every send
    has its receive; the first difference is an error naming both files."""
    for name, group in sorted(groups.items(), key=lambda item: _sort_key(item[0])):
        lists = {r: [c for c in files[r].calls if c.group == name and c.collective not in P2P]
                 for r in group.ranks if r in files}
        if not lists:
            continue
        first = min(lists)
        ref = lists[first]
        for r, calls in lists.items():
            for i, (a, b) in enumerate(zip(ref, calls, strict=False)):
                if not _same(a, b):
                    raise InputError(
                        f"call {i} on process group {name!r} differs between ranks: rank "
                        f"{first} ({files[first].name}, event {a.event}) has {_describe(a)}, "
                        f"rank {r} (event {b.event}) has {_describe(b)}",
                        file=files[r].name, key="traceEvents")
            if len(calls) != len(ref):
                raise InputError(
                    f"rank {r} issued {len(calls)} collectives on process group {name!r} but "
                    f"rank {first} ({files[first].name}) issued {len(ref)}: a trace is cut "
                    "short or the ranks profiled different steps", file=files[r].name,
                    key="traceEvents")
        _check_p2p(files, name, group)


def _check_p2p(files: Mapping[int, RankFile], name: str, group: ProcessGroup) -> None:
    flows: dict[tuple[int, int, str], list[RawCall]] = {}
    for r in group.ranks:
        if r not in files:
            continue
        for call in files[r].calls:
            if call.group != name or call.collective not in P2P or call.root is None:
                continue
            peer = group.ranks[call.root]
            src, dst = (r, peer) if call.collective == "send" else (peer, r)
            flows.setdefault((src, dst, call.collective), []).append(call)
    for src, dst in sorted({(src, dst) for src, dst, _ in flows}):
        sizes = [(c.local_elements, c.dtype) for c in flows.get((src, dst, "send"), [])]
        got = [(c.local_elements, c.dtype) for c in flows.get((src, dst, "recv"), [])]
        if sizes != got:
            raise InputError(
                f"rank {src} ({files[src].name}) sends {len(sizes)} messages to rank {dst} "
                f"on process group {name!r} (elements, dtype: {sizes[:3]}), but rank {dst} "
                f"receives {len(got)} from it ({got[:3]})", file=files[dst].name,
                key="traceEvents")


def fill_dtypes(files: Mapping[int, RankFile], groups: Mapping[str, ProcessGroup]) -> None:
    """A call whose own events give no dtype (gloo's scatter on a non-root rank) takes it
    from the same call on another member of its group; none knowing it is an error."""
    for name, group in groups.items():
        lists = [[c for c in files[r].calls if c.group == name and c.collective not in P2P]
                 for r in group.ranks if r in files]
        for position in zip(*lists, strict=False):
            known = next((c.dtype for c in position if c.dtype), "")
            for call in position:
                call.dtype = call.dtype or known
    for rf in files.values():
        for call in rf.calls:
            if not call.dtype and call.collective != "barrier":
                raise InputError(f"event {call.event}: its dtype is not in the trace (a "
                                 "tensor list's 'Input type' names none, and no backend "
                                 "event or record_param_comms gives it)", file=rf.name,
                                 key="Input type")
