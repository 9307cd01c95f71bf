"""The roofline core shared by every device class, and the contract of a class model.

A class model (one folder per class: gpu/, cpu/, systolic/, fpga/, npu/, and null.py) is a
function, the `model` of the class's record in `accelsim.devices.registry`:

    fn(profile, work: Table, gemms: Table, precision: str, software, **extra) -> Table

(`extra`: what the record says the class takes beside, `DeviceClass.cost`: the batch, a host.)

`software` is a resolved `accelsim.profiles.software.SoftwareStack` (or a stack name, which the
GPU and CPU models resolve; the other classes run compiled graphs and ignore it).

`work` is `accelsim.workload.work.work_table` (one row per op x phase), `gemms` is
`accelsim.workload.work.gemms_for` (forward GEMM shapes by op_index); a table is a DataFrame
or its read-only array form, `accelsim.workload.columns.Columns` (the estimate passes that:
`work_columns`, `gemm_columns`), and a model reads either as arrays. It returns a table
(either form) of one row per row of `work`, in its order, with the columns of `COST_COLUMNS`:

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
from accelsim.workload.columns import Columns, Table

COST_COLUMNS = ("compute_s", "memory_s", "overhead_s", "dynamic_energy_j", "dram_bytes",
                "onchip_bytes", "cycles")
BOUNDS = np.array(["compute", "memory", "overhead"])

ClassModel = Callable[..., Table]  # see the module docstring


def finish(work: Table, costs: Table, tdp_w: float, static_w: float,
           voltage_floor: float | None = None) -> pd.DataFrame:
    """`finish_columns` as a DataFrame (with the index of `work` where it is a DataFrame)."""
    return finish_columns(work, costs, tdp_w, static_w, voltage_floor).to_frame(
        work.index if isinstance(work, pd.DataFrame) else None)


def finish_columns(work: Table, costs: Table, tdp_w: float, static_w: float,
                   voltage_floor: float | None = None) -> Columns:
    """Roofline, bound, power cap and energy, per row: the columns of `work`, then those of
    `costs` (one that shadows a work column replaces it in place) and the ones named below.

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
    work, costs = Columns.of(work), Columns.of(costs)
    missing = [c for c in COST_COLUMNS if c not in costs]
    if missing:
        raise ValueError(f"class model returned no {missing}")
    terms = np.column_stack([np.asarray(costs[c], dtype=float)
                             for c in ("compute_s", "memory_s", "overhead_s")])
    if (terms < 0).any() or not np.isfinite(terms).all():
        raise ValueError("class model returned a negative or non-finite time")
    headroom_w = tdp_w - static_w
    if not headroom_w > 0:
        raise ValueError(f"static power {static_w} W is not below the TDP {tdp_w} W")
    time_s = np.maximum(terms[:, 0], terms[:, 1]) + terms[:, 2]
    bound = BOUNDS[np.argmax(terms, axis=1)]
    dyn_j = np.asarray(costs["dynamic_energy_j"], dtype=float)
    group = kernel_groups(work, costs)
    n = len(work)
    capped = (np.asarray(costs["power_capped"], dtype=bool) if "power_capped" in costs
              else np.ones(n, dtype=bool))
    clock_fraction = np.ones(n)
    if voltage_floor is not None:
        offchip_j = (np.asarray(costs["offchip_energy_j"], dtype=float)
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


def _finished(work: Columns, costs: Columns, time_s: np.ndarray, bound: np.ndarray,
              dyn_j: np.ndarray, static_w: float, clock_fraction: np.ndarray) -> Columns:
    new: dict[str, Any] = {c: costs[c] for c in costs}
    new.update(dynamic_energy_j=dyn_j, time_s=time_s, bound=bound, clock_fraction=clock_fraction,
               energy_j=dyn_j + static_w * time_s, bytes=work["read_bytes"] + work["write_bytes"])
    return work.joined(new)


def kernel_groups(work: Table, costs: Table) -> np.ndarray:
    """Position of the kernel each row ran in (its own unless the class model fused it)."""
    if "unit" not in costs:
        return np.arange(len(work))
    return producer_rows(work, np.asarray(costs["unit"]) == "fused")


def time_by_bound_s(layers: Table) -> tuple[np.ndarray, np.ndarray]:
    """(the bounds that occur, in name order; the seconds each accounts for)."""
    bounds, where = np.unique(np.asarray(layers["bound"]).astype(str), return_inverse=True)
    return bounds, np.bincount(where, weights=np.asarray(layers["time_s"], dtype=float),
                               minlength=len(bounds))


def bottleneck(layers: Table) -> str:
    """The bound that accounts for most of the time (compute, memory, overhead or power;
    the first in name order where two tie)."""
    bounds, time_s = time_by_bound_s(layers)
    return str(bounds[int(np.argmax(time_s))]) if len(bounds) else "none"


def explain_bound(layers: Table) -> str:
    """One line on where a batch's time goes: the share of each bound and the top layer."""
    time_s = np.asarray(layers["time_s"], dtype=float)
    total_s = float(time_s.sum())
    if total_s <= 0:
        return "no time"
    bounds, bound_s = time_by_bound_s(layers)
    order = np.argsort(-bound_s, kind="stable")
    parts = ", ".join(f"{bounds[j]} {bound_s[j] / total_s:.0%}" for j in order
                      if bound_s[j] / total_s >= 0.005)
    i = int(np.argmax(time_s))  # the first slowest row
    name, phase, bound = (np.asarray(layers[c])[i] for c in ("name", "phase", "bound"))
    return (f"time by bound: {parts}; slowest layer {name} ({phase}, "
            f"{bound}-bound, {float(time_s[i]) / total_s:.0%} of the time)")
