"""Pipeline schedules: the order in which one stage runs its micro-batches' forward (F) and
backward (B) passes.

- ``gpipe``: every forward, then every backward (GPipe, Huang et al. 2019).
- ``1f1b``: ``min(p - s - 1, m)`` warm-up forwards on stage ``s`` of ``p``, then one forward
  and one backward in turn, then the remaining backwards (PipeDream-Flush, as Megatron-LM's
  non-interleaved schedule). Both take ``(m + p - 1)(t_f + t_b)`` for ``m`` micro-batches
  with per-stage times ``t_f`` and ``t_b`` when communication is free; 1F1B keeps at most
  ``p - s`` micro-batches' activations alive instead of ``m``.
"""

from __future__ import annotations


def stage_order(schedule: str, stages: int, micro_batches: int, stage: int
                ) -> list[tuple[str, int]]:
    """``("F", i)`` and ``("B", i)`` in the order stage ``stage`` runs them."""
    m = micro_batches
    if schedule == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    if schedule == "1f1b":
        warm = min(stages - stage - 1, m)
        order = [("F", i) for i in range(warm)]
        for i in range(m - warm):
            order += [("F", warm + i), ("B", i)]
        return order + [("B", i) for i in range(m - warm, m)]
    raise ValueError(f"unknown schedule {schedule!r}; choose gpipe or 1f1b")
