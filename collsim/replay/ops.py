"""What PyTorch's collective operator events mean: the ``c10d::`` ops (and the functional
``_c10d_functional::`` ones) mapped to collsim's collectives, which argument holds the local
buffer, and element sizes of the dtypes traces name.

Facts read from traces PyTorch 2.x writes (tests/fixtures/traces/README.md): a c10d op's
``args`` carry ``Input Dims`` and ``Input type`` per argument (a tensor list's dtype is not
given: it is ``"TensorList"``), ``Concrete Inputs`` holds scalars as text (roots, peers,
alltoall splits), and the process group argument is blank."""

from __future__ import annotations

from dataclasses import dataclass

# dtype spellings in traces -> (collsim's dtype name, bytes per element). Operator events
# spell C++ types ("float", "c10::BFloat16", "long int"); record_param_comms spells
# ScalarType names ("Float", "BFloat16", "Long").
DTYPES: dict[str, tuple[str, int]] = {}
for _names, _canon, _size in (
    (("float", "Float", "float32"), "float32", 4),
    (("double", "Double", "float64"), "float64", 8),
    (("c10::Half", "Half", "float16"), "float16", 2),
    (("c10::BFloat16", "BFloat16", "bfloat16"), "bfloat16", 2),
    (("long int", "long", "Long", "int64", "int64_t"), "int64", 8),
    (("int", "Int", "int32"), "int32", 4),
    (("short int", "short", "Short", "int16"), "int16", 2),
    (("signed char", "Char", "int8"), "int8", 1),
    (("unsigned char", "Byte", "uint8"), "uint8", 1),
    (("bool", "Bool"), "bool", 1),
    (("c10::complex<float>", "ComplexFloat", "complex64"), "complex64", 8),
    (("c10::complex<double>", "ComplexDouble", "complex128"), "complex128", 16),
    (("c10::Float8_e4m3fn", "Float8_e4m3fn", "float8_e4m3fn"), "float8_e4m3fn", 1),
    (("c10::Float8_e5m2", "Float8_e5m2", "float8_e5m2"), "float8_e5m2", 1),
):
    for _name in _names:
        DTYPES[_name] = (_canon, _size)


@dataclass(frozen=True)
class OpKind:
    """How to read one operator: collsim's collective, the argument index of the local
    buffer (``local``), and how the local element count relates to collsim's size:
    ``"local"`` (size = local buffer), ``"times_group"`` (size = local x group size, for
    gathered buffers given only in part), or ``"other"`` (size = the argument ``other``)."""

    collective: str
    local: int
    rule: str = "local"
    other: int | None = None
    root_arg: int | None = None  # Concrete Inputs index of a root or peer (group rank)
    splits: tuple[int, int] | None = None  # Concrete Inputs of (output, input) splits
    group_size_arg: int | None = None  # Concrete Inputs index of the group's size


C10D_OPS: dict[str, OpKind] = {
    "c10d::allreduce_": OpKind("allreduce", 0),
    "c10d::allreduce_coalesced_": OpKind("allreduce", 0),
    "c10d::broadcast_": OpKind("broadcast", 0, root_arg=2),
    "c10d::reduce_": OpKind("reduce", 0, root_arg=3),
    "c10d::_allgather_base_": OpKind("allgather", 1, "other", other=0),
    "c10d::allgather_": OpKind("allgather", 1, "times_group"),
    "c10d::allgather_coalesced_": OpKind("allgather", 1, "times_group"),
    "c10d::allgather_into_tensor_coalesced_": OpKind("allgather", 0),
    "c10d::_reduce_scatter_base_": OpKind("reducescatter", 1),
    "c10d::reduce_scatter_": OpKind("reducescatter", 0, "times_group"),
    "c10d::reduce_scatter_tensor_coalesced_": OpKind("reducescatter", 1),
    "c10d::alltoall_base_": OpKind("alltoall", 1, splits=(3, 4)),
    "c10d::alltoall_": OpKind("alltoall", 1),
    "c10d::gather_": OpKind("gather", 1, "times_group", root_arg=3),
    "c10d::scatter_": OpKind("scatter", 0, "times_group", root_arg=3),
    "c10d::barrier": OpKind("barrier", 0),
    "c10d::monitored_barrier_": OpKind("barrier", 0),
    "c10d::send": OpKind("send", 0, root_arg=2),
    "c10d::recv_": OpKind("recv", 0, root_arg=2),
    "c10d::recv_any_source_": OpKind("recv", 0),
    # functional collectives: the input, scalars, and the group's name (blank on the
    # traces PyTorch 2.14 writes); the c10d op they call runs inside them
    "_c10d_functional::all_reduce": OpKind("allreduce", 0),
    "_c10d_functional::all_reduce_": OpKind("allreduce", 0),
    "_c10d_functional::all_gather_into_tensor": OpKind("allgather", 0, "times_group",
                                                       group_size_arg=1),
    "_c10d_functional::reduce_scatter_tensor": OpKind("reducescatter", 0, group_size_arg=2),
    "_c10d_functional::all_to_all_single": OpKind("alltoall", 0),
    "_c10d_functional::broadcast": OpKind("broadcast", 0),
}

# record_param_comms' "Collective name" -> collsim's collective; names not here (wait,
# init, coalesced markers) are not calls.
PARAM_COMMS: dict[str, str] = {
    "allreduce": "allreduce", "allreduce_coalesced": "allreduce",
    "all_reduce": "allreduce",
    "broadcast": "broadcast", "reduce": "reduce",
    "allgather": "allgather", "all_gather": "allgather", "_allgather_base": "allgather",
    "allgather_into_tensor_coalesced": "allgather", "allgather_coalesced": "allgather",
    "reduce_scatter": "reducescatter", "_reduce_scatter_base": "reducescatter",
    "reduce_scatter_tensor_coalesced": "reducescatter",
    "all_to_all": "alltoall", "all_to_allv": "alltoall", "alltoall": "alltoall",
    "alltoall_base": "alltoall",
    "gather": "gather", "scatter": "scatter", "barrier": "barrier",
    "send": "send", "recv": "recv", "recvAnySource": "recv",
}

# Backend events that run a call: gloo's worker events, NCCL's kernels (by a word in the
# kernel's name). Used to pair a call with its measured span and, for tensor lists, dtype.
GLOO_EVENTS: dict[str, tuple[str, ...]] = {
    "allreduce": ("gloo:all_reduce",),
    "broadcast": ("gloo:broadcast",),
    "reduce": ("gloo:reduce",),
    "allgather": ("gloo:all_gather",),
    "reducescatter": ("gloo:all_reduce", "gloo:reduce_scatter"),
    "alltoall": ("gloo:all_to_all",),
    "gather": ("gloo:gather",),
    "scatter": ("gloo:scatter",),
    "barrier": ("gloo:barrier",),
    "send": ("gloo:send",),
    "recv": ("gloo:recv",),
}
NCCL_KERNEL_WORDS: dict[str, tuple[str, ...]] = {
    "allreduce": ("AllReduce",),
    "broadcast": ("Broadcast",),
    "reduce": ("Reduce_",),
    "allgather": ("AllGather",),
    "reducescatter": ("ReduceScatter",),
    "alltoall": ("SendRecv", "AllToAll"),
    "gather": ("SendRecv",),
    "scatter": ("SendRecv",),
    "barrier": ("AllReduce",),
    "send": ("SendRecv", "Send"),
    "recv": ("SendRecv", "Recv"),
}


def is_nccl_kernel(name: str) -> bool:
    """NCCL's device kernels: ncclDevKernel_* (NCCL 2.19+) and ncclKernel_* (older)."""
    return name.startswith(("ncclDevKernel_", "ncclKernel_", "ncclDevFunc_"))


def elements(dims: object) -> int | None:
    """Elements in a tensor (a list of ints) or a tensor list (a list of lists); None when
    ``dims`` is neither."""
    if not isinstance(dims, list):
        return None
    if all(isinstance(d, int) for d in dims):
        count = 1
        for d in dims:
            count *= d
        return count
    total = 0
    for part in dims:
        n = elements(part)
        if n is None:
            return None
        total += n
    return total


def is_tensor_list(dims: object) -> bool:
    return isinstance(dims, list) and any(isinstance(d, list) for d in dims)
