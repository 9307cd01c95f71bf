"""The `accelsim` command line. Each command is a thin shell over the Python API: it resolves
names, calls one function and prints a DataFrame or one JSON object. Bad input of any kind
(`AccelsimError`) prints one line on stderr and exits 2, never a traceback."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
import pandas as pd

from accelsim.errors import AccelsimError
from accelsim.kernels.formats import FORMATS
from accelsim.workload.scenario import Scenario, resolve_workload
from accelsim.workload.tables import layer_table, totals, unsupported_ops

PRECISIONS = click.Choice(sorted(FORMATS) + ["fp8"], case_sensitive=False)


def _echo_json(obj: dict[str, Any]) -> None:
    click.echo(json.dumps(obj, indent=2, default=_json_default))


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: (list(v) if isinstance(v, tuple) else v) for k, v in row.items()}
            for row in df.to_dict(orient="records")]


def _fmt_si(x: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.2f}{unit}"
    return f"{x:.0f}"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="accelsim")
def cli() -> None:
    """accelsim: simulate deep-learning workloads on hardware accelerators."""


@cli.command()
@click.argument("workload")
@click.option("--batch", type=click.IntRange(min=1), help="Batch size (default: scenario's).")
@click.option("--precision", type=PRECISIONS, help="Numeric format (default: scenario's).")
@click.option("--seq-len", type=click.IntRange(min=1), help="Sequence length (sequence models).")
@click.option("--image-size", type=click.IntRange(min=1), help="Image side (image models).")
@click.option("--execute", is_flag=True, help="Run the numpy kernels forward once and report "
              "the output's relative error against fp32.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def describe(workload: str, batch: int | None, precision: str | None, seq_len: int | None,
             image_size: int | None, execute: bool, as_json: bool) -> None:
    """Per-layer table of a WORKLOAD (zoo model, scenario name or .toml file)."""
    sc = _resolve(workload, batch, precision, seq_len, image_size)
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

        num = compare_to_fp32(graph, sc.batch_size, sc.precision)
        out["numerics"] = {"precision": sc.precision,
                           "output_relative_error": num["output_relative_error"]}
        per_layer = num.get("layer_relative_error", {})
        layers = layers.assign(rel_error=[per_layer.get(n) for n in layers["name"]])
    if as_json:
        _echo_json({**out, "layers": _records(layers)})
        return
    shown = layers.assign(output_shape=layers["output_shape"].map(str),
                          flops=layers["flops"].map(_fmt_si), bytes=layers["bytes"].map(_fmt_si))
    click.echo(shown.to_string(index=False))
    click.echo(f"\n{graph.name}: {len(graph.ops)} ops, {_fmt_si(tot['params'])} params, "
               f"{_fmt_si(tot['flops_per_sample'])}FLOP/sample forward, batch {sc.batch_size} "
               f"{sc.precision}: {_fmt_si(out['flops'])}FLOP, {_fmt_si(out['bytes'])}B moved")
    if execute:
        click.echo(f"output relative error vs fp32: {out['numerics']['output_relative_error']:.3e}")
    if out["unsupported_ops"]:
        click.echo(f"unsupported ops (not costed): {', '.join(out['unsupported_ops'])}")


def _resolve(workload: str, batch: int | None, precision: str | None, seq_len: int | None,
             image_size: int | None, mode: str | None = None) -> Scenario:
    knobs = {k: v for k, v in (("seq_len", seq_len), ("image_size", image_size)) if v}
    return resolve_workload(workload).with_overrides(batch_size=batch, precision=precision,
                                                     mode=mode, input=knobs)


@cli.command()
@click.argument("workload")
@click.option("--hw", "hardware", required=True,
              help="Device profile: a built-in name (see `accelsim list`) or a .toml path.")
@click.option("--batch", type=click.IntRange(min=1), help="Batch size (default: scenario's).")
@click.option("--mode", type=click.Choice(["infer", "train"]), help="Default: scenario's.")
@click.option("--precision", type=PRECISIONS, help="Numeric format (default: scenario's).")
@click.option("--software", type=click.Choice(["eager", "compiled"]), default="eager",
              show_default=True, help="Framework: eager (an op per kernel) or compiled (fused).")
@click.option("--dataflow", type=click.Choice(["ws", "os", "is"]),
              help="Systolic arrays: weight, output or input stationary (default: profile's).")
@click.option("--seq-len", type=click.IntRange(min=1), help="Sequence length (sequence models).")
@click.option("--image-size", type=click.IntRange(min=1), help="Image side (image models).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def simulate(workload: str, hardware: str, batch: int | None, mode: str | None,
             precision: str | None, software: str, dataflow: str | None, seq_len: int | None,
             image_size: int | None, as_json: bool) -> None:
    """Time, energy and bottleneck of a WORKLOAD on a device (--hw)."""
    from accelsim.devices.estimate import estimate, summary
    from accelsim.devices.profile import load_profile, with_dataflow

    sc = _resolve(workload, batch, precision, seq_len, image_size, mode)
    graph = sc.graph()
    profile = load_profile(hardware)
    if dataflow:
        profile = with_dataflow(profile, dataflow)
    est = estimate(graph, profile, sc.batch_size, sc.precision, sc.mode, software, sc.optimizer)
    out = summary(est, graph)
    if as_json:
        _echo_json(out)
        return
    cols = ["name", "op", "phase", "flops", "bytes", "time_s", "energy_j", "bound"]
    shown = est.layers[cols].assign(flops=est.layers["flops"].map(_fmt_si),
                                    bytes=est.layers["bytes"].map(_fmt_si))
    click.echo(shown.to_string(index=False, float_format=lambda x: f"{x:.3e}"))
    mem = out["memory"]
    cap = "unknown" if mem["capacity_bytes"] is None else _fmt_si(mem["capacity_bytes"]) + "B"
    click.echo(
        f"\n{graph.name} {sc.mode} batch {sc.batch_size} {sc.precision} on {est.device} "
        f"({est.device_class}, {software}):\n"
        f"  {'step' if sc.mode == 'train' else 'batch'} time {est.step_time_s * 1e3:.3f} ms, "
        f"{est.throughput_samples_per_s:,.1f} samples/s, "
        f"{est.energy_j_per_sample * 1e3:.3f} mJ/sample, {est.average_power_w:.0f} W average\n"
        f"  bottleneck: {est.bottleneck}; memory {_fmt_si(mem['required_bytes'])}B of {cap}"
        f" ({'fits' if mem['fits'] else 'DOES NOT FIT'})")


@cli.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def list_cmd(as_json: bool) -> None:
    """Built-in hardware profiles, scenarios and zoo models."""
    from accelsim.devices.profile import list_profiles
    from accelsim.workload.scenario import scenario_names
    from accelsim.workload.zoo import model_names

    rows = [profile_row(p) for p in list_profiles()]
    if as_json:
        _echo_json({"profiles": rows, "workloads": scenario_names() + model_names(),
                    "scenarios": scenario_names(), "models": model_names()})
        return
    click.echo(pd.DataFrame(rows).fillna("").to_string(index=False))
    click.echo(f"\nscenarios: {', '.join(scenario_names())}")
    click.echo(f"models: {', '.join(model_names())}")


def profile_row(p: Any) -> dict[str, Any]:
    """Key figures of a device profile, for `accelsim list`."""
    peaks = p.compute.matrix_peak_flops_per_s or p.compute.vector_peak_flops_per_s
    best = max(peaks.items(), key=lambda kv: kv[1]) if peaks else None
    mem = p.offchip_memory
    return {
        "name": p.name, "class": p.device_class, "display_name": p.display_name,
        "peak_tflops": round(best[1] / 1e12, 1) if best else None,
        "peak_precision": best[0] if best else None,
        "memory_gb": round(mem.capacity_bytes / 1e9, 1) if mem and mem.capacity_bytes else None,
        "memory_bandwidth_gb_s": round(mem.bandwidth_bytes_per_s / 1e9, 1) if mem else None,
        "tdp_w": p.power.tdp_w,
    }


def main(argv: list[str] | None = None) -> int:
    """Console entry point: run the CLI, turning user errors into one line and exit code 2."""
    try:
        cli.main(args=argv, prog_name="accelsim", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 1
    except click.ClickException as err:
        err.show()
        return err.exit_code
    except AccelsimError as err:
        click.echo(f"accelsim: error: {err}", err=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
