"""read_trace on traces real PyTorch wrote (tests/fixtures/traces, gloo on CPU): every
collective found with the bytes, group and order the recording script's model implies; the
same job in NCCL's shape (a test-made transform: no GPU here); and bad traces refused with
the file, event and field named."""

from __future__ import annotations

import copy
import gzip
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from collsim.errors import InputError
from collsim.replay import read_trace

TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"
_spec = importlib.util.spec_from_file_location("record", TRACES / "record.py")
record = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(record)  # constants only: torch is imported inside its functions

F32 = 4


def params(widths: tuple[int, ...]) -> int:
    """Parameters of record.py's MLP: a weight and a bias per Linear."""
    return sum(a * b + b for a, b in zip(widths, widths[1:], strict=False))


def kinds(calls, *keep):
    return [(c.collective, c.size_bytes) for c in calls if c.collective in keep]


def test_ddp_allreduces_the_gradients_once_per_step_on_the_default_group():
    trace = read_trace(TRACES / "ddp")
    assert (trace.world_size, trace.backend) == (record.DDP_RANKS, "gloo")
    assert trace.groups["0"].ranks == tuple(range(record.DDP_RANKS))
    gradients = params(record.DDP_LAYERS) * F32
    for rank, calls in trace.calls.items():
        assert kinds(calls, "allreduce") == [("allreduce", gradients)] * record.STEPS
        assert {c.group for c in calls} == {"0"} and [c.index for c in calls] == list(
            range(len(calls)))
        # DDP's own small broadcasts of int32 state are the only other calls
        assert {c.collective for c in calls} == {"allreduce", "broadcast"}
        assert all(c.dtype == "float32" for c in calls if c.collective == "allreduce")
        assert trace.files[rank].endswith(f"rank{rank}.json.gz")


def test_fsdp_gathers_each_layer_forward_and_backward_and_reduce_scatters_its_gradient():
    trace = read_trace(TRACES / "fsdp")
    widths = record.FSDP_LAYERS
    layer = [params(widths[i:i + 2]) * F32 for i in range(len(widths) - 1)]
    for calls in trace.calls.values():
        gathers = [c.size_bytes for c in calls if c.collective == "allgather"]
        scatters = [c.size_bytes for c in calls if c.collective == "reducescatter"]
        # forward in layer order, backward in reverse; whole unsharded layers (even sizes)
        assert gathers == (layer + layer[::-1]) * record.STEPS
        assert scatters == layer[::-1] * record.STEPS
        assert len(calls) == len(gathers) + len(scatters)


def test_pipeline_calls_go_to_their_stage_group_and_activations_to_the_other_stage():
    trace = read_trace(TRACES / "pipeline")
    dp = {g.ranks: name for name, g in trace.groups.items()}
    assert set(dp) >= set(record.PIPE_DP_GROUPS) and dp[(0, 1, 2, 3)] == "0"
    activation = record.BATCH * record.PIPE_STAGE_LAYERS[0][-1] * F32
    for rank, calls in trace.calls.items():
        stage = 0 if rank in record.PIPE_DP_GROUPS[0] else 1
        own = dp[record.PIPE_DP_GROUPS[stage]]
        gradients = params(record.PIPE_STAGE_LAYERS[stage]) * F32
        steps = [c for c in calls if c.collective != "broadcast"]
        per_step = ([("send", activation), ("recv", activation), ("allreduce", gradients)]
                    if stage == 0 else
                    [("recv", activation), ("allreduce", gradients), ("send", activation)])
        assert [(c.collective, c.size_bytes) for c in steps] == per_step * record.STEPS
        assert all(c.group == own for c in calls if c.collective in ("allreduce", "broadcast"))
        peer = rank + 2 if stage == 0 else rank - 2
        assert all(c.group == "0" and c.peer == peer for c in steps if c.collective in
                   ("send", "recv"))


def test_moe_all_to_all_has_the_recorded_splits_and_every_other_collective_its_size():
    trace = read_trace(TRACES / "moe")
    n, hidden, splits = record.MOE_RANKS, record.MOE_HIDDEN, record.MOE_SPLITS
    itemsize = {"float32": 4, "bfloat16": 2, "int64": 8, "": 0}
    gathered = {"all_gather_into_tensor", "all_gather", "gather", "scatter",
                "functional_all_gather"}
    collsim_name = {"broadcast": "broadcast", "reduce": "reduce", "barrier": "barrier",
                    "all_gather_into_tensor": "allgather", "all_gather": "allgather",
                    "reduce_scatter_tensor": "reducescatter", "gather": "gather",
                    "scatter": "scatter", "functional_all_reduce": "allreduce",
                    "functional_all_gather": "allgather",
                    "functional_reduce_scatter": "reducescatter"}
    for rank, calls in trace.calls.items():
        sends = tuple(s * hidden for s in splits[rank])
        receives = tuple(splits[j][rank] * hidden for j in range(n))
        first, back, loss, *rest = calls
        assert (first.collective, first.size_bytes) == ("alltoall", sum(sends) * F32)
        assert (first.in_split_sizes, first.out_split_sizes) == (sends, receives)
        assert (back.in_split_sizes, back.out_split_sizes) == (receives, sends)
        assert back.size_bytes == sum(receives) * F32
        assert (loss.collective, loss.size_bytes, loss.dtype) == ("allreduce", F32, "float32")
        expected = []
        for name, count, dtype in record.MOE_EXTRA_CALLS:
            per_rank = count * n if name in gathered else count
            if name in ("reduce_scatter_tensor", "functional_reduce_scatter"):
                per_rank = count * n  # its input, the whole buffer
            expected.append((collsim_name[name], per_rank * itemsize[dtype], dtype))
        assert [(c.collective, c.size_bytes, c.dtype) for c in rest] == expected
        roots = {"broadcast": 1, "reduce": 0, "gather": 0, "scatter": 0}  # as record.py calls
        assert {c.collective: c.root for c in rest if c.root is not None} == roots
        assert [c.index for c in calls] == list(range(len(calls)))


def test_compute_fills_the_gaps_between_calls_in_time_order():
    trace = read_trace(TRACES / "ddp")
    for rank, spans in trace.compute.items():
        calls = trace.calls[rank]
        assert spans and all(s.duration_us > 0 and s.stream is None for s in spans)
        starts = [s.start_us for s in spans]
        assert starts == sorted(starts)
        assert starts[0] < calls[0].start_us  # the forward pass before the first call


def _unzip(src: Path, dst: Path) -> None:
    dst.mkdir()
    for path in sorted(src.glob("rank*.json.gz")):
        (dst / path.name[:-3]).write_bytes(gzip.decompress(path.read_bytes()))


def test_plain_gzipped_and_globbed_traces_read_alike(tmp_path):
    _unzip(TRACES / "moe", tmp_path / "plain")
    gz = read_trace(TRACES / "moe")
    assert read_trace(tmp_path / "plain").calls == gz.calls
    assert read_trace(str(TRACES / "moe" / "rank*.json.gz")).calls == gz.calls


# -- NCCL's shape, made from a gloo fixture --------------------------------------------

NCCL_KERNELS = {"gloo:all_reduce": "AllReduce_Sum_f32_RING_LL", "gloo:broadcast":
                "Broadcast_RING_LL", "gloo:send": "SendRecv", "gloo:recv": "SendRecv"}
COMM_STREAM, COMPUTE_STREAM = 20, 7


def _as_nccl(src: Path, dst: Path, groups_by_call, group_sizes) -> None:
    """Rewrite gloo traces as PyTorch writes NCCL ones: distributedInfo's backend "nccl",
    a record_param_comms inside each c10d op naming its group, element counts and dtype, and
    each gloo event replaced by an NCCL kernel on a communication stream; the CPU ops become
    compute kernels on another stream."""
    dst.mkdir()
    for path in sorted(src.glob("rank*.json.gz")):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        doc["distributedInfo"]["backend"] = "nccl"
        rank = doc["distributedInfo"]["rank"]
        names = iter(groups_by_call[rank])
        events = []
        for e in doc["traceEvents"]:
            name = e.get("name", "")
            if name.startswith("gloo:"):
                kernel = copy.deepcopy(e)
                kernel.update(cat="kernel", name=f"ncclDevKernel_{NCCL_KERNELS[name]}(x)",
                              args={"stream": COMM_STREAM, "device": 0})
                events.append(kernel)
                continue
            events.append(e)
            if name.startswith("c10d::"):
                group = next(names)
                dims = e["args"]["Input Dims"][0]
                nelems = 1
                for d in (dims[0] if dims and isinstance(dims[0], list) else dims):
                    nelems *= d
                events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms",
                               "pid": e["pid"], "tid": e["tid"], "ts": e["ts"] + 0.01,
                               "dur": 0.01, "args": {
                                   "Collective name": name[6:].rstrip("_"),
                                   "dtype": "Float" if "allreduce" in name or "send" in name
                                   or "recv" in name else "Int",
                                   "In msg nelems": nelems, "Out msg nelems": nelems,
                                   "Group size": group_sizes[group],
                                   "Process Group Name": group,
                                   "Seq": len(events)}})
            elif e.get("cat") == "cpu_op" and e.get("ph") == "X" and name.startswith("aten::mm"):
                events.append({**e, "cat": "kernel", "name": "gemm",
                               "args": {"stream": COMPUTE_STREAM}})
        doc["traceEvents"] = events
        (dst / path.name).write_bytes(gzip.compress(json.dumps(doc).encode()))


def test_an_nccl_shaped_trace_gives_the_kernels_times_and_the_named_groups(tmp_path):
    gloo = read_trace(TRACES / "pipeline")
    _as_nccl(TRACES / "pipeline", tmp_path / "nccl",
             {r: [c.group for c in calls] for r, calls in gloo.calls.items()},
             {name: len(g.ranks) for name, g in gloo.groups.items()})
    nccl = read_trace(tmp_path / "nccl")
    assert nccl.backend == "nccl"
    for rank, calls in nccl.calls.items():
        assert [(c.collective, c.size_bytes, c.group, c.peer) for c in calls] == [
            (c.collective, c.size_bytes, c.group, c.peer) for c in gloo.calls[rank]]
        assert all(c.stream == COMM_STREAM and c.sequence is not None for c in calls)
        # the kernel's span is the gloo event's, which the gloo read measured too
        assert [c.duration_us for c in calls] == [c.duration_us for c in gloo.calls[rank]]
        spans = nccl.compute[rank]
        assert spans and all(s.stream == COMPUTE_STREAM and s.name.endswith("kernels")
                             for s in spans)


def test_without_gloo_worker_threads_the_groups_come_from_matching_ranks(tmp_path):
    """The pipeline's DDP broadcasts fit both its stage group and the world; with the gloo
    events' threads removed, the ranks' next calls still tell them apart."""
    dst = tmp_path / "nothreads"
    dst.mkdir()
    for path in sorted((TRACES / "pipeline").glob("rank*.json.gz")):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        for e in doc["traceEvents"]:
            if e.get("name", "").startswith("gloo:"):
                e.pop("tid", None)
        (dst / path.name).write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert read_trace(dst).calls == read_trace(TRACES / "pipeline").calls


# -- bad traces ----------------------------------------------------------------------

def _copy(case: str, dst: Path) -> Path:
    shutil.copytree(TRACES / case, dst)
    return dst


def _edit(path: Path, change) -> None:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    change(doc)
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))


def _refused(path, *words):
    with pytest.raises(InputError) as caught:
        read_trace(path)
    text = str(caught.value)
    for word in words:
        assert word in text, text
    return caught.value


def test_a_truncated_trace_is_refused_naming_the_file(tmp_path):
    folder = _copy("ddp", tmp_path / "t")
    raw = gzip.decompress((folder / "rank1.json.gz").read_bytes())
    (folder / "rank1.json.gz").write_bytes(gzip.compress(raw[: len(raw) // 2]))
    error = _refused(folder, "rank1.json.gz", "truncated")
    assert error.file.endswith("rank1.json.gz")


def test_a_cut_gzip_stream_is_refused(tmp_path):
    folder = _copy("ddp", tmp_path / "t")
    data = (folder / "rank0.json.gz").read_bytes()
    (folder / "rank0.json.gz").write_bytes(data[: len(data) // 2])
    _refused(folder, "rank0.json.gz", "cannot be read")


@pytest.mark.parametrize("text, words", [
    ("not json at all", ["expected '{'"]),
    ('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1,}]}', ["not valid JSON"]),
    ('{"schemaVersion": 1}', ["no traceEvents"]),
    ('{"traceEvents": []}', ["no traceEvents"]),
    ('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1}]}', ["no distributedInfo"]),
])
def test_what_is_not_a_trace_is_refused(tmp_path, text, words):
    path = tmp_path / "rank0.json"
    path.write_text(text)
    _refused(path, "rank0.json", *words)


def test_a_missing_rank_is_refused_naming_it(tmp_path):
    folder = _copy("moe", tmp_path / "t")
    (folder / "rank2.json.gz").unlink()
    _refused(folder, "world_size is 4", "rank(s) 2")


def test_a_repeated_rank_is_refused_naming_both_files(tmp_path):
    folder = _copy("ddp", tmp_path / "t")
    shutil.copy(folder / "rank0.json.gz", folder / "rank0-again.json.gz")
    _refused(folder, "rank0-again.json.gz", "rank0.json.gz", "rank 0 again")


def test_groups_that_disagree_between_ranks_are_refused_naming_both_files(tmp_path):
    folder = _copy("pipeline", tmp_path / "t")

    def regroup(doc):
        for pg in doc["distributedInfo"]["pg_config"]:
            if pg["pg_name"] == "1":
                pg["ranks"] = [1, 0]
    _edit(folder / "rank1.json.gz", regroup)
    _refused(folder, "process group '1'", "rank1.json.gz", "rank0.json.gz", "pg_config")


def test_calls_that_disagree_between_ranks_are_refused_naming_both_files(tmp_path):
    folder = _copy("ddp", tmp_path / "t")

    def shrink(doc):
        for e in doc["traceEvents"]:
            if e.get("name") == "c10d::allreduce_":
                e["args"]["Input Dims"][0] = [[3000]]
                return
    _edit(folder / "rank1.json.gz", shrink)
    _refused(folder, "differs between ranks", "rank0.json.gz", "rank1.json.gz",
             "allreduce of 3152", "allreduce of 3000")


def test_a_call_without_its_shapes_is_refused_naming_event_and_field(tmp_path):
    folder = _copy("moe", tmp_path / "t")

    def drop(doc):
        for number, e in enumerate(doc["traceEvents"]):
            if e.get("name") == "c10d::broadcast_":
                del e["args"]["Input Dims"]
                doc["marker"] = number
                return
    _edit(folder / "rank3.json.gz", drop)
    error = _refused(folder, "rank3.json.gz", "c10d::broadcast_", "record_shapes")
    assert error.key == "Input Dims"


def test_a_bad_distributed_info_field_is_refused_naming_it(tmp_path):
    folder = _copy("ddp", tmp_path / "t")
    _edit(folder / "rank0.json.gz", lambda doc: doc["distributedInfo"].update(rank="zero"))
    error = _refused(folder, "rank0.json.gz", "distributedInfo.rank")
    assert error.key == "distributedInfo.rank"


def test_an_empty_folder_and_a_missing_path_are_refused(tmp_path):
    _refused(tmp_path, "no trace")
    _refused(tmp_path / "nowhere", "no such file")


def test_the_benchmarks_synthetic_nccl_traces_read_as_written(tmp_path):
    """benchmarks/trace_read.py's traces: per step an allgather and a reduce-scatter on the
    rank's 8-rank group (record_param_comms names it) and an allreduce on the world."""
    import sys
    sys.path.insert(0, str(TRACES.parents[2] / "benchmarks"))
    import trace_read

    world, steps, bf16 = 16, 3, 2
    for rank in range(world):
        trace_read.write_rank(tmp_path / f"rank{rank}.json", rank, world, steps)
    trace = read_trace(tmp_path)
    assert trace.backend == "nccl" and len(trace.groups) == 1 + world // trace_read.DP
    for rank, calls in trace.calls.items():
        dp = str(1 + rank // trace_read.DP)
        assert [(c.collective, c.size_bytes, c.group) for c in calls] == [
            ("allgather", 4096 * 8 * bf16, dp), ("reducescatter", 4096 * 8 * bf16, dp),
            ("allreduce", 65536 * bf16, "0")] * steps
        assert all(c.stream == 20 and c.duration_us == 120.0 for c in calls)
        assert len(trace.compute[rank]) == steps and all(
            s.stream == 7 and s.name == f"{3 * trace_read.LAYERS} kernels"
            for s in trace.compute[rank])


def test_a_send_without_its_receive_is_refused_naming_both_ranks(tmp_path):
    folder = _copy("pipeline", tmp_path / "t")

    def drop_sends(doc):
        doc["traceEvents"] = [e for e in doc["traceEvents"]
                              if e.get("name") not in ("c10d::send", "gloo:send")]
    _edit(folder / "rank3.json.gz", drop_sends)
    _refused(folder, "rank 3", "rank3.json.gz", "sends 0 messages to rank 1",
             "rank1.json.gz", "receives 2")


def test_ranks_whose_unnamed_group_calls_cannot_match_are_refused(tmp_path):
    """On gloo traces, calls that match no other rank's go to their smallest group, whose
    members then disagree."""
    folder = _copy("pipeline", tmp_path / "t")

    def grow(doc):
        for e in doc["traceEvents"]:
            if e.get("name") == "c10d::allreduce_":
                e["args"]["Input Dims"][0] = [[1000]]
                return
    _edit(folder / "rank2.json.gz", grow)
    _refused(folder, "on process group '2' differs between ranks", "rank2.json.gz",
             "rank3.json.gz", "allreduce of 1000 elements", "allreduce of 264 elements")


def test_a_trace_is_streamed_in_far_less_memory_than_its_size(tmp_path):
    """One rank's file of about 8 MB goes through in a window of text: the peak of Python
    allocations stays under a third of the file (decoding it whole would take several
    times the file)."""
    import sys
    import tracemalloc

    from collsim.replay.jsonstream import stream_trace
    sys.path.insert(0, str(TRACES.parents[2] / "benchmarks"))
    import trace_read

    path = tmp_path / "rank0.json"
    trace_read.write_rank(path, 0, trace_read.DP, 300)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        events = sum(1 for key, _ in stream_trace(path, "rank0") if key == "traceEvents")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert size > 7e6 and events == 300 * (6 * trace_read.LAYERS + 9)
    assert peak < size / 3, (peak, size)
