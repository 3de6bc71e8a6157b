"""``collsim calibrate --topology PRESET --measured LOG [LOG ...] --out FILE.yaml``: fit the
preset's declared NCCL figures to measured nccl-tests logs and write a topology file."""

from __future__ import annotations

import argparse
from pathlib import Path

from collsim.calibrate.fit import PICK_SCALES, TREE_RATINGS, FitProgress, calibrate
from collsim.calibrate.writer import calibrated_yaml
from collsim.cli.measured import add_case_arguments, cases_from_args
from collsim.errors import InputError
from collsim.hardware.loader import load_topology
from collsim.output.files import replace_text
from collsim.watch import FitWatch
from collsim.yamlfile import read_text


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "calibrate", help="fit a preset's NCCL figures to nccl-tests logs; write a topology",
        description="Fit a preset's declared NCCL figures (launch cost, per-protocol latency "
                    "scales, network per-message overhead, reachable bandwidth per link class "
                    "and NVLS's, the LL/LL128 share of it, the sizes where NCCL switches) "
                    "to measured nccl-tests logs by least squares on the log of the time per "
                    "call, within physical bounds, and write a topology file that estimate, "
                    "run and scenarios accept. Figures the logs cannot determine keep the "
                    "preset's values and are listed. See docs/calibration.md.")
    parser.add_argument("--topology", "-t", required=True, metavar="PRESET",
                        help="the preset to start from (file or shipped name)")
    parser.add_argument("--measured", required=True, nargs="+", action="extend", metavar="LOG",
                        help="nccl-tests logs (several runs per file are fine; repeat the flag "
                             "or list several): all are fitted together")
    parser.add_argument("--out", required=True, metavar="FILE.yaml",
                        help="the calibrated topology file to write")
    parser.add_argument("--name", help="the topology's name (default: the file's stem)")
    add_case_arguments(parser)
    parser.add_argument("--fixed-picks", action="store_true",
                        help="keep the sizes where NCCL's model switches algorithm or protocol "
                             "(skips the search for pick_scale, one fit per candidate)")
    parser.add_argument("--tree-rating", action="store_true",
                        help="also search how NCCL rates its tree against the ring "
                             "(nccl.tree_rating: one more fit at most; minutes on a 4-node log)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.suffix not in (".yaml", ".yml"):
        raise InputError(f"expected a .yaml file name, got {args.out!r}", key="--out")
    preset, cases = cases_from_args(args)
    if any(case.topology.machine is None or case.topology.machine.nccl is None
           for case in cases):
        raise InputError(f"topology '{preset}' declares no NCCL figures to fit (no 'nccl' "
                         "section); start from a shipped preset", key="--topology")
    progress = FitProgress()
    with FitWatch(progress) as watch:
        watch.start()
        calibration = calibrate(cases, pick_scales=() if args.fixed_picks else PICK_SCALES,
                                tree_ratings=TREE_RATINGS if args.tree_rating else (),
                                progress=progress)
    name = args.name or out.stem
    text = calibrated_yaml(read_text(preset, "topology"), preset.stem, name, calibration, cases,
                           args.overrides)
    replace_text(out, lambda file: file.write(text))
    load_topology(out)  # the file must load as written
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        print(line[2:])
    print(f"-> {out}")
    return 0
