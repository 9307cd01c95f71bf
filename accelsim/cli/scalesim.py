"""`accelsim scalesim`: SCALE-Sim's own command line (`python3 scalesim/scale.py -c CFG -t
TOPOLOGY -p OUTDIR -i conv|gemm`) on accelsim's systolic SRAM model: the three per-layer
reports SCALE-Sim writes, into OUTDIR/RUN_NAME/ as SCALE-Sim puts them (RUN_NAME: the .cfg's
[general] run_name).

    accelsim scalesim -c workloads/scalesim/array_ws_16x16.cfg \\
        -t workloads/scalesim/topology_conv.csv -p reports/_generated/scalesim-run

A CALC-mode .cfg (InterfaceBandwidth: CALC) is refused in one line: SCALE-Sim sizes each
prefetch's bandwidth from the demand as it runs (`memory/read_buffer_estimate_bw.py`), which
the analytical model does not reproduce (`devices/systolic/scalesim/report.py`).
"""

from __future__ import annotations

from pathlib import Path

import click

from accelsim.cli.common import cli


@cli.command()
@click.option("-c", "config", required=True, type=click.Path(dir_okay=False),
              metavar="CFG", help="SCALE-Sim .cfg (the array, its SRAMs and DRAM bandwidth).")
@click.option("-t", "topology", required=True, type=click.Path(dir_okay=False),
              metavar="TOPOLOGY", help="SCALE-Sim topology CSV (conv or GEMM form).")
@click.option("-p", "outdir", default=".", show_default=True, metavar="OUTDIR",
              type=click.Path(file_okay=False),
              help="Folder; the reports go into OUTDIR/RUN_NAME/ (RUN_NAME: the .cfg's "
              "[general] run_name), as SCALE-Sim writes them.")
@click.option("-i", "input_type", type=click.Choice(["conv", "gemm"]), default="conv",
              show_default=True, help="The topology's form, as SCALE-Sim's -i: it must match "
              "the file's header (GEMM form: Layer, M, N, K).")
def scalesim(config: str, topology: str, outdir: str, input_type: str) -> None:
    """Run a SCALE-Sim topology on a SCALE-Sim .cfg as SCALE-Sim's own command line does.

    Writes COMPUTE_REPORT.csv, BANDWIDTH_REPORT.csv and DETAILED_ACCESS_REPORT.csv (SCALE-Sim
    v3's columns and format, one row per layer) into OUTDIR/RUN_NAME/ and prints their paths.
    The same reports as `accelsim simulate TOPOLOGY --hw CFG --scalesim-report DIR`."""
    from accelsim.devices.systolic.scalesim.config import run_name
    from accelsim.devices.systolic.scalesim.report import write_scalesim_reports
    from accelsim.errors import AccelsimError
    from accelsim.profiles.hardware import resolve_hardware
    from accelsim.workload.importers.topology import read_graph, topology_form

    if not config.lower().endswith(".cfg"):
        raise AccelsimError(f"-c {config}: give a SCALE-Sim .cfg file")
    if not topology.lower().endswith(".csv"):
        raise AccelsimError(f"-t {topology}: give a SCALE-Sim topology .csv file")
    form = topology_form(Path(topology))
    if form != input_type:
        raise AccelsimError(f"-i {input_type}: {topology} is a topology in {form} form "
                            f"(give -i {form})")
    name = run_name(Path(config))
    _, profile = resolve_hardware(config)
    graph = read_graph(Path(topology))
    for path in write_scalesim_reports(Path(outdir) / name, graph, profile):
        click.echo(str(path))
