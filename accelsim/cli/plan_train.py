"""`accelsim plan TRAINING-SCENARIO`: the best system, node count, devices per node, batch and
precision to train on, for an objective (time to train, the run's cost or energy, throughput,
samples per dollar or per joule) under a deadline, rent, power and AU limits
(`accelsim.explore.plan_train`).

    accelsim plan resnet50-train --hw dgx-h100,hgx-h200 --nodes 1,2,...,64 --epochs 90 \\
        --deadline-h 2 --minimize cost
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from accelsim.cli.plan_text import (
    Columns,
    closing_lines,
    echo_plan_json,
    names_list,
    parse_counts,
    plan_table,
)
from accelsim.errors import AccelsimError

TRAINING_ONLY = ("nodes", "epochs", "steps", "deadline_h", "min_au")
_COLUMNS: Columns = (
    ("hardware", "hardware", None), ("format", "precision", None), ("batch", "batch", None),
    ("nodes", "nodes", None), ("GPUs/node", "devices", None), ("GPUs", "gpus", None),
    ("samples/s", "throughput_samples_per_s", 1.0),
    ("hours", "time_to_train_s", 1 / 3600), ("$/h", "usd_per_hour", 1.0),
    ("$ run", "usd_per_run", 1.0), ("kW", "power_w", 1e-3), ("AU", "au", 1.0),
    ("binds", "binds", None))


def training_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The training plan's options, on `accelsim plan`."""
    options = [
        click.option("--nodes", default="1", show_default=True,
                     help="Training: node counts to search (a list, or a doubling range)."),
        click.option("--epochs", type=click.IntRange(1, 10_000), default=1,
                     show_default=True, help="Training: epochs of the dataset the run trains."),
        click.option("--steps", type=click.IntRange(2, 10_000), default=30,
                     show_default=True, help="Training: steps simulated per configuration."),
        click.option("--deadline-h", type=float, help="Training: the run must finish within "
                     "this many hours."),
        click.option("--min-au", type=float, help="Training: the least accelerator "
                     "utilization (MLPerf Storage's AU, 0 to 1)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def training_plan(ctx: click.Context, workload: str, hardware: str, objective: str,
                  limits: dict[str, float | None], top: int, as_json: bool,
                  opts: dict[str, Any]) -> None:
    """Run and print the training plan of training scenario `workload`."""
    from accelsim.explore.plan_train import TRAIN_OBJECTIVES, TrainLimits, make_train_plan
    from accelsim.workload.scenario import resolve_workload

    if objective not in TRAIN_OBJECTIVES:
        raise AccelsimError(f"objective {objective!r} for a training plan: --minimize "
                            "time-to-train, cost or energy, or --maximize throughput, "
                            "samples-per-dollar or samples-per-joule")
    for name in ("deadline_h", "max_cost_per_hour", "max_power_kw"):
        value = limits.get(name)
        if value is not None and not value > 0:
            raise AccelsimError(f"--{name.replace('_', '-')} {value}: must be above 0")
    if opts["min_au"] is not None and not 0 < opts["min_au"] <= 1:
        raise AccelsimError(f"--min-au {opts['min_au']}: a share from 0 to 1")
    sc = resolve_workload(workload)
    given = {n: ctx.get_parameter_source(n).name == "COMMANDLINE"
             for n in ("batch", "precision", "devices")}
    batches = parse_counts(opts["batch"], "batch") if given["batch"] else [sc.batch_size]
    precisions = (names_list(opts["precision"]) if given["precision"] else [sc.precision])
    devices = parse_counts(opts["devices"], "devices") if given["devices"] else None
    deadline = limits.get("deadline_h")
    power = limits.get("max_power_kw")
    p = make_train_plan(
        workload, names_list(hardware), batches, precisions, devices,
        parse_counts(opts["nodes"], "nodes"), objective, opts["epochs"],
        TrainLimits(None if deadline is None else deadline * 3600.0,
                    limits.get("max_cost_per_hour"), None if power is None else power * 1e3,
                    opts["min_au"]), opts["steps"], top, workers=opts["workers"],
        resume=opts["resume"])
    if opts["plot"]:
        from accelsim.plots.plan_train import train_plan_figure
        from accelsim.plots.style import save_figure

        save_figure(train_plan_figure(p, deadline), opts["plot"])
    wrote = None
    if opts["report"]:
        from accelsim.cli.plan_report import limits_given, write_plan_report
        from accelsim.plots.plan_train import train_plan_figure

        wrote = write_plan_report(
            opts["report"], p, f"plan {workload}",
            [("objective", p.objective), ("systems", hardware), ("epochs", opts["epochs"]),
             ("nodes", opts["nodes"]), ("batch", ", ".join(map(str, batches))),
             ("precision", ", ".join(precisions)),
             ("devices per node", "every one" if devices is None else opts["devices"]),
             *limits_given(deadline_h=deadline, max_cost_per_hour=limits.get(
                 "max_cost_per_hour"), max_power_kw=power, min_au=opts["min_au"])],
            _COLUMNS, "{hardware} {precision} batch {batch}, {devices} GPUs x {nodes} nodes",
            train_plan_figure(p, deadline), top,
            front_title="Front: no other is both sooner and cheaper")
    if as_json:
        echo_plan_json(p, top)
        return
    lines = [f"plan {workload}: train {opts['epochs']} epoch(s); {p.objective} over "
             f"{len(p.rows):,} configurations, {p.simulated} simulated "
             f"({p.simulated / len(p.rows):.0%}) for {opts['steps']} steps each"]
    best = p.best
    if not best:
        lines.append("  no configuration meets the limits")
    else:
        lines += ["", f"Best {min(top, len(best))} (hours: the whole run at the simulated "
                  "throughput; $ run: its rent):", plan_table(best[:top], _COLUMNS)]
    if len(p.front) > 1:
        lines += ["", "Front (no other is both sooner and cheaper):",
                  plan_table(p.front, _COLUMNS)]
    click.echo("\n".join(lines + closing_lines(p, wrote)))
