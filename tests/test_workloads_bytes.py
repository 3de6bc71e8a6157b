"""Bytes on the wire: every number format and every compression moves exactly what its
format says (worked by hand), and each parallelism issues the calls its definition implies
(ZeRO-3 per layer, tensor allreduces, expert all-to-alls, pipeline sends)."""

from __future__ import annotations

import pytest

from collsim.workloads.executor import run_plan
from collsim.workloads.formats import parse_format
from collsim.workloads.loader import workload_from_text
from collsim.workloads.plan import build_plan
from collsim.workloads.service import isolated


def plan_of(text: str, gpus: int | None = None):
    return build_plan(workload_from_text(text), gpus)


def data_calls(plan, rank: int = 0):
    """The data-parallel calls GPU ``rank`` takes part in."""
    return [t.call for t in plan.tasks[rank] if t.call and t.call.label == "data"]


# -- number formats ------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "bits", "values", "nbytes"), [
    ("fp32", 32, 1000, 4000), ("bf16", 16, 1000, 2000), ("fp16", 16, 1000, 2000),
    ("fp8_e4m3", 8, 1000, 1000), ("fp8_e5m2", 8, 1000, 1000),
    ("1-6-9", 16, 1000, 2000),      # DALL-E's custom 16-bit formats
    ("0-6-10", 16, 1000, 2000),
    ("1-5-6", 12, 1000, 1500),      # 12 bits: two values in three bytes
    ("1-5-6", 12, 1001, 1502),      # 12012 bits: 1501.5 bytes, padded to 1502
    ("1-3-3", 7, 1000, 875),        # 7000 bits
    ("float32", 32, 3, 12),
])
def test_gradients_in_each_format_move_their_packed_bytes(name, bits, values, nbytes):
    assert parse_format(name).bits == bits
    plan = plan_of(f"""
name: formats
model: {{layers: 1, parameters_per_layer: {values}}}
parallelism: {{data: 2}}
compute: {{forward: 1ms}}
dtypes: {{gradients: "{name}"}}
gradients: {{bucket: 1GiB}}
""")
    (call,) = data_calls(plan)
    assert (call.collective, call.size, call.group) == ("allreduce", nbytes, (0, 1))
    assert call.dtype == {"fp32": "float32", "float32": "float32", "bf16": "bfloat16",
                          "fp16": "float16"}.get(name, "uint8")


def test_unknown_formats_are_refused():
    for bad in ("fp12", "2-5-5", "1-0-7", "bf"):
        with pytest.raises(ValueError):
            parse_format(bad)


def test_buckets_hold_whole_values_of_the_format():
    """A 1000-B bucket of 12-bit values holds 666 of them (7992 bits); 2000 values fill
    three buckets of 666 and one of 2."""
    plan = plan_of("""
name: cut
model: {layers: 1, parameters_per_layer: 2000}
parallelism: {data: 2}
compute: {forward: 1ms}
dtypes: {gradients: 1-5-6}
gradients: {bucket: 1000}
""")
    assert [c.size for c in data_calls(plan)] == [999, 999, 999, 3]


# -- compression ---------------------------------------------------------------------------

COMPRESSED = """
name: compressed
model: {{layers: 1, parameters_per_layer: {values}, activation: 4KiB}}
parallelism: {{data: 4, tensor: {tensor}}}
compute: {{forward: 1ms}}
dtypes: {{gradients: {fmt}}}
gradients: {{bucket: 1GiB}}
compression: {compression}
"""


def compressed_call(compression: str, values: int = 10000, fmt: str = "fp32",
                    tensor: int = 1):
    plan = plan_of(COMPRESSED.format(values=values, compression=compression, fmt=fmt,
                                     tensor=tensor))
    (call,) = data_calls(plan)
    return call


@pytest.mark.parametrize(("compression", "values", "fmt", "collective", "size"), [
    # top-k: ceil(k n) values kept, each with its index; exchanged by allgather (x 4 ranks)
    ("{kind: topk, fraction: 0.01}", 10000, "fp32", "allgather", 4 * (100 * 4 + 100 * 4)),
    ("{kind: topk, fraction: 0.01}", 10001, "fp32", "allgather", 4 * (101 * 4 + 101 * 4)),
    ("{kind: topk, fraction: 0.001, index_bytes: 2}", 10000, "bf16", "allgather",
     4 * (10 * 2 + 10 * 2)),
    # sign: one bit per value and a scale per block: 1250 B + ceil(10000/128) = 79 scales
    ("{kind: sign, block: 128}", 10000, "fp32", "allgather", 4 * (1250 + 79 * 4)),
    ("{kind: sign, block: 128, scale: fp16}", 10000, "fp32", "allgather", 4 * (1250 + 79 * 2)),
    ("{kind: sign, block: 10000}", 10001, "bf16", "allgather", 4 * (1251 + 2 * 4)),
    # low rank 4 of a 64x100 and a 100x36 matrix (10000 values): 4(164) + 4(136) = 1200
    ("{kind: lowrank, rank: 4, shapes: [[64, 100], [100, 36]]}", 10000, "fp32", "allreduce",
     1200 * 4),
    # ... with 3600 values the shapes leave out, sent as they are: 656 + 3600
    ("{kind: lowrank, rank: 4, shapes: [[64, 100]]}", 10000, "fp32", "allreduce",
     (656 + 3600) * 4),
    # square assumption: 10000 values = 100 x 100, factors 2 x 4 x 100
    ("{kind: lowrank, rank: 4}", 10000, "fp32", "allreduce", 800 * 4),
    ("{kind: lowrank, rank: 4}", 10001, "bf16", "allreduce", 2 * 4 * 101 * 2),
    ("{kind: none}", 10000, "fp32", "allreduce", 40000),
])
def test_compressed_gradients_move_the_bytes_their_format_says(compression, values, fmt,
                                                                collective, size):
    call = compressed_call(compression, values, fmt)
    assert (call.collective, call.size) == (collective, size)


def test_low_rank_shards_each_matrix_over_tensor_parallelism():
    """Tensor 2: a GPU holds 64x50 and 100x18 of the two matrices: 4(114) + 4(118) = 928."""
    call = compressed_call("{kind: lowrank, rank: 4, shapes: [[64, 100], [100, 36]]}",
                           tensor=2)
    assert call.size == 928 * 4


def test_encoding_and_decoding_cost_compute_per_bucket():
    """Two buckets of 10000 fp32 values (40000 B): encode 50 us each, decode at 1 GB/s
    40 us each; forward 1 ms + backward 2 ms per layer, 2 layers."""
    text = """
name: costs
model: {layers: 2, parameters_per_layer: 10000}
parallelism: {data: 4}
compute: {forward: 1ms}
dtypes: {gradients: fp32}
gradients: {bucket: 40000}
compression: {kind: topk, fraction: 0.01, encode: 50us, decode: 1GB/s}
"""
    plan = plan_of(text)
    result = run_plan(plan, isolated(lambda call: 0.0))
    assert result.compute_s == pytest.approx(2 * 3e-3 + 2 * 50e-6 + 2 * 40e-6, rel=1e-12)
    categories = [t.category for t in plan.tasks[0] if t.is_compute]
    assert categories.count("encode") == 2 and categories.count("decode") == 2


# -- what each parallelism issues ----------------------------------------------------------

def test_zero_3_gathers_each_layer_twice_and_reduces_it_once_per_micro_batch():
    """3 layers of 1200 parameters, tensor 2 (600 per GPU), data 4, 2 micro-batches: per
    layer and micro-batch an allgather of 600 bf16 parameters (1200 B) before the forward
    and again before the backward, and a reduce-scatter of 600 fp32 gradients (2400 B)
    after the backward, all over the GPU's data-parallel group."""
    plan = plan_of("""
name: zero3
model: {layers: 3, parameters_per_layer: 1200, activation: 4KiB}
parallelism: {tensor: 2, data: 4, zero: 3, micro_batches: 2}
compute: {forward: 1ms}
dtypes: {parameters: bf16, gradients: fp32}
""")
    layout = plan.layout
    for rank in range(plan.world):
        mine = [t.call for t in plan.tasks[rank] if t.call and t.call.label == "data"]
        gathers = [c for c in mine if c.collective == "allgather"]
        reductions = [c for c in mine if c.collective == "reducescatter"]
        assert len(gathers) == 3 * 2 * 2 and len(reductions) == 3 * 2
        assert {c.size for c in gathers} == {1200} and {c.size for c in reductions} == {2400}
        assert {c.group for c in mine} == {layout.group("data", rank)}
        per_layer = {}
        for call in mine:
            layer = call.key[4] if call.collective == "allgather" else call.key[3]
            per_layer[layer] = per_layer.get(layer, 0) + call.size
        assert per_layer == {layer: 2 * (2 * 1200 + 2400) for layer in range(3)}
    result = run_plan(plan, isolated(lambda call: 0.0))
    assert result.kinds["data allgather"].bytes == 12 * 1200
    assert result.kinds["data reducescatter"].bytes == 6 * 2400
    assert "data allreduce" not in result.kinds


def test_tensor_parallelism_allreduces_twice_per_layer_each_way():
    plan = plan_of("""
name: tp
model: {layers: 3, parameters_per_layer: 1000, hidden: 64, sequence: 32, micro_batch: 2}
parallelism: {tensor: 4, data: 1, micro_batches: 5}
compute: {forward: 1ms}
dtypes: {activations: fp16}
""")
    calls = [c for c in plan.calls().values() if c.label == "tensor"]
    assert len(calls) == 3 * 5 * 4
    assert {c.size for c in calls} == {64 * 32 * 2 * 2}
    assert {c.group for c in calls} == {(0, 1, 2, 3)}


def test_expert_layers_all_to_all_twice_each_way_in_their_expert_group():
    """8 layers, every 2nd a MoE layer of 8 experts (top 2) over expert degree 2 of data 4:
    4 MoE layers x 3 micro-batches x 4 all-to-alls of 2 x the activation; the experts'
    gradients (4 experts of 50 fp32 values per GPU and MoE layer) are reduced over the
    expert-data group."""
    plan = plan_of("""
name: moe
model:
  layers: 8
  parameters_per_layer: 1000
  activation: 4KiB
  experts: {count: 8, every: 2, top_k: 2, parameters: 50}
parallelism: {data: 4, expert: 2, micro_batches: 3}
compute: {forward: 1ms}
dtypes: {gradients: fp32}
gradients: {bucket: 1GiB}
""")
    layout = plan.layout
    for rank in range(plan.world):
        calls = [t.call for t in plan.tasks[rank] if t.call]
        a2a = [c for c in calls if c.collective == "alltoall"]
        assert len(a2a) == 4 * 3 * 4
        assert {c.size for c in a2a} == {2 * 4096}
        assert {c.group for c in a2a} == {layout.group("expert", rank)}
        assert {c.key[3] for c in a2a} == {1, 3, 5, 7}
        expert_grads = [c for c in calls if c.label == "expert_data"]
        assert [c.size for c in expert_grads] == [4 * (4 * 50) * 4]
        assert expert_grads[0].group == layout.group("expert_data", rank)


def test_pipeline_sends_pass_activations_forward_and_gradients_back():
    plan = plan_of("""
name: pp
model: {layers: 6, parameters_per_layer: 1000, activation: 4KiB}
parallelism: {pipeline: 3, tensor: 2, data: 1, micro_batches: 4}
compute: {forward: 1ms}
""")
    layout = plan.layout
    sends = [c for c in plan.calls().values() if c.label == "pipeline"]
    assert len(sends) == 2 * 2 * 4 * 2  # 2 boundaries, 2 tensor ranks, 4 micro-batches, 2 ways
    for call in sends:
        src, dst = (layout.coords(g) for g in call.group)
        assert src["tensor"] == dst["tensor"] and abs(src["pipeline"] - dst["pipeline"]) == 1
        forward = call.key[3] == "activation"
        assert (dst["pipeline"] - src["pipeline"] == 1) == forward
        assert (call.collective, call.size, call.root) == ("broadcast", 4096, 0)
