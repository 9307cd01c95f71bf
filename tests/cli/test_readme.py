"""Every command of the README runs verbatim from the repository root (issue 23 item 4): each
`accelsim ...` line of its bash blocks through the command line, exit code 0.

Skipped, each with its reason: the virtual-environment and `pip install` steps (the suite
already runs inside an installed checkout; the main job after `&&` is run), `python -m pytest`
(this suite), `accelsim calibrate` (about 1.5 min of measurement; the commands that read its
files run on the calibration the repository ships, benchmarks/results/calibrate_host/), and
the Dask line when no scheduler answers at its address.
"""

from __future__ import annotations

import re
import shlex
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from accelsim.cli import cli

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_CALIBRATION = "benchmarks/results/calibrate_host/"


def readme_commands() -> list[str]:
    """The `accelsim` command lines of the README's bash blocks (continuations joined,
    comments dropped; after a chain's last `&&`)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if not line or line.startswith("#"):
                continue
            line = line.split("&&")[-1].strip()
            if line.startswith("accelsim"):
                out.append(line)
    return out


def _scheduler_up(address: str) -> bool:
    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


COMMANDS = readme_commands()


def test_the_readme_has_commands():
    assert len(COMMANDS) >= 40
    assert COMMANDS[0].startswith("accelsim simulate resnet50-train --hw dgx-a100")


@pytest.mark.slow
@pytest.mark.parametrize("line", COMMANDS, ids=[c[:60] for c in COMMANDS])
def test_readme_command_runs(line, monkeypatch):
    args = shlex.split(line)[1:]
    if args[0] == "calibrate":
        pytest.skip("calibrate measures this host for ~1.5 min; its readers use the shipped "
                    "calibration")
    if "--scheduler" in args and not _scheduler_up(args[args.index("--scheduler") + 1]):
        pytest.skip("no Dask scheduler at the README's address")
    args = [a.replace("calib/", SHIPPED_CALIBRATION) if a.startswith("calib/") else a
            for a in args]
    for a in args:  # the README writes only under reports/_generated/
        assert not a.endswith((".png", ".csv", ".html", ".json", ".sqlite")) or (
            a.startswith(("reports/_generated/", "tests/fixtures/", "workloads/",
                          SHIPPED_CALIBRATION)))
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, f"{line}\n{result.output[-2000:]}"
