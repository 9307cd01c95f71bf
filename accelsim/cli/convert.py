"""`accelsim convert WORKLOAD --hw SYSTEM --to DATASET`: the one-time packing of a training
run's small-file dataset into record shards, its cost on the system and the epochs it pays
back in (`accelsim.explore.convert`)."""

from __future__ import annotations

from typing import Any

import click

from accelsim.cli.common import cli, echo_json
from accelsim.cli.options import cli_knobs, knob_options
from accelsim.errors import AccelsimError


@cli.command("convert")
@click.argument("workload")
@click.option("--hw", "hardware", required=True, help="The system whose host and storage "
              "convert (and train on) the dataset.")
@click.option("--to", "target", required=True, metavar="DATASET",
              help="The record-shard dataset to pack into (e.g. imagenet-records).")
@click.option("--workers", type=int, default=None, metavar="N",
              help="Worker processes packing (default: every host core).")
@click.option("--sample-steps", "sample_steps", type=int, default=100, show_default=True,
              metavar="N", help="Training steps simulated on each dataset to time an epoch.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@knob_options
def convert(workload: str, hardware: str, target: str, workers: int | None,
            sample_steps: int, as_json: bool, **kw: Any) -> None:
    """Cost of packing a training WORKLOAD's dataset into TARGET's record shards on a system
    (read, decode, write), and the training time it saves per epoch."""
    from accelsim.cli.storage_system import node_and_dataset
    from accelsim.explore.convert import conversion_record
    from accelsim.profiles.datasets import load_dataset
    from accelsim.sim.knobs import make_config

    knobs = cli_knobs(kw)
    if "steps" in knobs or "epochs" in knobs:
        raise AccelsimError("convert times an epoch itself: drop --steps/--epochs "
                            "(--sample-steps sets the steps it simulates)")
    if not 1 <= sample_steps <= 100_000:
        raise AccelsimError(f"--sample-steps {sample_steps}: between 1 and 100,000")
    cfg = make_config(workload, hardware, **knobs)
    if (cfg.mode or cfg.scenario.mode) != "train":
        raise AccelsimError(f"convert needs a training run; '{workload}' is mode "
                            f"{cfg.mode or cfg.scenario.mode} (add --mode train)")
    node, src = node_and_dataset(cfg, "convert")
    dst = load_dataset(target)
    rec = conversion_record(cfg, src, dst, node, workers or node.host.cores, sample_steps)
    if as_json:
        echo_json(rec)
        return
    phases = ", ".join(f"{k} {v:,.0f} s" for k, v in rec["phases_s"].items())
    pay = ("never: it saves no training time here (under 0.1% of an epoch)"
           if rec["payback_epochs"] is None
           else f"after {rec['payback_epochs']:,.1f} epoch(s)")
    lines = [
        f"{src.name} -> {dst.name} on {node.name} ({rec['storage']}, {rec['workers']} workers)",
        f"  conversion   {rec['time_s'] / 60:,.1f} min, limited by {rec['limited_by']} "
        f"({rec['read_bytes'] / 1e9:,.1f} GB read, {rec['write_bytes'] / 1e9:,.1f} GB written)",
        f"  phases       {phases}",
        f"  epoch        {src.name} {rec['epoch_s'][src.name]:,.1f} s "
        f"({rec['bottleneck'][src.name]}-bound), {dst.name} {rec['epoch_s'][dst.name]:,.1f} s "
        f"({rec['bottleneck'][dst.name]}-bound); {rec['saving_per_epoch_s']:,.1f} s saved",
        f"  pays back    {pay}",
        *[f"  note         {n}" for n in rec["notes"]],
    ]
    click.echo("\n".join(lines))
