"""A user's measurements for `accelsim validate`: rows in the schema of
shared/reference/calibration_measurements.csv plus explicit mapping columns, each turned into a
`stack_fit.Row` (what to simulate and what was measured) or a reason it cannot be.

    rows, rejected = read_measurements("workloads/validate-example.csv")

Columns read (others, such as the calibration file's workload / hardware / source text, are
kept only as description):
    id                  row name (default: "row <line>")
    value               the measured number: samples/s for throughput, ms for latency
    sim_profile         a system (dgx-a100: its host CPU scales host time) or device profile
                        (a100: the stack's reference host), by name or .toml path
    sim_software        a software stack by name or .toml path ("default": the class's)
    sim_model           a zoo model (resnet50, bert_base, ...)
    sim_mode            infer or train
    sim_batch           per-device batch (per micro-step)
    sim_precision       fp32, tf32, fp16, bf16, fp8, int8
    sim_metric          throughput (samples/s) or latency (ms per batch)
    sim_seq_len         optional: the model's sequence length
    sim_optimizer       optional (train): sgd, momentum, adam (default sgd)
    sim_accumulation    optional (train): gradient-accumulation steps, one optimizer update per
                        group (default 1)
The mapping columns carry a `sim_` prefix because the calibration schema already has
free-text `software`, `precision` and `metric` columns. A missing column or an unreadable file
is an AccelsimError naming the file; a bad row is rejected with its reason, never an error.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from accelsim.calibrate.stack_fit import Row
from accelsim.errors import AccelsimError, DataFileError
from accelsim.numbers import is_float_text, is_int_text, shown
from accelsim.physical import MAX_BATCH, MAX_STEPS, input_ceiling
from accelsim.profiles.software import DEFAULT
from accelsim.tomlfiles import MAX_TABLE_BYTES, read_text_file

# NB: the measured figures read: past any throughput, latency or energy a run gives (1e30),
# and above 1e-30, so that predicted / measured stays finite; 1e308 or 5e-324 is a damaged
# cell, not a measurement.
MIN_MEASURED, MAX_MEASURED = 1e-30, 1e30
REQUIRED = ("value", "sim_profile", "sim_software", "sim_model", "sim_mode", "sim_batch",
            "sim_precision", "sim_metric")
OPTIONAL = ("id", "sim_seq_len", "sim_optimizer", "sim_accumulation")
MODES = ("infer", "train")
METRICS = ("throughput", "latency")
OPTIMIZERS = ("sgd", "momentum", "adam")


def _whole(text: str, column: str, high: int, default: int | None = None,
           required: bool = False) -> int | None:
    """A count in [1, `high`] (the ceilings of the matching knobs, `accelsim.physical`); an
    empty cell is `default`, or refused where the column is `required`."""
    if not text.strip():
        if required:
            raise ValueError(f"{column} is empty: a whole number >= 1 is needed")
        return default
    if not is_int_text(text):
        raise ValueError(f"{column} {shown(text)} is not a whole number (ASCII digits, no '_')")
    n = int(text)
    if n < 1:
        raise ValueError(f"{column} {n} must be >= 1")
    if n > high:
        raise ValueError(f"{column} {n} must be <= {high:,}")
    return n


def _system_or_device(spec: str) -> tuple[str, str]:
    """(device profile, system or "") named by `spec` (a system's device is its accelerator)."""
    from accelsim.profiles.hardware import resolve_hardware
    from accelsim.profiles.systems import load_system

    try:
        system = load_system(spec)
    except AccelsimError:
        return resolve_hardware(spec)[1].name if not spec.endswith(".toml") else spec, ""
    return system.device, spec


def row_from(cells: dict[str, str], line: int) -> Row:
    """The Row of one CSV record (ValueError / AccelsimError with the reason it is bad)."""
    from accelsim.formats import get_format
    from accelsim.workload.zoo import model_names

    get = {k: (cells.get(k) or "").strip() for k in (*REQUIRED, *OPTIONAL)}
    if not is_float_text(get["value"]):
        raise ValueError(f"value {shown(get['value'])} is not a number (ASCII digits, no '_')")
    measured = float(get["value"])
    if not (math.isfinite(measured) and MIN_MEASURED <= measured <= MAX_MEASURED):
        raise ValueError(f"value {shown(get['value'])} must be a positive number from "
                         f"{MIN_MEASURED:g} to {MAX_MEASURED:g}")
    if get["sim_model"] not in model_names():
        raise ValueError(f"sim_model {get['sim_model']!r} is not a zoo model")
    if get["sim_mode"] not in MODES:
        raise ValueError(f"sim_mode {get['sim_mode']!r}: choose {' or '.join(MODES)}")
    if get["sim_metric"] not in METRICS:
        raise ValueError(f"sim_metric {get['sim_metric']!r}: choose {' or '.join(METRICS)} "
                         "(the model predicts one deterministic step, not a percentile)")
    optimizer = get["sim_optimizer"] or "sgd"
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"sim_optimizer {optimizer!r}: choose one of {', '.join(OPTIMIZERS)}")
    precision = get_format(get["sim_precision"]).name  # UnknownNameError names the choices
    precision = "fp8" if precision.startswith("fp8") else precision
    device, system = _system_or_device(get["sim_profile"])
    seq_len = _whole(get["sim_seq_len"], "sim_seq_len", input_ceiling("seq_len"))
    return Row(get["sim_model"], seq_len,
               _whole(get["sim_batch"], "sim_batch", MAX_BATCH, required=True),
               _whole(get["sim_accumulation"], "sim_accumulation", MAX_STEPS, 1), precision,
               get["sim_mode"], optimizer, get["sim_metric"], id=get["id"] or f"row {line}",
               device=device, system=system, stack=get["sim_software"] or DEFAULT,
               measured=measured, workload=get["sim_profile"])


def read_measurements(path: str | Path) -> tuple[list[Row], list[tuple[str, str]]]:
    """(rows the model can express, [(row id, reason)] for the others). The Row's `workload`
    holds the sim_profile as written (what --hw takes)."""
    text = read_text_file(path, MAX_TABLE_BYTES)
    try:
        reader = csv.DictReader(text.splitlines())
        header = reader.fieldnames or []
        records = list(reader)
    except csv.Error as err:
        raise DataFileError(str(path), f"not a readable CSV ({err})") from None
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise DataFileError(str(path), f"missing column(s) {', '.join(missing)} (mapping "
                            "columns: " + ", ".join(REQUIRED) + ")")
    rows: list[Row] = []
    rejected: list[tuple[str, str]] = []
    for line, cells in enumerate(records, start=2):
        name = (cells.get("id") or "").strip() or f"row {line}"
        if None in cells:  # more cells than header columns
            rejected.append((name, f"line {line} has more cells than the header"))
            continue
        try:
            rows.append(row_from(cells, line))
        except (ValueError, AccelsimError) as err:
            rejected.append((name, str(err)))
    return rows, rejected
