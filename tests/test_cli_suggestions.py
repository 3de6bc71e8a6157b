"""A typo gets a suggestion, as ``--topology`` does: algorithms, collectives, parameter names,
``--set`` keys; and a bad ``--set`` key is blamed on the command line, not on a line of the
topology file it was applied to."""

from __future__ import annotations

import pytest

from collsim.cli import main
from collsim.errors import InputError
from collsim.hardware.loader import load_topology
from collsim.hardware.shipped import find_topology
from collsim.suggest import closest, did_you_mean, edits

ESTIMATE = ["estimate", "-t", "dgx-h100", "-c", "allreduce", "-a", "ring", "-p", "8",
            "-s", "1MiB"]


def error_of(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    return captured.err


def replaced(flag: str, value: str) -> list[str]:
    argv = list(ESTIMATE)
    argv[argv.index(flag) + 1] = value
    return argv


def test_closest_name_or_none():
    assert closest("rign", ["ring", "binomial"]) == "ring"
    assert closest("zzz", ["ring", "binomial"]) is None
    assert did_you_mean("allreduc", ["allreduce", "allgather"]) == "; did you mean 'allreduce'?"
    assert did_you_mean("zzz", ["ring"]) == ""
    assert closest("nodez", ["node", "nodes", "kind"]) == "nodes"  # a mistyped letter
    assert closest("nodess", ["node", "nodes"]) == "nodes"
    assert edits("kitten", "sitting") == 3 and edits("", "abc") == 3


@pytest.mark.parametrize(("flag", "typo", "meant"), [
    ("-a", "rign", "ring"),
    ("-a", "nvls_tre", "nvls_tree"),
    ("-c", "allreduc", "allreduce"),
    ("-t", "dgx-h10", "dgx-h100"),
])
def test_a_misspelt_name_gets_a_suggestion(capsys, flag, typo, meant):
    err = error_of(replaced(flag, typo), capsys)
    assert f"did you mean '{meant}'?" in err


def test_a_misspelt_parameter_gets_a_suggestion(capsys):
    err = error_of([*ESTIMATE, "--param", "protocl=LL"], capsys)
    assert "takes no parameter 'protocl'" in err and "did you mean 'protocol'?" in err


def test_nothing_close_suggests_nothing(capsys):
    err = error_of(replaced("-a", "qqqqqq"), capsys)
    assert "choose one of" in err and "did you mean" not in err


def test_a_bad_set_key_is_blamed_on_the_command_line(capsys):
    err = error_of(["estimate", "-t", "h100-cluster", "--set", "nodez=2", *ESTIMATE[3:]],
                   capsys)
    assert "key 'nodez' (from --set on the command line" in err
    assert "did you mean 'nodes'?" in err
    assert ".yaml:" not in err  # no line of the topology file


def test_a_bad_set_value_is_blamed_on_the_command_line(capsys):
    err = error_of(["estimate", "-t", "h100-cluster", "--set", "node.nics.count=many",
                    *ESTIMATE[3:]], capsys)
    assert "key 'node.nics.count' (from --set on the command line" in err


def test_a_problem_in_the_file_itself_still_names_its_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("kind: switch\ngpus: 4\nlink: {latency: 1us, bandwidth: 1GB/s}\n"
                    "colour: blue\n")
    with pytest.raises(InputError) as caught:
        load_topology(path, {"gpus": 8}, "--set on the command line")
    assert caught.value.file == str(path) and caught.value.line == 4
    assert "--set" not in str(caught.value)


def test_the_python_set_argument_is_named_too():
    import collsim

    with pytest.raises(InputError, match=r"key 'nodez' \(from set=") as caught:
        collsim.estimate(find_topology("h100-cluster"), "allreduce", "ring", 8, "1MiB",
                         set={"nodez": 2})
    assert "did you mean 'nodes'?" in str(caught.value)
