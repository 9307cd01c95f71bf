"""One device, one workload: per-layer time, energy and bound, and the step totals.

    est = estimate(graph, load_profile("a100"), batch=256, precision="bf16", mode="train")
    est.step_time_s, est.throughput_samples_per_s, est.layers  # a DataFrame, one row per op x phase
    est.rows  # the same rows as read-only arrays (`accelsim.workload.columns`), no frame built

A pure function of its inputs: the software stack is resolved for the device class and the
host CPU (`accelsim.profiles.software`; its per-step host time is added here), the class's
record is looked up by the profile's class (`accelsim.devices.registry`: its cost model and
what the class takes beside, its limits and notes), the roofline and power cap (DVFS where the
record says so, `accelsim.devices.dvfs`) are applied by `accelsim.devices.core.finish`, and the
memory need is checked against the device's capacity. Every result is checked against the laws
of `accelsim.devices.invariants` (a violation raises `InvariantError`, a bug). Energy is
reported in two parts: the device's, and the host CPU's where a device falls back to it (an
NPU, `host_energy_j`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices import registry
from accelsim.devices.core import bottleneck, finish_columns
from accelsim.devices.invariants import check_estimate, check_graph
from accelsim.devices.precision import cannot_train, compute_precision, hardware_key
from accelsim.errors import AccelsimError
from accelsim.profiles.software import DEFAULT, SoftwareStack
from accelsim.profiles.stack_choice import resolve_software
from accelsim.results.headline import Figures, PowerSplit, reserve
from accelsim.workload.columns import Columns, Table
from accelsim.workload.freeze import is_frozen
from accelsim.workload.graph import Graph
from accelsim.workload.memory import io_bytes_per_sample, largest_batch, memory_need
from accelsim.workload.tables import totals, unsupported_ops
from accelsim.workload.work import gemm_columns, trained_params, work_columns


def class_model(device_class: str):  # noqa: ANN201 - returns a ClassModel
    """The cost model of a device class, with what its record passes beside the common inputs
    (`registry.DeviceClass.cost`: a batch, a host CPU); AccelsimError for an unknown class."""
    return registry.get(device_class).cost


def power_limits_w(profile: Any) -> tuple[float, float]:
    """(TDP, static power) of a device, W."""
    return registry.get(profile.device_class).power_limits(profile)


def voltage_floor(profile: Any) -> float | None:
    """The DVFS voltage floor of a device whose clock drops under the power limit (GPUs:
    `accelsim.devices.dvfs`); None for the others, whose power cap stretches time uniformly
    (NB: TPUs, FPGAs, NPUs and CPUs publish no base clock to anchor a V-F curve here)."""
    if not registry.get(profile.device_class).dvfs:
        return None
    from accelsim.devices.energy import dvfs_settings

    return dvfs_settings()[1]


def capacity_bytes(profile: Any) -> float | None:
    """Device memory for weights and activations, bytes (None: not published)."""
    return registry.get(profile.device_class).capacity_bytes(profile)


@dataclass(frozen=True)
class DeviceEstimate:
    """The result of `estimate`: per-layer rows and step totals (SI units)."""

    device: str
    device_class: str
    mode: str
    batch_size: int
    precision: str
    software: str
    rows: Columns  # one row per op x phase (`layers` is the same as a DataFrame)
    step_time_s: float
    energy_j: float
    bottleneck: str
    memory: dict[str, Any]
    unsupported_ops: list[str] = field(default_factory=list)
    compute_precision: str = ""  # what the matrix units computed in ("" = `precision`)
    software_applied: str = ""  # what the cost model charged ("" = `software`)
    notes: list[str] = field(default_factory=list)  # where the run differs from the request
    host_energy_j: float = 0.0  # the part of energy_j the host CPU spent (NPU fallback)
    clock_hz: float | None = None  # the rated clock (GPU boost) DVFS fractions refer to

    @cached_property
    def layers(self) -> pd.DataFrame:
        """`rows` as a DataFrame (built on first use: a sweep point reads arrays only)."""
        return self.rows.to_frame()

    @property
    def throughput_samples_per_s(self) -> float:
        return self.batch_size / self.step_time_s

    @property
    def average_power_w(self) -> float:
        """Device and host together, W."""
        return self.energy_j / self.step_time_s

    @property
    def device_energy_j(self) -> float:
        """The device's part of `energy_j` (all but the host CPU's), J."""
        return self.energy_j - self.host_energy_j

    @property
    def device_power_w(self) -> float:
        """The device's average power over the step, the figure its TDP bounds, W."""
        return self.device_energy_j / self.step_time_s

    @property
    def host_power_w(self) -> float:
        """The host CPU's average power over the step for the ops it ran (NPU fallback), W."""
        return self.host_energy_j / self.step_time_s

    @property
    def sustained_clock_fraction(self) -> float:
        """Time-weighted share of the rated clock the device ran at over the step (1: never
        power-limited; DVFS in `core.finish`)."""
        t = self.rows["time_s"]
        f = self.rows["clock_fraction"] if "clock_fraction" in self.rows else 1
        return float((f * t).sum() / t.sum()) if t.sum() > 0 else 1.0

    @property
    def energy_j_per_sample(self) -> float:
        return self.energy_j / self.batch_size

    def phase_time_s(self, phase: str) -> float:
        """Time of one phase (forward, backward or optimizer) of the step."""
        return float(self.rows["time_s"][self.rows["phase"] == phase].sum())


def estimate(graph: Graph, profile: Any, batch: int, precision: str, mode: str = "infer",
             software: str | SoftwareStack = DEFAULT, optimizer: str = "sgd",
             host_single_thread_hz: float | None = None,
             host_cpu: Any = None, measured: pd.DataFrame | None = None,
             tf32: bool | None = None) -> DeviceEstimate:
    """Cost one inference batch (`mode="infer"`) or one training step (`"train"`: forward,
    backward and optimizer update) of `graph` on the device described by `profile`, under the
    software stack `software` ("default": the device class's; a name, a stack file or a
    `SoftwareStack`, resolved here once for the class models) on a host CPU of that
    single-thread clock (None: the stack's reference host). `host_cpu`: the system's CPU
    profile, which runs the ops an NPU cannot (None: its record's `host_fallback` stands in).
    `measured`: per-op measurements of the executed kernels (`accelsim.kernels.measure`),
    applied by `accelsim.devices.sparsity` (zero gating, 2:4 sparsity) and reported per layer.
    `tf32`: fp32 GEMMs as TF32 on tensor cores, or not (None: as the stack says)."""
    stack, software_note = resolve_software(software, profile.device_class,
                                            host_single_thread_hz)
    asked = software if isinstance(software, str) else software.name  # (the record's)
    stack = stack.with_tf32(tf32)
    record = registry.get(profile.device_class)
    if batch < 1:
        raise AccelsimError(f"batch size must be at least 1, not {batch}")
    why_not = cannot_train(profile) if mode == "train" else None
    if why_not:
        raise AccelsimError(why_not)
    inputs = {"device": profile.name, "workload": graph.name, "batch": batch,
              "precision": precision, "mode": mode, "software": asked, "optimizer": optimizer}
    check_graph(graph, inputs)
    work = work_columns(graph, batch, precision, mode, optimizer)
    gemms = gemm_columns(graph, batch)
    host = record.host_for(host_cpu)
    costs = record.cost(profile, work, gemms, hardware_key(precision), stack, batch=batch,
                        host=host)
    if measured is not None:
        from accelsim.devices.sparsity import with_measured_sparsity

        costs = with_measured_sparsity(profile, work, costs, hardware_key(
            compute_precision(profile, precision)[0]), measured)
    if record.step_overhead:
        costs = with_step_overhead(costs, stack, batch * io_bytes_per_sample(graph, precision)[0])
    tdp_w, static_w = record.power_limits(profile)
    rows = finish_columns(work, costs, tdp_w, static_w, voltage_floor(profile))
    check_estimate(rows, profile, hardware_key(precision), tdp_w, static_w, inputs, host)
    cap = record.capacity_bytes(profile)
    need = memory_need(graph, batch, precision, mode, optimizer)
    memory = need.check(cap if cap is not None else float("inf"))
    if cap is None:
        memory["capacity_bytes"] = None
    memory["largest_batch_that_fits"] = largest_batch(graph, cap, precision, mode, optimizer)
    used, precision_note = compute_precision(profile, precision)
    unsupported = unsupported_ops(graph)
    notes = [n for n in (precision_note, software_note) if n]
    if host_cpu is None and "unit" in rows and (rows["unit"] == "host").any():
        notes.append(f"ops the {profile.device_class.upper()} cannot run ran on the stand-in "
                     f"host CPU '{record.host_fallback}' (no host CPU profile: the system's CPU "
                     "is defined inline or not given)")
    if record.notes is not None:
        notes.extend(record.notes(profile, *record.tables(work, gemms), stack,
                                  hardware_key(precision)))
    peaks = getattr(getattr(profile, "compute", None), "matrix_peak_flops_per_s", None) or {}
    if tf32 is not None and "tf32" not in peaks:  # (the knob is refused at other precisions)
        notes.append(f"--tf32 {'on' if tf32 else 'off'} changes nothing here: {profile.name} "
                     "has no TF32 matrix units, its fp32 GEMMs run in fp32")
    if mode == "train" and used.startswith("int"):
        # NB: costed as asked (every GEMM at the integer rate); said, since no framework
        # trains in integers (gradients and the update need a float format).
        notes.append(f"training at {used}: every forward and backward GEMM is costed at the "
                     f"{used} rate, but gradients and the optimizer update need a float "
                     "format (no framework trains in integers): read the figures as a bound")
    if unsupported:
        notes.append(f"{len(unsupported)} op kinds have no cost formula and are not costed: "
                     f"{', '.join(unsupported)}")
    step_time_s = float(rows["time_s"].sum())
    if not step_time_s > 0:  # a graph of reshapes and aliases only: no rate to divide by
        source = graph.meta.get("source_file") or graph.name
        raise AccelsimError(f"{source}: every costed op takes 0 s on {profile.name} (the "
                            "graph does no arithmetic and moves no data), so it has no "
                            "throughput to report")
    return DeviceEstimate(
        device=profile.name, device_class=profile.device_class, mode=mode, batch_size=batch,
        precision=precision, software=asked, rows=rows,
        step_time_s=step_time_s, energy_j=float(rows["energy_j"].sum()),
        bottleneck=bottleneck(rows), memory=memory, unsupported_ops=unsupported,
        compute_precision=used, software_applied=stack.name, notes=notes,
        host_energy_j=float(rows["host_energy_j"].sum()) if "host_energy_j" in rows else 0.0,
        clock_hz=getattr(getattr(profile, "compute", None), "clock_hz", None))


def with_step_overhead(costs: Table, stack: SoftwareStack,
                       payload_bytes: float = 0.0) -> Columns:
    """`costs` with the stack's host time per step (and per request: NB one request per
    batch, whose inputs are `payload_bytes`) added to the overhead, serial with the device's
    work. NB: spread evenly over the rows, so that no one layer carries the whole step's host
    time in the layer table."""
    step_s = (stack.host_per_step_s + stack.host_per_request_s
              + stack.host_payload_s(payload_bytes))
    costs = Columns.of(costs)
    if step_s <= 0 or len(costs) == 0:
        return costs
    return costs.assign(overhead_s=np.asarray(costs["overhead_s"]) + step_s / len(costs))


def _clock(est: DeviceEstimate, rated_hz: float | None) -> dict[str, Any]:
    """Rated and sustained clock (time-weighted over the step) and the share of time spent
    power-limited."""
    t = est.rows["time_s"]
    limited = float(t[est.rows["clock_fraction"] < 1].sum() / t.sum()) if (
        "clock_fraction" in est.rows and t.sum() > 0) else 0.0
    frac = est.sustained_clock_fraction
    return {"rated_mhz": None if rated_hz is None else rated_hz / 1e6,
            "sustained_mhz": None if rated_hz is None else frac * rated_hz / 1e6,
            "sustained_fraction": frac, "power_limited_time_share": limited}


def summary(est: DeviceEstimate, graph: Graph, layers: bool = True,
            profile_clock_hz: float | None = None,
            tail: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON-ready record of an estimate (what `accelsim simulate --json` prints) with the
    headline's keys reserved, for the engine to place its `Figures` (`figures(est)` for one
    batch); with `layers` False its per-layer list is left empty (the totals are unchanged).
    `profile_clock_hz`: the device's rated clock (None: `est.clock_hz`); `tail`: keys that
    follow the totals (--execute's `execution`: what the kernels computed)."""
    profile_clock_hz = profile_clock_hz or est.clock_hz
    tot = totals(graph)
    cols = ["name", "op", "phase", "flops", "bytes", "dram_bytes", "time_s", "energy_j", "bound"]
    if not np.isnan(np.asarray(est.rows["cycles"], dtype=float)).all():
        cols.append("cycles")
    extra = [c for c in ("unit", "host_energy_j", "stall_cycles", "output_error",
                         "input_sparsity", "weight_sparsity") if c in est.rows]
    record = {
        "workload": {"name": graph.name, "mode": est.mode, "batch_size": est.batch_size,
                     "precision": est.precision, "params": tot["params"],
                     "flops_per_sample": tot["flops_per_sample"]},
        "hardware": {"name": est.device, "class": est.device_class,
                     "software": est.software_applied or est.software,
                     "software_default": est.software == DEFAULT,
                     "compute_precision": est.compute_precision or est.precision},
        **reserve(with_split=True), "bottleneck": None,  # the engine places its `Figures`
        "clock": _clock(est, profile_clock_hz),
        "memory": est.memory,
        "time_by_phase_s": {p: est.phase_time_s(p) for p in dict.fromkeys(est.rows["phase"])},
        "layers": _records(est.layers[cols + extra]) if layers else [],
        "unsupported_ops": est.unsupported_ops,
        "notes": list(est.notes),
    }
    if is_frozen(graph) and est.mode == "train":  # transfer learning: say what trains
        trained = trained_params(graph)
        record["workload"]["trainable_params"] = int(trained)
        record["notes"].append(
            f"transfer learning: {int(trained):,} of {tot['params']:,} parameters train "
            f"({trained / tot['params']:.1%}); {len(graph.meta['frozen'])} layers frozen run "
            "forward only, with no weight gradient, optimizer state or gradient exchange")
    # A cycle-counted array (systolic): the whole network; None elsewhere (same keys always).
    record["total_cycles"] = (float(np.nansum(est.rows["cycles"])) if "stall_cycles" in est.rows
                              else None)
    record.update(tail or {})
    record["bottleneck_detail"] = None
    return record


def figures(est: DeviceEstimate, detail: str | None = None) -> Figures:
    """One batch on the device as headline figures (`detail`: what bounds it), with the
    device and host CPU apart."""
    batch = est.batch_size
    return Figures(est.throughput_samples_per_s, est.step_time_s, est.energy_j_per_sample,
                   est.average_power_w, est.bottleneck, detail,
                   PowerSplit(est.device_power_w, est.host_power_w,
                              est.device_energy_j / batch, est.host_energy_j / batch))


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts, NaN (no cycle count: a host-fallback row) as None, so JSON stays valid."""
    return frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
