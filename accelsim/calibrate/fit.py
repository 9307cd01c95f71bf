"""Fit a stack's CPU efficiencies and per-op overhead to timed calibration cases, in closed form.

    work_s, kernels = unit_work_s(profile, case, "fp32")   # the model's time at efficiency 1
    fit = fit_efficiencies(keys, work_s, kernels, measured_s)

The CPU class model (`accelsim.devices.cpu`) times a row as work / (peak x efficiency) plus the
stack's dispatch time per kernel. Running it with every efficiency 1 and no dispatch gives each
case's `work_s` (compute for GEMM, convolution, attention and vector cases; memory for streams),
so the measured times obey t_i = work_s_i / e_(key_i) + kernels_i x t_kernel: linear in 1/e
per key once t_kernel is the measured time of an empty op. Least squares through the origin
gives each 1/e in closed form.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelsim.calibrate.cases import Case
from accelsim.devices.cpu import VECTOR_OPS, cpu_costs
from accelsim.devices.precision import hardware_key
from accelsim.devices.software import (
    CPU_KERNELS,
    CPU_OP_KEYS,
    CPU_PRECISIONS,
    SoftwareStack,
    builtin_stacks,
)
from accelsim.errors import AccelsimError
from accelsim.workload.work import gemms_for, work_table

MEMORY_KERNELS = ("stream",)  # kernels whose work is the memory term; the rest: compute
MATMUL_KERNELS = ("gemm", "conv", "attention")
# Per-core GEMM output blocks tried (m, n): the one whose fit errs least on the matmul cases.
CORE_TILES = tuple((m, n) for m in (1, 4, 16, 64) for n in (4, 16, 64))


@dataclass(frozen=True)
class Fit:
    """Fitted efficiency per key ("gemm_fp32", ...; fraction of the profile's peak), the
    shared dispatch time per kernel (s), the fit's relative error per case, and the per-core
    GEMM tile the cases' work was modelled with."""

    efficiency: dict[str, float]
    per_kernel_s: float
    relative_error: np.ndarray
    core_tile: tuple[int, int] | None = None  # the GEMM tile the work was modelled with

    @property
    def median_abs_error(self) -> float:
        return float(np.median(np.abs(self.relative_error)))


def unit_stack(core_tile: tuple[int, int] | None = None) -> SoftwareStack:
    """A stack with every CPU efficiency 1 and no host time: the model's pure work (GEMMs
    blocked in `core_tile`, None: the class's tile)."""
    base = builtin_stacks()["pytorch-eager"]
    ones = {f"{k}_{p}": 1.0 for k in (*CPU_KERNELS, *CPU_OP_KEYS) for p in CPU_PRECISIONS}
    return dataclasses.replace(base, name="unit", fuses=(), per_step_s=0.0, per_request_s=0.0,
                               per_kernel_s={"cpu": 0.0}, cpu_efficiency=ones,
                               host_single_thread_hz=None, cpu_core_tile=core_tile)


def case_key(case: Case, precision: str) -> str:
    """The `[cpu_efficiency]` key a case fits: its op kind's for a non-matmul op (`relu_fp32`),
    else its kernel's (`gemm_fp32`, `conv_fp32`, `attention_fp32`)."""
    kind = case.graph.ops[-1].kind.value
    name = kind if case.kernel in ("vector", "stream") else case.kernel
    return f"{name}_{hardware_key(precision)}"


def with_group_figures(efficiency: dict[str, float]) -> dict[str, float]:
    """`efficiency` plus `vector_<p>` and `stream_<p>`: the geometric mean of the fitted op
    kinds of each group at that precision, for op kinds no case measured. NB: an unmeasured
    op kind is taken to be as efficient as the typical measured one of its group."""
    groups: dict[str, list[float]] = {}
    for key, value in efficiency.items():
        kind, _, precision = key.rpartition("_")
        if kind in MATMUL_KERNELS:
            continue
        group = "vector" if kind in VECTOR_OPS else "stream"
        groups.setdefault(f"{group}_{precision}", []).append(value)
    means = {k: float(np.exp(np.mean(np.log(v)))) for k, v in groups.items()}
    return {**efficiency, **means}


def unit_work_s(profile: Any, case: Case, precision: str,
                core_tile: tuple[int, int] | None = None) -> tuple[float, float]:
    """(the model's time of the case's op at efficiency 1 for its kernel's term, s; the kernels
    the model charges dispatch for) on `profile` in `precision`, GEMMs blocked in
    `core_tile` (None: the class's)."""
    work = work_table(case.graph, case.batch, precision).iloc[[-1]]
    costs = cpu_costs(profile, work, gemms_for(case.graph, case.batch), hardware_key(precision),
                      unit_stack(core_tile))
    column = "memory_s" if case.kernel in MEMORY_KERNELS else "compute_s"
    return float(costs[column].iloc[0]), float(costs["kernels"].iloc[0])


def fit_efficiencies(keys: list[str], work_s: np.ndarray, kernels: np.ndarray,
                     measured_s: np.ndarray, dispatch_s: float = 0.0,
                     core_tile: tuple[int, int] | None = None) -> Fit:
    """Per key, the least-squares slope through the origin of the time left after dispatch
    against the model's work: 1/e = sum(x (t - k t0)) / sum(x^2), x = work_s, t = measured_s,
    k = kernels, t0 = `dispatch_s` (an empty op's measured time). NB: in absolute time, so
    the large cases, which dominate a network's time, dominate the fit; a key whose slope is
    not positive (every case dominated by dispatch) takes the median of its cases' ratios,
    each case's time after dispatch floored at a tenth of its measured time. Raises
    AccelsimError when a measured time is not positive and finite."""
    work_s, kernels, measured_s = (np.asarray(a, dtype=float)
                                   for a in (work_s, kernels, measured_s))
    if not (np.all(np.isfinite(measured_s)) and np.all(measured_s > 0)):
        raise AccelsimError("calibration: a measured time is not positive and finite")
    if np.any(work_s <= 0) or not np.all(np.isfinite(work_s)):
        raise AccelsimError("calibration: a case has no modelled work (not positive)")
    key_arr = np.asarray(keys)
    left_s = measured_s - kernels * dispatch_s
    efficiency: dict[str, float] = {}
    predicted_s = np.empty_like(measured_s)
    for name in sorted(set(keys)):
        rows = key_arr == name
        x = work_s[rows]
        slope = float(np.sum(x * left_s[rows]) / np.sum(x * x))
        if slope <= 0:
            slope = float(np.median(np.maximum(left_s[rows], 0.1 * measured_s[rows]) / x))
        efficiency[name] = 1.0 / slope
        predicted_s[rows] = x * slope + kernels[rows] * dispatch_s
    return Fit(efficiency=efficiency, per_kernel_s=float(dispatch_s),
               relative_error=predicted_s / measured_s - 1.0, core_tile=core_tile)


def fit_core_tile(rows: list[dict[str, Any]], cases: list[Case], profile: Any,
                  dispatch_s: float) -> tuple[int, int]:
    """The per-core GEMM tile of `CORE_TILES` whose fit (`fit_efficiencies`) has the least
    mean squared relative error over the matmul rows (`rows[i]` timed `cases[i]`: keys
    "precision", "key", "kernels", "measured_s"). NB: a small tile stands for a BLAS that
    wastes little on a skinny GEMM; the class's 64 x 64 charges M = 8 as M = 64."""
    picked = [(r, c) for r, c in zip(rows, cases, strict=True) if c.kernel in MATMUL_KERNELS]
    if not picked:
        return CORE_TILES[-1]
    best: tuple[float, tuple[int, int]] | None = None
    for tile in CORE_TILES:
        work = np.array([unit_work_s(profile, c, r["precision"], tile)[0] for r, c in picked])
        fit = fit_efficiencies([r["key"] for r, _ in picked], work,
                               np.array([r["kernels"] for r, _ in picked]),
                               np.array([r["measured_s"] for r, _ in picked]), dispatch_s)
        score = float(np.mean(fit.relative_error ** 2))
        if best is None or score < best[0]:
            best = (score, tile)
    return best[1]
