"""Command-line options generated from the knob table (`accelsim.sim.knobs.KNOBS`), so that
simulate, compare, sweep and report take the same flags with the same meaning.

    @knob_options
    def simulate(workload, hardware, **kw): cfg = make_config(workload, hardware,
                                                              **cli_knobs(kw))
"""

from __future__ import annotations

from typing import Any

import click

from accelsim.cli.common import PRECISIONS
from accelsim.errors import AccelsimError
from accelsim.interconnect.collectives import ALGORITHMS
from accelsim.interconnect.nccl import AUTO
from accelsim.numbers import parse_float, parse_int, shown
from accelsim.profiles.stack_choice import software_choices
from accelsim.sim.knobs import KNOBS

# Flag spellings that differ from `--knob-name` (kept from earlier releases), and choices.
_BOOL_FLAGS = {
    "gpudirect": "--gpudirect/--no-gpudirect",
    "pinned_memory": "--pinned/--pageable",
    "overlap_allreduce": "--overlap/--no-overlap",
}
class _StackChoice(click.Choice):
    """A built-in software stack, or a path to a stack file (`*.toml`, checked when loaded)."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and value.endswith(".toml"):
            return value
        if isinstance(value, str) and value not in self.choices:
            from accelsim.errors import did_you_mean

            hint = did_you_mean(value, self.choices)
            if hint:
                self.fail(f"{value!r}: {hint}(or a stack .toml file)", param, ctx)
        return super().convert(value, param, ctx)


_CHOICES: dict[str, Any] = {
    "mode": click.Choice(["infer", "train", "serve", "federated"]),
    "precision": PRECISIONS,
    "software": _StackChoice(software_choices()),
    "dataflow": click.Choice(["ws", "os", "is"]),
    "allreduce": click.Choice([*ALGORITHMS, AUTO]),
    "decode": click.Choice(["cpu", "gpu", "hw"]),
    "optimizer": click.Choice(["sgd", "momentum", "adam"]),
    "weight_precision": click.Choice(["fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4"]),
    "kv_precision": click.Choice(["fp16", "bf16", "fp8", "int8"]),
    "batching": click.Choice(["continuous", "static"]),
    "length_dist": click.Choice(["fixed", "uniform", "exponential"]),
    "tf32": click.Choice(["on", "off"]),  # a bool knob given as on|off
    "padding": click.Choice(["batch-max", "removed"]),
    "checkpoint_mode": click.Choice(["sync", "async"]),
}
_LONGEST_CHOICE_METAVAR = 50  # characters of "a|b|c" shown as the option's metavar
INPUT_KNOBS = ("seq_len", "image_size")  # the common model inputs get their own flags


_NOT_FINITE = ("nan", "inf", "infinity")


class _Number(click.ParamType):
    """An int or float option read by the one number parser (`accelsim.numbers`): ASCII
    digits, no '_' (click's own INT takes '1_0' and full-width digits, as int() does)."""

    def __init__(self, kind: type) -> None:
        self.kind = kind
        self.name = "integer" if kind is int else "float"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return (parse_int if self.kind is int else parse_float)(value, self.name)
        except AccelsimError:
            if self.kind is float and value.strip().lower().lstrip("+-") in _NOT_FINITE:
                self.fail(f"{shown(value)}: must be a finite number", param, ctx)
            what = "a whole number" if self.kind is int else "a number"
            self.fail(f"{shown(value)} is not {what} (ASCII digits, no '_')", param, ctx)


_TYPES = {int: _Number(int), float: _Number(float), str: str}


def flag_name(name: str) -> str:
    """The command-line flag of knob `name`: --name-with-dashes."""
    return "--" + name.replace("_", "-")


def _option(name: str, help_text: str, kind: type) -> Any:
    if kind is bool and name not in _CHOICES:
        return click.option(_BOOL_FLAGS.get(name, f"{flag_name(name)}/--no-{flag_name(name)[2:]}"),
                            name, default=None, help=help_text[:1].upper() + help_text[1:] + ".")
    kind_type = _CHOICES[name] if name in _CHOICES else _TYPES[kind]
    text = help_text[:1].upper() + help_text[1:] + "."
    metavar = None
    if name in _CHOICES and len("|".join(kind_type.choices)) > _LONGEST_CHOICE_METAVAR:
        # a long list goes in the help, wrapped, not in one [a|b|...] metavar over 100 columns
        metavar = name.upper()
        text += f" One of: {', '.join(kind_type.choices)}."
    return click.option(flag_name(name), name, type=kind_type, default=None, metavar=metavar,
                        help=text)


def choice_list(name: str, kind: type) -> tuple[str, ...]:
    """The values a knob takes when they are a fixed set (its click.Choice, or on|off for a
    bool flag); () otherwise. The software stack also takes a .toml path."""
    if name in _CHOICES:
        return tuple(_CHOICES[name].choices)
    return ("true", "false") if kind is bool else ()


def knob_options(fn: Any, skip: tuple[str, ...] = ()) -> Any:
    """Add one option per knob (default None: the scenario's or system's value), the model
    input flags --seq-len and --image-size, and --set KNOB=VALUE for any other model input."""
    opts = [_option(k.name, k.help, k.kind) for k in KNOBS.values() if k.name not in skip]
    opts += [click.option(flag_name(n), n, type=_TYPES[int], default=None,
                          help=f"Model input: {n.replace('_', ' ')}.") for n in INPUT_KNOBS]
    opts.append(SET_OPTION)
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


SET_OPTION = click.option(
    "--set", "settings", multiple=True, metavar="INPUT=VALUE",
    help="Any other model input (repeatable), e.g. --set m=2048 --set n=2048 --set k=2048 "
    "for gemm.")


def model_inputs(settings: tuple[str, ...]) -> dict[str, str]:
    """`--set NAME=VALUE` items as {name: value text} (typed later, by the model's knobs);
    AccelsimError for an item without '=' or given twice."""
    from accelsim.errors import AccelsimError

    out: dict[str, str] = {}
    for item in settings:
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name or not text.strip():
            raise AccelsimError(f"--set {item!r}: write INPUT=VALUE")
        if name in out:
            raise AccelsimError(f"--set: model input '{name}' is given twice: give it once")
        out[name] = text.strip()
    return out


def cli_knobs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The knobs the user gave (pops them from `kwargs`, `--set` items among them; unset ones
    are dropped)."""
    from accelsim.errors import AccelsimError

    names = [*KNOBS, *INPUT_KNOBS]
    given = {n: v for n, v in ((n, kwargs.pop(n, None)) for n in names) if v is not None}
    for name, text in model_inputs(kwargs.pop("settings", ())).items():
        if name in given:
            raise AccelsimError(f"--set {name}: given by its own flag too: give it once")
        given[name] = text
    return given
