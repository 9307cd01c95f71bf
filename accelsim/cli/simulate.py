"""`accelsim simulate`: a workload on a device or a whole system, for inference (one batch),
training (the storage-to-accelerator pipeline) or serving (requests through a batcher)."""

from __future__ import annotations

from typing import Any

import click

from accelsim.cli.common import cli, echo_json
from accelsim.cli.helpgroups import GroupedCommand
from accelsim.cli.options import cli_knobs, knob_options
from accelsim.errors import AccelsimError

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


@cli.command(cls=GroupedCommand)
@click.argument("workload")
@click.option("--hw", "hardware", help=HW_HELP + " Required unless --storage-system.")
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
@click.option("--storage-system", "storage_system", metavar="NAME|FILE",
              help="A storage system described from its parts (hw_profiles/storage_systems/): "
              "with --emulate-accelerators, MLPerf Storage on it and its client hosts; with "
              "--hw SYSTEM and a training workload, one node's share of it.")
@click.option("--clients", "clients", type=int, metavar="N",
              help="With --storage-system: client hosts reading it (default: the file's; "
              "training: --nodes).")
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
@click.option("--dlio-summary", "dlio_summary", type=click.Path(dir_okay=False),
              help="WORKLOAD a DLIO workload .yaml: also write DLIO's summary.json (AU, "
              "samples/s, MB/s in DLIO's keys) to this file.")
def simulate(workload: str, hardware: str | None, layers: str, trace: str | None,
             as_json: bool, scalesim_dir: str | None, emulated: str | None,
             max_accelerators: bool, storage_system: str | None = None,
             clients: int | None = None, execute: bool = False, prune_2_4: bool = False,
             dlio_summary: str | None = None, **kw: Any) -> None:
    """Time, energy and bottleneck of a WORKLOAD on a system or device (--hw).

    WORKLOAD is a zoo model, a built-in scenario or a scenario .toml file, or a DLIO workload
    .yaml (MLPerf Storage's emulation of it). A workload that does not fit in device memory
    is reported as such (exit 0), with the largest batch that fits."""
    from accelsim.results.render import render
    from accelsim.run import run_simulation
    from accelsim.sim.knobs import make_config

    top = parse_layers(layers)
    from accelsim.profiles.dlio import is_dlio_file

    if is_dlio_file(workload):
        from accelsim.cli.dlio import run_dlio

        if emulated or max_accelerators or storage_system or clients is not None:
            raise AccelsimError("a DLIO .yaml is its own emulation: drop "
                                "--emulate-accelerators, --max-accelerators, --storage-system "
                                "and --clients")
        if hardware is None:
            raise AccelsimError("--hw is required: the system whose storage DLIO reads")
        run_dlio(workload, hardware, cli_knobs(kw), dlio_summary, as_json)
        return
    if dlio_summary is not None:
        raise AccelsimError("--dlio-summary needs a DLIO workload .yaml as WORKLOAD")
    if storage_system is not None and (emulated or max_accelerators):
        from accelsim.cli.storage_system import run_system_emulation

        if hardware is not None:
            raise AccelsimError("--storage-system with --emulate-accelerators names the "
                                "client hosts too: drop --hw")
        run_system_emulation(workload, storage_system, clients, emulated, max_accelerators,
                             cli_knobs(kw), as_json)
        return
    if clients is not None and storage_system is None:
        raise AccelsimError("--clients needs --storage-system")
    if hardware is None:
        raise AccelsimError("--hw is required (a system, a device or a .toml path), or "
                            "--storage-system with --emulate-accelerators")
    if emulated or max_accelerators:
        from accelsim.cli.storage_sizing import run_sizing

        run_sizing(workload, hardware, emulated, max_accelerators, cli_knobs(kw), as_json)
        return
    knobs = cli_knobs(kw)
    cfg = make_config(workload, hardware, **knobs)
    storage_note = None
    if storage_system is not None:
        from accelsim.cli.storage_system import train_on_storage_system

        cfg, storage_note = train_on_storage_system(cfg, storage_system, clients, knobs)
    if execute or prune_2_4:
        from dataclasses import replace

        cfg = replace(cfg, execute=execute, prune_2_4=prune_2_4)
    res = run_simulation(cfg)
    if storage_note:
        res.record["notes"] = [*res.record["notes"], storage_note]
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
