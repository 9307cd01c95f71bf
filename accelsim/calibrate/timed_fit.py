"""Time a calibration's kernel cases and fit a stack's factors on them (`fit_cases`): every
case at every precision, the least time of each over the plan's passes, then the fit of
`accelsim.calibrate.fit`. Shared by numpy's stack and PyTorch's (`accelsim.calibrate.run`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from accelsim.calibrate.cases import Clock, dispatch_case, time_case
from accelsim.calibrate.contention import spread
from accelsim.calibrate.fit import (
    Fit,
    case_fault_s,
    case_key,
    case_pass_s,
    fit_with_pack,
    unit_work_s,
)
from accelsim.calibrate.progress import Progress

DISPATCH_REPEATS = 50


def fit_cases(profile: Any, precisions: tuple[str, ...], plan: dict[str, Any],
               cases: list[Any], bar: Progress, clock: Clock, timer: Any = time_case,
               weight_casts: bool = False, allocator: tuple[float, int, int] | None = None,
               passes: dict[str, Any] | None = None, stack: str = "numpy"
               ) -> tuple[Fit, list[dict[str, Any]]]:
    """Time every case at every precision with `timer(case, precision, repeats, clock)`,
    keeping each one's least time over `plan["passes"]` passes through all of them (NB: a
    burst of other work on a shared host then spoils one pass of a case, not all), and fit
    (`fit.fit_with_pack`: matmul keys jointly with their precision's packing and weight-cast
    passes, or for int8 GEMMs and convolutions the per-call quantisation of both operands;
    `weight_casts`: the stack casts weights in every call, as the numpy kernels do below 32
    bits; `allocator`: (fresh_page_s, page_bytes, mmap_threshold_bytes), whose fault time
    per case is measured, not fitted: `fit.case_fault_s`; `passes`: the measured element-pass
    tables (`pass_bench`), whose time per case is measured, not fitted: `fit.case_pass_s`; a
    case they price whole, a GEMV, fits nothing and keeps its error beside the fit's)."""
    rows: list[dict[str, Any]] = []
    timed: list[Any] = []
    # NB: case-major, precisions inner: a burst of other work spoils a few cases of every
    # precision rather than one precision's whole fit
    for case in cases:
        for precision in precisions:
            rows.append({"case": case.name, "kernel": case.kernel, "precision": precision,
                         "key": case_key(case, precision), "measured_s": float("inf")})
            timed.append(case)
    for n in range(plan["passes"]):
        for row, case in zip(rows, timed, strict=True):
            step = (stack, case.name, row["precision"], n)
            bar.begin(step, f"{row['kernel']} {row['case']} {row['precision']}")
            wall_s, cpu_s = time.perf_counter(), time.process_time()
            seconds = timer(case, row["precision"], plan["repeats"], clock)
            wall_s, cpu_s = time.perf_counter() - wall_s, time.process_time() - cpu_s
            row["measured_s"] = min(row["measured_s"], seconds)
            row.setdefault("samples_s", []).append(seconds)
            if case.kernel in ("vector", "stream") and wall_s > 0:  # one thread: numpy's loops
                row.setdefault("cpu_over_wall", []).append(cpu_s / wall_s)
            bar.end(step)
    for row in rows:
        row["spread"] = spread(row["samples_s"])
    bar.begin((stack, "fit"), "fitting")
    dispatch_s = timer(dispatch_case(), precisions[0], DISPATCH_REPEATS, clock)
    for row, case in zip(rows, timed, strict=True):
        row["work_s"], row["serial_s"], row["memory_s"], row["kernels"] = unit_work_s(
            profile, case, row["precision"], weight_casts, passes)
        row["fault_s"] = case_fault_s(case, row["precision"], allocator, weight_casts)
        row["pass_s"], row["pass_priced"] = case_pass_s(profile, case, row["precision"],
                                                        weight_casts, passes)
    fitted = [r for r in rows if not r["pass_priced"]]
    work, serial, memory, kernels, measured, faults = (
        np.array([r[c] for r in fitted])
        for c in ("work_s", "serial_s", "memory_s", "kernels", "measured_s", "fault_s"))
    fixed = faults + np.array([r["pass_s"] for r in fitted])
    fit = fit_with_pack([r["key"] for r in fitted], work, serial, kernels, measured,
                        dispatch_s, memory, fixed)
    for row, err in zip(fitted, fit.relative_error, strict=True):
        row["fit_relative_error"] = float(err)
    for row in rows:
        if row["pass_priced"]:  # NB: in-sample all the same: the tables are measured here
            row["fit_relative_error"] = float(
                (row["pass_s"] + row["kernels"] * dispatch_s + row["fault_s"])
                / row["measured_s"] - 1.0)
    errors = np.array([r["fit_relative_error"] for r in rows])
    bar.end((stack, "fit"))
    return dataclasses.replace(fit, relative_error=errors), rows
