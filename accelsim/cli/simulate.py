"""`accelsim simulate`: a workload on a device or a whole system, for inference (one batch),
training (the storage-to-accelerator pipeline) or serving (requests through a batcher)."""

from __future__ import annotations

from typing import Any

import click

from accelsim.cli.common import cli, echo_json
from accelsim.cli.options import cli_knobs, knob_options
from accelsim.cli.render import render
from accelsim.errors import AccelsimError
from accelsim.sim.api import run_simulation
from accelsim.sim.knobs import make_config

HW_HELP = "A system (e.g. dgx-a100) or device profile (e.g. a100), or a .toml path."


def parse_layers(value: str) -> int | None:
    """--layers: a count of rows, or "all" (None)."""
    if value == "all":
        return None
    try:
        n = int(value)
    except ValueError:
        raise AccelsimError(f"--layers {value!r}: a number of rows or 'all'") from None
    if n < 0:
        raise AccelsimError(f"--layers {value!r}: a number of rows >= 0 or 'all'")
    return n


@cli.command()
@click.argument("workload")
@click.option("--hw", "hardware", required=True, help=HW_HELP)
@knob_options
@click.option("--layers", default="10", show_default=True,
              help="Layer rows to print, slowest first: a number, or 'all' (graph order).")
@click.option("--trace", type=click.Path(dir_okay=False), help="Write a Chrome/Perfetto trace "
              "of the events (infer: the layers on the device).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def simulate(workload: str, hardware: str, layers: str, trace: str | None, as_json: bool,
             **kw: Any) -> None:
    """Time, energy and bottleneck of a WORKLOAD on a system or device (--hw).

    WORKLOAD is a zoo model, a built-in scenario or a scenario .toml file. A workload that
    does not fit in device memory is reported as such (exit 0), with the largest batch that
    fits."""
    top = parse_layers(layers)
    res = run_simulation(make_config(workload, hardware, **cli_knobs(kw)))
    if trace:
        from accelsim.results.trace import write_chrome_trace

        write_chrome_trace(res.records, trace)
    if as_json:
        echo_json(res.record)
        return
    click.echo(render(res.record, top))
