"""`accelsim compare`: one workload on several devices or systems with the same knobs, as a
table (one row per hardware), and optionally as CSV, JSON, a bar figure and a roofline figure.

    accelsim compare resnet50 --hw a100,tpu-v3,edge-tpu --precision int8 --plot cmp.png
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click
import pandas as pd

from accelsim.cli.common import cli, echo_json
from accelsim.cli.helpgroups import FoldedCommand
from accelsim.cli.options import cli_knobs, knob_options
from accelsim.errors import AccelsimError
from accelsim.results.csvtext import csv_text
from accelsim.results.files import write_atomic

HW_HELP = ("Devices or systems separated by commas (e.g. a100,tpu-v3,alveo-u250,edge-tpu,"
           "xeon-8480), or .toml paths.")
# (header with unit, column, factor from SI) of the numeric table columns.
_NUMBERS = (
    ("throughput samples/s", "throughput_samples_per_s", 1.0),
    ("latency ms", "latency_s", 1e3),
    ("energy mJ/sample", "energy_j_per_sample", 1e3),
    ("perf/W samples/J", "samples_per_j", 1.0),
)
_MODE_NUMBERS = {
    "train": ("AU %", "accelerator_utilization", 100.0),
    "serve": ("p99 ms", "latency_p99_s", 1e3),
}


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _number(x: float) -> str:
    """Four significant digits, thousands grouped: 2,091 / 13.68 / 0.0158."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _precision_cell(row: dict[str, Any]) -> str:
    ran = str(row["precision"])
    if row["precision_requested"] != ran:
        return f"{ran} (asked {row['precision_requested']})"
    if not _missing(row["compute_precision"]) and row["compute_precision"] != ran:
        return f"{ran} (matmuls {row['compute_precision']})"
    return ran


def _memory_cell(row: dict[str, Any]) -> str:
    need = row["required_bytes"]
    if _missing(need):
        return ""
    cap = row["capacity_bytes"]
    have = "no DRAM" if _missing(cap) else f"{cap / 1e9:,.1f}"
    return f"{need / 1e9:,.2f} / {have}" + ("" if row["fits"] else " NO FIT")


def table_rows(frame: pd.DataFrame) -> tuple[list[str], list[list[str]], set[int]]:
    """(headers, cells, right-aligned column indices) of the terminal table."""
    rows = frame.to_dict(orient="records")
    modes = {r["mode"] for r in rows}
    numbers = list(_NUMBERS) + [_MODE_NUMBERS[m] for m in sorted(modes) if m in _MODE_NUMBERS]
    many = any(not _missing(r["devices"]) and r["devices"] > 1 for r in rows)
    headers = ["hardware", "precision", "software", "batch", *(["devices"] if many else []),
               *(n[0] for n in numbers), "memory GB need / have", "bottleneck"]
    cells = []
    for r in rows:
        cell = [r["hardware"], _precision_cell(r), "" if _missing(r["software"]) else r["software"],
                "" if _missing(r["batch_size"]) else f"{int(r['batch_size'])}"]
        if many:
            cell.append("" if _missing(r["devices"]) else f"{int(r['devices'])}")
        status = ("left out" if not _missing(r["error"])
                  else None if r["fits"] else "does not fit")
        for i, (_, col, factor) in enumerate(numbers):
            value = r.get(col)
            cell.append((status if i == 0 else "") if status or _missing(value)
                        else _number(value * factor))
        cell += [_memory_cell(r), "" if _missing(r["bottleneck"]) else str(r["bottleneck"])]
        cells.append(cell)
    right = set(range(3, 4 + many + len(numbers)))
    return headers, cells, right


def render_table(frame: pd.DataFrame) -> str:
    """The terminal table, then one line per note and per device left out."""
    from accelsim.results.textfit import text_table, wrap_lines

    headers, cells, right = table_rows(frame)
    out = text_table(headers, cells, right)
    notes = []
    for r in frame.to_dict(orient="records"):
        if not _missing(r["error"]):
            notes.append(f"  {r['hardware']}: left out: {r['error']}")
        notes += [f"  {r['hardware']}: {n}" for n in
                  ("" if _missing(r["notes"]) else r["notes"]).split("; ") if n]
    if notes:
        out += ["", "Notes:", *notes]
    return "\n".join(wrap_lines(out))


def json_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows as JSON-ready dicts: NaN becomes None, numpy scalars plain numbers."""
    def clean(v: Any) -> Any:
        v = v.item() if hasattr(v, "item") else v
        return None if isinstance(v, float) and not math.isfinite(v) else v

    return [{k: clean(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _check_figure_path(option: str, path: str | None) -> None:
    """Fail before simulating when a figure could not be written (extension, folder)."""
    from accelsim.plots.style import FORMATS

    if path is None:
        return
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise AccelsimError(f"{option} {path}: a figure is written as {', '.join(FORMATS)}, "
                            f"not '{p.suffix or 'no extension'}'")
    if not p.parent.is_dir():
        raise AccelsimError(f"{option} {path}: no such folder '{p.parent}'")


@cli.command(cls=FoldedCommand)
@click.argument("workload")
@click.option("--hw", "hardware", required=True, help=HW_HELP)
@knob_options
@click.option("--fallback/--no-fallback", default=True, show_default=True,
              help="Run a device that cannot run --precision at the closest format it runs "
              "(the row says so), or leave it out.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="Write the table as "
              "CSV (every column).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Write grouped "
              "bars of the metrics (.png, .svg or .pdf).")
@click.option("--roofline", "roofline_path", type=click.Path(dir_okay=False),
              help="Write every layer on every device's roofline (.png, .svg or .pdf).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as one JSON list.")
def compare(workload: str, hardware: str, fallback: bool, csv_path: str | None,
            plot_path: str | None, roofline_path: str | None, as_json: bool,
            **kw: Any) -> None:
    """Compare a WORKLOAD on several devices or systems (--hw a,b,c) with the same knobs.

    One row per hardware: throughput, latency, energy per sample, performance per watt,
    memory fit, bottleneck, and the precision and software each really used. A device that
    cannot run --precision runs the closest format it can, and its row says so (or, with
    --no-fallback, it is left out and the notes say why)."""
    from accelsim.explore.compare import compare_runs, roofline_inputs, rows_frame

    _check_figure_path("--plot", plot_path)
    _check_figure_path("--roofline", roofline_path)
    runs = compare_runs(workload, hardware, fallback=fallback, **cli_knobs(kw))
    frame = rows_frame(runs)
    if csv_path:
        write_atomic(csv_path, csv_text(frame))
    left_out = [r for r in frame.to_dict(orient="records") if not _missing(r["error"])]
    if len(left_out) == len(frame):
        first = left_out[0] if left_out else {"hardware": "-", "error": "no hardware given"}
        raise AccelsimError(f"every one of the {len(frame)} devices was left out; the first: "
                            f"{first['hardware']}: {first['error']}")
    if plot_path:
        from accelsim.plots.compare import compare_figure
        from accelsim.plots.style import save_figure

        save_figure(compare_figure(frame), plot_path)
    if roofline_path:
        from accelsim.plots.roofline import roofline_figure
        from accelsim.plots.style import save_figure

        layers, roofs, not_drawn = roofline_inputs(runs)
        if roofs.empty:
            raise AccelsimError("--roofline: no device ran the workload, so there is no "
                                "roofline to draw")
        first = frame.iloc[0]
        title = (f"{first['workload']} ({first['mode']}), batch {first['batch_size']}: each "
                 "kernel on each device's roofline")
        save_figure(roofline_figure(layers, roofs, title, not_drawn), roofline_path)
    if as_json:
        echo_json(json_rows(frame))
        return
    click.echo(render_table(frame))
