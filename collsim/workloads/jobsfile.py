"""Jobs files: several jobs (a workload's step or a repeated collective) placed on disjoint
GPU sets of one topology, each with a start time. Validated against a JSON schema (published
as ``collsim/schemas/jobs.schema.json``: ``python -m collsim.workloads.jobsfile``), then for
what a schema cannot say; every problem is reported at once with its file, line and key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from collsim.algorithms.registry import get_algorithm
from collsim.errors import InputError, InputErrors
from collsim.hardware.limits import MAX_GPUS, count_text
from collsim.schema import validate
from collsim.units import UnitError, parse_size, parse_time
from collsim.workloads.jobs import CollectiveJob, JobsFile, JobSpec, WorkloadJob
from collsim.workloads.limits import MAX_PLAN_TASKS
from collsim.workloads.loader import load_workload
from collsim.yamlfile import Document, load_yaml, parse_yaml

PUBLISHED = Path(__file__).resolve().parent.parent / "schemas" / "jobs.schema.json"

_GPUS = {"description": "the job's GPUs in rank order: a list, or ranges '0-63,128-191'",
         "type": ["string", "array", "integer"], "items": {"type": "integer", "minimum": 0}}
_JOB = {
    "type": "object", "additionalProperties": False, "required": ["name", "gpus"],
    "properties": {
        "name": {"type": "string", "description": "the job's name in the table"},
        "gpus": _GPUS,
        "start": {"type": ["string", "number"], "description": "when it starts: 0, 5ms"},
        "workload": {"type": "string", "description": "a workload file (relative to this "
                                                      "file): the job is one step of it"},
        "with": {"type": "object", "description": "workload keys to override (dotted), as "
                                                  "collsim workload --with"},
        "collective": {"type": "string", "description": "or a collective: allreduce, ..."},
        "algorithm": {"type": "string", "description": "its algorithm (default ring)"},
        "size": {"type": ["string", "integer"], "description": "its size: 256MiB"},
        "repeat": {"type": "integer", "minimum": 1,
                   "description": "calls back to back (default 1)"},
        "dtype": {"type": "string", "description": "element type (default float32)"},
    },
}
JOBS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "collsim jobs file", "type": "object", "additionalProperties": False,
    "required": ["jobs"],
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "jobs": {"type": "array", "minItems": 1, "items": _JOB},
    },
}


def parse_gpus(value: Any) -> tuple[int, ...]:
    """GPUs from a list, one number, or ranges such as '0-7,16-23'."""
    if isinstance(value, bool):
        raise ValueError(f"expected GPUs, got {value!r}")
    if isinstance(value, int):
        value = [value]
    if isinstance(value, list):
        _check_gpu(max(value, default=0))
        return tuple(value)
    gpus: list[int] = []
    for part in str(value).replace(" ", "").split(","):
        first, _, last = part.partition("-")
        shown = part if len(part) <= 30 else f"{part[:27]}..."
        if not (first.isdigit() and (last or first).isdigit()):
            raise ValueError(f"expected GPU numbers or ranges like '0-63', got {shown!r}")
        if max(len(first), len(last)) > len(str(MAX_GPUS)):
            raise ValueError(f"{shown!r} names GPUs beyond the largest machine collsim "
                             f"builds ({count_text(MAX_GPUS)} GPUs, numbered from 0)")
        low, high = int(first), int(last or first)
        if high < low:
            raise ValueError(f"range {shown!r} runs backwards")
        _check_gpu(high)  # before the range is listed: '0-999999999999' is a refusal
        gpus.extend(range(low, high + 1))
    return tuple(gpus)


def _check_gpu(gpu: int) -> None:
    if gpu >= MAX_GPUS:
        raise ValueError(f"GPU {count_text(gpu)} is beyond the largest machine collsim "
                         f"builds ({count_text(MAX_GPUS)} GPUs, numbered from 0)")


def load_jobs(path: str | Path) -> JobsFile:
    """Read, validate and check a jobs file."""
    return jobs_from_document(load_yaml(path))


def jobs_from_text(text: str, file: str = "<jobs>", base: Path | None = None) -> JobsFile:
    """A jobs file from YAML text; workload paths are relative to ``base`` (default: cwd)."""
    return jobs_from_document(parse_yaml(text, file), base)


def jobs_from_document(doc: Document, base: Path | None = None) -> JobsFile:
    if not isinstance(doc.data, dict):
        raise InputError("a jobs file must be a mapping with a list of 'jobs'",
                         file=doc.file, line=1)
    validate(doc, JOBS_SCHEMA)
    if base is None:
        base = Path(doc.file).parent if not doc.file.startswith("<") else Path(".")
    jobs: list[JobSpec] = []
    problems: list[InputError] = []
    used: dict[int, str] = {}
    for index, entry in enumerate(doc.data["jobs"]):
        try:
            job = _job(doc, index, entry, base)
        except InputErrors as exc:
            problems.extend(exc.errors)
            continue
        except InputError as exc:
            problems.append(exc)
            continue
        for gpu in job.gpus:
            if gpu in used:
                problems.append(doc.error(("jobs", index, "gpus"), f"GPU {gpu} is also job "
                                          f"'{used[gpu]}''s: jobs take disjoint GPU sets"))
                break
            used[gpu] = job.name
        if job.name in [j.name for j in jobs]:
            problems.append(doc.error(("jobs", index, "name"), f"two jobs are named "
                                      f"'{job.name}'"))
        jobs.append(job)
    if problems:
        raise problems[0] if len(problems) == 1 else InputErrors(problems)
    return JobsFile(doc.data.get("name", Path(doc.file).stem), tuple(jobs), doc.file)


def _job(doc: Document, index: int, entry: dict[str, Any], base: Path) -> JobSpec:
    at = ("jobs", index)
    try:
        gpus = parse_gpus(entry["gpus"])
    except ValueError as exc:
        raise doc.error(at + ("gpus",), str(exc)) from None
    if len(set(gpus)) != len(gpus):
        raise doc.error(at + ("gpus",), "a GPU is listed twice")
    try:
        start = parse_time(entry.get("start", 0))
    except UnitError as exc:
        raise doc.error(at + ("start",), str(exc)) from None
    has_workload, has_collective = "workload" in entry, "collective" in entry
    if has_workload == has_collective:
        raise doc.error(at, "a job is either a 'workload' or a 'collective', exactly one")
    if has_workload:
        for key in ("algorithm", "size", "repeat", "dtype"):
            if key in entry:
                raise doc.error(at + (key,), f"'{key}' belongs to a collective job; a "
                                             "workload job takes workload, with, gpus, start")
        path = Path(entry["workload"])
        path = path if path.is_absolute() else base / path
        workload = load_workload(path, entry.get("with") or {})
        return JobSpec(entry["name"], gpus, start, WorkloadJob(workload))
    if "with" in entry:
        raise doc.error(at + ("with",), "'with' overrides a workload's keys; this job is a "
                                        "collective")
    algorithm = entry.get("algorithm", "ring")
    try:
        get_algorithm(entry["collective"], algorithm)
    except (InputError, ValueError, KeyError) as exc:
        raise doc.error(at + ("algorithm",), str(getattr(exc, "message", exc))) from None
    if "size" not in entry:
        raise doc.error(at, "a collective job needs a 'size' (256MiB)")
    try:
        size = parse_size(entry["size"])
    except UnitError as exc:
        raise doc.error(at + ("size",), str(exc)) from None
    repeat = entry.get("repeat", 1)
    if repeat * len(gpus) > MAX_PLAN_TASKS:
        raise doc.error(at + ("repeat",), f"{count_text(repeat)} calls on {len(gpus):,} GPUs "
                        f"are {count_text(repeat * len(gpus))} tasks; collsim plans at most "
                        f"{count_text(MAX_PLAN_TASKS)} (see workload steps)")
    return JobSpec(entry["name"], gpus, start,
                   CollectiveJob(entry["collective"], algorithm, size,
                                 repeat, entry.get("dtype", "float32")))


if __name__ == "__main__":
    print(json.dumps(JOBS_SCHEMA, indent=2))
