"""Physics as a check, not a hope: what every estimate and every run must satisfy.

A violation is a bug in accelsim (a class model, the roofline core, the pipeline), never the
user's input, so it raises `InvariantError` (not an `AccelsimError`: the CLI reports it as an
internal error, exit 70) with the inputs, the row and the numbers.

Per estimate (`check_estimate`, run by `estimate.estimate` on every result; SI units):
- finite and >= 0: every time, energy, FLOP and byte column; time_s >= max(compute_s,
  memory_s) + overhead_s (the power cap only adds time).
- peak: rows are checked per kernel, a row with the rows fused into it (`core.kernel_groups`),
  over the kernel's time: its own FLOPs at most the peak of the unit that ran it (the matrix
  path at the precision for a matmul row, else the vector path; `unit_peaks`, read from the
  profile); fused FLOPs at most the vector path's peak (an NPU's post-processing unit beside
  its MAC array, the vector units of a GPU or CPU); where the kernel itself ran on the vector
  path they share it, so together they are held to that peak. Host-fallback rows are held to
  the host CPU's peaks.
- power: the device's part of a kernel's energy (all but `host_energy_j`) over its time, plus
  static power, is at most the TDP; static power is below the TDP.
- energy: energy_j = dynamic + static x time; the host's part is within the dynamic energy.
- bytes: on a device with off-chip memory a kernel moves at least its operands off chip once
  (reads + writes, less what a fused row takes from its producer on chip: its input and the
  output it replaces); and, once per graph (`check_graph`), each op reads whole the tensors
  its producers wrote and writes its own output, any scratch it writes (attention scores)
  being read back (a lookup reads at least its indices).
Per run: `check_training`, `check_serving` (conservation of samples and requests, time
order, energy parts, power).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from accelsim.devices import registry
from accelsim.devices.core import kernel_groups
from accelsim.errors import AccelsimError
from accelsim.workload.columns import Table
from accelsim.workload.graph import Graph
from accelsim.workload.tables import counts_table

REL_TOL = 1e-9  # float rounding of sums of many rows
# ops that read only the part of an input they select: rows of a table chosen by their
# indices (embedding), or the elements a slice keeps
LOOKUP_OPS = frozenset({"embedding", "slice"})
_NONNEGATIVE = ("flops", "read_bytes", "write_bytes", "bytes", "dram_bytes", "onchip_bytes",
                "compute_s", "memory_s", "overhead_s", "time_s", "dynamic_energy_j", "energy_j")


class InvariantError(Exception):
    """A result broke a law of the model (a bug, not bad input); the message has the inputs."""


def fail(check: str, context: Mapping[str, Any], detail: str) -> InvariantError:
    """The error for a violated invariant: what broke, the inputs, the numbers."""
    inputs = ", ".join(f"{k}={v}" for k, v in context.items())
    return InvariantError(f"invariant '{check}' violated: {detail}; inputs: {inputs} "
                          "(a bug in accelsim, not in the input: please report this message)")


# ---- peaks of the units, from the profile ------------------------------------------------


def unit_peaks(profile: Any, precision: str) -> tuple[float, float]:
    """(matrix-path, vector-path) peak FLOP/s (OP/s for int8) of a device at `precision`: its
    class's peaks (`accelsim.devices.registry.peaks`; inf for the null device)."""
    return registry.peaks(profile, precision)


def host_peak_flops_per_s(precision: str, host: Any) -> float:
    """The largest peak at `precision` (fp32 where it rejects it) of the host CPU that ran a
    device's fallback rows (an NPU's), FLOP/s."""
    try:
        return max(unit_peaks(host, precision))
    except AccelsimError:
        return max(unit_peaks(host, "fp32"))


# ---- per estimate ------------------------------------------------------------------------


_COLUMNS = (*_NONNEGATIVE, "host_energy_j", "resident_bytes")


@dataclass(frozen=True)
class _Rows:
    """An estimate's layers as arrays, with the kernel each row ran in."""

    layers: Table
    col: dict[str, np.ndarray]
    group: np.ndarray  # position of each row's kernel (`core.kernel_groups`)
    root: np.ndarray  # rows that are kernels (not fused into another)
    host: np.ndarray  # rows the host CPU ran (NPU fallback)
    matmul: np.ndarray

    def per_kernel(self, values: np.ndarray) -> np.ndarray:
        """`values` summed over each kernel's rows, at the kernel's position."""
        return np.bincount(self.group, weights=values, minlength=len(self.group))

    def value(self, name: str, i: int) -> Any:
        """Row i's entry in the column `name`."""
        return np.asarray(self.layers[name])[i]

    def where(self, i: int) -> str:
        unit = f", unit {self.value('unit', i)}" if "unit" in self.layers else ""
        return (f"row {i} '{self.value('name', i)}' ({self.value('op', i)}, "
                f"{self.value('phase', i)}{unit})")


def _rows(layers: Table) -> _Rows:
    n = len(layers)
    present = [c for c in _COLUMNS if c in layers]
    col = {c: np.asarray(layers[c], dtype=float) for c in present}
    col.setdefault("host_energy_j", np.zeros(n))
    group = kernel_groups(layers, layers)
    host = np.asarray(layers["unit"]) == "host" if "unit" in layers else np.zeros(n, bool)
    return _Rows(layers, col, group, group == np.arange(n), host,
                 np.asarray(layers["matmul"], dtype=bool))


def _first(bad: np.ndarray) -> int | None:
    return int(np.argmax(bad)) if bad.any() else None


def _check_finite(r: _Rows, context: Mapping[str, Any]) -> None:
    for name in _NONNEGATIVE:
        i = _first(~np.isfinite(r.col[name]) | (r.col[name] < 0))
        if i is not None:
            raise fail("finite and non-negative", context,
                       f"{r.where(i)}: {name} = {r.col[name][i]!r}")
    least_s = np.maximum(r.col["compute_s"], r.col["memory_s"]) + r.col["overhead_s"]
    time_s = r.col["time_s"]
    i = _first(time_s < least_s * (1 - REL_TOL))
    if i is not None:
        raise fail("roofline", context, f"{r.where(i)}: time_s {time_s[i]:.6g} below "
                   f"max(compute, memory) + overhead = {least_s[i]:.6g} s")


def _check_peaks(r: _Rows, profile: Any, precision: str, context: Mapping[str, Any],
                 host: Any = None) -> None:
    record = registry.get(profile.device_class)
    matrix_peak, vector_peak = record.peaks(profile, precision)
    flops = r.col["flops"]
    kernel_s = r.per_kernel(r.col["time_s"])
    fused_flops = r.per_kernel(np.where(r.root, 0.0, flops))
    row_matrix = np.full(len(flops), matrix_peak)
    if record.row_matrix_peaks is not None:  # rows on other matrix units (a GPU's tf32 rows)
        row_matrix = record.row_matrix_peaks(profile, r.layers, precision, r.matmul, row_matrix)
    own_peak = np.where(r.matmul, np.maximum(row_matrix, vector_peak), vector_peak)
    if r.host.any():
        if host is None:
            raise fail("peak", context, f"{r.where(_first(r.host))}: a host row without the "
                       "host CPU profile that ran it")
        own_peak = np.where(r.host, host_peak_flops_per_s(precision, host), own_peak)
    on_vector = (~r.matmul | (row_matrix <= vector_peak)) & ~r.host
    vector = np.full(len(flops), vector_peak)
    # A GPU row's kernels may execute fewer FLOPs than the op's count (Winograd, gpu_gemm).
    executed = (np.asarray(r.layers["executed_flops"], dtype=float)
                if "executed_flops" in r.layers else flops)
    checks = (
        ("its unit's peak", executed, own_peak),
        ("the vector unit's peak (fused rows)", fused_flops, vector),
        ("the shared vector unit's peak (kernel + fused rows)",
         np.where(on_vector, executed + fused_flops, 0.0), vector),
    )
    for what, done, peak in checks:
        i = _first(r.root & (done > peak * kernel_s * (1 + REL_TOL)))
        if i is not None:
            rate = done[i] / kernel_s[i] if kernel_s[i] > 0 else math.inf
            raise fail("peak", context, f"{r.where(i)}: {done[i]:.6g} FLOPs in "
                       f"{kernel_s[i]:.6g} s = {rate:.6g} FLOP/s, above {what} "
                       f"{peak[i]:.6g} FLOP/s")


def _check_power(r: _Rows, tdp_w: float, static_w: float, context: Mapping[str, Any]) -> None:
    if not 0 <= static_w < tdp_w:
        raise fail("static power below TDP", context, f"static {static_w!r} W, TDP {tdp_w!r} W")
    dyn_j, host_j, time_s = r.col["dynamic_energy_j"], r.col["host_energy_j"], r.col["time_s"]
    static_j = static_w * time_s
    i = _first(np.abs(r.col["energy_j"] - dyn_j - static_j) > REL_TOL * (dyn_j + static_j))
    if i is not None:
        raise fail("energy", context, f"{r.where(i)}: energy_j {r.col['energy_j'][i]!r} != "
                   f"dynamic {dyn_j[i]!r} + static {static_j[i]!r} J")
    i = _first((host_j < 0) | (host_j > dyn_j * (1 + REL_TOL)))
    if i is not None:
        raise fail("energy", context, f"{r.where(i)}: host part {host_j[i]!r} J outside the "
                   f"dynamic energy {dyn_j[i]!r} J")
    if math.isinf(tdp_w):
        return
    device_j, kernel_s = r.per_kernel(dyn_j - host_j), r.per_kernel(time_s)
    i = _first(device_j > (tdp_w - static_w) * kernel_s * (1 + REL_TOL))
    if i is not None:
        power = device_j[i] / kernel_s[i] + static_w if kernel_s[i] > 0 else math.inf
        raise fail("power within TDP", context, f"{r.where(i)}: device energy "
                   f"{device_j[i]:.6g} J in {kernel_s[i]:.6g} s = {power:.6g} W with static, "
                   f"above the TDP {tdp_w:g} W (bound {r.value('bound', i)})")


def _check_offchip_bytes(r: _Rows, context: Mapping[str, Any]) -> None:
    write = r.col["write_bytes"]
    compulsory = (r.per_kernel(r.col["read_bytes"] + write)
                  - 2.0 * r.per_kernel(np.where(r.root, 0.0, write)))
    # inputs a cache still held from the kernel that wrote them count as moved once
    resident = r.col["resident_bytes"] if "resident_bytes" in r.col else 0.0
    moved = r.per_kernel(r.col["dram_bytes"] + resident)
    i = _first(r.root & ~r.host & (moved < compulsory * (1 - REL_TOL)))
    if i is not None:
        raise fail("bytes conserved", context, f"{r.where(i)}: {moved[i]:.6g} bytes off chip, "
                   f"fewer than its operands once, {compulsory[i]:.6g} bytes")


def check_estimate(layers: Table, profile: Any, precision: str, tdp_w: float,
                   static_w: float, context: Mapping[str, Any], host: Any = None) -> None:
    """Every per-row invariant of an estimate's `layers` (`core.finish`'s output) on `profile`
    at hardware precision `precision`; `context` names the inputs for the message. `host`:
    the CPU profile that ran an NPU's fallback rows (`registry.DeviceClass.host_for`)."""
    rows = _rows(layers)
    _check_finite(rows, context)
    _check_peaks(rows, profile, precision, context, host)
    _check_power(rows, tdp_w, static_w, context)
    if registry.get(profile.device_class).has_offchip_memory(profile):
        _check_offchip_bytes(rows, context)


def check_graph(graph: Graph, context: Mapping[str, Any] | None = None) -> None:
    """Bytes conserved in a graph's counts (see the module docstring); judged once per graph,
    reported with `context` (the inputs of the estimate that asked)."""
    problem = _graph_problem(graph)
    if problem is not None:
        raise fail("bytes conserved", context or {"workload": graph.name}, problem)


@lru_cache(maxsize=128)
def _graph_problem(graph: Graph) -> str | None:
    counts = counts_table(graph)
    elems = {name: math.prod(shape) for name, shape in graph.shapes.items()}
    cols = ("op_index", "read_elems", "write_elems", "fwd_flops")
    for i, read, write, flops in zip(*(counts[c].to_numpy() for c in cols), strict=True):
        if read == write == flops == 0:
            continue  # a view
        op = graph.ops[int(i)]
        inputs = float(sum(elems[t] for t in op.inputs))
        out = float(elems[op.name])
        partial = op.kind.value in LOOKUP_OPS
        scratch_ok = partial or read - inputs == write - out
        if (read < inputs and not partial) or write < out or not scratch_ok:
            return (f"op '{op.name}' ({op.kind.value}) reads {read:g} elements of inputs "
                    f"holding {inputs:g} and writes {write:g} for an output of {out:g}")
    return None


# ---- per run -----------------------------------------------------------------------------


def _check_values(values: Mapping[str, float], context: Mapping[str, Any], check: str,
                  upper: float = math.inf) -> None:
    for name, value in values.items():
        if not (isinstance(value, int | float) and math.isfinite(value) and
                0 <= value <= upper * (1 + REL_TOL)):
            limit = "" if math.isinf(upper) else f" and at most {upper:g}"
            raise fail(check, context, f"{name} = {value!r}, not finite, >= 0{limit}")


def check_training(res: Any, planned_samples: int, tdp_w: float, static_w: float,
                   host_fallback: bool, context: Mapping[str, Any]) -> None:
    """Run-level invariants of a `TrainResult`: times and rates finite and >= 0, every
    sample planned trained exactly once, utilisations within [0, 1], energy parts >= 0
    summing to the total, and (without host fallback, whose energy the accelerators' part
    holds) the accelerators' average power within TDP."""
    _check_values({"run_time_s": res.run_time_s, "step_time_s": res.step_time_s,
                   "throughput_samples_per_s": res.throughput_samples_per_s}, context, "time")
    if not res.run_time_s > 0:
        raise fail("time", context, f"run_time_s = {res.run_time_s!r}")
    if res.samples != planned_samples:
        raise fail("samples conserved", context, f"{res.samples} samples trained, "
                   f"{planned_samples} planned")
    _check_values({**{f"utilization[{k}]": v for k, v in res.utilization.items()},
                   "accelerator_utilization": res.accelerator_utilization}, context,
                  "utilization", upper=1.0)
    energy = {k: v for k, v in res.energy_breakdown_j.items() if v is not None}  # None: unknown
    total = energy.pop("total")
    _check_values(energy, context, "energy")
    if not math.isclose(total, sum(energy.values()), rel_tol=REL_TOL, abs_tol=1e-300):
        raise fail("energy", context, f"total {total!r} J != sum of parts {energy}")
    if host_fallback or math.isinf(tdp_w):
        return
    # The devices draw their compute, static and (on their SMs or engines) decode energy.
    device_w = (energy["accelerators"] + energy["static"] + energy.get("decode", 0.0)) / (
        res.run_time_s * res.devices)
    if device_w > tdp_w * (1 + REL_TOL):
        raise fail("power within TDP", context, f"accelerators average {device_w:.6g} W per "
                   f"device over the run, above the TDP {tdp_w:g} W (static {static_w:g} W)")


def check_serving(res: Any, requests: int, static_w: float,
                  context: Mapping[str, Any]) -> None:
    """Run-level invariants of a `ServeResult`: every request served exactly once, in time
    order (arrival <= start <= end <= makespan), utilisations within [0, 1], energy finite and
    >= 0, and the average power no more than the devices' largest draw (a batch's energy over
    its service time, or `static_w` between batches)."""
    reqs, table = res.requests, res.service
    in_batches = int(res.records["samples"].sum())
    if not res.requests_served == len(reqs) == in_batches == requests:
        raise fail("requests conserved", context, f"{requests} requests, "
                   f"{res.requests_served} served, {in_batches} in batches")
    tol_s = REL_TOL * max(res.makespan_s, 1.0)
    order = ((reqs["start_s"] < reqs["arrival_s"] - tol_s) | (reqs["end_s"] < reqs["start_s"])
             | (reqs["end_s"] > res.makespan_s + tol_s)).to_numpy()
    i = _first(order)
    if i is not None:
        raise fail("time order", context, f"request {i}: {reqs.iloc[i].to_dict()}, makespan "
                   f"{res.makespan_s!r} s")
    _check_values({f"utilization[{d}]": u for d, u in enumerate(res.utilization)}, context,
                  "utilization", upper=1.0)
    _check_values({"energy_j": res.energy_j, "average_power_w": res.average_power_w},
                  context, "energy")
    service_s = table["service_s"].to_numpy(dtype=float)
    energy_j = table["energy_j"].to_numpy(dtype=float)
    # a zero-time service row draws no power of its own (not inf or NaN, which would pass)
    busy_w = float(np.max(np.divide(energy_j, service_s, out=np.zeros_like(energy_j),
                                    where=service_s > 0), initial=0.0))
    most_w = res.devices * max(busy_w, static_w)
    if res.average_power_w > most_w * (1 + REL_TOL):
        raise fail("power", context, f"average {res.average_power_w:.6g} W above the most the "
                   f"devices draw, {most_w:.6g} W")
