"""The command line run in-process, as several test files drive it."""

from __future__ import annotations

import pytest

from accelsim.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `accelsim ARGS`."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The stderr of `accelsim ARGS`, which must be a usage error (exit 2) of one line."""
    code = main(list(args))
    _, err = capsys.readouterr()
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err
