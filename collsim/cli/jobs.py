"""``collsim jobs``: several jobs on one topology, each one's time and its slowdown."""

from __future__ import annotations

import argparse
import json

from collsim.cli.common import add_topology_arguments, topology_from_args
from collsim.cli.recording import add_link_report_arguments
from collsim.output.files import check_figure_name
from collsim.watch import Watch


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "jobs", help="several jobs sharing one fabric: each one's time and slowdown",
        description="Run the jobs of a jobs file (workload steps or repeated collectives on "
                    "disjoint GPU sets, each from its start time) on one simulation of the "
                    "topology, then each job alone: its time, its time alone and the "
                    "slowdown.")
    parser.add_argument("jobs", metavar="JOBS", help="jobs YAML file")
    add_topology_arguments(parser)
    add_link_report_arguments(parser, " while the jobs share the fabric")
    parser.add_argument("--link-figure", metavar="FILE.png",
                        help="draw the busiest links while the jobs share the fabric")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # workloads only when this command runs, not when the parser is built
    from collsim.workloads.jobs import format_jobs, run_jobs
    from collsim.workloads.jobsfile import load_jobs

    if args.link_figure:
        check_figure_name(args.link_figure, "--link-figure")
    jobs = load_jobs(args.jobs)
    topology = topology_from_args(args)
    recording = bool(args.link_report or args.link_figure)
    shared: list = []
    with Watch() as watch:
        if recording:
            # the recording fabric only when a link report or figure is asked for
            from collsim.engine.recording import RecordingFabric
            results = run_jobs(jobs, topology, RecordingFabric, shared, watch.follow)
        else:
            results = run_jobs(jobs, topology, observe=watch.follow)
    if args.json:
        print(json.dumps({"topology": topology.name, "jobs": [
            {"name": r.name, "what": r.kind, "gpus": r.gpus, "start_s": r.start_s,
             "time_s": r.time_s, "alone_s": r.solo_s, "slowdown": r.slowdown}
            for r in results]}))
    else:
        print(format_jobs(results, topology.name))
    if recording:
        # the link report only when asked for
        from collsim.output.linkload import format_link_report, link_loads
        loads = link_loads(shared[0].simulation.fabric)
        span = max(r.start_s + r.time_s for r in results)
        if args.link_report:
            print(format_link_report(loads, span, args.links))
        if args.link_figure:
            # matplotlib only when a figure is drawn
            from collsim.output.linkfigure import link_figure
            link_figure(loads, span, args.link_figure, f"{jobs.name} on {topology.name}")
    return 0
