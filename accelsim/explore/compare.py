"""One workload, the same knobs, several devices: one row per device, never apples with oranges.

    frame = compare("resnet50", ["a100", "tpu-v3", "edge-tpu"], precision="int8")
    runs = compare_runs("resnet50", "a100,tpu-v3", precision="bf16")  # rows, layers and roofs
    frame = rows_frame(runs)
    layers_by_hw, roofs, not_drawn = roofline_inputs(runs)   # for plots.roofline

A device that cannot run the requested precision runs the closest one it can
(`accelsim.devices.precision.fallback_precision`) and its row says so in `notes`; without a
fallback (or when `fallback=False`) the row is left out: `error` says why and every figure is
None. A hardware name that does not exist fails the whole comparison (`AccelsimError`), and so
does an error that every device raises alike (a knob of another mode): those are about the
input, not about one device.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from accelsim.devices.precision import fallback_note, fallback_precision, hardware_key
from accelsim.devices.registry import peaks
from accelsim.errors import AccelsimError, PrecisionError
from accelsim.profiles.hardware import resolve_hardware
from accelsim.results.summary import ROW_COLUMNS, error_row, flat_row
from accelsim.run import SimulationConfig, run_simulation
from accelsim.sim.knobs import make_config
from accelsim.workload.scenario import Scenario

# Columns of a comparison: the hardware as given, its readable name, the requested precision
# beside the one that ran, then the shared row (`accelsim.results.summary.ROW_COLUMNS`).
_AT = ROW_COLUMNS.index("precision")
COLUMNS = ("hardware", "device_name", *ROW_COLUMNS[:_AT], "precision_requested",
           *ROW_COLUMNS[_AT:])
ROOF_COLUMNS = ("hardware", "device_name", "precision", "peak_flops_per_s", "bandwidth_bytes_per_s",
                "ridge_flops_per_byte", "compute_roof", "memory_roof")


@dataclass(frozen=True)
class DeviceRun:
    """One device of a comparison: its row (`COLUMNS`), its per-layer DataFrame (empty when
    left out), and its roofline (a row of `ROOF_COLUMNS`; None when left out)."""

    hardware: str
    row: dict[str, Any]
    layers: pd.DataFrame
    roof: dict[str, Any] | None
    precision_problem: bool = False  # left out because of the numeric format


def parse_hardware(hw: str | Sequence[str]) -> list[str]:
    """The hardware specs of `hw` (a list, or names separated by commas), in order."""
    parts = hw.split(",") if isinstance(hw, str) else list(hw)
    specs = [str(p).strip() for p in parts if str(p).strip()]
    if not specs:
        raise AccelsimError("compare: give at least one device or system (e.g. a100,tpu-v3)")
    twice = sorted({s for s in specs if specs.count(s) > 1})
    if twice:
        raise AccelsimError(f"compare: hardware named more than once: {', '.join(twice)}")
    return specs


def display_name(spec: str, system: Any, profile: Any) -> str:
    """A readable name: the device's display name, or the system's name and what it holds."""
    if spec == getattr(system, "name", None) and spec != profile.name:
        return f"{spec} ({system.device_count}x {profile.display_name})"
    return str(profile.display_name)


def device_roof(profile: Any, precision: str) -> dict[str, Any]:
    """The roofline of one device at `precision` (the format its matrix units computed in):
    compute ceiling, FLOP/s (OP/s for integers), and off-chip bandwidth, bytes/s."""
    peak_flops_per_s, compute_roof = _compute_ceiling(profile, hardware_key(precision))
    mem = profile.offchip_memory
    if mem is not None:
        bandwidth, memory_roof = mem.bandwidth_bytes_per_s, f"{mem.technology} bandwidth"
    else:
        # NB: no device DRAM (edge-tpu): what does not fit on chip streams over the host link,
        # which is what the device model charges off-chip bytes to, so that link is the roof.
        link = profile.host_link
        bandwidth, memory_roof = link.bandwidth_bytes_per_s, f"host link ({link.kind})"
    return {"precision": precision, "peak_flops_per_s": float(peak_flops_per_s),
            "bandwidth_bytes_per_s": float(bandwidth),
            "ridge_flops_per_byte": float(peak_flops_per_s) / float(bandwidth),
            "compute_roof": compute_roof, "memory_roof": memory_roof}


def _compute_ceiling(profile: Any, key: str) -> tuple[float, str]:
    """(FLOP/s, which path) of the fastest unit that runs format `key` in the device model:
    the larger of its class's two peaks (`accelsim.devices.registry.peaks`, the one the
    invariants hold every estimate to); AccelsimError where the class has none for `key`."""
    matrix, vector = peaks(profile, key)
    return (matrix, f"{key} matrix peak") if matrix >= vector else (vector, f"{key} vector peak")


def compare_runs(workload: str | Scenario, hw: str | Sequence[str], *, fallback: bool = True,
                 **knobs: Any) -> list[DeviceRun]:
    """Simulate `workload` with the same `knobs` on each hardware of `hw`, once each; one
    `DeviceRun` per hardware, in the order given. See the module docstring for fallbacks."""
    specs = parse_hardware(hw)
    resolved = {spec: resolve_hardware(spec) for spec in specs}  # unknown names fail here
    base = make_config(workload, specs[0], **knobs)  # bad knobs fail here, once
    runs = [_run_one(dataclasses.replace(base, hardware=spec), *resolved[spec], fallback)
            for spec in specs]
    errors = {r.row["error"] for r in runs}
    if None not in errors and len(errors) == 1 and not any(r.precision_problem for r in runs):
        raise AccelsimError(errors.pop())  # the same error everywhere: the input is wrong
    return runs


def _run_one(cfg: SimulationConfig, system: Any, profile: Any, fallback: bool) -> DeviceRun:
    """One device: run at the requested precision, else at its fallback, else a left-out row."""
    requested = cfg.scenario.precision
    note = None
    try:
        res = run_simulation(cfg)
    except PrecisionError as err:
        fb = fallback_precision(requested, err.runs) if fallback else None
        if fb is None:
            why = f"{err}" + ("" if fallback else " (fallback to another precision is off)")
            return _left_out(cfg, system, profile, why, precision_error=True)
        note = fallback_note(profile.name, requested, fb, err.runs)
        try:
            res = run_simulation(dataclasses.replace(
                cfg, scenario=cfg.scenario.with_overrides(precision=fb)))
        except AccelsimError as again:
            return _left_out(cfg, system, profile, f"{err}; its fallback {fb} failed too: "
                             f"{again}", precision_error=True)
    except AccelsimError as err:
        return _left_out(cfg, system, profile, str(err))
    row = _identity(cfg, system, profile) | flat_row(res.record)
    if note:
        row["notes"] = "; ".join(n for n in (note, row["notes"]) if n)
    layers = pd.DataFrame(res.record["layers"])
    try:
        roof = {"hardware": cfg.hardware, "device_name": row["device_name"],
                **device_roof(profile, res.record["hardware"]["compute_precision"])}
    except AccelsimError:  # a user profile without a peak for the format: no roofline
        roof = None
    return DeviceRun(cfg.hardware, row, layers, roof)


def _identity(cfg: SimulationConfig, system: Any, profile: Any) -> dict[str, Any]:
    return {"hardware": cfg.hardware, "device_name": display_name(cfg.hardware, system, profile),
            "precision_requested": cfg.scenario.precision}


def _left_out(cfg: SimulationConfig, system: Any, profile: Any, why: str,
              precision_error: bool = False) -> DeviceRun:
    sc = cfg.scenario
    row = _identity(cfg, system, profile) | error_row(
        why, workload=sc.name or sc.model, mode=cfg.mode or sc.mode, device=profile.name,
        device_class=profile.device_class, system=system.name, precision=sc.precision,
        batch_size=sc.batch_size)
    return DeviceRun(cfg.hardware, row, pd.DataFrame(), None, precision_error)


def rows_frame(runs: Sequence[DeviceRun]) -> pd.DataFrame:
    """The comparison table: one row per run, columns `COLUMNS`."""
    return pd.DataFrame([r.row for r in runs], columns=list(COLUMNS))


def roofs_frame(runs: Sequence[DeviceRun]) -> pd.DataFrame:
    """The roof of every device that ran and fits: columns `ROOF_COLUMNS`."""
    return pd.DataFrame([r.roof for r in runs if r.roof is not None and r.row["fits"]],
                        columns=list(ROOF_COLUMNS))


def roofline_inputs(runs: Sequence[DeviceRun]
                    ) -> tuple[dict[str, pd.DataFrame], pd.DataFrame, dict[str, str]]:
    """What `accelsim.plots.roofline.roofline_figure` draws: (layers by hardware, roofs, why
    each other device is not drawn, by readable name)."""
    roofs = roofs_frame(runs)
    drawn = set(roofs["hardware"])
    layers = {r.hardware: r.layers for r in runs if r.hardware in drawn}
    why = {r.row["device_name"]: ("left out" if r.row["error"] else "does not fit"
                                  if not r.row["fits"] else "no peak listed for its format")
           for r in runs if r.hardware not in drawn}
    return layers, roofs, why


def compare(workload: str | Scenario, hw: str | Sequence[str], *, fallback: bool = True,
            **knobs: Any) -> pd.DataFrame:
    """One row per hardware of `hw` (columns `COLUMNS`): throughput, latency, energy per
    sample, performance per watt, memory fit, bottleneck, and the precision and software each
    device really used (`precision_requested` beside `precision`).

    >>> df = compare("resnet50", "a100,edge-tpu", precision="fp16")
    >>> df[["hardware", "precision_requested", "precision"]].values.tolist()
    [['a100', 'fp16', 'fp16'], ['edge-tpu', 'fp16', 'int8']]
    """
    return rows_frame(compare_runs(workload, hw, fallback=fallback, **knobs))
