"""`accelsim sweep`: the cartesian grid of any knobs, one row per point, printed as a table
(or JSON), written as CSV and plotted; in N processes or on a Dask cluster; resumable."""

from __future__ import annotations

import math
import re
from typing import Any

import click
import pandas as pd

from accelsim.cli.common import cli, echo_json
from accelsim.cli.helpgroups import GroupedCommand
from accelsim.cli.options import INPUT_KNOBS, flag_name
from accelsim.cli.simulate import HW_HELP
from accelsim.errors import AccelsimError
from accelsim.explore.grid import expand_axis
from accelsim.sim.knobs import KNOBS
from accelsim.workload.scenario import resolve_workload

_VALUES = "V[,V...]"
# Result columns shown in the terminal: (column, header, format of the scaled value, scale).
_SHOWN = (
    ("throughput_samples_per_s", "samples/s", "{:,.1f}", 1.0),
    ("latency_s", "latency ms", "{:,.3f}", 1e3),
    ("energy_j_per_sample", "mJ/sample", "{:,.3f}", 1e3),
    ("accelerator_utilization", "AU", "{:.0%}", 1.0),
    ("latency_p99_s", "p99 ms", "{:,.3f}", 1e3),
)
_ERROR_WIDTH = 70


def _choices(name: str, kind: type, help_text: str) -> str:
    """' Values: a, b, c.' for a knob with a fixed set of values (the option is plain text, a
    value or a comma list, so click does not list them itself), unless its help already
    names every one."""
    from accelsim.cli.options import choice_list

    values = choice_list(name, kind)
    named = set(re.findall(r"[\w+-]+(?:\.[\w+-]+)*", help_text))
    return f" Values: {', '.join(values)}." if values and not set(values) <= named else ""


def _knob_flags(fn: Any) -> Any:
    """One string option per knob (a value or a comma list; a list is an axis)."""
    opts = [click.option(flag_name(k.name), k.name, metavar=_VALUES, default=None,
                         help=f"{k.help[:1].upper()}{k.help[1:]}."
                         f"{_choices(k.name, k.kind, k.help)}")
            for k in KNOBS.values()]
    opts += [click.option(flag_name(n), n, metavar=_VALUES, default=None,
                          help=f"Model input: {n.replace('_', ' ')}.") for n in INPUT_KNOBS]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


@cli.command(cls=GroupedCommand)
@click.argument("workload")
@click.option("--hw", "hardware", required=True, metavar="P[,P...]",
              help=HW_HELP + " A comma list is an axis.")
@_knob_flags
@click.option("--set", "settings", multiple=True, metavar="KNOB=V[,V...]",
              help="Any knob or model input (repeatable), e.g. --set prep_workers=2,4,8.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="Write the table as CSV.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False),
              help="Write the figures (.png, .svg or .pdf).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object, not a table.")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Run points in this many processes.")
@click.option("--scheduler", metavar="ADDRESS",
              help="Run points on a Dask cluster, e.g. tcp://host:8786.")
@click.option("--point-timeout", "point_timeout_s", type=click.FloatRange(0, min_open=True),
              metavar="SECONDS", default=None,
              help="With --scheduler: the seconds a point is given (default 300) before its "
                   "chunk is cancelled and run once more; late again, its points fail.")
@click.option("--resume", "resume_path", type=click.Path(dir_okay=False),
              help="SQLite file storing each finished point; a rerun skips them.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.option("--fallback/--no-fallback", default=True, show_default=True,
              help="A point on a device that lacks the precision asked for runs the closest "
                   "one, as compare does, and its notes say so (--no-fallback: it fails).")
def sweep(workload: str, hardware: str, settings: tuple[str, ...], csv_path: str | None,
          plot_path: str | None, as_json: bool, workers: int, scheduler: str | None,
          point_timeout_s: float | None, resume_path: str | None, quiet: bool, fallback: bool,
          **flags: str | None) -> None:
    """Simulate WORKLOAD at every point of the grid of the knobs given.

    Every knob flag takes one value or a comma list, and every list is an axis: --hw
    a100,h100 --batch 1,2,4,...,1024 --precision bf16,fp16 is 2 x 11 x 2 points. "..."
    continues a run up to the last value: values with one difference set a step (8,16,...,64),
    others one ratio (1,2,4,...,1024). A point that fails (a knob of another mode; a format
    the device lacks, with --no-fallback) has its error in its row; the others run."""
    from accelsim.explore.run import sweep as run_sweep

    model = resolve_workload(workload).model
    knobs = _axes(flags, settings, model)
    df = run_sweep(workload, hardware, workers=workers, scheduler=scheduler,
                   resume=resume_path, progress=False if quiet else None, fallback=fallback,
                   point_timeout_s=point_timeout_s, **knobs)
    failed = int(df["error"].notna().sum())
    damaged = df.attrs.get("points_damaged") or {}
    if damaged:
        key, why = next(iter(damaged.items()))
        click.echo(f"accelsim: {len(damaged)} stored points in {resume_path} were damaged and "
                   f"were run again (the first: {why})", err=True)
    if csv_path:
        from accelsim.results.csvtext import csv_text
        from accelsim.results.files import write_atomic

        write_atomic(csv_path, csv_text(df))
    if failed == len(df):
        raise AccelsimError(f"all {len(df)} points failed; the first: {df['error'].iloc[0]}")
    if plot_path:
        from accelsim.plots.sweep import plot_sweep

        plot_sweep(df, plot_path)
    if as_json:
        echo_json({"workload": workload, "swept": df.attrs["swept"], "points": _json_rows(df)})
    else:
        click.echo(table(df))
    if failed:
        click.echo(f"accelsim: {failed} of {len(df)} points failed (see the error column)",
                   err=True)
    unfinished = df.attrs.get("points_unfinished", 0)
    if unfinished:
        click.echo(f"accelsim: {unfinished} of them did not finish on the Dask cluster (timed "
                   "out, or its workers were lost); they are not stored: rerun with the same "
                   "--resume to run only them", err=True)
    fell_back = int(df["notes"].str.contains(r"^ran \S+: \S+ cannot run ", na=False).sum())
    if fell_back:
        click.echo(f"accelsim: {fell_back} of {len(df)} points ran the closest precision the "
                   "device has (see the notes and compute_precision columns; --no-fallback "
                   "fails them)", err=True)


def _axes(flags: dict[str, str | None], settings: tuple[str, ...],
          model: str) -> dict[str, Any]:
    """Knob name -> list of values, from the flags and --set, in that order."""
    given = {name: text for name, text in flags.items() if text is not None}
    for item in settings:
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name or not text.strip():
            raise AccelsimError(f"--set {item!r}: write KNOB=VALUE or KNOB=V1,V2,...")
        if name in given:
            raise AccelsimError(f"knob '{name}' is given twice (a flag or --set): give it once")
        given[name] = text
    return {name: expand_axis(name, text, model) for name, text in given.items()}


def table(df: pd.DataFrame) -> str:
    """The terminal table: the swept knobs, the headline figures, fit, bottleneck, error."""
    swept = [c for c in df.attrs.get("swept", ["hardware"]) if c in df]
    out = df[swept].copy()
    for column, header, fmt, factor in _SHOWN:
        if df[column].notna().any():
            out[header] = [_fmt(v, fmt, factor) for v in df[column]]
    out["fits"] = ["" if f is None or f != f else ("yes" if f else "NO") for f in df["fits"]]
    out["bottleneck"] = df["bottleneck"].fillna("")
    if df["error"].notna().any():
        out["error"] = [_short(e) for e in df["error"]]
    return out.to_string(index=False)


def _fmt(value: Any, fmt: str, factor: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(value * factor)


def _short(error: Any) -> str:
    if not isinstance(error, str):
        return ""
    return error if len(error) <= _ERROR_WIDTH else error[:_ERROR_WIDTH - 3] + "..."


def _json_rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts: NaN (a missing figure) becomes null."""
    return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
            for row in df.to_dict(orient="records")]
