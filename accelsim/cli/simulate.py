"""`accelsim simulate`: a workload on a device or a whole system, for inference (one batch),
training (the storage-to-accelerator pipeline) or serving (requests through a batcher)."""

from __future__ import annotations

from typing import Any

import click

from accelsim.cli.common import cli, echo_json
from accelsim.cli.options import cli_knobs, knob_options
from accelsim.errors import AccelsimError
from accelsim.results.render import render
from accelsim.run import run_simulation
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
@click.option("--emulate-accelerators", "emulated", metavar="ACCELERATOR",
              help="MLPerf Storage: emulate this accelerator (a100, h100) as DLIO does, its "
              "measured compute time per batch and no model.")
@click.option("--max-accelerators", "max_accelerators", is_flag=True,
              help="MLPerf Storage: the most emulated accelerators the storage keeps at the AU "
              "threshold, and the storage throughput that takes.")
@click.option("--scalesim-report", "scalesim_dir", type=click.Path(file_okay=False),
              help="Write SCALE-Sim's COMPUTE_REPORT.csv, BANDWIDTH_REPORT.csv and "
              "DETAILED_ACCESS_REPORT.csv into this folder (--hw a SCALE-Sim .cfg).")
@click.option("--execute", "execute", is_flag=True, help="Infer: also run the workload's "
              "numpy kernels (one sample) at the device's numeric format; report each layer's "
              "output error vs fp32 and operand sparsity, and feed the zeros into energy (zero "
              "gating) and time (2:4 sparse weights on sparse tensor cores).")
@click.option("--prune-2-4", "prune_2_4", is_flag=True, help="With --execute: the device runs "
              "conv/linear weights magnitude-pruned to 2:4 (the fp32 reference stays dense): "
              "the error of pruning beside the sparse tensor cores' speed.")
def simulate(workload: str, hardware: str, layers: str, trace: str | None, as_json: bool,
             scalesim_dir: str | None, emulated: str | None, max_accelerators: bool,
             execute: bool = False, prune_2_4: bool = False, **kw: Any) -> None:
    """Time, energy and bottleneck of a WORKLOAD on a system or device (--hw).

    WORKLOAD is a zoo model, a built-in scenario or a scenario .toml file. A workload that
    does not fit in device memory is reported as such (exit 0), with the largest batch that
    fits."""
    top = parse_layers(layers)
    if emulated or max_accelerators:
        from accelsim.cli.storage_sizing import run_sizing

        run_sizing(workload, hardware, emulated, max_accelerators, cli_knobs(kw), as_json)
        return
    cfg = make_config(workload, hardware, **cli_knobs(kw))
    if execute or prune_2_4:
        from dataclasses import replace

        cfg = replace(cfg, execute=execute, prune_2_4=prune_2_4)
    res = run_simulation(cfg)
    if scalesim_dir:
        from pathlib import Path

        from accelsim.devices.systolic.scalesim.report import write_scalesim_reports
        from accelsim.profiles.hardware import resolve_hardware

        _, profile = resolve_hardware(cfg.hardware)
        write_scalesim_reports(Path(scalesim_dir), cfg.scenario.graph(), profile,
                               cfg.scenario.batch_size, cfg.dataflow)
    if trace:
        from accelsim.results.trace import write_chrome_trace

        write_chrome_trace(res.records, trace)
    if as_json:
        echo_json(res.record)
        return
    click.echo(render(res.record, top))
