"""The `accelsim` command line. Each command is a thin shell over the Python API: it resolves
names, calls one function and prints a DataFrame or one JSON object. Bad input of any kind
(`AccelsimError`, or a command line click cannot parse) prints one line on stderr and exits 2,
never a traceback; an unexpected exception (a bug) prints one line too and exits 70
(`ACCELSIM_DEBUG=1` shows the traceback). `accelsim` alone prints the help.

One module per command: `describe`, `simulate`, `compare`, `sweep`, `report`, `listing`
(`accelsim list`); the group and shared helpers in `common`, the knob flags in `options`, the
human output of a run in `render`.
"""

from __future__ import annotations

import os

import click

from accelsim.cli.common import cli  # its commands are imported as they run (LAZY_COMMANDS)
from accelsim.errors import AccelsimError

INTERNAL_ERROR = 70  # EX_SOFTWARE: set ACCELSIM_DEBUG=1 for the traceback


def main(argv: list[str] | None = None) -> int:
    """Console entry point: run the CLI, turning user errors into one line and exit code 2."""
    try:
        cli.main(args=argv, prog_name="accelsim", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 1
    except click.UsageError as err:
        if type(err).__name__ == "NoArgsIsHelpError":  # a bare command: the help, as asked
            err.show()
            return err.exit_code
        where = err.ctx.command_path if err.ctx is not None else "accelsim"
        _error_line(f"{err.format_message()} (see '{where} --help')")
        return 2
    except click.ClickException as err:
        _error_line(err.format_message())
        return err.exit_code
    except AccelsimError as err:
        _error_line(str(err))
        return 2
    except (KeyboardInterrupt, BrokenPipeError):
        return 130
    except Exception as err:  # noqa: BLE001 - last resort: a bug, said in one line
        if os.environ.get("ACCELSIM_DEBUG"):
            raise
        _error_line(f"internal error (a bug: please report the command): "
                    f"{type(err).__name__}: {err}", "")
        return INTERNAL_ERROR
    return 0


def _error_line(message: str, kind: str = "error: ") -> None:
    """`message` as one line on stderr (a newline in a path or value is shown as \\n)."""
    one_line = message.replace("\r", "\\r").replace("\n", "\\n")
    click.echo(f"accelsim: {kind}{one_line}", err=True)
