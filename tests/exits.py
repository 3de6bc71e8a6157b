"""How a command-line test expects bad input to end: exit 2, one short paragraph, no
traceback."""

from __future__ import annotations

from collsim.cli import main


def fails_cleanly(capsys, *argv: object) -> str:
    """Run the command line; it must exit 2 with a short message and no traceback."""
    status = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.startswith("collsim: error: ") and "Traceback" not in err
    assert len(err) < 1000, err
    return err
