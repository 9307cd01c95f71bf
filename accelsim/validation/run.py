"""`accelsim validate`: predict a user's measured rows, and fit a GPU and a stack to them.

    rows, rejected = read_measurements(path)
    table, failed = predict_rows(rows)          # predicted vs measured, per row
    result = fit_rows(rows, folds=5)            # fitted parameters and held-out errors
    write_calibrated(result, out_dir, source)   # <stack>-calibrated.toml per fitted stack

Prediction is the device estimate `accelsim simulate` makes for the row's options
(`estimate` on the profile, under the stack, with the system's host CPU): throughput =
batch / step time (train: `device_only` in simulate's record), latency = step time in ms; with
gradient accumulation the optimizer update counts once per group of micro-steps.
The fit is `accelsim.calibrate.stack_fit` (the one benchmarks/fidelity/fit_stacks.py runs on the
calibration file), on the rows whose device is a GPU. Held-out error: k-fold, row i in fold
i mod k (k = min(folds, rows)), or one fold per device (leave-one-device-out); each fold is
fitted from the shipped values on the other rows and predicts its own. Device profiles carry
no efficiency factors (they are class-wide, in hw_profiles/efficiency/gpu.toml), so the
fitted class factors are folded into the calibrated stack's modifiers: min(class x modifier,
1) is what the GPU model charges, and the written modifier is fitted class x fitted modifier
/ shipped class factor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from accelsim.calibrate.stack_fit import (
    Row,
    build_parts,
    fit,
    free_params,
    initial_params,
    predictions,
    stack_for_key,
)
from accelsim.errors import AccelsimError
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.software import DEFAULT, MAX_MODIFIER, builtin_stacks
from accelsim.results.files import output_folder, write_atomic
from accelsim.tomlfiles import read_text_file

MODIFIERS = {"tensor_core": "tensor_core_efficiency", "cuda_core": "cuda_core_efficiency",
             "dram_bandwidth": "dram_bandwidth_efficiency"}


def predict_row(row: Row) -> float:
    """The model's value for `row`, in its unit (samples/s or ms)."""
    from accelsim.devices.estimate import estimate
    from accelsim.profiles.devices import load_profile
    from accelsim.profiles.hardware import host_clock_hz, host_cpu_profile, resolve_hardware
    from accelsim.workload.zoo import build_model

    system, profile = resolve_hardware(row.system) if row.system else (None, None)
    if profile is None:
        profile = load_profile(row.device)
    graph = build_model(row.model, **({} if row.seq_len is None else {"seq_len": row.seq_len}))
    software = row.stack if row.stack == DEFAULT or row.stack in builtin_stacks() \
        else stack_for_key(row.stack)
    est = estimate(graph, profile, row.batch, row.precision, row.mode, software, row.optimizer,
                   None if system is None else host_clock_hz(system),
                   None if system is None else host_cpu_profile(system))
    if not est.memory["fits"]:
        raise AccelsimError(f"batch {row.batch} does not fit in {profile.name}'s memory")
    opt_s = est.phase_time_s("optimizer") if row.mode == "train" else 0.0
    step_s = est.step_time_s - opt_s + opt_s / row.accumulation_steps
    return step_s * 1e3 if row.metric == "latency" else row.batch / step_s


def predict_rows(rows: list[Row]) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """(one line per predicted row: id, profile, software, model, mode, batch, precision,
    metric, measured, predicted, error = predicted / measured - 1; [(id, reason)] for rows
    the model refused)."""
    out, failed = [], []
    cache: dict[tuple, float] = {}
    for r in rows:
        key = (r.case, r.metric)
        try:
            if key not in cache:
                cache[key] = predict_row(r)
        except AccelsimError as err:
            failed.append((r.id, str(err)))
            continue
        out.append({"id": r.id, "profile": r.workload, "software": r.stack, "model": r.model,
                    "mode": r.mode, "batch": r.batch, "precision": r.precision,
                    "metric": r.metric, "measured": r.measured, "predicted": cache[key],
                    "error": cache[key] / r.measured - 1.0})
    return pd.DataFrame(out), failed


def error_stats(err: np.ndarray) -> dict[str, float | int]:
    """rows, median |error|, worst |error| (NaN for no rows)."""
    a = np.abs(np.asarray(err, dtype=float))
    return {"rows": len(a), "median_abs_error": float(np.median(a)) if len(a) else float("nan"),
            "worst_abs_error": float(a.max()) if len(a) else float("nan")}


@dataclass
class FitResult:
    """A fit on the GPU rows: parameters, in-sample and held-out errors, rows left out."""

    params: dict[str, float]
    free: list[str]
    stacks: list[str]
    rows: int
    folds: int
    in_sample: dict[str, float | int]
    held_out: dict[str, float | int]
    held_out_errors: list[float] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)
    by_device: bool = False  # folds: the devices (else rows, i mod k)


def fit_rows(rows: list[Row], folds: int = 5, by_device: bool = False) -> FitResult:
    """Fit the GPU class factors and the rows' stacks (see the module docstring). With
    `by_device` the held-out folds are the rows' devices instead (leave-one-device-out: each
    device predicted by a fit on the others'; `folds` is then the device count)."""
    from accelsim.profiles.devices import load_profile

    gpu, left_out = [], []
    for r in rows:
        try:
            is_gpu = load_profile(r.device).device_class == "gpu"
        except AccelsimError as err:
            left_out.append((r.id, str(err)))
            continue
        if not is_gpu:
            left_out.append((r.id, f"{r.device} is not a GPU: the fit covers the GPU model"))
        elif r.stack == DEFAULT:
            left_out.append((r.id, "sim_software 'default': name the stack to fit"))
        else:
            gpu.append(r)
    if not gpu:
        raise AccelsimError("no GPU rows with a named software stack to fit")
    extra = sorted({r.stack for r in gpu} - set(builtin_stacks()))
    start = initial_params(extra)
    parts, row_case = build_parts(gpu)
    p = fit(gpu, parts, row_case, start)
    measured = np.array([r.measured for r in gpu])
    in_err = predictions(gpu, parts, row_case, p) / measured - 1.0
    if by_device:
        devices = sorted({r.device for r in gpu})
        fold, k = np.array([devices.index(r.device) for r in gpu]), len(devices)
    else:
        k = min(folds, len(gpu))
        fold = np.arange(len(gpu)) % k
    held = np.full(len(gpu), np.nan)
    if k >= 2:
        for f in range(k):
            train = fold != f
            q = fit([r for r, t in zip(gpu, train, strict=True) if t], parts, row_case[train],
                    start)
            test = ~train
            held[test] = predictions([r for r, t in zip(gpu, test, strict=True) if t], parts,
                                     row_case[test], q) / measured[test] - 1.0
    return FitResult(p, free_params(gpu), sorted({r.stack for r in gpu}), len(gpu), k,
                     error_stats(in_err), error_stats(held[~np.isnan(held)]),
                     held.tolist(), left_out, by_device)


def set_toml_value(text: str, key: str, value: str) -> str:
    """`text` with the first line `key = ...` set to `key = value` (KeyError: no such line)."""
    new, n = re.subn(rf"(?m)^{re.escape(key)} = .*$", f"{key} = {value}", text, count=1)
    if n != 1:
        raise KeyError(key)
    return new


def _us(value: float) -> float:
    """A fitted host time in us as written: below 1 ns (the fit's descent toward 0, and under
    the schema's physical range) it is 0."""
    return value if value >= 1e-3 else 0.0


def calibrated_values(result: FitResult, stack: str) -> dict[str, float]:
    """The fitted values of `stack` in its TOML's terms: host times in us, modifiers with the
    fitted class factors folded in (capped to the schema's MAX_MODIFIER)."""
    p, shipped = result.params, load_efficiency("gpu")
    out = {"host.per_kernel_us.gpu": _us(p[f"{stack}.kernel_us"]),
           "host.per_step_us": _us(p[f"{stack}.step_us"])}
    if _us(p.get(f"{stack}.request_us", 0.0)):
        out["host.per_request_us"] = _us(p[f"{stack}.request_us"])
    for mod, cls in MODIFIERS.items():
        folded = p[cls] * p[f"{stack}.{mod}"] / float(shipped[f"fitted.{cls}"])
        out[f"efficiency.{mod}"] = min(folded, MAX_MODIFIER)
    return out


def write_calibrated(result: FitResult, out_dir: Path, source: str) -> list[Path]:
    """Write `<stack>-calibrated.toml` per fitted stack into `out_dir`: its TOML with the
    fitted values and `fitted:` sources naming `source`; returns the paths."""
    from accelsim.datafiles import builtin_files

    out_dir = output_folder(out_dir, "validate --out")
    builtins = builtin_files("hw_profiles", "software/*.toml")
    written = []
    for stack in result.stacks:
        path = Path(builtins[stack]) if stack in builtins else Path(stack)
        text = read_text_file(path)
        text = re.sub(r"(?m)^(aliases|default_for) = .*\n", "", text)  # names of the built-in
        note = (f"fitted: accelsim validate --fit on {result.rows} rows of {source} (GPU class "
                "factors folded into the modifiers)")
        for dotted, value in calibrated_values(result, stack).items():
            key = dotted.rsplit(".", 1)[1]
            try:
                text = set_toml_value(text, key, f"{value:.4g}")
            except KeyError:  # an optional key the stack does not set: add it to its table
                table = dotted.rsplit(".", 1)[0]
                text = text.replace(f"[{table}]\n", f"[{table}]\n{key} = {value:.4g}\n", 1)
            src = rf'"{re.escape(dotted)}" = .*'
            if re.search(rf"(?m)^{src}$", text):
                text = re.sub(rf"(?m)^{src}$", f'"{dotted}" = "{note}"', text, count=1)
            else:
                text = text.rstrip("\n") + f'\n"{dotted}" = "{note}"\n'
        target = out_dir / f"{path.stem}-calibrated.toml"
        write_atomic(target, f"# Calibrated by accelsim validate --fit on {source}.\n" + text)
        written.append(target)
    return written


def summary(result: FitResult) -> dict[str, Any]:
    """The JSON-ready summary of a fit."""
    return {"rows": result.rows, "folds": result.folds, "stacks": result.stacks,
            "held_out_by": "device" if result.by_device else "row",
            "parameters": {n: result.params[n] for n in result.free},
            "in_sample": result.in_sample, "held_out": result.held_out,
            "left_out": [{"id": i, "reason": why} for i, why in result.left_out]}
