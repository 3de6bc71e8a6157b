"""The Python interface as a notebook uses it: ``import collsim``, one point, a scenario, and
a new algorithm written, checked against numpy and timed."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import collsim
from collsim.cli import main
from collsim.output.table import read_table

ROOT = Path(__file__).resolve().parents[1]
SWITCH = ROOT / "topologies" / "switch-64.yaml"
# switch-64.yaml: alpha = 2 x 1 us, beta = 1 / 100 GB/s, gamma = 1 / 1 TB/s.
ALPHA, BETA, GAMMA = 2e-6, 1 / 100e9, 1 / 1e12

SCENARIO = f"""\
name: api
topologies: [{SWITCH}]
collectives: [allreduce]
algorithms: [ring, binomial]
sweep:
  size: [1KiB, 1MiB]
  ranks: [3, 4]
"""


def star(rank: int, job: collsim.Job) -> collsim.Program:
    """Every rank sends its buffer to rank 0, which sums them and sends the sum back."""
    p, n = job.nranks, job.count
    if p == 1:
        return
    if rank == 0:
        yield tuple(collsim.Recv(peer, 0, 0, n, reduce=True) for peer in range(1, p))
        yield tuple(collsim.Send(peer, 1, 0, n) for peer in range(1, p))
    else:
        yield collsim.Send(0, 0, 0, n)
        yield collsim.Recv(0, 1, 0, n)


def star_cost(c: collsim.Cost) -> float:
    return 2 * c.alpha + 2 * (c.p - 1) * c.n * c.beta + (c.p - 1) * c.n * c.gamma


@pytest.fixture
def registered():
    """The toy star allreduce, registered for one test and removed after it."""
    collsim.register("allreduce", "star", cost=star_cost, formula="2α + 2(p-1)·n·β")(star)
    yield "star"
    collsim.unregister("allreduce", "star")


def test_import_is_light_and_estimate_draws_nothing():
    code = ("import sys, collsim\n"
            "assert 'simpy' not in sys.modules and 'numpy' not in sys.modules\n"
            "collsim.estimate('switch-64', 'allreduce', 'ring', 4, '1MiB')\n"
            "assert 'matplotlib' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_every_public_name_resolves_and_says_what_it_is():
    assert "estimate" in dir(collsim)
    for name in collsim.__all__:
        value = getattr(collsim, name)
        assert value.__doc__ or name == "Program", name  # Program is a type alias
    with pytest.raises(AttributeError):
        collsim.no_such_name  # noqa: B018
    submodules = {module.name for module in pkgutil.iter_modules(collsim.__path__)}
    assert not submodules & set(collsim.__all__)  # a subpackage would hide a public name


def test_estimate_takes_a_name_a_path_or_a_topology_and_text_or_bytes():
    by_name = collsim.estimate("switch-64", "allreduce", "ring", 8, "64MiB")
    by_path = collsim.estimate(SWITCH, "allreduce", "ring", 8, 64 * 2**20)
    machine = collsim.load_topology(str(SWITCH))
    by_object = collsim.estimate(machine, "allreduce", "ring", 8, "64MiB")
    assert by_name == by_path == by_object
    n, p = 64 * 2**20, 8
    ring = 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * n * BETA + (p - 1) / p * n * GAMMA
    assert by_name.time_s == pytest.approx(ring, rel=1e-9)
    assert by_name.busbw_GBps == pytest.approx(n / ring / 1e9 * 2 * (p - 1) / p, rel=1e-9)
    assert str(by_name).startswith("allreduce ring on ideal-switch, 8 ranks, 64M ")
    assert by_name.row()["time_s"] == by_name.time_s


def test_estimate_set_and_params_act_as_on_the_command_line():
    n, p = 2**20, 4
    fast = collsim.estimate("switch-64", "allreduce", "ring", p, n,
                            set={"link.bandwidth": "200GB/s"})
    ring = 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * n * BETA / 2 + (p - 1) / p * n * GAMMA
    assert fast.time_s == pytest.approx(ring, rel=1e-9)
    halves = collsim.estimate("switch-64", "allreduce", "ring", p, n, {"dtype": "float16"})
    assert halves.time_s == pytest.approx(collsim.estimate(
        "switch-64", "allreduce", "ring", p, n).time_s, rel=1e-12)
    with pytest.raises(collsim.InputError, match="dtype"):
        collsim.estimate("switch-64", "allreduce", "ring", p, n, {"dtype": "float17"})
    with pytest.raises(collsim.InputError, match="size"):
        collsim.estimate("switch-64", "allreduce", "ring", p, "12XB")
    with pytest.raises(collsim.InputError, match="no topology file 'switch-65'"):
        collsim.load_topology("switch-65")
    with pytest.raises(ValueError, match="already built"):
        collsim.load_topology(collsim.load_topology("switch-64"), set={"gpus": 4})


def test_estimate_takes_a_cost_model():
    launch = 5e-6
    plain = collsim.estimate("switch-64", "allreduce", "ring", 4, "1MiB")
    model = collsim.MessageCosts(launch=launch)
    charged = collsim.estimate("switch-64", "allreduce", "ring", 4, "1MiB", costs=model)
    assert charged.time_s == pytest.approx(plain.time_s + launch, rel=1e-9)
    assert charged.analytic_time_s == pytest.approx(charged.time_s, rel=1e-9)


def test_a_registered_algorithm_is_checked_against_numpy_and_estimated(registered):
    assert "star" in collsim.list_algorithms("allreduce")["allreduce"]
    # 4 sizes x 2 ring orders for each p, every operator in turn.
    assert collsim.check_algorithm("allreduce", registered, ranks=range(1, 13)) == 12 * 8
    p, n = 6, 3 * 2**20
    result = collsim.estimate("switch-64", "allreduce", registered, p, n)
    assert result.time_s == pytest.approx(star_cost(collsim.Cost(p, n, ALPHA, BETA, GAMMA)),
                                          rel=1e-9)
    assert result.analytic_time_s == pytest.approx(result.time_s, rel=1e-9)
    server = collsim.estimate("switch-64", "allreduce", "parameter_server", p, n)
    assert result.time_s == pytest.approx(server.time_s, rel=1e-12)


def test_check_algorithm_finds_wrong_data_and_deadlocks():
    def forgets_to_add(rank, job):
        """Two ranks swap buffers: each ends with the other's, not the sum."""
        other = 1 - rank
        yield (collsim.Send(other, 0, 0, job.count), collsim.Recv(other, 0, 0, job.count))

    with pytest.raises(AssertionError, match="rank 0 buffer 'buf' wrong"):
        collsim.check_algorithm("allreduce", forgets_to_add, ranks=2, counts=[5])

    def both_receive_first(rank, job):
        yield collsim.Recv(1 - rank, 0, 0, job.count)
        yield collsim.Send(1 - rank, 0, 0, job.count)

    with pytest.raises(collsim.SimulationError, match="deadlock|blocked|stuck"):
        collsim.check_algorithm("broadcast", both_receive_first, ranks=2, counts=[4])


def test_check_algorithm_covers_roots_of_rooted_collectives():
    # p = 1: one root; p > 1: roots 0 and p-1; 2 sizes x 2 ring orders each.
    assert collsim.check_algorithm("broadcast", "binomial", ranks=[1, 5, 8],
                                   counts=[0, 17]) == 4 + 8 + 8


def test_register_protects_built_in_names_and_replaces_its_own(registered):
    with pytest.raises(ValueError, match="built-in"):
        collsim.register("allreduce", "ring")(star)
    with pytest.raises(ValueError, match="replace=True"):
        collsim.register("allreduce", registered)(star)
    collsim.register("allreduce", registered, replace=True)(star)
    with pytest.raises(ValueError, match="unknown collective"):
        collsim.register("allreduce2", "x")(star)
    with pytest.raises(ValueError, match="not registered"):
        collsim.unregister("allreduce", "ring")


def test_run_scenario_returns_the_rows_collsim_run_writes(tmp_path, capsys):
    path = tmp_path / "api.yaml"
    path.write_text(SCENARIO)
    rows = collsim.run_scenario(path)
    assert rows.out is None and capsys.readouterr().err == ""
    assert main(["run", str(path), "--out", str(tmp_path / "cli"), "--no-figures"]) == 0
    columns, written = read_table(tmp_path / "cli" / "results.csv")
    assert rows == written and rows.columns == columns
    assert len(rows) == 2 * 2 * 2
    assert rows.where(algorithm="ring", ranks=4).column("size_bytes") == [1024, 2**20]
    assert "binomial" in repr(rows) and "time_s" in repr(rows)
    with pytest.raises(KeyError, match="no column 'rank'"):
        rows.where(rank=4)


def test_run_scenario_into_a_folder_with_progress(tmp_path, capsys):
    scenario = collsim.load_scenario(text=SCENARIO)
    out = tmp_path / "run"
    rows = collsim.run_scenario(scenario, out, figures=False, progress=True)
    assert rows.out == out and (out / "results.csv").is_file()
    assert "8/8 points" in capsys.readouterr().err
    with pytest.raises(collsim.InputError, match="already holds results.csv"):
        collsim.run_scenario(scenario, out)
    assert collsim.run_scenario(scenario, out, resume=True) == rows
    with pytest.raises(ValueError, match="not both"):
        collsim.load_scenario(SWITCH, text=SCENARIO)
