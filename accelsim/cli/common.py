"""The command group, the options several commands share, and output helpers."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import click

from accelsim.formats import ALIASES, FORMATS

if TYPE_CHECKING:  # pandas and the workload layer load when a command runs, not for --help
    import pandas as pd

    from accelsim.workload.scenario import Scenario

PRECISIONS = click.Choice(sorted(FORMATS) + list(ALIASES), case_sensitive=False)


# Each command: its module, and the first sentence of its help, which is what `accelsim --help`
# lists (tests/cli/test_startup.py holds it to the command's own docstring). The group loads a
# command's module only when that command runs or shows its own help, so `accelsim --help`
# imports no command and `accelsim list` only its own (issue 22: start-up).
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "calibrate": ("accelsim.cli.calibrate", "Measure this host (GEMMs, convolutions, attention, "
                  "normalisation and elementwise ops through the numpy kernels, a memory "
                  "stream, disk reads, JPEG decode) and write profiles for `simulate --hw "
                  "OUT/host-cpu.toml --software OUT/numpy-host.toml`."),
    "collective": ("accelsim.cli.collective", "Time, algorithm bandwidth and bus bandwidth of a "
                   "collective per message size."),
    "compare": ("accelsim.cli.compare", "Compare a WORKLOAD on several devices or systems "
                "(--hw a,b,c) with the same knobs."),
    "convert": ("accelsim.cli.convert", "Cost of packing a training WORKLOAD's dataset into "
                "TARGET's record shards on a system (read, decode, write), and the training "
                "time it saves per epoch."),
    "describe": ("accelsim.cli.describe", "Per-layer table of a WORKLOAD (zoo model, scenario "
                 "name or .toml file)."),
    "list": ("accelsim.cli.listing", "Built-in device profiles, systems, software stacks, "
             "storage systems, scenarios, zoo models and decoder configs."),
    "plan": ("accelsim.cli.plan", "The best inference configurations of a WORKLOAD (devices, "
             "precisions, batches, device counts) for an objective under limits, the front "
             "against cost per hour, and what binds; for a decoder, the cheapest way to serve "
             "a load under TTFT/TPOT targets; for a training scenario, the system, nodes and "
             "batch to train on by a deadline."),
    "report": ("accelsim.cli.report", "Write an HTML report of WORKLOAD on a system or device "
               "(--hw); print its path."),
    "scalesim": ("accelsim.cli.scalesim", "Run a SCALE-Sim topology on a SCALE-Sim .cfg as "
                 "SCALE-Sim's own command line does."),
    "simulate": ("accelsim.cli.simulate", "Time, energy and bottleneck of a WORKLOAD on a "
                 "system or device (--hw)."),
    "size-storage": ("accelsim.cli.size_storage", "The fewest storage servers of a family that "
                     "keep N emulated accelerators at MLPerf Storage's AU threshold, and what "
                     "limits one server more."),
    "sweep": ("accelsim.cli.sweep", "Simulate WORKLOAD at every point of the grid of the knobs "
              "given."),
    "validate": ("accelsim.cli.validate", "Predict each row of MEASUREMENTS (the calibration "
                 "CSV schema plus the mapping columns sim_profile, sim_software, sim_model, "
                 "sim_mode, sim_batch, sim_precision, sim_metric) and print predicted vs "
                 "measured, the median and worst error, and the rows it could not express, "
                 "with the reason."),
}


NO_BREAK_HYPHEN = "\u2011"  # stands in for "-" while click wraps a help text


class HelpFormatter(click.HelpFormatter):
    """click's help layout, with words never broken at their hyphens: a flag or a name such as
    `pytorch-compiled` or `time-to-train` wraps whole (click's wrapper breaks after a hyphen).
    NB: each "-" is a non-breaking hyphen while wrapping (one column wide, as "-"), and "-"
    again in the text written."""

    def write_dl(self, rows: Any, col_max: int = 30, col_spacing: int = 2) -> None:
        super().write_dl([(term, text.replace("-", NO_BREAK_HYPHEN)) for term, text in rows],
                         col_max, col_spacing)

    def write_text(self, text: str) -> None:
        super().write_text(text.replace("-", NO_BREAK_HYPHEN))

    def getvalue(self) -> str:
        return super().getvalue().replace(NO_BREAK_HYPHEN, "-")


class HelpContext(click.Context):
    """A context whose help is laid out by `HelpFormatter`."""

    formatter_class = HelpFormatter


def with_help_layout(cmd: click.Command) -> click.Command:
    """`cmd` (and a group's commands) with `HelpContext`, so its help wraps whole words."""
    cmd.context_class = HelpContext
    for sub in getattr(cmd, "commands", {}).values():
        with_help_layout(sub)
    return cmd


class LazyGroup(click.Group):
    """A group whose commands are imported when first asked for (`LAZY_COMMANDS`): importing
    a command's module registers it here, through its `@cli.command()`."""

    context_class = HelpContext

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY_COMMANDS:
            importlib.import_module(LAZY_COMMANDS[cmd_name][0])
        cmd = self.commands.get(cmd_name)
        return None if cmd is None else with_help_layout(cmd)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing of the commands, from their summaries (no command is imported)."""
        commands = [(name, self.commands.get(name) or
                     click.Command(name, help=LAZY_COMMANDS[name][1]))
                    for name in self.list_commands(ctx)]
        commands = [(name, cmd) for name, cmd in commands if not cmd.hidden]
        if commands:
            limit = formatter.width - 6 - max(len(name) for name, _ in commands)
            with formatter.section("Commands"):
                formatter.write_dl([(name, cmd.get_short_help_str(limit))
                                    for name, cmd in commands])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="accelsim")
def cli() -> None:
    """accelsim: simulate deep-learning workloads on hardware accelerators."""


def workload_options(fn: Any) -> Any:
    """--batch, --precision, --seq-len and --image-size: overrides of the scenario."""
    for opt in reversed([
        click.option("--batch", type=click.IntRange(min=1),
                     help="Batch size per accelerator (default: scenario's)."),
        click.option("--precision", type=PRECISIONS, help="Numeric format (default: scenario's)."),
        click.option("--seq-len", type=click.IntRange(min=1),
                     help="Sequence length (sequence models)."),
        click.option("--image-size", type=click.IntRange(min=1), help="Image side (image models)."),
    ]):
        fn = opt(fn)
    return fn


def resolve(workload: str, batch: int | None, precision: str | None, seq_len: int | None,
            image_size: int | None, mode: str | None = None,
            inputs: dict[str, str] | None = None) -> Scenario:
    """The scenario a WORKLOAD argument names, with the command line's overrides applied
    (`inputs`: other model inputs, `--set NAME=VALUE`, as text)."""
    from accelsim.errors import AccelsimError
    from accelsim.physical import input_ceiling
    from accelsim.sim.knobs import check_range, parse_knob_values
    from accelsim.workload.scenario import resolve_workload

    knobs: dict[str, Any] = {k: v for k, v in (("seq_len", seq_len), ("image_size", image_size))
                             if v}
    sc = resolve_workload(workload)
    for name, text in (inputs or {}).items():
        values = parse_knob_values(name, text, sc.model)
        if len(values) != 1:
            raise AccelsimError(f"--set {name}={text}: give one value")
        knobs[name] = check_range(name, values[0], 1, input_ceiling(name))
    return sc.with_overrides(batch_size=batch, precision=precision, mode=mode, input=knobs)


def echo_json(obj: Any) -> None:
    """Print `obj` as JSON: never NaN or Infinity (`accelsim.results.jsontext`)."""
    from accelsim.results.jsontext import json_text

    click.echo(json_text(obj))


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as JSON-ready dicts (tuples become lists)."""
    return [{k: (list(v) if isinstance(v, tuple) else v) for k, v in row.items()}
            for row in df.to_dict(orient="records")]
