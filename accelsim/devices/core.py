"""The roofline core shared by every device class, and the contract of a class model.

A class model (one folder per class: gpu/, cpu/, systolic/, fpga/, npu/, and null.py) is a
function, the `model` of the class's record in `accelsim.devices.registry`:

    fn(profile, work: DataFrame, gemms: DataFrame, precision: str, software, **extra) -> DataFrame

(`extra`: what the record says the class takes beside, `DeviceClass.cost`: the batch, a host.)

`software` is a resolved `accelsim.profiles.software.SoftwareStack` (or a stack name, which the
GPU and CPU models resolve; the other classes run compiled graphs and ignore it).

`work` is `accelsim.workload.work.work_table` (one row per op x phase), `gemms` is
`accelsim.workload.work.gemms_for` (forward GEMM shapes by op_index). It returns a DataFrame
with the same index as `work` and the columns of `COST_COLUMNS`:

- compute_s: time if compute were the only limit (after the class's mapping losses);
- memory_s: time if off-chip memory traffic were the only limit;
- overhead_s: fixed time not overlapped with either (launch, dispatch, fill/drain, fallback);
- dynamic_energy_j: switching energy of the arithmetic and of every memory level;
- dram_bytes, onchip_bytes: bytes moved per memory level;
- cycles: device clock cycles (NaN where the class has no single clock).

Optional columns pass through (e.g. `unit`: where an op ran, for NPU fallback to the host).
`power_capped` (bool, default True) exempts rows from the device's power cap (work done by
another part, such as the host CPU an NPU falls back to); `host_energy_j` is the part of a
row's `dynamic_energy_j` spent by that other part (reported apart from the device's);
`offchip_energy_j` is the part of it spent off chip (DVFS does not scale it).
`finish` then applies the roofline (time = max(compute, memory) + overhead), the bound, the
power cap and static energy. Stateless: policies are functions, profiles are data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices.dvfs import throttle
from accelsim.devices.mapping import producer_rows

COST_COLUMNS = ("compute_s", "memory_s", "overhead_s", "dynamic_energy_j", "dram_bytes",
                "onchip_bytes", "cycles")
BOUNDS = np.array(["compute", "memory", "overhead"])

ClassModel = Callable[..., pd.DataFrame]  # see the module docstring


def finish(work: pd.DataFrame, costs: pd.DataFrame, tdp_w: float, static_w: float,
           voltage_floor: float | None = None) -> pd.DataFrame:
    """Roofline, bound, power cap and energy, per row.

    time_s = max(compute_s, memory_s) + overhead_s. The bound is the largest of the three
    terms. The power cap governs each kernel: a row together with the rows fused into it
    (`unit` "fused", `mapping.producer_rows`), whose energy is spent in the same time. If a
    kernel's average power (dynamic energy / time + static) would exceed the TDP, the device
    throttles. With a `voltage_floor` (a device with DVFS) the clock and the voltage drop until
    the kernel fits (`accelsim.devices.dvfs`; the optional cost column `offchip_energy_j` is
    the part of the energy that does not scale with the core voltage); the column
    `clock_fraction` says at what share of the rated clock each row ran. Without one, the
    kernel's own row stretches until the power equals the TDP (NB: a clock that scales down
    uniformly at constant energy; its `clock_fraction` is its unthrottled time over its
    throttled one). `static_w` must be below `tdp_w`
    (`energy.static_power_w` guarantees it for a profile).
    """
    missing = [c for c in COST_COLUMNS if c not in costs]
    if missing:
        raise ValueError(f"class model returned no {missing}")
    terms = np.column_stack([costs[c].to_numpy(dtype=float)
                             for c in ("compute_s", "memory_s", "overhead_s")])
    if (terms < 0).any() or not np.isfinite(terms).all():
        raise ValueError("class model returned a negative or non-finite time")
    headroom_w = tdp_w - static_w
    if not headroom_w > 0:
        raise ValueError(f"static power {static_w} W is not below the TDP {tdp_w} W")
    time_s = np.maximum(terms[:, 0], terms[:, 1]) + terms[:, 2]
    bound = BOUNDS[np.argmax(terms, axis=1)]
    dyn_j = costs["dynamic_energy_j"].to_numpy(dtype=float)
    group = kernel_groups(work, costs)
    n = len(work)
    capped = (costs["power_capped"].to_numpy(dtype=bool) if "power_capped" in costs
              else np.ones(n, dtype=bool))
    clock_fraction = np.ones(n)
    if voltage_floor is not None:
        offchip_j = (costs["offchip_energy_j"].to_numpy(dtype=float)
                     if "offchip_energy_j" in costs else np.zeros(n))
        clock_fraction, time_s, dyn_j, stretch_s = throttle(
            group, terms[:, 0], terms[:, 1], terms[:, 2], dyn_j - offchip_j, offchip_j,
            headroom_w, voltage_floor, capped)
        time_s = time_s + stretch_s
        bound = np.where((clock_fraction < 1) & (group == np.arange(n)), "power", bound)
        return _finished(work, costs, time_s, bound, dyn_j, static_w, clock_fraction)
    # the least time each kernel's energy allows within the power envelope, minus what it takes
    short_s = (np.bincount(group, weights=dyn_j, minlength=n) / headroom_w
               - np.bincount(group, weights=time_s, minlength=n))
    throttled = (short_s > 0) & (group == np.arange(n)) & capped
    stretched_s = time_s + np.where(throttled, short_s, 0.0)
    # NB: the stretch is a uniform clock drop at constant energy: the kernel ran at the share
    # of its clock that its unthrottled time is of its throttled one (so the clock line says
    # what limited it)
    kernel_s = np.bincount(group, weights=time_s, minlength=n)
    clock_fraction = np.where(throttled, kernel_s / np.maximum(kernel_s + short_s, 1e-300), 1.0)
    bound = np.where(throttled, "power", bound)
    return _finished(work, costs, stretched_s, bound, dyn_j, static_w, clock_fraction)


def _finished(work: pd.DataFrame, costs: pd.DataFrame, time_s: np.ndarray, bound: np.ndarray,
              dyn_j: np.ndarray, static_w: float, clock_fraction: np.ndarray) -> pd.DataFrame:
    # The new columns as one frame beside the work's (setting 18 columns one at a time cost
    # three times as much); a cost column that shadows a work column replaces it in place.
    new: dict[str, Any] = {c: costs[c].to_numpy() for c in costs.columns}
    new.update(dynamic_energy_j=dyn_j, time_s=time_s, bound=bound, clock_fraction=clock_fraction,
               energy_j=dyn_j + static_w * time_s,
               bytes=(work["read_bytes"] + work["write_bytes"]).to_numpy())
    if work.columns.isin(list(new)).any():
        return pd.DataFrame({**{c: work[c] for c in work.columns}, **new}, index=work.index)
    return pd.concat([work, pd.DataFrame(new, index=work.index)], axis=1)


def kernel_groups(work: pd.DataFrame, costs: pd.DataFrame) -> np.ndarray:
    """Position of the kernel each row ran in (its own unless the class model fused it)."""
    if "unit" not in costs:
        return np.arange(len(work))
    return producer_rows(work, costs["unit"].to_numpy() == "fused")


def bottleneck(layers: pd.DataFrame) -> str:
    """The bound that accounts for most of the time (compute, memory, overhead or power)."""
    by_bound = layers.groupby("bound")["time_s"].sum()
    return str(by_bound.idxmax()) if len(by_bound) else "none"


def explain_bound(layers: pd.DataFrame) -> str:
    """One line on where a batch's time goes: the share of each bound and the top layer."""
    total_s = float(layers["time_s"].sum())
    if total_s <= 0:
        return "no time"
    shares = layers.groupby("bound")["time_s"].sum().sort_values(ascending=False) / total_s
    parts = ", ".join(f"{bound} {share:.0%}" for bound, share in shares.items() if share >= 0.005)
    # the first slowest row, read column by column (a whole row of mixed types costs more)
    time_s = layers["time_s"].to_numpy()
    i = int(np.argmax(time_s))
    name, phase, bound = (layers[c].iat[i] for c in ("name", "phase", "bound"))
    return (f"time by bound: {parts}; slowest layer {name} ({phase}, "
            f"{bound}-bound, {float(time_s[i]) / total_s:.0%} of the time)")
