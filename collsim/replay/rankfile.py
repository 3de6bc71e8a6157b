"""One rank's trace file, streamed once: its distributedInfo, the collective calls it
issued (with what each call's events say), the backend spans that ran them, and the time
between them. Only those are kept, so memory follows the number of calls, not of events."""

from __future__ import annotations

import ast
import bisect
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collsim.errors import InputError
from collsim.replay.jsonstream import stream_trace
from collsim.replay.model import ProcessGroup
from collsim.replay.ops import (
    C10D_OPS,
    DTYPES,
    GLOO_EVENTS,
    NCCL_KERNEL_WORDS,
    PARAM_COMMS,
    elements,
    is_nccl_kernel,
)

PAIR_WINDOW = 64  # backend spans looked at past a call for its own
_NUMBERS = (int, float)
_TIMED = frozenset(("cpu_op", "kernel", "user_annotation"))  # what bounds a rank's timeline


@dataclass
class RawCall:
    """A call as one rank's events describe it, before groups are resolved across ranks."""

    event: str  # what an error calls it: the op's name and its event number in the file
    collective: str
    local_elements: int
    rule: str  # OpKind.rule, or "exact" when local_elements is already collsim's size
    dtype: str  # "" until known
    start_us: float
    duration_us: float
    tid: object
    root: int | None = None  # group rank of a root or peer, where the op names one
    in_splits: tuple[int, ...] = ()
    out_splits: tuple[int, ...] = ()
    row: int = 1  # elements per split unit (alltoall splits count rows)
    group: str | None = None  # named by the trace (record_param_comms, functional ops)
    group_size: int | None = None  # implied by the buffers (gathered / local), where they do
    sequence: int | None = None
    stream: int | None = None
    measured: bool = False  # start/duration come from a backend span or kernel
    backend_tid: object = None  # the gloo worker thread that ran it
    issue_start_us: float = 0.0  # the op's span on the issuing thread
    issue_end_us: float = 0.0
    candidates: tuple[str, ...] = ()  # groups it may be on, set by the cross-rank pass


@dataclass
class RankFile:
    """What one file says about its rank."""

    path: Path
    name: str  # how errors call the file
    rank: int = -1
    world_size: int = -1
    backend: str = ""
    groups: dict[str, ProcessGroup] = field(default_factory=dict)
    calls: list[RawCall] = field(default_factory=list)
    first_us: float = float("inf")  # earliest op or kernel start
    last_us: float = float("-inf")  # latest op or kernel end
    kernel_start: array = field(default_factory=lambda: array("d"))  # compute kernels
    kernel_end: array = field(default_factory=lambda: array("d"))
    kernel_stream: array = field(default_factory=lambda: array("q"))
    pytorch_version: str = ""


def _fail(rf: RankFile, what: str, key: str | None = None) -> InputError:
    return InputError(what, file=rf.name, key=key)


def _ranks(rf: RankFile, value: Any, where: str) -> tuple[int, ...]:
    if isinstance(value, str):
        if "..." in value:
            raise _fail(rf, f"{where} lists its ranks cut short ({value[:60]}...); the "
                            "group's ranks cannot be known", "ranks")
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise _fail(rf, f"{where}: expected a list of ranks, found {value!r}",
                        "ranks") from None
    if not isinstance(value, list | tuple) or not all(
            isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in value):
        raise _fail(rf, f"{where}: expected a list of ranks, found {value!r}", "ranks")
    return tuple(value)


def _read_info(rf: RankFile, info: Any) -> None:
    where = "distributedInfo"
    if not isinstance(info, dict):
        raise _fail(rf, f"{where} must be an object", where)
    for key in ("rank", "world_size"):
        value = info.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _fail(rf, f"{where}.{key}: expected a whole number >= 0, found {value!r}",
                        f"{where}.{key}")
    rf.rank, rf.world_size = info["rank"], info["world_size"]
    if rf.rank >= rf.world_size:
        raise _fail(rf, f"rank {rf.rank} is not below world_size {rf.world_size}",
                    f"{where}.rank")
    rf.backend = str(info.get("backend", ""))
    configs = info.get("pg_config", [])
    if isinstance(configs, dict):  # some versions key the groups by name
        configs = [{"pg_name": k, **v} for k, v in configs.items() if isinstance(v, dict)]
    if not isinstance(configs, list):
        raise _fail(rf, f"{where}.pg_config: expected a list of groups", f"{where}.pg_config")
    for i, pg in enumerate(configs):
        at = f"{where}.pg_config[{i}]"
        if not isinstance(pg, dict) or "pg_name" not in pg or "ranks" not in pg:
            raise _fail(rf, f"{at}: expected an object with pg_name and ranks", at)
        ranks = _ranks(rf, pg["ranks"], at)
        if any(r >= rf.world_size for r in ranks) or len(set(ranks)) != len(ranks):
            raise _fail(rf, f"{at}: ranks {list(ranks)} must be distinct and below "
                            f"world_size {rf.world_size}", f"{at}.ranks")
        name = str(pg["pg_name"])
        rf.groups[name] = ProcessGroup(name, str(pg.get("pg_desc", "")), ranks)
    if not rf.groups:  # a trace from before pg_config: the default group only
        rf.groups["0"] = ProcessGroup("0", "default_pg", tuple(range(rf.world_size)))


def _dims(rf: RankFile, args: dict, event: str, index: int) -> Any:
    dims = args.get("Input Dims")
    if not isinstance(dims, list) or len(dims) <= index:
        raise _fail(rf, f"event {event}: 'Input Dims' must list the op's arguments (record "
                        "the trace with record_shapes=True)", "Input Dims")
    return dims[index]


def _int_list(rf: RankFile, text: Any, event: str, key: str) -> tuple[int, ...]:
    if text in ("", None, "[]", []):
        return ()
    try:
        value = ast.literal_eval(text) if isinstance(text, str) else text
    except (ValueError, SyntaxError):
        value = None
    if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
        raise _fail(rf, f"event {event}: expected a list of whole numbers, found {text!r}", key)
    return tuple(value)


def _concrete_int(rf: RankFile, args: dict, index: int, event: str) -> int | None:
    concrete = args.get("Concrete Inputs")
    if not isinstance(concrete, list) or len(concrete) <= index or concrete[index] == "":
        return None
    try:
        return int(concrete[index])
    except (TypeError, ValueError):
        raise _fail(rf, f"event {event}: expected a whole number at argument {index}, "
                        f"found {concrete[index]!r}", "Concrete Inputs") from None


def _op_call(rf: RankFile, e: dict, number: int) -> RawCall:
    name = e["name"]
    kind = C10D_OPS[name]
    event = f"#{number} {name}"
    args = e.get("args")
    if not isinstance(args, dict):
        raise _fail(rf, f"event {event}: has no 'args'", "args")
    local = _dims(rf, args, event, kind.local)
    count = elements(local)
    if count is None:
        raise _fail(rf, f"event {event}: 'Input Dims' argument {kind.local} is not a tensor "
                        f"or tensor list: {local!r}", "Input Dims")
    rule, group_size = kind.rule, None
    if rule == "other":  # the gathered output is given: it is the size
        other = elements(_dims(rf, args, event, kind.other))
        if other is None:
            raise _fail(rf, f"event {event}: 'Input Dims' argument {kind.other} is not a "
                            "tensor", "Input Dims")
        group_size = other // count if count and other % count == 0 else None
        count, rule = other, "exact"
    if name == "c10d::_reduce_scatter_base_":
        out = elements(_dims(rf, args, event, 0))
        group_size = count // out if out and count % out == 0 else None
    types = args.get("Input type")
    dtype = ""
    if isinstance(types, list) and len(types) > kind.local:
        dtype = DTYPES.get(types[kind.local], ("", 0))[0]
    call = RawCall(event, kind.collective, count, rule, dtype, float(e["ts"]),
                   float(e.get("dur", 0.0)), e.get("tid"))
    call.issue_start_us, call.issue_end_us = call.start_us, call.start_us + call.duration_us
    if kind.collective == "barrier":
        call.local_elements, call.rule, call.dtype = 0, "exact", ""
    if kind.root_arg is not None:
        call.root = _concrete_int(rf, args, kind.root_arg, event)
    if kind.splits is not None:
        concrete = args.get("Concrete Inputs") or []
        out_s = concrete[kind.splits[0]] if len(concrete) > kind.splits[0] else ""
        in_s = concrete[kind.splits[1]] if len(concrete) > kind.splits[1] else ""
        call.out_splits = _int_list(rf, out_s, event, "Concrete Inputs")
        call.in_splits = _int_list(rf, in_s, event, "Concrete Inputs")
        rows = local[0] if isinstance(local, list) and local else 0
        call.row = count // rows if rows else 1
        if call.in_splits:
            group_size = len(call.in_splits)
    if kind.group_size_arg is not None:
        group_size = _concrete_int(rf, args, kind.group_size_arg, event) or group_size
    if name.startswith("_c10d_functional::"):
        concrete = args.get("Concrete Inputs") or []
        if concrete and concrete[-1]:
            call.group = str(concrete[-1])
    call.group_size = group_size
    return call


def _apply_param_comms(rf: RankFile, call: RawCall, args: dict, event: str) -> None:
    """Fill a call from record_param_comms: the group by name, dtype, sizes, splits, seq."""
    name = args.get("Process Group Name")
    if name is not None:
        call.group = str(name)
        if call.group not in rf.groups and "Process Group Ranks" in args:
            ranks = _ranks(rf, args["Process Group Ranks"], f"event {event}")
            rf.groups[call.group] = ProcessGroup(
                call.group, str(args.get("Process Group Description", "")), ranks)
    dtype = args.get("dtype")
    if isinstance(dtype, str) and dtype in DTYPES and not call.dtype:
        call.dtype = DTYPES[dtype][0]
    if isinstance(args.get("Seq"), int):
        call.sequence = args["Seq"]
    if not call.in_splits:
        call.in_splits = _int_list(rf, args.get("In split size"), event, "In split size")
        call.out_splits = _int_list(rf, args.get("Out split size"), event, "Out split size")
        call.row = 1


def _param_call(rf: RankFile, e: dict, number: int, collective: str) -> RawCall:
    """A call seen only as record_param_comms (no c10d op around it)."""
    args = e["args"]
    event = f"#{number} record_param_comms"
    nin, nout = args.get("In msg nelems"), args.get("Out msg nelems")
    for key, value in (("In msg nelems", nin), ("Out msg nelems", nout)):
        if not isinstance(value, int) or value < 0:
            raise _fail(rf, f"event {event}: {key}: expected a whole number, found {value!r}",
                        key)
    if "dtype" not in args:
        raise _fail(rf, f"event {event}: has no dtype", "dtype")
    gathered = collective in ("allgather", "gather")
    count = nout if gathered else nin
    if collective in ("scatter",):
        count = nin if nin >= nout else nout
    call = RawCall(event, collective, 0 if collective == "barrier" else count, "exact", "",
                   float(e["ts"]), float(e.get("dur", 0.0)), e.get("tid"))
    call.issue_start_us, call.issue_end_us = call.start_us, call.start_us + call.duration_us
    size = args.get("Group size")
    call.group_size = size if isinstance(size, int) else None
    _apply_param_comms(rf, call, args, event)
    for key, peer in (("Dst Rank", "send"), ("Src Rank", "recv")):
        if collective == peer and isinstance(args.get(key), int):
            call.root = args[key]
    return call


def _bad_event(rf: RankFile, number: int, name: Any, ts: Any, dur: Any) -> None:
    if not isinstance(name, str):
        raise _fail(rf, f"event #{number}: a complete event needs a string 'name', found "
                        f"{name!r}", "name")
    if not isinstance(ts, int | float) or isinstance(ts, bool):
        raise _fail(rf, f"event #{number} {name}: 'ts' must be a number, found {ts!r}", "ts")
    raise _fail(rf, f"event #{number} {name}: 'dur' must be a number >= 0, found {dur!r}",
                "dur")


def read_rank_file(path: Path, name: str) -> RankFile:
    """Stream one file into a RankFile; InputError for anything not a usable trace."""
    rf = RankFile(path, name)
    ops: list[tuple[dict, int]] = []  # (event, number) of collective ops
    params: list[tuple[float, float, object, dict, int]] = []
    backend: list[tuple[float, float, str, object, str]] = []  # ts, dur, name, tid, dtype
    kernels: list[tuple[float, float, str, int | None]] = []  # NCCL kernels
    compute: list[tuple[float, float, int]] = []
    saw_events = False
    number = -1
    first, last = float("inf"), float("-inf")
    for key, e in stream_trace(path, name):
        if key != "traceEvents":
            if key == "distributedInfo":
                _read_info(rf, e)
            elif key in ("pytorch_version", "torch_version") and isinstance(e, str):
                rf.pytorch_version = e
            continue
        saw_events = True
        number += 1
        if e.__class__ is not dict:
            raise _fail(rf, f"event #{number}: expected an object, found {type(e).__name__}",
                        "traceEvents")
        if e.get("ph") != "X":
            continue
        ev_name, ts, dur = e.get("name"), e.get("ts"), e.get("dur", 0.0)
        if (ev_name.__class__ is not str or ts.__class__ not in _NUMBERS
                or dur.__class__ not in _NUMBERS or dur < 0):
            _bad_event(rf, number, ev_name, ts, dur)
        cat = e.get("cat")
        if cat == "kernel":
            stream = (e.get("args") or {}).get("stream")
            stream = stream if stream.__class__ is int else None
            if is_nccl_kernel(ev_name):
                kernels.append((float(ts), float(dur), ev_name, stream))
            else:
                compute.append((float(ts), float(ts + dur), stream or 0))
        elif ev_name in C10D_OPS:
            ops.append((e, number))
        elif ev_name == "record_param_comms":
            args = e.get("args")
            if not isinstance(args, dict) or "Collective name" not in args:
                raise _fail(rf, f"event #{number} record_param_comms: has no "
                                "'Collective name'", "Collective name")
            params.append((float(ts), float(dur), e.get("tid"), e, number))
        elif ev_name.startswith("gloo:"):
            args = e.get("args") or {}
            types = args.get("Input type") or [""]
            backend.append((float(ts), float(dur), ev_name, e.get("tid"),
                            DTYPES.get(types[0], ("", 0))[0]))
        if cat in _TIMED:
            if ts < first:
                first = ts
            if ts + dur > last:
                last = ts + dur
    rf.first_us, rf.last_us = float(first), float(last)
    if not saw_events:
        raise _fail(rf, "has no traceEvents: not a PyTorch profiler trace", "traceEvents")
    if rf.rank < 0:
        raise _fail(rf, "has no distributedInfo (rank, world_size, pg_config): was it "
                        "recorded with torch.distributed initialized?", "distributedInfo")
    _build_calls(rf, ops, params)
    _pair_spans(rf, backend, kernels)
    compute.sort()
    for start, end, stream in compute:
        rf.kernel_start.append(start)
        rf.kernel_end.append(end)
        rf.kernel_stream.append(stream)
    return rf


def _build_calls(rf: RankFile, ops: list, params: list) -> None:
    """Top-level collective ops become calls (an op inside another op of the same thread is
    its implementation); record_param_comms inside an op fills it in, one outside any op is
    a call of its own."""
    ops.sort(key=lambda item: (item[0]["ts"], -item[0].get("dur", 0.0)))
    open_until: dict[object, float] = {}
    spans: dict[object, list[tuple[float, float, RawCall]]] = {}
    for e, number in ops:
        tid, ts = e.get("tid"), float(e["ts"])
        end = ts + float(e.get("dur", 0.0))
        if open_until.get(tid, float("-inf")) >= end and ts >= spans[tid][-1][0]:
            continue  # nested in the previous op of this thread
        call = _op_call(rf, e, number)
        open_until[tid] = end
        spans.setdefault(tid, []).append((ts, end, call))
        rf.calls.append(call)
    params.sort(key=lambda p: p[0])
    for ts, _dur, tid, e, number in params:
        args = e["args"]
        collective = PARAM_COMMS.get(str(args["Collective name"]))
        if collective is None:
            continue
        owners = spans.get(tid, [])
        at = bisect.bisect_right(owners, ts, key=lambda s: s[0]) - 1
        if at >= 0 and owners[at][0] <= ts <= owners[at][1]:
            call = owners[at][2]
            if call.group is None:
                _apply_param_comms(rf, call, args, f"#{number} record_param_comms")
            continue
        rf.calls.append(_param_call(rf, e, number, collective))
    rf.calls.sort(key=lambda c: c.start_us)


def _pair_spans(rf: RankFile, backend: list, kernels: list) -> None:
    """Give each call the backend span that ran it (gloo's worker event, or NCCL's kernel on
    GPU traces): the first unused one of the call's kind starting after the call was issued.
    A tensor list's dtype, which the op event does not give, comes from gloo's event."""
    gpu = bool(kernels)
    spans = sorted(kernels if gpu else backend, key=lambda s: s[0])
    used = [False] * len(spans)
    lo = 0
    for call in rf.calls:
        while lo < len(spans) and (used[lo] or spans[lo][0] < call.start_us - 1e-3):
            lo += 1  # used, or started before this call was issued: no later call's
        for i in range(lo, min(lo + PAIR_WINDOW, len(spans))):
            if used[i]:
                continue
            ts, dur, name = spans[i][0], spans[i][1], spans[i][2]
            if gpu:
                ok = any(w in name for w in NCCL_KERNEL_WORDS[call.collective])
            else:
                ok = name in GLOO_EVENTS[call.collective]
            if not ok:
                continue
            used[i] = True
            call.start_us, call.duration_us, call.measured = ts, dur, True
            if gpu:
                call.stream = spans[i][3]
            else:
                call.backend_tid = spans[i][3]
                if not call.dtype and call.collective != "barrier":
                    call.dtype = spans[i][4]
            break
