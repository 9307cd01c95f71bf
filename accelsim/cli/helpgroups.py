"""`--help` with the options grouped by purpose (issue 23 item 3): one table, `GROUPS`, gives
every option of simulate and sweep a group, and two click Command classes render it.

`GroupedCommand` (simulate, sweep) prints one section per group, in the table's order; an
option the table does not know goes under "Other options" (tests/cli/test_help_groups.py
fails on that, so a new option must be given a group). `FoldedCommand` (compare, report)
prints its own options in full and the knob flags it shares with simulate as one line per
group of names, pointing at `accelsim simulate --help` for their meaning.

Only click is imported here: `--help` must stay light (tests/cli/test_startup.py).
"""

from __future__ import annotations

import textwrap
from typing import Any

import click

OTHER = "Other options"
SHARED_TITLE = "Options shared with simulate (see `accelsim simulate --help`)"

# Group title -> the parameter names (click's `param.name`, the function argument) in it.
GROUPS: dict[str, tuple[str, ...]] = {
    "Workload": ("mode", "batch", "precision", "seq_len", "image_size", "settings",
                 "seq_len_dist", "padding", "model_config", "optimizer", "trainable", "freeze"),
    "Hardware and software": ("hardware", "software", "tf32", "dataflow", "devices", "nodes",
                              "device_spread", "scalesim_dir"),
    "Training: input pipeline and storage": (
        "dataset", "storage", "storage_count", "io_threads", "prep_workers", "prefetch",
        "gpudirect", "decode", "pinned_memory", "storage_system", "clients"),
    "Training: steps and gradient exchange": (
        "steps", "epochs", "accumulate", "allreduce", "overlap_allreduce", "bucket_mb",
        "jobs", "coordinated"),
    "Training: a cluster node by node": ("every_node", "fabric", "placement", "slow_node",
                                         "link_failures"),
    "MLPerf Storage and DLIO": ("emulated", "max_accelerators", "dlio_summary"),
    "Serving": ("rate", "concurrency", "think_time_ms", "max_batch", "max_wait_ms",
                "requests"),
    "LLM (decoder models)": (
        "prompt_tokens", "output_tokens", "tp", "pp", "overlap_tp", "expert_parallel",
        "weight_precision", "kv_precision", "batching", "length_dist", "slo_ttft_ms",
        "slo_tpot_ms", "chunked_prefill", "prefill_tokens", "requests_file", "zero",
        "recompute", "vp", "cp", "lora_rank", "checkpoint_every", "checkpoint_mode",
        "checkpoint_storage"),
    "Federated learning": ("population", "clients_per_round", "rounds", "local_steps",
                           "network", "uplink_mbps", "downlink_mbps", "rtt_ms", "deadline_s",
                           "client_spread", "server", "update_precision"),
    "Cost and energy": ("usd_per_device_hour", "usd_per_kwh", "pue"),
    "Sweep": ("workers", "scheduler", "point_timeout_s", "resume_path", "quiet", "fallback"),
    "Simulation and output": ("seed", "max_events", "execute", "prune_2_4", "layers", "trace",
                              "csv_path", "plot_path", "as_json", "help"),
}
GROUP_OF: dict[str, str] = {name: title for title, names in GROUPS.items() for name in names}


def _sections(params: list[click.Parameter], ctx: click.Context,
              ) -> list[tuple[str, list[tuple[click.Parameter, tuple[str, str]]]]]:
    """(group title, [(param, help record)]) in the table's order, 'Other options' last."""
    found: dict[str, list[tuple[click.Parameter, tuple[str, str]]]] = {}
    help_option = ctx.command.get_help_option(ctx)
    for param in params:
        if not isinstance(param, click.Option):
            continue  # the arguments are in the usage line and the docstring
        record = param.get_help_record(ctx)
        if record is not None:
            name = "help" if param is help_option else param.name or ""
            found.setdefault(GROUP_OF.get(name, OTHER), []).append((param, record))
    return [(title, found[title]) for title in [*GROUPS, OTHER] if title in found]


def _flag_name(param: click.Parameter) -> str:
    """An option's long spelling (--gpudirect for --gpudirect/--no-gpudirect)."""
    names = getattr(param, "opts", None) or [param.name or ""]
    return max(names, key=len)


# `accelsim plan`'s own groups (its options are not simulate's knobs).
PLAN_GROUPS: dict[str, tuple[str, ...]] = {
    "What to search": ("hardware", "batch", "precision", "devices"),
    "Objective and limits": ("maximize", "minimize", "p99_ms", "max_cost_per_hour",
                             "max_power_kw"),
    "Training scenarios": ("nodes", "epochs", "steps", "deadline_h", "min_au"),
    "Decoders: serving a load": ("software", "tp", "pp", "max_batch", "rate",
                                 "prompt_tokens", "output_tokens", "ttft_ms", "tpot_ms",
                                 "requests"),
    "Running the search": ("workers", "resume"),
    "Output": ("top", "plot", "report_path", "as_json", "help"),
}


class PlanCommand(click.Command):
    """`accelsim plan`: its `--help` in one section per `PLAN_GROUPS` group."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        of = {name: title for title, names in PLAN_GROUPS.items() for name in names}
        found: dict[str, list[tuple[str, str]]] = {}
        help_option = ctx.command.get_help_option(ctx)
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
            if record is not None:
                name = "help" if param is help_option else param.name or ""
                found.setdefault(of.get(name, OTHER), []).append(record)
        for title in [*PLAN_GROUPS, OTHER]:
            if title in found:
                with formatter.section(title):
                    formatter.write_dl(found[title])


class GroupedCommand(click.Command):
    """A command whose `--help` has one section per option group (`GROUPS`)."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        for title, rows in _sections(self.get_params(ctx), ctx):
            with formatter.section(title):
                formatter.write_dl([record for _, record in rows])


class FoldedCommand(click.Command):
    """A command that takes simulate's knob flags but shows only its own options in full;
    the shared ones are named, one line per group (`shared`: their parameter names)."""

    shared: frozenset[str] = frozenset()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from accelsim.sim.knobs import KNOBS

        self.shared = frozenset([*KNOBS, "seq_len", "image_size", "settings"])

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        params = self.get_params(ctx)
        own = [p.get_help_record(ctx) for p in params
               if isinstance(p, click.Option) and p.name not in self.shared]
        with formatter.section("Options"):
            formatter.write_dl([r for r in own if r is not None])
        folded = [p for p in params if p.name in self.shared]
        with formatter.section(SHARED_TITLE):
            for title, rows in _sections(folded, ctx):
                names = ", ".join(_flag_name(p) for p, _ in rows)
                indent = " " * formatter.current_indent
                formatter.write(f"{indent}{title}:\n")
                formatter.write("\n".join(textwrap.wrap(
                    names, formatter.width, initial_indent=indent + "  ",
                    subsequent_indent=indent + "  ", break_on_hyphens=False)) + "\n")
