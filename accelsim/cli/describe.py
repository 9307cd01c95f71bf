"""`accelsim describe`: the per-layer table of a workload, optionally run for real."""

from __future__ import annotations

from typing import Any

import click

from accelsim.cli.common import cli, echo_json, records, resolve, workload_options
from accelsim.cli.options import SET_OPTION, model_inputs
from accelsim.errors import AccelsimError
from accelsim.results.render import fmt_si
from accelsim.workload.tables import layer_table, totals, unsupported_ops

# NB: --execute runs numpy kernels twice (fp32 and the format asked) at 3e9 to 3e10 FLOP/s on
# one core; these ceilings on the forward pass (resnet50 at batch 8 is 6.6e10 FLOPs moving
# 2.7e9 B, 2.4 s) keep a run under about a minute and its arrays in a few GB.
EXECUTE_MAX_FLOPS = 1e11
EXECUTE_MAX_BYTES = 4e9


@cli.command()
@click.argument("workload")
@workload_options
@click.option("--execute", is_flag=True, help="Run the numpy kernels forward once and report "
              "the output's relative error against fp32.")
@click.option("--time", "timed", is_flag=True, help="With --execute: time each layer's kernels "
              "here (measured_time_s), beside the prediction of --hw when given.")
@click.option("--hw", default=None, help="With --time: the device profile (name or TOML path) "
              "whose forward-pass estimate is shown beside the measurement.")
@click.option("--software", default=None,
              help="With --hw: the software stack (name or stack TOML path; default: the "
              "device class's).")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --time: forward passes; each layer's least time is kept.")
@click.option("--cpu-time", is_flag=True, help="With --time: the process's CPU time, not the "
              "wall clock (a shared host; one BLAS thread), as `calibrate --cpu-time`.")
@SET_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def describe(workload: str, batch: int | None, precision: str | None, seq_len: int | None,
             image_size: int | None, execute: bool, timed: bool, hw: str | None,
             software: str | None, repeat: int, cpu_time: bool, settings: tuple[str, ...],
             as_json: bool) -> None:
    """Per-layer table of a WORKLOAD (zoo model, scenario name or .toml file)."""
    if (timed or hw) and not execute:
        raise click.UsageError("--time and --hw measure a real run: add --execute")
    if hw and not timed:
        raise click.UsageError("--hw puts a prediction beside the measured times: add --time")
    if software and not hw:
        raise click.UsageError("--software names the stack of the --hw prediction: add --hw")
    sc = resolve(workload, batch, precision, seq_len, image_size,
                 inputs=model_inputs(settings))
    graph = sc.graph()
    layers = layer_table(graph, sc.batch_size, sc.precision)
    tot = totals(graph)
    out: dict[str, Any] = {
        "name": graph.name, "batch_size": sc.batch_size, "precision": sc.precision,
        "params": tot["params"], "flops_per_sample": tot["flops_per_sample"],
        "train_flops_per_sample": tot["train_flops_per_sample"],
        "flops": float(layers["flops"].sum()), "bytes": float(layers["bytes"].sum()),
        "unsupported_ops": unsupported_ops(graph),
    }
    if execute:
        from accelsim.kernels.execute import compare_to_fp32

        _check_executable(out["flops"], out["bytes"])

        num = compare_to_fp32(graph, sc.batch_size, sc.precision)
        out["numerics"] = {"precision": sc.precision,
                           "output_relative_error": num["output_relative_error"]}
        per_layer = num.get("layer_relative_error", {})
        layers = layers.assign(rel_error=[per_layer.get(n) for n in layers["name"]])
        if timed:
            from accelsim.calibrate.timing import measure_beside_prediction
            from accelsim.profiles.software import DEFAULT

            timing, per_op = measure_beside_prediction(graph, sc.batch_size, sc.precision, hw,
                                                       software or DEFAULT, repeat, cpu_time)
            out.update(timing)
            layers = layers.merge(per_op, on="name", how="left")
    if as_json:
        echo_json({**out, "layers": records(layers)})
        return
    shown = layers.assign(output_shape=layers["output_shape"].map(str),
                          flops=layers["flops"].map(fmt_si), bytes=layers["bytes"].map(fmt_si))
    from accelsim.results.textfit import frame_table, wrap_lines

    click.echo("\n".join(frame_table(shown)))
    click.echo("\n" + "\n".join(wrap_lines([
        f"{graph.name}: {len(graph.ops)} ops, {fmt_si(tot['params'])} params, "
        f"{fmt_si(tot['flops_per_sample'])}FLOP/sample forward, batch {sc.batch_size} "
        f"{sc.precision}: {fmt_si(out['flops'])}FLOP, {fmt_si(out['bytes'])}B moved"])))
    if execute:
        click.echo(f"output relative error vs fp32: {out['numerics']['output_relative_error']:.3e}")
    if timed:
        predicted = ("" if out["predicted_time_s"] is None else
                     f", predicted on {hw} {out['predicted_time_s'] * 1e3:.2f} ms "
                     f"({out['relative_error']:+.1%})")
        click.echo(f"forward measured here {out['measured_time_s'] * 1e3:.2f} ms (sum of the "
                   f"layers' kernel times){predicted}")
    if out["unsupported_ops"]:
        click.echo(f"unsupported ops (not costed): {', '.join(out['unsupported_ops'])}")


def _check_executable(flops: float, n_bytes: float) -> None:
    """Refuse --execute of a forward pass too large to run here in reasonable time and memory."""
    if flops > EXECUTE_MAX_FLOPS or n_bytes > EXECUTE_MAX_BYTES:
        raise AccelsimError(
            f"--execute: the forward pass is {flops:.3g} FLOPs moving {n_bytes:.3g} B, over the "
            f"limit of {EXECUTE_MAX_FLOPS:.0e} FLOPs and {EXECUTE_MAX_BYTES:.0e} B for running "
            "the kernels here; use a smaller batch or input, or drop --execute")
