"""The calibrated topology file: the preset's text with its ``nccl`` section replaced by the
fitted figures, under a comment block naming the fitted figures (each with the logs it was
fitted from), the logs and the fit's error per log. Everything else (links, sources,
comments) stays as the preset has it, so the file loads wherever the preset does
(``--topology FILE.yaml``, ``--set nodes=64``, scenarios)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from collsim import __version__
from collsim.calibrate.cases import Case
from collsim.calibrate.figures import BY_NAME
from collsim.calibrate.fit import Calibration, Fitted
from collsim.hardware.machine import LINK_CLASSES, NcclFigures, ProtocolOverride
from collsim.hardware.nccl_names import ALGORITHMS, PROTOCOLS
from collsim.hardware.nccl_release import format_version

_TOP_KEY = re.compile(r"^[A-Za-z_][\w-]*\s*:")


def calibrated_yaml(preset_text: str, preset: str, name: str, calibration: Calibration,
                    cases: Sequence[Case], overrides: Sequence[str] = ()) -> str:
    """The file's text (see the module docstring)."""
    lines = _without_nccl(preset_text.splitlines())
    lines = [f"name: {name}" if line.startswith("name:") else line for line in lines]
    while lines and not lines[-1].strip():
        lines.pop()
    head = _comment(preset, calibration, cases, overrides)
    return "\n".join(head + [""] + lines + [""] + _nccl_block(calibration) + [""])


def _without_nccl(lines: list[str]) -> list[str]:
    out, inside = [], False
    for line in lines:
        if line.startswith("nccl:"):
            inside = True
            continue
        if inside and (_TOP_KEY.match(line) or (line.startswith("#"))):
            inside = False
        if not inside:
            out.append(line)
    return out


def _comment(preset: str, calibration: Calibration, cases: Sequence[Case],
             overrides: Sequence[str]) -> list[str]:
    out = [f"# Calibrated by collsim {__version__} (collsim calibrate) from the preset {preset}",
           "# and these nccl-tests logs (error of the simulated time per call, |sim/measured - 1|,",
           "# over each log's sizes, before -> after the fit):"]
    for case, error in zip(cases, calibration.errors, strict=True):
        out.append(f"#   {case.label}: {case.collective} {case.nodes} x {case.gpus_per_node} GPUs, "
                   f"{len(case.sizes)} sizes; median {_pct(error.before_median)} -> "
                   f"{_pct(error.after_median)}, p90 {_pct(error.before_p90)} -> "
                   f"{_pct(error.after_p90)}")
    if overrides:
        out.append(f"# Calibrated with --set {' --set '.join(overrides)}: pass the same when "
                   "using this file.")
    fitted = [f for f in calibration.figures if f.determined]
    kept = [f for f in calibration.figures if not f.determined]
    out.append("# Fitted (least squares on log time, bounded to physical ranges; latency.* scale "
               "NCCL's per-step latencies, efficiency.* are a protocol's share of the bandwidth; "
               "docs/calibration.md):" if fitted else "# No figure is determined by these logs.")
    for f in fitted:
        out.append(f"#   {f.name:<18} {BY_NAME[f.name].what}: {_show(f, f.preset)} -> "
                   f"{_show(f, f.value)}{_bound(f)}")
        out.append(f"#   {'':<18} fitted from {_from(calibration, f.name)}")
    if kept:
        out.append("# Not determined by these logs, kept as the preset has them:")
        out += [f"#   {f.name:<18} {f.why}" for f in kept]
    named = {f.name for f in calibration.figures}
    unexercised = [name for name in BY_NAME if name not in named]
    if unexercised:
        out.append("# Not exercised by these logs' calls (docs/calibration.md#log-kinds), kept "
                   f"as the preset has them: {', '.join(unexercised)}.")
    out.append("# Every other figure, and its source, as in the preset.")
    return out


def _from(calibration: Calibration, name: str) -> str:
    """The logs (``file:line`` of each run) whose times determined the figure."""
    labels = calibration.sources.get(name, ())
    return ", ".join(labels) if labels else "the logs together"


def _bound(figure: Fitted) -> str:
    """A fit that ended at a bound says so: the logs ask for more than the range allows, or
    (a bandwidth that stops binding) say only that it is at least that far."""
    return f" (at its {figure.bound} bound)" if figure.bound else ""


def _show(figure: Fitted, value: float | None) -> str:
    if value is None:
        return "-"
    unit = BY_NAME[figure.name].unit
    if unit == "us":
        return f"{value * 1e6:.4g} us"
    if unit == "GB/s":
        return f"{value / 1e9:.4g} GB/s"
    return f"x{value:.4g}"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _nccl_block(calibration: Calibration) -> list[str]:
    figures: NcclFigures = calibration.nccl
    fitted = {f.name for f in calibration.figures if f.determined}

    def note(name: str) -> str:
        return "  # fitted" if name in fitted else "  # as the preset"

    out = ["nccl:", f"  launch: {_time(figures.launch)}{note('launch')}",
           f"  cpu: {figures.cpu}", f"  nvls: {str(figures.nvls).lower()}",
           f"  sharp: {str(figures.sharp).lower()}"]
    if figures.version is not None:
        out.append(f'  version: "{format_version(figures.version)}"')
    if figures.nic_path is not None:
        out.append(f"  nic_path: {figures.nic_path}")
    if figures.pick_scale is not None:
        out.append(f"  pick_scale: {figures.pick_scale:g}{note('pick_scale')}")
    if figures.tree_rating is not None:
        out.append(f"  tree_rating: {figures.tree_rating:.4g}{note('tree_rating')}")
    reachable = [c for c in LINK_CLASSES if c in figures.reachable]
    if reachable or figures.nvls_reachable is not None or figures.p2p_reachable is not None:
        out.append("  reachable:")
        out += [f"    {c}: {_bandwidth(figures.reachable[c], figures.line.get(c))}"
                f"{note('reachable.' + c)}" for c in reachable]
    if figures.nvls_reachable is not None:
        out.append(f"    nvls: {_bandwidth(figures.nvls_reachable, figures.line.get('nvlink'))}"
                   f"{note('reachable.nvls')}")
    if figures.p2p_reachable is not None:
        out.append(f"    p2p: {_bandwidth(figures.p2p_reachable, figures.line.get('network'))}"
                   f"{note('reachable.p2p')}")
    protocols = _protocols(figures)
    if protocols:
        scaled = sorted(n for n in fitted if n.startswith(("latency.", "efficiency.")))
        why = (f"  # NCCL's figures x the fitted {', '.join(scaled)}" if scaled else "")
        out.append("  protocols:" + why)
        out += protocols
    return out


def _protocols(figures: NcclFigures) -> list[str]:
    out = []
    for p in PROTOCOLS:
        entries = []
        own = figures.overrides.get((p, None))
        if own is not None and _fields(own):
            entries += [f"      {k}: {v}" for k, v in _fields(own)]
        for family in ALGORITHMS:
            override = figures.overrides.get((p, family))
            if override is not None and _fields(override):
                inner = ", ".join(f"{k}: {v}" for k, v in _fields(override))
                entries.append(f"      {family}: {{{inner}}}")
        if entries:
            out += [f"    {p}:", *entries]
    return out


def _fields(override: ProtocolOverride) -> list[tuple[str, str]]:
    out = []
    if override.latency:
        inner = ", ".join(f"{c}: {_time(override.latency[c])}" for c in LINK_CLASSES
                          if c in override.latency)
        out.append(("latency", f"{{{inner}}}"))
    if override.base is not None:
        out.append(("base", _time(override.base)))
    for key in ("channel_cap", "gpu_cap"):
        value = getattr(override, key)
        if value is not None:
            out.append((key, _bandwidth(value, None)))
    if override.efficiency is not None:
        out.append(("efficiency", f"{override.efficiency:.6g}"))
    return out


def _time(seconds: float) -> str:
    return f"{seconds * 1e6:.6g}us"


def _bandwidth(value: float, line: float | None) -> str:
    """GB/s to six significant digits, rounded down so it never exceeds the line rate."""
    if value <= 0:
        return "0GB/s"
    gb = value / 1e9
    digits = 6 - math.ceil(math.log10(gb))
    down = math.floor(gb * 10**digits) / 10**digits
    if line is not None:
        down = min(down, line / 1e9)
    return f"{down:.6g}GB/s"
