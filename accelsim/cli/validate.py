"""`accelsim validate MEASUREMENTS.csv [--fit [--out DIR]]`: the model against your own
measurements (`accelsim.validation`)."""

from __future__ import annotations

from pathlib import Path

import click

from accelsim.cli.common import cli, echo_json
from accelsim.errors import AccelsimError


def _pct(x: float) -> str:
    return "n/a" if x != x else f"{x:.1%}"  # NaN: no rows


@cli.command()
@click.argument("measurements", type=click.Path(dir_okay=False))
@click.option("--fit", "do_fit", is_flag=True, help="Fit the GPU efficiency factors and the "
              "rows' software stacks to the rows; report the error on held-out rows (k-fold) "
              "and write calibrated stacks.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="calibrated",
              show_default=True, help="With --fit: folder for <stack>-calibrated.toml.")
@click.option("--folds", type=click.IntRange(2, 100), default=5, show_default=True,
              help="With --fit: k of the k-fold held-out error (k >= the row count: "
              "leave-one-out).")
@click.option("--by-device", is_flag=True, help="With --fit: hold out one device at a time "
              "(leave-one-device-out) instead of k-fold over rows.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def validate(measurements: str, do_fit: bool, out_dir: str, folds: int, by_device: bool,
             as_json: bool) -> None:
    """Predict each row of MEASUREMENTS (the calibration CSV schema plus the mapping columns
    sim_profile, sim_software, sim_model, sim_mode, sim_batch, sim_precision, sim_metric) and
    print predicted vs measured, the median and worst error, and the rows it could not
    express, with the reason. Example: workloads/validate-example.csv."""
    from accelsim.results.files import output_folder
    from accelsim.validation.measurements import read_measurements
    from accelsim.validation.run import (
        error_stats,
        fit_rows,
        predict_rows,
        summary,
        write_calibrated,
    )

    if do_fit:  # before the fit: "" is not Path("") = ".", and a bad folder fails at once
        output_folder(out_dir, "validate --out")
    rows, rejected = read_measurements(measurements)
    table, failed = predict_rows(rows)
    skipped = rejected + failed
    if not len(table):  # nothing to report: an error, as compare and sweep say it
        first = f"; the first: {skipped[0][0]}: {skipped[0][1]}" if skipped else ""
        raise AccelsimError(f"{measurements}: none of its {len(skipped)} rows could be "
                            f"predicted{first}")
    stats = error_stats(table["error"].to_numpy() if len(table) else [])
    record: dict = {"file": measurements, "predicted": table.to_dict(orient="records"),
                    "stats": stats, "not_expressed": [{"id": i, "reason": why}
                                                      for i, why in skipped]}
    lines = []
    if len(table):
        shown = table.assign(error=table["error"].map(lambda e: f"{e:+.1%}"))
        lines += [shown.to_string(index=False, float_format=lambda x: f"{x:.4g}"), ""]
    lines.append(f"{stats['rows']} rows predicted: median |error| "
                 f"{_pct(stats['median_abs_error'])}, worst {_pct(stats['worst_abs_error'])}")
    if skipped:
        lines.append(f"{len(skipped)} rows not expressed:")
        lines += [f"  {i}: {why}" for i, why in skipped]
    if do_fit:
        result = fit_rows(rows, folds, by_device)
        written = write_calibrated(result, Path(out_dir), Path(measurements).name)
        record["fit"] = {**summary(result), "written": [str(p) for p in written]}
        lines += _fit_lines(result, written, sorted({r.device for r in rows}))
    if as_json:
        echo_json(record)
        return
    click.echo("\n".join(lines))


def _fit_lines(result, written: list[Path], devices: list[str]) -> list[str]:  # noqa: ANN001
    held = result.held_out
    lines = ["", f"fit on {result.rows} GPU rows ({', '.join(result.stacks)}): in-sample median "
             f"|error| {_pct(result.in_sample['median_abs_error'])}, worst "
             f"{_pct(result.in_sample['worst_abs_error'])}"]
    how = ("one device at a time, each predicted by a fit on the others'" if result.by_device
           else f"{result.folds}-fold, row i in fold i mod {result.folds}, each fold fitted on "
           "the others")
    if result.folds >= 2:
        lines.append(f"held out ({how}): median |error| {_pct(held['median_abs_error'])}, "
                     f"worst {_pct(held['worst_abs_error'])}")
    else:
        lines.append("held out: nothing to hold out (one row, or one device with --by-device)")
    lines += [f"  {n} = {result.params[n]:.4g}" for n in result.free]
    lines += [f"  left out of the fit: {i}: {why}" for i, why in result.left_out]
    lines += [f"wrote {p} (use: --hw {' or '.join(devices) or 'PROFILE'} --software {p}; the "
              "GPU class factors are folded into its modifiers)" for p in written]
    return lines
