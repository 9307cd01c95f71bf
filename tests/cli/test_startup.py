"""Start-up (issue 22): a command imports only what it uses. Each command runs in a fresh
interpreter, which reports the heavy top-level modules loaded when it ends; and the group's
help lists each command from its summary without importing it."""

from __future__ import annotations

import re
import subprocess
import sys

import click
import pytest

from tests.helpers.paths import ROOT

# Heavy libraries a command imports only when it needs them.
HEAVY = ("ml_dtypes", "pandas", "matplotlib", "simpy", "onnx", "dask", "distributed", "numpy",
         "tqdm")
_PROBE = """
import atexit, sys
heavy = set(sys.argv[1].split(","))
atexit.register(lambda: sys.__stderr__.write(
    "LOADED:" + ",".join(sorted({m.split(".")[0] for m in sys.modules} & heavy)) + "\\n"))
sys.argv[1:2] = []
from accelsim.cli import main
sys.exit(main(sys.argv[1:]))
"""


def loaded(*args: str) -> set[str]:
    """The modules of HEAVY left loaded by `accelsim ARGS`, run in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", _PROBE, ",".join(HEAVY), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = [x for x in proc.stderr.splitlines() if x.startswith("LOADED:")][-1]
    return set(filter(None, line.removeprefix("LOADED:").split(",")))


def test_help_imports_no_heavy_module():
    assert loaded("--help") == set()


def test_list_json_imports_no_kernels_simulation_or_plots():
    # NB: pandas and numpy still come in with the device classes that validate a profile.
    assert loaded("list", "--json") & {"ml_dtypes", "matplotlib", "simpy", "onnx", "dask",
                                        "tqdm"} == set()


def test_simulate_one_device_imports_no_kernels_simulation_or_plots():
    assert loaded("simulate", "resnet50", "--hw", "a100") & {
        "ml_dtypes", "matplotlib", "simpy", "onnx", "dask", "tqdm"} == set()


@pytest.mark.parametrize("limit", [20, 45, 60, 80, 1000])
def test_help_summaries_are_the_commands_own(limit):
    from accelsim.cli.common import LAZY_COMMANDS, cli

    ctx = click.Context(cli)
    for name in LAZY_COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
        summary = click.Command(name, help=LAZY_COMMANDS[name][1])
        assert summary.get_short_help_str(limit) == command.get_short_help_str(limit), name
    assert sorted(cli.commands) == sorted(LAZY_COMMANDS)


def test_every_command_module_is_in_the_table():
    from accelsim.cli.common import LAZY_COMMANDS

    modules = {f"accelsim.cli.{p.stem}" for p in (ROOT / "accelsim" / "cli").glob("*.py")
               if re.search(r"^@cli\.command", p.read_text(), re.M)}
    assert modules == {module for module, _ in LAZY_COMMANDS.values()}
