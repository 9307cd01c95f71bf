"""The command group, the options several commands share, and output helpers."""

from __future__ import annotations

from typing import Any

import click
import pandas as pd

from accelsim.formats import ALIASES, FORMATS
from accelsim.results.jsontext import json_text
from accelsim.workload.scenario import Scenario, resolve_workload

PRECISIONS = click.Choice(sorted(FORMATS) + list(ALIASES), case_sensitive=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
            image_size: int | None, mode: str | None = None) -> Scenario:
    """The scenario a WORKLOAD argument names, with the command line's overrides applied."""
    knobs = {k: v for k, v in (("seq_len", seq_len), ("image_size", image_size)) if v}
    return resolve_workload(workload).with_overrides(batch_size=batch, precision=precision,
                                                     mode=mode, input=knobs)


def echo_json(obj: Any) -> None:
    """Print `obj` as JSON: never NaN or Infinity (`accelsim.results.jsontext`)."""
    click.echo(json_text(obj))


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as JSON-ready dicts (tuples become lists)."""
    return [{k: (list(v) if isinstance(v, tuple) else v) for k, v in row.items()}
            for row in df.to_dict(orient="records")]
