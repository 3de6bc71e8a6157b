"""A training step's time from its plan: the no-overlap sum, the overlap bound, the pipeline
bubble's closed form, stragglers, and every GPU's step splitting into compute, exposed
communication and bubble."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.workloads.executor import run_plan
from collsim.workloads.loader import workload_from_text
from collsim.workloads.plan import build_plan
from collsim.workloads.service import alpha_beta, isolated

FREE_CALLS = isolated(lambda call: 0.0)


def step(text: str, service, gpus: int | None = None):
    plan = build_plan(workload_from_text(text), gpus)
    return plan, run_plan(plan, service)


def assert_parts_add_up(result):
    for rank in result.ranks:
        assert rank.compute_s + rank.exposed_s + rank.bubble_s == \
            pytest.approx(result.step_s, rel=1e-12, abs=1e-15)
        assert rank.exposed_s >= -1e-15 and rank.bubble_s >= -1e-12


# -- no overlap: the sum of the parts ------------------------------------------------------

NO_OVERLAP = """
name: serial
model: {layers: 2, parameters_per_layer: 1000, activation: 4096}
parallelism: {tensor: 2, data: 2, micro_batches: 2, zero: ZERO}
compute: {forward: 1ms, backward: 2x, optimizer: 4ms}
gradients: {bucket: 2000, overlap: false}
dtypes: {gradients: fp32, parameters: bf16}
"""


def test_without_overlap_a_step_is_the_sum_of_its_parts():
    """Every call costs 10 us + 1 ns per byte. Per GPU, by hand:
    compute: 2 micro-batches x 2 layers x (1 + 2 ms) / tensor 2 = 6 ms, and the optimizer
    4 ms x (2 of 2 layers) / tensor 2 = 2 ms; tensor allreduces: 2 x 2 x 4 of 4096 B, each
    10 + 4.096 us; data allreduces: a layer's 500 fp32 gradients fill one 2000-B bucket, so
    2 buckets, each 10 + 2 us."""
    plan, result = step(NO_OVERLAP.replace("ZERO", "0"), isolated(alpha_beta(10e-6, 1e-9)),
                        gpus=4)
    compute = 6e-3 + 2e-3
    tensor = 16 * (10e-6 + 4096e-9)
    data = 2 * (10e-6 + 2000e-9)
    assert result.step_s == pytest.approx(compute + tensor + data, rel=1e-12)
    assert result.compute_s == pytest.approx(compute, rel=1e-12)
    assert result.exposed_s == pytest.approx(tensor + data, rel=1e-12)
    assert result.bubble_s == pytest.approx(0, abs=1e-15)
    assert result.kinds["tensor allreduce"].calls == 16
    assert result.kinds["data allreduce"].calls == 2
    assert result.kinds["data allreduce"].bytes == 4000
    assert_parts_add_up(result)


def test_without_overlap_zero_2_is_the_sum_of_its_parts():
    """ZeRO-2: each bucket is reduce-scattered (2000 B, 12 us), the optimizer works on half
    the parameters (1 ms), then each bucket's 500 bf16 parameters are gathered (1000 B,
    11 us)."""
    _, result = step(NO_OVERLAP.replace("ZERO", "2"), isolated(alpha_beta(10e-6, 1e-9)),
                     gpus=4)
    expected = 6e-3 + 1e-3 + 16 * (10e-6 + 4096e-9) + 2 * 12e-6 + 2 * 11e-6
    assert result.step_s == pytest.approx(expected, rel=1e-12)
    assert set(result.kinds) == {"tensor allreduce", "data reducescatter", "data allgather"}
    assert result.kinds["data allgather"].bytes == 2 * 1000
    assert_parts_add_up(result)


# -- full overlap: data-parallel buckets behind the backward ----------------------------

OVERLAP = """
name: overlap
model: {layers: LAYERS, parameters_per_layer: 1000}
parallelism: {data: 4}
compute: {forward: FORWARD, backward: BACKWARD}
gradients: {bucket: 4000, overlap: true}
dtypes: {gradients: fp32}
"""


def overlap_step(layers: int, forward: float, backward: float, durations):
    text = (OVERLAP.replace("LAYERS", str(layers)).replace("FORWARD", repr(forward))
            .replace("BACKWARD", repr(backward)))
    return step(text, isolated(lambda call: durations[call.key[-1]]))[1]


def test_with_overlap_a_compute_bound_step_is_compute_plus_the_last_bucket():
    """Each bucket is one layer's gradients (4000 B), its allreduce takes 1.5 ms and each
    layer's backward 2 ms: every allreduce ends before backward fills the next bucket, so
    the communication stream is idle whenever a bucket arrives and only the last bucket,
    filled when the backward ends, is exposed."""
    layers, forward, backward, call = 4, 1e-3, 2e-3, 1.5e-3
    result = overlap_step(layers, forward, backward, [call] * layers)
    compute = layers * (forward + backward)
    communication = layers * call
    assert result.step_s == pytest.approx(max(compute, communication) + call, rel=1e-12)
    assert result.exposed_s == pytest.approx(call, rel=1e-12)
    assert_parts_add_up(result)


def test_with_overlap_a_communication_bound_step_is_first_bucket_plus_communication():
    """Allreduces of 3 ms behind backwards of 2 ms: from the first bucket on the
    communication stream never idles, so the step is the forward, one backward, and every
    allreduce."""
    layers, forward, backward, call = 4, 1e-3, 2e-3, 3e-3
    result = overlap_step(layers, forward, backward, [call] * layers)
    assert result.step_s == pytest.approx(layers * forward + backward + layers * call,
                                          rel=1e-12)
    assert_parts_add_up(result)


@settings(max_examples=40, deadline=None)
@given(layers=st.integers(1, 8), forward=st.floats(1e-4, 1e-2), backward=st.floats(1e-4, 1e-2),
       data=st.data())
def test_with_overlap_the_step_is_the_longest_chain_of_buckets(layers, forward, backward,
                                                                 data):
    """Bucket k (k = 1..L, one layer each) is ready at L*f + k*b; the allreduces run one at
    a time in that order, so the step ends at max over k of (ready_k + the allreduces from
    k on): the longer of compute and communication, counted from where they start."""
    calls = data.draw(st.lists(st.floats(0, 1e-2), min_size=layers, max_size=layers))
    result = overlap_step(layers, forward, backward, calls)
    expected = max(layers * forward + k * backward + sum(calls[k - 1:])
                   for k in range(1, layers + 1))
    assert result.step_s == pytest.approx(expected, rel=1e-9)
    assert_parts_add_up(result)


# -- the pipeline bubble -----------------------------------------------------------------

PIPELINE = """
name: pipeline
model: {layers: LAYERS, parameters_per_layer: 1000, activation: 4KiB}
parallelism: {data: 1, pipeline: STAGES, micro_batches: MICRO, schedule: SCHEDULE}
compute: {forward: 1ms, backward: RATIOx}
"""


@settings(max_examples=60, deadline=None)
@given(stages=st.integers(1, 6), micro=st.integers(1, 12), per_stage=st.integers(1, 3),
       ratio=st.sampled_from([0.5, 1, 2, 3.25]), schedule=st.sampled_from(["gpipe", "1f1b"]))
def test_the_pipeline_bubble_is_its_closed_form(stages, micro, per_stage, ratio, schedule):
    """With free communication, p stages and m micro-batches, a stage's forward t_f and
    backward t_b: the step is (m + p - 1)(t_f + t_b), each stage computes m(t_f + t_b) and
    idles (p - 1)(t_f + t_b), a fraction (p - 1)/(m + p - 1) of the step ((p - 1)/m of the
    ideal, bubble-free step)."""
    text = (PIPELINE.replace("LAYERS", str(stages * per_stage)).replace("STAGES", str(stages))
            .replace("MICRO", str(micro)).replace("SCHEDULE", schedule)
            .replace("RATIO", str(ratio)))
    _, result = step(text, FREE_CALLS)
    t_f, t_b = per_stage * 1e-3, per_stage * 1e-3 * ratio
    p, m = stages, micro
    assert result.step_s == pytest.approx((m + p - 1) * (t_f + t_b), rel=1e-9)
    for rank in result.ranks:
        assert rank.compute_s == pytest.approx(m * (t_f + t_b), rel=1e-9)
        assert rank.bubble_s / result.step_s == pytest.approx((p - 1) / (m + p - 1),
                                                              rel=1e-9, abs=1e-12)
        assert rank.bubble_s == pytest.approx((p - 1) / m * rank.compute_s, rel=1e-9,
                                              abs=1e-12)
    assert result.exposed_s == 0
    assert_parts_add_up(result)


def test_1f1b_runs_the_warm_up_the_steady_state_and_the_cool_down():
    plan, _ = step(PIPELINE.replace("LAYERS", "4").replace("STAGES", "4")
                   .replace("MICRO", "6").replace("SCHEDULE", "1f1b").replace("RATIO", "2"),
                   FREE_CALLS)
    order = [t.name.split()[0][0].upper() + t.name.split()[-1][2:]
             for t in plan.tasks[plan.layout.rank(pipeline=1)] if t.is_compute
             and t.category in ("forward", "backward")]
    assert order == ["F0", "F1", "F2", "B0", "F3", "B1", "F4", "B2", "F5", "B3", "B4", "B5"]


# -- stragglers and noise ----------------------------------------------------------------

JITTER = """
name: noisy
model: {layers: 4, parameters_per_layer: 1000, activation: 4KiB}
parallelism: {pipeline: 2, data: 2, micro_batches: 3}
compute: {forward: 1ms}
dtypes: {gradients: fp32}
gradients: {bucket: 4000}
noise: {seed: SEED, jitter: 0.2, spread: 1ms}
"""


def test_noise_is_deterministic_for_a_seed_and_changes_with_it():
    service = isolated(alpha_beta(5e-6, 1e-9))
    first = step(JITTER.replace("SEED", "7"), service)[1]
    again = step(JITTER.replace("SEED", "7"), service)[1]
    other = step(JITTER.replace("SEED", "8"), service)[1]
    assert first.to_dict(ranks=True) == again.to_dict(ranks=True)
    assert first.step_s != other.step_s
    assert_parts_add_up(first)


def test_start_offsets_are_the_seeded_uniform_draws():
    import numpy as np

    result = step(JITTER.replace("SEED", "3"), FREE_CALLS)[1]
    expected = np.random.default_rng(3).uniform(0, 1e-3, 4)
    assert [r.offset_s for r in result.ranks] == [float(x) for x in expected]


def test_jitter_scales_compute_by_a_mean_one_factor():
    """Many tasks, coefficient of variation 0.2: the mean factor is 1 within a few standard
    errors and their spread is 0.2 within 10%."""
    text = """
name: many
model: {layers: 400, parameters_per_layer: 10}
parallelism: {data: 1}
compute: {forward: 1ms, backward: 1x}
noise: {seed: 11, jitter: 0.2}
"""
    plan = build_plan(workload_from_text(text), 1)
    from collsim.workloads.executor import execute

    timeline = execute(plan, FREE_CALLS)
    factors = [(timeline.end[0][i] - timeline.start[0][i]) / task.seconds
               for i, task in enumerate(plan.tasks[0]) if task.seconds]
    import statistics

    assert abs(statistics.mean(factors) - 1) < 4 * 0.2 / len(factors) ** 0.5
    assert statistics.stdev(factors) == pytest.approx(0.2, rel=0.1)


def test_a_late_rank_stretches_every_collective_it_joins():
    """Data parallelism without overlap on 2 GPUs, GPU 1 starting 2 ms late: the step is
    2 ms longer, GPU 0 waits those 2 ms inside the first allreduce (exposed communication)
    and GPU 1's late start is bubble."""
    base = """
name: straggler
model: {layers: 2, parameters_per_layer: 1000}
parallelism: {data: 2}
compute: {forward: 1ms}
gradients: {bucket: 2000, overlap: false}
"""
    service = isolated(alpha_beta(10e-6, 1e-9))
    alone = step(base, service)[1]
    late = step(base + "noise: {offsets: {1: 2ms}}\n", service)[1]
    assert late.step_s == pytest.approx(alone.step_s + 2e-3, rel=1e-12)
    assert late.ranks[0].exposed_s == pytest.approx(alone.ranks[0].exposed_s + 2e-3, rel=1e-12)
    assert late.ranks[1].bubble_s == pytest.approx(2e-3, rel=1e-12)
    assert late.ranks[1].exposed_s == pytest.approx(alone.ranks[1].exposed_s, rel=1e-12)


def test_without_overlap_a_pipeline_send_holds_its_rank_until_delivered():
    """Two stages of one layer (forward 1 ms, backward 2 ms), GPipe, sends of 1 ms. One
    micro-batch: F on stage 0, its send, F and B on stage 1, the gradient's send, B on
    stage 0: 8 ms either way. Two micro-batches, by hand:

    - overlap: stage 0 runs F0 0-1, F1 1-2 and sends them 1-2, 2-3; stage 1 runs F0 2-3,
      F1 3-4, B0 4-6, B1 6-8 and sends the gradients 6-7, 8-9; stage 0 runs B0 7-9, B1
      9-11: 11 ms.
    - no overlap: each send holds its sender. Stage 0: F0 0-1, send 1-2, F1 2-3, send 3-4.
      Stage 1: F0 2-3, F1 4-5, B0 5-7, send 7-8, B1 8-10, send 10-11. Stage 0: B0 8-10,
      B1 11-13: 13 ms.
    """
    text = """
name: sends
model: {layers: 2, parameters_per_layer: 10, activation: 4KiB}
parallelism: {data: 1, pipeline: 2, micro_batches: MICRO, schedule: gpipe}
compute: {forward: 1ms}
gradients: {overlap: OVERLAP}
"""
    service = isolated(lambda call: 1e-3 if call.label == "pipeline" else 0.0)

    def run(micro, overlap):
        return step(text.replace("MICRO", str(micro)).replace("OVERLAP", overlap),
                    service)[1].step_s

    assert run(1, "true") == pytest.approx(8e-3) and run(1, "false") == pytest.approx(8e-3)
    assert run(2, "true") == pytest.approx(11e-3)
    assert run(2, "false") == pytest.approx(13e-3)
