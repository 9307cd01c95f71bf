"""`accelsim plan`: the best inference configuration of a WORKLOAD over devices, precisions,
batches and device counts under constraints, the front against cost, and what binds; for a
decoder, the cheapest way to serve a load under TTFT/TPOT targets (`cli/plan_llm.py`); for a
training scenario, what to train on by a deadline (`cli/plan_train.py`).

    accelsim plan resnet50 --hw h100,l4,t4 --maximize samples-per-dollar --p99-ms 20
    accelsim plan llama-3.1-8b --hw dgx-h100,hgx-h200,l4 --software vllm,tensorrt-llm \
        --rate 40 --ttft-ms 500 --tpot-ms 50 --minimize cost
"""

from __future__ import annotations

from typing import Any

import click

from accelsim.cli.common import cli
from accelsim.cli.helpgroups import PlanCommand
from accelsim.cli.plan_llm import (
    SERVING_ONLY,
    is_decoder_workload,
    refuse_given,
    serving_options,
    serving_plan,
)
from accelsim.cli.plan_text import echo_plan_json, not_chosen_lines, parse_counts, plan_table
from accelsim.cli.plan_train import TRAINING_ONLY, training_options, training_plan
from accelsim.errors import AccelsimError

_MAXIMIZE = ("throughput", "samples-per-dollar", "samples-per-joule", "tokens-per-dollar")
_MINIMIZE = ("cost", "energy", "latency", "time-to-train")
_COLUMNS = (("hardware", "hardware", None), ("precision", "precision", None),
            ("batch", "batch", None), ("devices", "devices", None),
            ("samples/s", "throughput_samples_per_s", 1.0), ("latency ms", "latency_s", 1e3),
            ("$/h", "usd_per_hour", 1.0), ("samples/$", "samples_per_usd", 1.0),
            ("samples/J", "samples_per_j", 1.0), ("kW", "power_w", 1e-3),
            ("binds", "binds", None))


@cli.command(cls=PlanCommand)
@click.argument("workload")
@click.option("--hw", "hardware", required=True,
              help="Devices or systems separated by commas.")
@click.option("--batch", "batch", default="1,2,4,...,128", show_default=True,
              help="Batch sizes to search (a list, or a doubling range with ...; a training "
              "scenario: its own batch unless given).")
@click.option("--precision", "precision", default="fp16,int8", show_default=True,
              help="Numeric formats to search, separated by commas (a training scenario: "
              "its own unless given; a decoder: fp16 unless given).")
@click.option("--devices", "devices", default="1,2,4,8", show_default=True,
              help="Device counts to search (inference: independent replicas; a training "
              "scenario: GPUs per node, every one unless given).")
@click.option("--maximize", type=click.Choice(_MAXIMIZE), help="The objective to maximise.")
@click.option("--minimize", type=click.Choice(_MINIMIZE),
              help="The objective to minimise (cost: $ per 1,000 samples; of a training "
              "scenario: the run's $).")
@click.option("--p99-ms", type=float, help="Latency limit of one batch, ms.")
@click.option("--max-cost-per-hour", type=float, help="Rent limit, $ an hour.")
@click.option("--max-power-kw", type=float, help="Power limit of the devices, kW.")
@click.option("--top", default=5, show_default=True, type=click.IntRange(1, 1000),
              help="Best configurations to print.")
@click.option("--plot", "plot", type=click.Path(dir_okay=False),
              help="Write the figure: the objective against $/h, the front, the chosen point "
              "(.png, .svg or .pdf).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False),
              help="Write the plan as one HTML page: the answer, the question, the best, the "
              "front, the figure, why the rest were not chosen.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Processes to simulate in (inference and training plans; a decoder's "
              "serving plan runs in one).")
@click.option("--resume", "resume", type=click.Path(dir_okay=False),
              help="SQLite file keeping every simulated configuration: a rerun (after a "
              "kill, or with more to search) reads back those already there.")
@serving_options
@training_options
@click.pass_context
def plan(ctx: click.Context, workload: str, hardware: str, batch: str, precision: str,
         devices: str, maximize: str | None, minimize: str | None, p99_ms: float | None,
         max_cost_per_hour: float | None, max_power_kw: float | None, top: int,
         plot: str | None, report_path: str | None, as_json: bool, workers: int,
         resume: str | None, **serving: Any) -> None:
    """The best inference configurations of a WORKLOAD (devices, precisions, batches, device
    counts) for an objective under limits, the front against cost per hour, and what binds;
    for a decoder, the cheapest way to serve a load under TTFT/TPOT targets; for a training
    scenario, the system, nodes and batch to train on by a deadline."""
    from accelsim.explore.plan import make_plan
    from accelsim.workload.scenario import resolve_workload

    if (maximize is None) == (minimize is None):
        raise AccelsimError("give one objective: --maximize or --minimize")
    training = {k: serving.pop(k) for k in TRAINING_ONLY}
    if is_decoder_workload(workload):
        refuse_given(ctx, TRAINING_ONLY, "a training scenario's plan")
        if workers > 1:
            raise AccelsimError(f"--workers {workers}: a decoder's serving plan runs in one "
                                "process (each configuration's search starts from the "
                                "cheapest served before it); --resume keeps its runs")
        serving_plan(ctx, workload, hardware, precision, maximize or minimize,
                     max_cost_per_hour, top, as_json,
                     {**serving, "report": report_path, "plot": plot, "resume": resume})
        return
    refuse_given(ctx, SERVING_ONLY, "a decoder's serving plan")
    if resolve_workload(workload).mode == "train":
        refuse_given(ctx, ("p99_ms",), "an inference plan")
        training_plan(ctx, workload, hardware, maximize or minimize,
                      {"deadline_h": training.pop("deadline_h"),
                       "max_cost_per_hour": max_cost_per_hour, "max_power_kw": max_power_kw},
                      top, as_json, {**training, "batch": batch, "precision": precision,
                                     "devices": devices, "plot": plot,
                                     "report": report_path, "workers": workers,
                                     "resume": resume})
        return
    refuse_given(ctx, TRAINING_ONLY, "a training scenario's plan")
    if minimize == "time-to-train":
        raise AccelsimError(f"--minimize time-to-train plans a training scenario (such as "
                            f"resnet50-train); {workload} is an inference workload")
    if (maximize or minimize) == "tokens-per-dollar":
        raise AccelsimError("--maximize tokens-per-dollar plans a decoder's serving; for "
                            f"{workload} use samples-per-dollar")
    for name, value in (("--p99-ms", p99_ms), ("--max-cost-per-hour", max_cost_per_hour),
                        ("--max-power-kw", max_power_kw)):
        if value is not None and not value > 0:
            raise AccelsimError(f"{name} {value}: must be above 0")
    p = make_plan(workload, [h.strip() for h in hardware.split(",") if h.strip()],
                  parse_counts(batch, "batch"),
                  [x.strip() for x in precision.split(",") if x.strip()],
                  parse_counts(devices, "devices"), maximize or minimize, p99_ms,
                  max_cost_per_hour, max_power_kw, workers=workers, resume=resume)
    if plot:
        from accelsim.plots.plan import plan_figure
        from accelsim.plots.style import save_figure

        save_figure(plan_figure(p), plot)
    wrote = None
    if report_path:
        from accelsim.cli.plan_report import limits_given, write_plan_report
        from accelsim.plots.plan import plan_figure

        wrote = write_plan_report(
            report_path, p, f"plan {workload}",
            [("objective", p.objective), ("hardware", hardware), ("batch", batch),
             ("precision", precision), ("devices", devices),
             *limits_given(p99_ms=p99_ms, max_cost_per_hour=max_cost_per_hour,
                           max_power_kw=max_power_kw)],
            _COLUMNS, "{hardware} {precision} batch {batch} x{devices}", plan_figure(p), top)
    if as_json:
        echo_plan_json(p, top)
        return
    best = p.best
    lines = [f"plan {workload}: {p.objective} over {len(p.rows):,} configurations, "
             f"{p.simulated} simulated ({p.simulated / len(p.rows):.0%})"]
    if not best:
        lines.append("  no configuration meets the limits")
    else:
        lines += ["", f"Best {min(top, len(best))}:", plan_table(best[:top], _COLUMNS)]
    if p.front:
        lines += ["", "Front (no other is better at no more $/h):", plan_table(p.front, _COLUMNS)]
    lines += not_chosen_lines(p)
    no_price = sorted({r["hardware"] for r in p.rows if r["status"] == "simulated"
                       and r["usd_per_hour"] is None})
    if no_price:
        lines.append(f"  note: no price for {', '.join(no_price)} (hw_profiles/prices/): no $ "
                     "figures for them")
    lines += [f"  note: {n}" for n in p.notes]
    if wrote:
        lines.append(wrote)
    click.echo("\n".join(lines))
