"""Fit a stack's CPU efficiencies and per-op overhead to timed calibration cases, in closed form.

    work_s, serial_s, memory_s, kernels = unit_work_s(profile, case, "fp32")  # efficiency 1
    fit = fit_with_pack(keys, work_s, serial_s, kernels, measured_s, dispatch_s, memory_s)

The CPU class model (`accelsim.devices.cpu.model`) times a row as work / (peak x efficiency), plus,
for a matmul, the serial passes over memory of BLAS packing and the stack's weight casts
(bytes / (bandwidth x the stack's `pack` figure)), plus the stack's dispatch time per kernel;
a memory-bound matmul (a GEMV) streams its DRAM bytes at the stack's `gemv` figure. Running it
with every efficiency 1 and no dispatch gives each case's `work_s` (the micro-kernels' compute
for GEMM, convolution and attention cases, compute for vector cases, memory for streams),
`serial_s` and `memory_s`, so the measured times obey
t_i = work_s_i / e_(key_i) + serial_s_i / e_(serial_i) + kernels_i x t_kernel (or
memory_s_i / e_(gemv, precision) + kernels_i x t_kernel where memory-bound), with t_kernel the
measured time of an empty op, and serial_i the case's `pack_<precision>`, or for an integer
precision's GEMM and convolution cases `quantize_<precision>` (numpy's int8 kernels quantise
both operands per call and multiply in their own loop: `cpu.quantized_rows`): linear in the
1/e. Non-matmul keys (no serial term) take the
least-squares slope through the origin of their key; the matmul keys of a precision, its
`pack_<precision>`, `quantize_<precision>` and `gemv_<precision>` figures one joint linear
least squares
(`fit_with_pack`). Both are closed forms. A serial figure whose coefficient comes out not
positive is dropped to the stack's cap and the rest refitted (`_lstsq_dropping_serials`).
Under measured element-pass tables (`devices.cpu.passes`: weight casts, int8 quantisation, a
GEMV's stream), what they price is a measured time per case (`case_pass_s`), subtracted like
the fault time, not a fitted figure: the casts leave `pack_<p>`, the quantisation
`quantize_<p>`, and the GEMVs (priced whole) `gemv_<p>`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelsim.calibrate.cases import Case
from accelsim.devices.cpu.model import (
    VECTOR_OPS,
    cpu_costs,
    fault_s,
    quantized_rows,
    serial_stream_bytes,
)
from accelsim.devices.cpu.passes import PassTable, pass_times_s
from accelsim.devices.precision import hardware_key
from accelsim.errors import AccelsimError
from accelsim.formats import get_format
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.software import (
    CPU_KERNELS,
    CPU_OP_KEYS,
    CPU_PRECISIONS,
    MAX_CPU_EFFICIENCY,
    SoftwareStack,
    builtin_stacks,
)
from accelsim.workload.columns import Columns
from accelsim.workload.work import gemms_for, work_table

MEMORY_KERNELS = ("stream",)  # kernels whose work is the memory term; the rest: compute
MATMUL_KERNELS = ("gemm", "conv", "attention")
# slope (1/efficiency) of a serial figure the joint fit cannot separate from zero: the cap of
# a stack's CPU efficiency (`software.MAX_CPU_EFFICIENCY`)
SERIAL_FLOOR = 1.0 / MAX_CPU_EFFICIENCY
BOUND_PASSES = 4  # fits of the joint matmul least squares while the cases' bounds settle
PACK_KERNEL = "pack"  # the matmuls' packing and weight-cast passes (`pack_<precision>`)
# an integer precision's per-call quantisation of both GEMM operands (`quantize_<precision>`)
QUANTIZE_KERNEL = "quantize"


@dataclass(frozen=True)
class Fit:
    """Fitted efficiency per key ("gemm_fp32", ...; fraction of the profile's peak), the
    shared dispatch time per kernel (s) and the fit's relative error per case."""

    efficiency: dict[str, float]
    per_kernel_s: float
    relative_error: np.ndarray

    @property
    def median_abs_error(self) -> float:
        return float(np.median(np.abs(self.relative_error)))


def unit_stack(weight_casts: bool = False) -> SoftwareStack:
    """A stack with every CPU efficiency and modifier 1, no host time and no layout
    conversions: the model's pure work (with autocast weight casts if `weight_casts`), GEMMs on
    the class's micro-tile."""
    base = builtin_stacks()["pytorch-eager"]
    ones = {f"{k}_{p}": 1.0 for k in (*CPU_KERNELS, *CPU_OP_KEYS) for p in CPU_PRECISIONS}
    return dataclasses.replace(base, name="unit", fuses=(), per_step_s=0.0, per_request_s=0.0,
                               per_kernel_s={"cpu": 0.0}, cpu_efficiency=ones,
                               host_single_thread_hz=None, cpu_micro_tile=None,
                               weight_casts=weight_casts, layout_conversions_per_conv=0.0,
                               efficiency={k: 1.0 for k in base.efficiency})


def case_key(case: Case, precision: str) -> str:
    """The `[cpu_efficiency]` key a case fits: its op kind's for a non-matmul op (`relu_fp32`),
    else its kernel's (`gemm_fp32`, `conv_fp32`, `attention_fp32`)."""
    kind = case.graph.ops[-1].kind.value
    name = kind if case.kernel in ("vector", "stream") else case.kernel
    return f"{name}_{hardware_key(precision)}"


def serial_kernel(key: str) -> str:
    """The figure a matmul key's serial passes fit (`unit_work_s`'s second figure): `quantize`
    for the GEMM and convolution keys of an integer precision (the CPU model's
    `cpu.quantized_rows` under a stack that gives it: the unit stack does), else `pack`."""
    kind, _, precision = key.rpartition("_")
    integer = get_format(precision).is_integer
    return QUANTIZE_KERNEL if integer and kind in ("gemm", "conv") else PACK_KERNEL


def with_group_figures(efficiency: dict[str, float]) -> dict[str, float]:
    """`efficiency` plus `vector_<p>` and `stream_<p>`: the geometric mean of the fitted op
    kinds of each group at that precision, for op kinds no case measured. NB: an unmeasured
    op kind is taken to be as efficient as the typical measured one of its group."""
    groups: dict[str, list[float]] = {}
    for key, value in efficiency.items():
        kind, _, precision = key.rpartition("_")
        if kind in (*MATMUL_KERNELS, PACK_KERNEL, QUANTIZE_KERNEL, "gemv"):
            continue
        group = "vector" if kind in VECTOR_OPS else "stream"
        groups.setdefault(f"{group}_{precision}", []).append(value)
    means = {k: float(np.exp(np.mean(np.log(v)))) for k, v in groups.items()}
    return {**efficiency, **means}


def _case_terms(profile: Any, case: Case, precision: str, weight_casts: bool,
                passes: dict[str, PassTable] | None) -> tuple[Any, Any, dict[str, Any]]:
    """(the CPU model's costs of the case's op under the unit stack with the pass tables
    `passes`, its serial bytes (`cpu.serial_stream_bytes`), the tables' times
    (`cpu_passes.pass_times_s`))."""
    work = work_table(case.graph, case.batch, precision).iloc[[-1]]
    gemms = gemms_for(case.graph, case.batch)
    stack = dataclasses.replace(unit_stack(weight_casts), cpu_passes=dict(passes or {}))
    key = hardware_key(precision)
    rows = Columns.of(cpu_costs(profile, work, gemms, key, stack))
    costs = {name: rows[name][0] for name in rows}  # the case's one row
    serial = serial_stream_bytes(profile, work, gemms, key, stack)
    timed = pass_times_s(work, gemms, key, stack.cpu_passes, quantized_rows(work, stack, key),
                         serial["casts"].to_numpy(), get_format(key).bytes_per_element,
                         stack.weight_casts)
    return costs, serial.iloc[0], {k: v[0] for k, v in timed.items()}


def unit_work_s(profile: Any, case: Case, precision: str, weight_casts: bool = False,
                passes: dict[str, PassTable] | None = None
                ) -> tuple[float, float, float, float]:
    """(the model's time of the case's op at efficiency 1 for its kernel's term, s; its serial
    passes over memory at efficiency 1 (packing, weight casts, quantisation), s; its DRAM time
    at efficiency 1, s; the kernels the model charges dispatch for) on `profile` in
    `precision`, under a stack that casts weights or not (`weight_casts`). A pass that a table
    of `passes` prices (`devices.cpu.passes`) is left out of all three: its time is measured,
    not fitted (`case_pass_s`)."""
    costs, serial, timed = _case_terms(profile, case, precision, weight_casts, passes)
    fitted_bytes = serial["pack"] + serial["transpose"] + \
        (0.0 if timed["cast"] else serial["cast"]) + \
        (0.0 if timed["quantize"] else serial["quantize"])
    serial_s = float(fitted_bytes / profile.offchip_memory.bandwidth_bytes_per_s)
    memory_s, kernels = float(costs["memory_s"]), float(costs["kernels"])
    if case.kernel in MEMORY_KERNELS:
        return memory_s, 0.0, memory_s, kernels
    measured_s = timed["cast_s"] + timed["quantize_s"]
    # NB: a GEMV's whole time is the measured stream (`case_pass_s`); a case whose measured
    # passes alone outlast its DRAM time at efficiency 1 is taken as not memory-bound (the
    # model's busy time is its compute, passes included, at any fitted figure near 1)
    if timed["gemv"] or (measured_s > 0 and measured_s >= memory_s):
        memory_s = 0.0
    return float(costs["compute_s"]) - serial_s - measured_s, serial_s, memory_s, kernels


def case_pass_s(profile: Any, case: Case, precision: str, weight_casts: bool,
                passes: dict[str, PassTable] | None) -> tuple[float, bool]:
    """(the model's time of the case's passes that a table of `passes` prices, s; whether
    that is the case's whole time: a GEMV under the `gemv_fp32` table, whose stream and cast
    are both measured, so that no figure is fitted on it)."""
    if not passes:
        return 0.0, False
    costs, _, timed = _case_terms(profile, case, precision, weight_casts, passes)
    if timed["gemv"]:
        return float(max(costs["memory_s"], costs["compute_s"])), True
    return float(timed["cast_s"] + timed["quantize_s"]), False


def case_fault_s(case: Case, precision: str, allocator: tuple[float, int, int] | None,
                 weight_casts: bool = False) -> float:
    """The model's time faulting in the case's fresh temporaries, s (`cpu.fault_s`: a
    measured time per page, not fitted) under `allocator` ((fresh_page_s, page_bytes,
    mmap_threshold_bytes); None: 0) and a stack that casts weights or not."""
    if allocator is None:
        return 0.0
    work = work_table(case.graph, case.batch, precision).iloc[[-1]]
    stack = dataclasses.replace(unit_stack(weight_casts), allocator=allocator)
    return float(fault_s(work, gemms_for(case.graph, case.batch), hardware_key(precision),
                         stack)[0][0])


def serial_fixed_s(keys: list[str], serial_s: np.ndarray, efficiency: dict[str, float]
                   ) -> np.ndarray:
    """Each case's serial passes over memory (`unit_work_s`'s second figure) at the stream
    efficiency the CPU model gives them: the stack's `stream_<precision>` group figure of the
    fitted non-matmul keys (`with_group_figures`), else the class's assumed DRAM efficiency."""
    groups = with_group_figures(efficiency)
    default = load_efficiency("cpu")["assumed.dram_bandwidth_efficiency"]
    return np.array([s / groups.get(f"stream_{k.rpartition('_')[2]}", default) if s else 0.0
                     for k, s in zip(keys, serial_s, strict=True)])


def fit_efficiencies(keys: list[str], work_s: np.ndarray, kernels: np.ndarray,
                     measured_s: np.ndarray, dispatch_s: float = 0.0,
                     fixed_s: np.ndarray | None = None) -> Fit:
    """Per key, the least-squares slope through the origin of the time left after dispatch
    and the fixed serial time against the model's work: 1/e = sum(x (t - k t0 - f)) / sum(x^2),
    x = work_s, t = measured_s, k = kernels, t0 = `dispatch_s` (an empty op's measured time),
    f = `fixed_s` (None: 0). NB: in absolute time, so
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
    fixed = np.zeros_like(measured_s) if fixed_s is None else np.asarray(fixed_s, dtype=float)
    left_s = measured_s - kernels * dispatch_s - fixed
    efficiency: dict[str, float] = {}
    predicted_s = np.empty_like(measured_s)
    for name in sorted(set(keys)):
        rows = key_arr == name
        x = work_s[rows]
        slope = float(np.sum(x * left_s[rows]) / np.sum(x * x))
        if slope <= 0:
            slope = float(np.median(np.maximum(left_s[rows], 0.1 * measured_s[rows]) / x))
        efficiency[name] = 1.0 / slope
        predicted_s[rows] = x * slope + kernels[rows] * dispatch_s + fixed[rows]
    return Fit(efficiency=efficiency, per_kernel_s=float(dispatch_s),
               relative_error=predicted_s / measured_s - 1.0)


def _lstsq_dropping_serials(x: np.ndarray, y: np.ndarray, n_keys: int) -> np.ndarray | None:
    """Least squares of y on the columns of x, the first `n_keys` the matmul keys' work, the
    rest serial figures (pack, quantize, gemv): a serial column whose coefficient comes out
    not positive is dropped (its slope set to `SERIAL_FLOOR`: no time separable from zero
    beyond the measured passes) and the rest refitted, most negative first. None when a key's
    coefficient is not positive. NB: an active-set step of non-negative least squares; a
    dropped figure is written as the stack's cap, a pass taking next to no time."""
    active = list(range(x.shape[1]))
    while True:
        coef = np.full(x.shape[1], SERIAL_FLOOR)
        dropped = [j for j in range(x.shape[1]) if j not in active]
        floor_s = x[:, dropped].sum(axis=1) * SERIAL_FLOOR
        coef[active] = np.linalg.lstsq(x[:, active], y - floor_s, rcond=None)[0]
        bad = [j for j in active if coef[j] <= 0]
        if not bad:
            return coef
        if any(j < n_keys for j in bad):
            return None
        active.remove(min(bad, key=lambda j: coef[j]))


def _joint_matmul_fit(keys: np.ndarray, work_s: np.ndarray, serial_s: np.ndarray,
                      memory_s: np.ndarray, left_s: np.ndarray, measured_s: np.ndarray
                      ) -> tuple[dict[str, float], np.ndarray] | None:
    """(1/e per matmul key, per serial figure (`pack`, or `quantize` for an integer precision's
    GEMM and convolution keys: `serial_kernel`) and, where a case is memory-bound, `gemv`; the
    fitted time left after dispatch per case) of one precision's matmul cases by least squares
    in relative error. A memory-bound case (a GEMV: its DRAM time above its compute and serial
    passes) is timed by its DRAM time at the `gemv` figure, as the CPU model times it; the
    bound of each case is taken at efficiency 1, then once more at the fitted figures. None
    when a coefficient is not positive (the cases cannot separate the work from the passes)."""
    names = sorted(set(keys))
    serial_names = np.array([serial_kernel(k) for k in keys])
    memory_bound = memory_s > work_s + serial_s
    for _ in range(BOUND_PASSES):
        serials = sorted({s for s in serial_names[~memory_bound & (serial_s > 0)]})
        columns = [*names, *serials] + (["gemv"] if memory_bound.any() else [])
        x = np.zeros((len(keys), len(columns)))
        for j, name in enumerate(names):
            x[(keys == name) & ~memory_bound, j] = work_s[(keys == name) & ~memory_bound]
        for j, name in enumerate(serials, start=len(names)):
            rows = (serial_names == name) & ~memory_bound
            x[rows, j] = serial_s[rows]
        if memory_bound.any():
            x[memory_bound, -1] = memory_s[memory_bound]
        weight = 1.0 / measured_s
        coef = _lstsq_dropping_serials(x * weight[:, None], left_s * weight, len(names))
        if coef is None:
            return None
        slopes = dict(zip(columns, coef, strict=True))
        compute_s = work_s * np.array([slopes[k] for k in keys]) + serial_s * np.array(
            [slopes.get(s, 0.0) for s in serial_names])
        # NB: the CPU model streams a matmul's operands at `gemv`, else `pack`, else the stream
        # figure (not fitted here: such a case is taken as not memory-bound)
        operand = slopes.get("gemv", slopes.get(PACK_KERNEL, 0.0))
        bound = memory_s * operand > compute_s
        if (bound == memory_bound).all():
            break
        memory_bound = bound
    return slopes, x @ coef


def fit_with_pack(keys: list[str], work_s: np.ndarray, serial_s: np.ndarray,
                  kernels: np.ndarray, measured_s: np.ndarray, dispatch_s: float = 0.0,
                  memory_s: np.ndarray | None = None, faults_s: np.ndarray | None = None
                  ) -> Fit:
    """Every key's efficiency and each precision's `pack_<precision>` (and `gemv_<precision>`
    where a case is memory-bound): non-matmul keys as `fit_efficiencies` (no serial term); the
    matmul keys (gemm, conv, attention) of a precision jointly with its serial figures
    (`pack`; `quantize` for an integer precision's GEMM and convolution cases),
    minimising sum(((x/e_key + s/e_serial + k t0) / t - 1)^2) (x = work_s, s = serial_s:
    `unit_work_s`; a memory-bound case: m/e_gemv + k t0, m its DRAM time `memory_s`, None:
    none is). NB: in relative error, so the skinny GEMMs, whose time is
    mostly packing and casts, weigh as much as the large ones (which dominate a network's
    time). Where the joint fit fails (`_joint_matmul_fit`: None), the serial term is priced at
    the fitted stream figure (`serial_fixed_s`) and subtracted. `faults_s`: each case's fresh
    page time (`case_fault_s`, measured, not fitted; None: 0), subtracted before fitting."""
    work_s, serial_s, kernels, measured_s = (np.asarray(a, dtype=float) for a in
                                             (work_s, serial_s, kernels, measured_s))
    memory_s = np.zeros_like(work_s) if memory_s is None else np.asarray(memory_s, dtype=float)
    faults = np.zeros_like(work_s) if faults_s is None else np.asarray(faults_s, dtype=float)
    base = fit_efficiencies(keys, work_s, kernels, measured_s, dispatch_s, faults)
    efficiency = dict(base.efficiency)
    predicted_s = measured_s * (1.0 + base.relative_error)
    key_arr = np.asarray(keys)
    kinds = np.array([k.rpartition("_")[0] for k in keys])
    precisions = np.array([k.rpartition("_")[2] for k in keys])
    left_s = measured_s - kernels * dispatch_s - faults
    for precision in sorted(set(precisions[np.isin(kinds, MATMUL_KERNELS)])):
        rows = np.isin(kinds, MATMUL_KERNELS) & (precisions == precision)
        joint = _joint_matmul_fit(key_arr[rows], work_s[rows], serial_s[rows], memory_s[rows],
                                  left_s[rows], measured_s[rows])
        if joint is not None:
            slopes, fitted_s = joint
            efficiency.update({k if k.endswith(f"_{precision}") else f"{k}_{precision}":
                               1.0 / v for k, v in slopes.items()})
            predicted_s[rows] = fitted_s + kernels[rows] * dispatch_s + faults[rows]
            continue
        fixed = serial_fixed_s(list(key_arr[rows]), serial_s[rows], base.efficiency) + \
            faults[rows]
        alone = fit_efficiencies(list(key_arr[rows]), work_s[rows], kernels[rows],
                                 measured_s[rows], dispatch_s, fixed)
        efficiency.update(alone.efficiency)
        if any(serial_kernel(k) == QUANTIZE_KERNEL and v > 0
               for k, v in zip(key_arr[rows], serial_s[rows], strict=True)):
            # NB: the quantisation passes were priced at the stream figure: so is the model's
            efficiency[f"{QUANTIZE_KERNEL}_{precision}"] = with_group_figures(
                base.efficiency).get(f"stream_{precision}", load_efficiency("cpu")[
                    "assumed.dram_bandwidth_efficiency"])
        predicted_s[rows] = measured_s[rows] * (1.0 + alone.relative_error)
    return Fit(efficiency=efficiency, per_kernel_s=float(dispatch_s),
               relative_error=predicted_s / measured_s - 1.0)


def simulated_relative_errors(profile: Any, stack: SoftwareStack, cases: list[Case],
                              rows: list[dict[str, Any]]) -> np.ndarray:
    """Per row of `rows` (case name, precision, measured_s), the error of what `simulate`
    predicts for the case under the written `stack`, predicted / measured - 1: the whole
    model (its max of compute and memory terms, dispatch, faults, tables), where the fit's own
    error (`Fit.relative_error`) sees only the term a kernel is fitted on."""
    from accelsim.devices.estimate import estimate

    by_name = {case.name: case for case in cases}
    out = []
    for row in rows:
        case = by_name[row["case"]]
        est = estimate(case.graph, profile, case.batch, row["precision"], software=stack)
        out.append(est.step_time_s / row["measured_s"] - 1.0)
    return np.array(out)

