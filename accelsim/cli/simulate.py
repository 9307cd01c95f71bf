"""`accelsim simulate`: a workload on a device or a whole system, for inference (one batch),
training (the storage-to-accelerator pipeline) or serving (requests through a batcher)."""

from __future__ import annotations

from typing import Any

import click

from accelsim.cli.common import cli, echo_json, fmt_si, resolve, workload_options
from accelsim.sim.api import SimulationConfig, run_simulation


def _pipeline_options(fn: Any) -> Any:
    opts = [
        click.option("--devices", type=int, help="Accelerators to use (default: all)."),
        click.option("--dataset", help="Dataset profile (default: scenario's, else system's)."),
        click.option("--storage", help="Storage profile (default: system's)."),
        click.option("--io-threads", type=int, help="Reader threads per accelerator."),
        click.option("--prep-workers", type=int, help="CPU preparation workers per accelerator."),
        click.option("--prefetch", "prefetch_batches", type=int,
                     help="Batches buffered between preparation and compute (0: no overlap)."),
        click.option("--gpudirect/--no-gpudirect", default=None,
                     help="GPUDirect Storage: storage straight into device memory."),
        click.option("--pageable", is_flag=True, help="Pageable (not pinned) host memory."),
        click.option("--allreduce", type=click.Choice(["ring", "tree"]), default="ring",
                     show_default=True, help="Gradient all-reduce algorithm."),
        click.option("--no-overlap", is_flag=True, help="Do not overlap the all-reduce with "
                     "the backward pass."),
        click.option("--steps", type=int, help="Training steps (default: one full epoch)."),
        click.option("--epochs", type=int, help="Whole epochs to simulate."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


SERVE_KNOBS = ("rate_per_s", "concurrency", "max_batch", "requests")


def _serve_options(fn: Any) -> Any:
    opts = [
        click.option("--rate", "rate_per_s", type=float, help="Poisson arrivals per second."),
        click.option("--concurrency", type=int, help="Closed-loop clients (instead of --rate)."),
        click.option("--max-batch", type=int, help="Dynamic batcher: largest batch."),
        click.option("--max-wait-ms", type=float, default=0.0, show_default=True,
                     help="Dynamic batcher: longest wait for a batch to fill."),
        click.option("--requests", type=int, default=10_000, show_default=True,
                     help="Requests to serve."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


@cli.command()
@click.argument("workload")
@click.option("--hw", "hardware", required=True,
              help="A system (e.g. dgx-a100) or device profile (e.g. a100), or a .toml path.")
@click.option("--mode", type=click.Choice(["infer", "train", "serve"]),
              help="Default: the scenario's (infer for a bare model).")
@workload_options
@click.option("--software", type=click.Choice(["eager", "compiled"]), default="eager",
              show_default=True, help="Framework: eager (an op per kernel) or compiled (fused).")
@click.option("--dataflow", type=click.Choice(["ws", "os", "is"]),
              help="Systolic arrays: weight, output or input stationary (default: profile's).")
@_pipeline_options
@_serve_options
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("--trace", type=click.Path(dir_okay=False), help="Write a Chrome/Perfetto trace.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def simulate(workload: str, hardware: str, mode: str | None, batch: int | None,
             precision: str | None, seq_len: int | None, image_size: int | None,
             trace: str | None, as_json: bool, pageable: bool, no_overlap: bool,
             max_wait_ms: float, **knobs: Any) -> None:
    """Time, energy and bottleneck of a WORKLOAD on a system or device (--hw)."""
    scenario_mode = mode if mode in ("infer", "train") else None
    sc = resolve(workload, batch, precision, seq_len, image_size, scenario_mode)
    given = {k: v for k, v in knobs.items() if v is not None}
    common = {k: given.pop(k) for k in ("software", "dataflow", "seed", "devices") if k in given}
    serve = {k: given.pop(k) for k in SERVE_KNOBS if k in given}
    serve["max_wait_s"] = max_wait_ms / 1e3
    train = {**given, "pinned_memory": not pageable, "overlap_allreduce": not no_overlap}
    cfg = SimulationConfig(sc, hardware, mode=mode, train=train, serve=serve, **common)
    res = run_simulation(cfg)
    if trace:
        from accelsim.results.trace import write_chrome_trace

        write_chrome_trace(res.records, trace)
    if as_json:
        echo_json(res.record)
        return
    _print_human(res.record)


def _print_human(r: dict[str, Any]) -> None:
    w, hw = r["workload"], r["hardware"]
    if w["mode"] == "infer":
        import pandas as pd

        layers = pd.DataFrame(r["layers"])
        shown = layers.assign(flops=layers["flops"].map(fmt_si), bytes=layers["bytes"].map(fmt_si))
        click.echo(shown.to_string(index=False, float_format=lambda x: f"{x:.3e}"))
    mem = r["memory"]
    cap = "unknown" if mem["capacity_bytes"] is None else fmt_si(mem["capacity_bytes"]) + "B"
    unit = {"infer": "batch", "train": "step", "serve": "mean request"}[w["mode"]]
    click.echo(
        f"\n{w['name']} {w['mode']} batch {w['batch_size']} {w['precision']} on {hw['name']} "
        f"({hw['class']}, {hw['software']}) in {hw['system']}:\n"
        f"  {unit} time {r['latency_s'] * 1e3:.3f} ms, "
        f"{r['throughput_samples_per_s']:,.1f} samples/s, "
        f"{r['energy_j_per_sample'] * 1e3:.3f} mJ/sample, {r['average_power_w']:.0f} W average\n"
        f"  bottleneck: {r['bottleneck']}; device memory {fmt_si(mem['required_bytes'])}B of "
        f"{cap} ({'fits' if mem['fits'] else 'DOES NOT FIT'})")
    if w["mode"] == "train":
        stalls = ", ".join(f"{k} {v['fraction']:.1%}" for k, v in r["stalls"].items())
        util = ", ".join(f"{k} {v:.0%}" for k, v in r["utilization"].items())
        click.echo(
            f"  {r['devices']} devices, {r['steps']} steps, {r['samples']:,} samples of "
            f"{r['dataset']} from {r['storage']}: run {r['run_time_s']:.2f} s\n"
            f"  accelerator utilization (AU) {r['accelerator_utilization']:.1%} "
            f"({'meets' if r['meets_au_target'] else 'misses'} {r['au_target']:.0%}); "
            f"stalls: {stalls}\n  utilization: {util}\n"
            f"  all-reduce {r['allreduce_time_s'] * 1e3:.2f} ms over {r['comm_link']}, "
            f"communication/computation {r['comm_to_compute_ratio']:.2f}")
    if w["mode"] == "serve":
        click.echo(f"  latency p50 {r['latency_p50_s'] * 1e3:.2f} ms, p95 "
                   f"{r['latency_p95_s'] * 1e3:.2f} ms, p99 {r['latency_p99_s'] * 1e3:.2f} ms; "
                   f"mean batch {r['batch_size_mean']:.1f}; offered load "
                   f"{r['offered_load']:.2f}")
