"""A replay as a figure: the first ranks' timelines, measured above simulated (compute grey,
each kind of call its colour), and every call's simulated time against its measured one."""

from __future__ import annotations

from pathlib import Path

from collsim.output.style import COLORS, MARKERS, RC
from collsim.replay.report import ReplayResult, measured_timeline
from collsim.replay.run import Replayed

RANKS = 4  # ranks drawn in the timeline panel
COMPUTE = "#bdbdbd"


def replay_figure(replayed: Replayed, result: ReplayResult, path: str | Path,
                  title: str = "") -> None:
    """Write the figure to ``path`` (its suffix is the format: png, svg, pdf)."""
    # matplotlib only when a figure is drawn: `import collsim` never loads it
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after the backend is chosen, as matplotlib asks
    from matplotlib.ticker import FuncFormatter, NullFormatter

    from collsim.output.files import replace_with

    plan = replayed.plan
    kinds = sorted({task.call.kind for tasks in plan.tasks for task in tasks if task.call})
    colour = {kind: COLORS[i % len(COLORS)] for i, kind in enumerate(kinds)}
    ranks = list(range(min(RANKS, plan.world)))
    with plt.rc_context(RC):
        figure, (timeline_axes, scatter_axes) = plt.subplots(
            1, 2, figsize=(9.5, 3.4), width_ratios=(1.7, 1), layout="constrained")
        rows = []
        sides = (("measured", measured_timeline(plan)), ("simulated", replayed.timeline))
        for rank in ranks:
            for side, timeline in sides:
                y = len(rows)
                rows.append(f"rank {rank} {side}")
                for index, task in enumerate(plan.tasks[rank]):
                    start = timeline.start[rank][index] * 1e3
                    width = timeline.end[rank][index] * 1e3 - start
                    fill = COMPUTE if task.call is None else colour[task.call.kind]
                    # Calls above compute: on CPU traces they run beside it on their thread.
                    timeline_axes.barh(y, width, left=start, height=0.7, color=fill,
                                       linewidth=0, zorder=2 if task.call is None else 3)
        timeline_axes.set_yticks(range(len(rows)), rows)
        timeline_axes.invert_yaxis()
        timeline_axes.set_xlabel("time from the trace's first event (ms)")
        timeline_axes.grid(axis="y", visible=False)
        handles = [plt.Rectangle((0, 0), 1, 1, color=COMPUTE)] + [
            plt.Rectangle((0, 0), 1, 1, color=colour[k]) for k in kinds]
        timeline_axes.legend(handles, ["compute (and host)", *kinds], loc="upper center",
                             bbox_to_anchor=(0.5, -0.22), ncols=min(3, len(kinds) + 1),
                             frameon=False)
        low, high = float("inf"), 0.0
        for i, kind in enumerate(kinds):
            points = [(c.measured_us, c.simulated_us) for c in result.calls
                      if f"{c.group} {c.collective}" == kind and c.measured_us > 0
                      and c.simulated_us > 0]
            if not points:
                continue
            xs, ys = zip(*points, strict=True)
            low, high = min(low, *xs, *ys), max(high, *xs, *ys)
            scatter_axes.scatter(xs, ys, s=14, color=colour[kind], marker=MARKERS[i % 10],
                                 alpha=0.7)
        if high > 0:
            scatter_axes.plot([low / 2, high * 2], [low / 2, high * 2], color="black",
                              linewidth=0.8, linestyle=(0, (3, 2.5)))
            scatter_axes.text(high * 1.6, high * 1.6, "equal ", fontsize=7, ha="right",
                              va="bottom")
            scatter_axes.set_xscale("log")
            scatter_axes.set_yscale("log")
            for axis in (scatter_axes.xaxis, scatter_axes.yaxis):
                axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
                axis.set_minor_formatter(NullFormatter())
        scatter_axes.set_xlabel("measured per call (us)")
        scatter_axes.set_ylabel("simulated per call (us)")
        scatter_axes.set_title("every call of every rank")
        figure.suptitle(title or f"{result.trace} on {result.topology}")
        metadata = {"Software": None} if Path(path).suffix == ".png" else None
        replace_with(path, lambda temporary: figure.savefig(
            temporary, format=Path(path).suffix[1:] or "png", metadata=metadata))
        plt.close(figure)
