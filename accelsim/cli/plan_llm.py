"""`accelsim plan DECODER`: the cheapest (or most tokens per dollar) way to serve an offered
load under TTFT/TPOT targets, over systems, stacks, precisions, tp, pp and batch caps
(`accelsim.explore.plan_llm`).

    accelsim plan llama-3.1-8b --hw dgx-h100,hgx-h200,l4 --software vllm,tensorrt-llm \\
        --rate 40 --ttft-ms 500 --tpot-ms 50 --minimize cost
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

# the serving plan's own options (refused on a non-decoder plan) and the inference plan's
SERVING_ONLY = ("software", "tp", "pp", "max_batch", "rate", "prompt_tokens", "output_tokens",
                "ttft_ms", "tpot_ms", "requests")
INFERENCE_ONLY = ("batch", "devices", "p99_ms", "max_power_kw")
_COLUMNS: Columns = (
    ("hardware", "hardware", None), ("stack", "software", None), ("format", "precision", None),
    ("split", "split", None), ("cap", "max_batch", None), ("GPUs", "gpus", None),
    ("req/s each", "capacity_per_replica_per_s", 1.0), ("$/h", "usd_per_hour", 1.0),
    ("TTFT ms", "ttft_p99_s", 1e3), ("TPOT ms", "tpot_p99_s", 1e3), ("binds", "binds", None))


def serving_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The serving plan's options, on `accelsim plan`."""
    options = [
        click.option("--software", default="vllm,tensorrt-llm", show_default=True,
                     help="Decoders: serving stacks to search, separated by commas."),
        click.option("--tp", default="1,2,4,8", show_default=True,
                     help="Decoders: tensor-parallel sizes to search."),
        click.option("--pp", default="1", show_default=True,
                     help="Decoders: pipeline-parallel sizes to search."),
        click.option("--max-batch", "max_batch", default="16,32,64,...,512", show_default=True,
                     help="Decoders: the engine's batch caps to search."),
        click.option("--rate", type=float, help="Decoders: the offered load, requests/s "
                     "(Poisson)."),
        click.option("--prompt-tokens", type=click.IntRange(1), default=512,
                     show_default=True, help="Decoders: prompt length, tokens."),
        click.option("--output-tokens", type=click.IntRange(1), default=128,
                     show_default=True, help="Decoders: output length, tokens."),
        click.option("--ttft-ms", type=float, help="Decoders: p99 time-to-first-token "
                     "target, ms."),
        click.option("--tpot-ms", type=float, help="Decoders: p99 time-per-output-token "
                     "target, ms."),
        click.option("--requests", type=click.IntRange(1, 1_000_000), default=2000,
                     show_default=True, help="Decoders: requests served to check each best "
                     "configuration at its load."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def is_decoder_workload(workload: str) -> bool:
    """True when WORKLOAD runs the decoder path (a decoder name or config file)."""
    from accelsim.workload.llm_configs import is_decoder
    from accelsim.workload.scenario import resolve_workload
    from accelsim.workload.sources import is_config_path

    model = resolve_workload(workload).model
    return is_config_path(model) or is_decoder(model)


def refuse_given(ctx: click.Context, names: tuple[str, ...], what: str) -> None:
    """One line naming an option given on the command line that only `what` reads."""
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name == "COMMANDLINE":
            raise AccelsimError(f"--{name.replace('_', '-')} is read by {what} only")


def serving_plan(ctx: click.Context, workload: str, hardware: str, precision: str,
                 objective: str, max_cost_per_hour: float | None, top: int, as_json: bool,
                 serving: dict[str, Any]) -> None:
    """Run and print the serving plan of decoder `workload`."""
    from accelsim.explore.plan_llm import SERVING_OBJECTIVES, make_serving_plan

    refuse_given(ctx, INFERENCE_ONLY, "an inference plan (not a decoder's)")
    if objective not in SERVING_OBJECTIVES:
        raise AccelsimError(f"objective {objective!r} for a decoder's serving plan: --minimize "
                            "cost, --maximize tokens-per-dollar or --maximize throughput")
    if serving["rate"] is None or not serving["rate"] > 0:
        raise AccelsimError("--rate: the offered load in requests/s, above 0 (a serving "
                            "plan sizes the replicas for it)")
    for name in ("ttft_ms", "tpot_ms"):
        if serving[name] is not None and not serving[name] > 0:
            raise AccelsimError(f"--{name.replace('_', '-')} {serving[name]}: must be above 0")
    if ctx.get_parameter_source("precision").name != "COMMANDLINE":
        precision = "fp16"  # NB: the inference plan's default (fp16,int8) is a CNN's
    p = make_serving_plan(
        workload, names_list(hardware), names_list(serving["software"]), names_list(precision),
        parse_counts(serving["tp"], "tp"), parse_counts(serving["pp"], "pp"),
        parse_counts(serving["max_batch"], "max_batch"), serving["rate"],
        serving["prompt_tokens"], serving["output_tokens"], serving["ttft_ms"],
        serving["tpot_ms"], objective, max_cost_per_hour, serving["requests"],
        resume=serving.get("resume"))
    for r in p.rows:  # the replica's shape, as the table prints it
        r["split"] = f"{r['replicas'] or '?'} x tp{r['tp']}" + (f" pp{r['pp']}" if r["pp"] > 1
                                                               else "")
    if serving.get("plot"):
        from accelsim.plots.plan_llm import serving_plan_figure
        from accelsim.plots.style import save_figure

        save_figure(serving_plan_figure(p), serving["plot"])
    wrote = None
    if serving.get("report"):
        from accelsim.cli.plan_report import limits_given, write_plan_report
        from accelsim.plots.plan_llm import serving_plan_figure

        wrote = write_plan_report(
            serving["report"], p, f"plan {workload}",
            [("objective", p.objective), ("systems", hardware), ("stacks", serving["software"]),
             ("load", f"{serving['rate']:g} requests/s, {serving['prompt_tokens']} prompt + "
                      f"{serving['output_tokens']} output tokens"),
             ("tp", serving["tp"]), ("pp", serving["pp"]), ("batch caps", serving["max_batch"]),
             *limits_given(ttft_p99_ms=serving["ttft_ms"], tpot_p99_ms=serving["tpot_ms"],
                           max_cost_per_hour=max_cost_per_hour)],
            _COLUMNS, "{split} {hardware} {software} {precision}, cap {max_batch}",
            serving_plan_figure(p), top)
    if as_json:
        echo_plan_json(p, top)
        return
    targets = ", ".join(f"{n} p99 <= {v:g} ms" for n, v in (
        ("TTFT", serving["ttft_ms"]), ("TPOT", serving["tpot_ms"])) if v is not None)
    lines = [f"plan {workload}: serve {serving['rate']:g} requests/s ({serving['prompt_tokens']}"
             f" prompt + {serving['output_tokens']} output tokens), {targets}; {p.objective} "
             f"over {len(p.rows):,} configurations, {p.simulated} simulations"]
    best = p.best
    if not best:
        lines.append("  no configuration meets the targets")
    else:
        lines += ["", f"Best {min(top, len(best))} (split: replicas x tp pp; req/s each: one "
                  "replica's capacity at the targets; TTFT/TPOT: p99 served at its load):",
                  plan_table(best[:top], _COLUMNS)]
    if p.front and p.objective != "cost":
        lines += ["", "Front (no other is better at no more $/h):", plan_table(p.front,
                                                                               _COLUMNS)]
    click.echo("\n".join(lines + closing_lines(p, wrote)))
