"""Read a job's Kineto traces (one JSON per rank, plain or gzipped) into a Trace: find the
files, stream each, agree the groups across ranks, and express each call in collsim's
sizes."""

from __future__ import annotations

import glob
import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from collsim.errors import InputError
from collsim.replay.groups import check_agreement, fill_dtypes, merge_groups, resolve_groups
from collsim.replay.model import ComputeSpan, ProcessGroup, Trace, TracedCall
from collsim.replay.ops import DTYPES
from collsim.replay.rankfile import RankFile, RawCall, read_rank_file

TRACE_SUFFIXES = (".json", ".json.gz")


def trace_files(path: str | Path) -> list[Path]:
    """The trace files ``path`` names: a folder's ``*.json``/``*.json.gz``, one file, or
    the files a glob pattern matches."""
    text = str(path)
    if any(ch in text for ch in "*?["):
        found = sorted(Path(p) for p in glob.glob(text) if Path(p).is_file())
        if not found:
            raise InputError(f"no trace file matches {text!r}", file=text)
        return found
    p = Path(text)
    if p.is_dir():
        found = sorted(f for f in p.iterdir()
                       if f.is_file() and f.name.endswith(TRACE_SUFFIXES))
        if not found:
            raise InputError("the folder holds no trace (*.json or *.json.gz)", file=text)
        return found
    if p.is_file():
        return [p]
    raise InputError("no such file or folder", file=text)


def read_trace(path: str | Path, progress: Callable[[int], None] | None = None) -> Trace:
    """The job in ``path``: a folder of per-rank traces, one trace file, or a glob pattern.

    Raises collsim.errors.InputError naming the file, event and field for bad input: a
    truncated or non-JSON file, a missing or repeated rank, groups or calls that disagree
    between ranks. ``progress``, where given, is called with 1 as each file is read (a
    Progress bar's ``advance``; ``trace_files`` says how many there are)."""
    files: dict[int, RankFile] = {}
    for file in trace_files(path):
        rf = read_rank_file(file, str(file))
        if rf.rank in files:
            raise InputError(f"rank {rf.rank} again: {files[rf.rank].name} is rank "
                             f"{rf.rank} too", file=rf.name, key="distributedInfo.rank")
        files[rf.rank] = rf
        if progress is not None:
            progress(1)
    first = files[min(files)]
    for rf in files.values():
        for key in ("world_size", "backend"):
            if getattr(rf, key) != getattr(first, key):
                raise InputError(f"{key} is {getattr(rf, key)!r} here but "
                                 f"{getattr(first, key)!r} in {first.name}",
                                 file=rf.name, key=f"distributedInfo.{key}")
    missing = sorted(set(range(first.world_size)) - set(files))
    if missing:
        shown = ", ".join(str(r) for r in missing[:10]) + (" ..." if len(missing) > 10 else "")
        raise InputError(f"world_size is {first.world_size} but no trace is of rank(s) "
                         f"{shown}: every rank's trace is needed", file=str(path),
                         key="distributedInfo.world_size")
    groups = merge_groups(files)
    resolve_groups(files, groups)
    check_agreement(files, groups)
    fill_dtypes(files, groups)
    return Trace(
        world_size=first.world_size,
        backend=first.backend,
        groups=groups,
        calls={r: _traced_calls(rf, groups) for r, rf in sorted(files.items())},
        compute={r: _compute(rf) for r, rf in sorted(files.items())},
        files={r: rf.name for r, rf in sorted(files.items())},
        pytorch_version=first.pytorch_version,
    )


def _size_bytes(call: RawCall, group: ProcessGroup) -> int:
    if call.collective == "barrier":
        return 0
    elements = call.local_elements
    if call.rule == "times_group":
        elements *= len(group.ranks)
    return elements * DTYPES[call.dtype][1]


def _traced_calls(rf: RankFile, groups: dict[str, ProcessGroup]) -> tuple[TracedCall, ...]:
    out = []
    for index, call in enumerate(rf.calls):
        group = groups[call.group]
        peer = root = None
        if call.root is not None:
            if call.collective in ("send", "recv"):
                peer = group.ranks[call.root]
            else:
                root = group.ranks[call.root]
        out.append(TracedCall(
            rank=rf.rank, index=index, collective=call.collective,
            size_bytes=_size_bytes(call, group), dtype=call.dtype, group=call.group,
            start_us=call.start_us, duration_us=call.duration_us, stream=call.stream,
            in_split_sizes=tuple(s * call.row for s in call.in_splits),
            out_split_sizes=tuple(s * call.row for s in call.out_splits),
            sequence=call.sequence, peer=peer, root=root))
    return tuple(out)


def _compute(rf: RankFile) -> tuple[ComputeSpan, ...]:
    """One span per gap between calls: on GPU traces the compute kernels' busy time in it,
    on CPU traces the issuing thread's time outside collective ops."""
    if len(rf.kernel_start):
        return _gpu_compute(rf)
    spans = []
    edges = [(c.issue_start_us, c.issue_end_us) for c in rf.calls]
    before = rf.first_us if math.isfinite(rf.first_us) else None
    for start, end in edges:
        if before is not None and start > before:
            spans.append(ComputeSpan(rf.rank, before, start - before, None, "cpu"))
        before = end if before is None else max(before, end)
    if before is not None and math.isfinite(rf.last_us) and rf.last_us > before:
        spans.append(ComputeSpan(rf.rank, before, rf.last_us - before, None, "cpu"))
    return tuple(spans)


def _gpu_compute(rf: RankFile) -> tuple[ComputeSpan, ...]:
    bounds = [c.start_us for c in rf.calls] + [math.inf]
    spans = []
    k, n = 0, len(rf.kernel_start)
    lo = -math.inf
    for hi in bounds:
        busy, first, last_end, count = 0.0, None, -math.inf, 0
        streams: Counter[int] = Counter()
        while k < n and rf.kernel_start[k] < hi:
            start, end = rf.kernel_start[k], rf.kernel_end[k]
            if start >= lo:
                first = start if first is None else first
                busy += max(0.0, end - max(start, last_end))
                last_end = max(last_end, end)
                streams[rf.kernel_stream[k]] += 1
                count += 1
            k += 1
        if count:
            spans.append(ComputeSpan(rf.rank, first, busy, streams.most_common(1)[0][0],
                                     f"{count} kernels"))
        lo = hi
    return tuple(spans)
