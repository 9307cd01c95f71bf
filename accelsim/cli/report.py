"""`accelsim report`: one self-contained HTML page of a simulation (figures embedded, no
server, no network): the answer, the bottleneck and what would relieve it (re-simulated),
the pipeline timeline, the stall, energy and memory breakdowns, the slowest layers."""

from __future__ import annotations

from typing import Any

import click

from accelsim.cli.common import cli
from accelsim.cli.helpgroups import FoldedCommand
from accelsim.cli.options import cli_knobs, knob_options
from accelsim.cli.simulate import HW_HELP


@cli.command(cls=FoldedCommand)
@click.argument("workload")
@click.option("--hw", "hardware", required=True, help=HW_HELP)
@knob_options
@click.option("--out", type=click.Path(dir_okay=False),
              help="HTML file to write (default: WORKLOAD-HW.html here).")
def report(workload: str, hardware: str, out: str | None, **kw: Any) -> None:
    """Write an HTML report of WORKLOAD on a system or device (--hw); print its path.

    Takes every knob `accelsim simulate` takes. What would relieve the bottleneck is found by
    simulating a few changes chosen by it (training what-ifs: a few steps each)."""
    from accelsim.report import report as write_report

    path = write_report(workload, hardware, out=out, **cli_knobs(kw))
    click.echo(str(path))
