"""A fit's simulations side by side (collsim/calibrate/workers.py): the same times, the same
fit, whatever the number of worker processes; a bad COLLSIM_JOBS is refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from collsim.calibrate import workers
from collsim.calibrate.fit import FitProgress, Model, calibrate
from collsim.calibrate.predict import simulate_pick
from collsim.errors import InputError
from tests.test_calibrate_cache import NAMES, _two_node_case


def _tasks():
    case = _two_node_case()
    return [(case.topology, case.collective, size, case.gpus, chosen)
            for size, chosen in zip(case.sizes, case.picks, strict=True)]


def test_workers_give_each_point_the_time_of_a_simulation_here(monkeypatch):
    monkeypatch.setenv("COLLSIM_JOBS", "2")
    tasks = _tasks()
    assert workers.simulate_times(tasks) == [simulate_pick(*task).time_s for task in tasks]


def test_a_model_on_two_workers_matches_one_on_one(monkeypatch):
    case = _two_node_case()
    u = np.log([1.3, 0.8, 1.5, 2.0, 0.9, 0.7, 1.0, 1.2, 0.8])
    times = {}
    for jobs in ("1", "2"):
        monkeypatch.setenv("COLLSIM_JOBS", jobs)
        progress = FitProgress()
        times[jobs] = Model([case], NAMES, progress).times(u)
        assert progress.simulations == len(set(zip(case.sizes, case.picks, strict=True)))
    assert np.array_equal(times["1"], times["2"])


def test_a_fit_on_two_workers_is_the_fit_on_one(monkeypatch):
    case = _two_node_case()
    fits = {}
    for jobs in ("1", "2"):
        monkeypatch.setenv("COLLSIM_JOBS", jobs)
        fits[jobs] = calibrate([case], ["launch", "latency.network", "reachable.network"],
                               max_iterations=3, pick_scales=())
    assert fits["1"].factors == fits["2"].factors


@pytest.mark.parametrize("text", ["two", "0", "-3"])
def test_a_bad_jobs_setting_is_refused_by_name(monkeypatch, text):
    monkeypatch.setenv("COLLSIM_JOBS", text)
    with pytest.raises(InputError, match="COLLSIM_JOBS"):
        workers.jobs()
