"""Fit the GPU class efficiency factors and a software stack's fitted fields to measured rows
(moved here from benchmarks/fidelity/fit_stacks.py, which fits the built-in stacks with it, so that
`accelsim validate --fit` fits a user's rows the same way).

    parts, row_case = build_parts(rows)           # rows: `Row`s (one measured value each)
    p = fit(rows, parts, row_case)                # {parameter: value}
    predictions(rows, parts, row_case, p)         # samples/s or ms, per row

Parameters: the class's tensor-core, CUDA-core and DRAM efficiencies; per fitted stack its host
time per kernel and per step (free only with >= MIN_HOST_ROWS rows at batch <= 8, where host
time shows), and (all but the reference stack pytorch-eager, whose modifiers are 1 by
definition) its tensor-core modifier, and its CUDA-core modifier where it has FP32 rows;
triton's per-request time and request payload rate (`payload_ns_per_byte`: the rows'
input bytes per batch cost that much host time each, serial with the GPU; NB: the rows are
client-measured with client and server on one machine). A stack is keyed by its built-in
name or its TOML path.
Method (numpy only, deterministic): each case's cost columns are computed once by gpu.py under
its stack with every factor at 1 and no host time; a step time for any parameter set is then
recombined exactly as gpu.py and estimate.py do (compute / efficiency x modifier capped at 1,
memory / bandwidth efficiency, launch gaps, host time per kernel not hidden by the kernel,
scaled by the system's host CPU, plus the per-step time), and coordinate descent on a
shrinking multiplicative grid minimises the sum of absolute log errors (robust to
inconsistent rows). The power limit is part of the recombination, as in `finish`: a kernel
whose power at full clock exceeds its board's headroom runs at the clock that fits
(`accelsim.devices.dvfs.throttle`, on the cases that can throttle at all: those over the limit
at every factor 1 and no host time, the fastest and most power-hungry point). NB: within one
step of the descent the clock fractions are held at their values at the step's start (a fixed
point, refreshed at every step); predictions use the exact throttle. NB: the per-step host
time is added once per step here, while the estimate spreads it over the rows' overhead, which
lowers their power a little: on a throttled case the two differ by about 1e-5.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelsim.devices import registry
from accelsim.devices.core import kernel_groups
from accelsim.devices.dvfs import throttle
from accelsim.devices.energy import static_power_w
from accelsim.devices.estimate import voltage_floor
from accelsim.devices.gpu.model import gpu_costs
from accelsim.profiles.devices import load_profile
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.software import SoftwareStack, builtin_stacks, load_stack
from accelsim.workload.memory import io_bytes_per_sample
from accelsim.workload.work import gemms_for, work_table
from accelsim.workload.zoo import build_model

REFERENCE_STACK = "pytorch-eager"
CLASS_PARAMS = ("tensor_core_efficiency", "cuda_core_efficiency", "dram_bandwidth_efficiency")
BOUNDS = {"eff": (0.2, 1.0), "mod": (0.3, 2.0), "kernel_us": (0.5, 300.0),
          "step_us": (0.0, 20000.0), "payload_ns_per_byte": (0.0, 50.0)}
HOST_BOUND_BATCH = 8  # rows at or below it identify host time
MIN_HOST_ROWS = 4
BATCH_BANDS = ((1, 8, "1-8"), (9, 64, "16-64"), (65, 10**9, "128+"))


@dataclass(frozen=True)
class Run:
    """What one measurement asks of the model on one device."""

    model: str
    seq_len: int | None
    batch: int  # per device, per micro-step
    accumulation_steps: int
    precision: str
    mode: str
    optimizer: str
    metric: str  # "throughput" (samples/s) or "latency" (ms)


@dataclass(frozen=True)
class Row(Run):
    """One measured single-device row as the model sees it. `device`: a profile name or path;
    `system`: a system name or path whose host CPU ran it ("" = the stack's reference host);
    `stack`: a built-in stack name or a stack TOML path."""

    id: str = ""
    sku: str = ""
    device: str = ""
    system: str = ""
    stack: str = ""
    measured: float = float("nan")  # samples/s or ms
    workload: str = ""

    @property
    def band(self) -> str:
        """Batch band of the protocol: 1-8, 16-64, 128+."""
        return next(name for lo, hi, name in BATCH_BANDS if lo <= self.batch <= hi)

    @property
    def case(self) -> tuple:
        """What the estimate depends on (rows sharing it share one estimate)."""
        return (self.device, self.system, self.stack, self.model, self.seq_len, self.batch,
                self.accumulation_steps, self.precision, self.mode, self.optimizer)


@dataclasses.dataclass
class Parts:
    """Every fit case's unit-factor cost columns, flattened; `case` maps a row to its case."""

    case: np.ndarray  # per kernel row: the case it belongs to
    tensor: np.ndarray
    cuda: np.ndarray
    memory: np.ndarray
    kernels: np.ndarray
    launch: np.ndarray
    weight: np.ndarray  # 1, or 1 / accumulation steps for optimizer rows
    case_stack: list[str]
    case_host_scale: np.ndarray  # reference clock / the system's host clock, per case
    n_cases: int
    case_payload_bytes: np.ndarray  # per case: a batch's input bytes (a server's request)
    die_j: np.ndarray  # per kernel row: dynamic energy that scales with the core voltage, J
    offchip_j: np.ndarray  # per kernel row: DRAM energy (does not), J
    group: np.ndarray  # per kernel row: the (global) position of the kernel it ran in
    headroom_w: np.ndarray  # per kernel row: its board's TDP less static power, W
    floor: np.ndarray  # per kernel row: the DVFS voltage floor (nan: no DVFS, never capped)
    capped: np.ndarray  # per kernel row: its case can exceed the power limit at all


def stack_for_key(key: str) -> SoftwareStack:
    """The stack a row names: a built-in by name, else a stack TOML by path."""
    return builtin_stacks().get(key) or load_stack(key)


def _case_costs(row: Row) -> dict[str, np.ndarray]:
    """Cost columns of one case under its stack, factors 1, host time 0."""
    eff = load_efficiency("gpu")
    saved = dict(eff)
    stack = stack_for_key(row.stack)
    bare = dataclasses.replace(stack, per_kernel_s={"gpu": 0.0}, per_step_s=0.0,
                               per_request_s=0.0,
                               efficiency=dict.fromkeys(stack.efficiency, 1.0))
    try:
        for name in CLASS_PARAMS:
            eff[f"fitted.{name}"] = 1.0
        graph = build_model(row.model, **({} if row.seq_len is None else {"seq_len": row.seq_len}))
        work = work_table(graph, row.batch, row.precision, row.mode, row.optimizer)
        costs = gpu_costs(load_profile(row.device), work, gemms_for(graph, row.batch),
                          row.precision, bare)
    finally:
        eff.update(saved)
    tensor = np.asarray(costs["unit"]) == "tensor_core"
    kernels = np.asarray(costs["kernels"], dtype=float)
    optimizer = np.asarray(work["phase"]) == "optimizer"
    profile = load_profile(row.device)
    tdp_w = registry.get(profile.device_class).power_limits(profile)[0]
    offchip = np.asarray(costs["offchip_energy_j"], dtype=float)
    floor = voltage_floor(profile)
    n = len(work)
    return {"tensor": np.where(tensor, costs["compute_s"], 0.0),
            "cuda": np.where(tensor, 0.0, costs["compute_s"]),
            "memory": np.asarray(costs["memory_s"], dtype=float), "kernels": kernels,
            "launch": kernels * eff["assumed.kernel_launch_s"],
            "weight": np.where(optimizer, 1.0 / row.accumulation_steps, 1.0),
            "die_j": np.asarray(costs["dynamic_energy_j"], dtype=float) - offchip,
            "offchip_j": offchip, "group": kernel_groups(work, costs),
            "headroom_w": np.full(n, tdp_w - static_power_w(profile)),
            "floor": np.full(n, np.nan if floor is None else floor)}


def host_scale(system: str, stack: str) -> float:
    """Reference host clock / the system's host clock (the stack's host-time factor); 1 where
    no system (or no host clock) is given."""
    from accelsim.profiles.hardware import host_clock_hz
    from accelsim.profiles.systems import load_system

    clock = host_clock_hz(load_system(system)) if system else None
    return 1.0 if clock is None else stack_for_key(stack).reference_single_thread_hz / clock


def build_parts(rows: list[Row]) -> tuple[Parts, np.ndarray]:
    """The flattened parts of every distinct case, and each row's case index."""
    cases: dict[tuple, int] = {}
    first: list[Row] = []
    row_case = np.empty(len(rows), dtype=int)
    for i, r in enumerate(rows):
        if r.case not in cases:
            cases[r.case] = len(cases)
            first.append(r)
        row_case[i] = cases[r.case]
    cols: dict[str, list[np.ndarray]] = {k: [] for k in (
        "tensor", "cuda", "memory", "kernels", "launch", "weight", "case", "die_j",
        "offchip_j", "group", "headroom_w", "floor", "capped")}
    offset = 0
    for c, r in enumerate(first):
        part = _case_costs(r)
        part["group"] = part["group"] + offset
        n = len(part["tensor"])
        offset += n
        for k, v in part.items():
            cols[k].append(v)
        cols["case"].append(np.full(n, c))
        cols["capped"].append(np.zeros(n, dtype=bool))
    flat = {k: np.concatenate(v) for k, v in cols.items()}
    parts = Parts(n_cases=len(first), case_stack=[r.stack for r in first],
                  case_host_scale=np.array([host_scale(r.system, r.stack) for r in first]),
                  case_payload_bytes=np.array([_payload_bytes(r) for r in first]), **flat)
    # the cases over the limit at their fastest (every factor 1, no host time) can throttle
    fast_f = _clock(parts, parts.tensor + parts.cuda, parts.memory, np.zeros(offset),
                    np.isfinite(parts.floor))
    over = np.bincount(parts.case, weights=fast_f < 1, minlength=parts.n_cases) > 0
    parts.capped = over[parts.case] & np.isfinite(parts.floor)
    return parts, row_case


def _payload_bytes(row: Row) -> float:
    """The input bytes of one batch of `row` (what a server's request carries)."""
    graph = build_model(row.model, **({} if row.seq_len is None else {"seq_len": row.seq_len}))
    return row.batch * io_bytes_per_sample(graph, row.precision)[0]


def _clock(parts: Parts, compute_s: np.ndarray, memory_s: np.ndarray, overhead_s: np.ndarray,
           rows: np.ndarray) -> np.ndarray:
    """Clock fraction of every kernel row (1 outside `rows`): `finish`'s DVFS on `rows`."""
    f = np.ones(len(compute_s))
    if not rows.any():
        return f
    idx = np.flatnonzero(rows)
    local = np.searchsorted(idx, parts.group[idx])  # each row's kernel among `rows`
    f[idx] = throttle(local, compute_s[idx], memory_s[idx], overhead_s[idx], parts.die_j[idx],
                      parts.offchip_j[idx], parts.headroom_w[idx], float(parts.floor[idx][0]))[0]
    return f  # (NB: one voltage floor for every GPU, `dvfs.toml`)


def initial_params(extra_stacks: list[str] | tuple[str, ...] = ()) -> dict[str, float]:
    """The current values in the TOMLs, as fit parameters (host times in us): every built-in
    stack's and those of `extra_stacks` (stack TOML paths)."""
    eff = load_efficiency("gpu")
    p = {name: float(eff[f"fitted.{name}"]) for name in CLASS_PARAMS}
    stacks = {**builtin_stacks(), **{k: stack_for_key(k) for k in extra_stacks}}
    for name, s in stacks.items():
        p[f"{name}.kernel_us"] = s.per_kernel_s.get("gpu", 0.0) * 1e6
        p[f"{name}.step_us"] = s.per_step_s * 1e6
        p[f"{name}.request_us"] = s.per_request_s * 1e6
        p[f"{name}.tensor_core"] = s.efficiency["tensor_core"]
        p[f"{name}.cuda_core"] = s.efficiency["cuda_core"]
        p[f"{name}.dram_bandwidth"] = s.efficiency["dram_bandwidth"]
        p[f"{name}.payload_ns_per_byte"] = (1e9 / s.payload_bytes_per_s
                                            if s.payload_bytes_per_s else 0.0)
    return p


def host_bound_rows(rows: list[Row], stack: str) -> int:
    """Rows of `stack` at batch 1-8, where host time shows (they identify it)."""
    return sum(r.stack == stack and r.batch <= HOST_BOUND_BATCH for r in rows)


def free_params(rows: list[Row]) -> list[str]:
    """The parameters the rows can set (see the module docstring). A stack's host times are
    free only where it has at least MIN_HOST_ROWS rows at batch 1-8 (else `fit` gives them the
    median of the stacks that have)."""
    names = list(CLASS_PARAMS)
    for stack in sorted({r.stack for r in rows}):
        fp32 = any(r.stack == stack and r.precision == "fp32" for r in rows)
        host = host_bound_rows(rows, stack) >= MIN_HOST_ROWS
        if stack == "triton":
            names += ["triton.request_us"] * host + ["triton.tensor_core",
                                                     "triton.payload_ns_per_byte"]
            continue
        names += [f"{stack}.kernel_us", f"{stack}.step_us"] if host else []
        if stack != REFERENCE_STACK:
            names += [f"{stack}.tensor_core"] + ([f"{stack}.cuda_core"] if fp32 else [])
    return names


def case_times_s(parts: Parts, p: dict[str, float], clock: np.ndarray | None = None
                 ) -> np.ndarray:
    """Step time of every case under parameters `p` (gpu.py's recombination and `finish`'s
    DVFS; `clock`: every kernel row's clock fraction held, None: the throttle's at `p`)."""
    per_row, step_s = _row_times(parts, p, clock)
    return np.bincount(parts.case, weights=per_row, minlength=parts.n_cases) + step_s


def row_clock(parts: Parts, p: dict[str, float]) -> np.ndarray:
    """The clock fraction of every kernel row under parameters `p`."""
    return _row_times(parts, p, None, clock_only=True)


def _row_times(parts: Parts, p: dict[str, float], clock: np.ndarray | None,
               clock_only: bool = False) -> Any:
    stacks = parts.case_stack
    per_case = {k: np.array([p[f"{s}.{k}"] for s in stacks])
                for k in ("kernel_us", "step_us", "request_us", "tensor_core", "cuda_core",
                          "dram_bandwidth", "payload_ns_per_byte")}
    tc = np.minimum(p["tensor_core_efficiency"] * per_case["tensor_core"], 1.0)[parts.case]
    cc = np.minimum(p["cuda_core_efficiency"] * per_case["cuda_core"], 1.0)[parts.case]
    bw = np.minimum(p["dram_bandwidth_efficiency"] * per_case["dram_bandwidth"], 1.0)[parts.case]
    scale = parts.case_host_scale
    compute, memory = parts.tensor / tc + parts.cuda / cc, parts.memory / bw
    busy = np.maximum(compute, memory)
    host = parts.kernels * (per_case["kernel_us"] * 1e-6 * scale)[parts.case]
    overhead = parts.launch + np.maximum(host - busy, 0.0)
    if clock is None:
        clock = _clock(parts, compute, memory, overhead, parts.capped)
    if clock_only:
        return clock
    per_row = parts.weight * (np.maximum(compute / clock, memory) + overhead)
    payload_s = parts.case_payload_bytes * per_case["payload_ns_per_byte"] * 1e-9
    return per_row, ((per_case["step_us"] + per_case["request_us"]) * 1e-6 + payload_s) * scale


def predictions(rows: list[Row], parts: Parts, row_case: np.ndarray,
                p: dict[str, float], clock: np.ndarray | None = None) -> np.ndarray:
    """Predicted value of every row, in its CSV unit (samples/s or ms)."""
    t = case_times_s(parts, p, clock)[row_case]
    batch = np.array([r.batch for r in rows], dtype=float)
    latency = np.array([r.metric == "latency" for r in rows])
    return np.where(latency, t * 1e3, batch / t)


def _bounds(name: str) -> tuple[float, float]:
    if name in CLASS_PARAMS:
        return BOUNDS["eff"]
    kind = name.rsplit(".", 1)[1]
    if kind in ("step_us", "request_us"):
        return BOUNDS["step_us"]
    return BOUNDS[kind if kind in ("kernel_us", "payload_ns_per_byte") else "mod"]


def fit(rows: list[Row], parts: Parts, row_case: np.ndarray,
        start: dict[str, float] | None = None) -> dict[str, float]:
    """Parameters minimising the absolute log error of `rows` (coordinate descent)."""
    p = dict(start or initial_params())
    names = free_params(rows)
    measured = np.array([r.measured for r in rows])
    host_free = [n for n in names if n.endswith(".kernel_us")]
    for stack in {r.stack for r in rows} - {"triton"}:
        if f"{stack}.kernel_us" not in names and host_free:  # too few host-bound rows
            for kind in ("kernel_us", "step_us"):  # the fitted stacks' median
                p[f"{stack}.{kind}"] = float(np.median(
                    [p[n] for n in names if n.endswith(f".{kind}")]))

    def loss(q: dict[str, float]) -> float:
        pred = predictions(rows, parts, row_case, q, clock)
        return float(np.sum(np.abs(np.log(pred / measured))))

    for step in (0.5, 0.2, 0.08, 0.03, 0.01):
        clock = row_clock(parts, p)  # held through the step (the module docstring)
        best = loss(p)
        for _ in range(30):
            improved = False
            for name in names:
                lo, hi = _bounds(name)
                for factor in (1 - step, 1 + step):
                    value = min(max(p[name] * factor if p[name] > 0 else 1.0, lo), hi)
                    trial = {**p, name: value}
                    err = loss(trial)
                    if err < best - 1e-12:
                        best, p, improved = err, trial, True
            if not improved:
                break
    return p


def abs_errors(rows: list[Row], parts: Parts, row_case: np.ndarray,
               p: dict[str, float]) -> np.ndarray:
    """|predicted / measured - 1| per row."""
    measured = np.array([r.measured for r in rows])
    return np.abs(predictions(rows, parts, row_case, p) / measured - 1.0)
