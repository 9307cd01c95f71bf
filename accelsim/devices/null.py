"""The null device: fixed, known costs per op, so everything above the device layer (the
pipeline, results, reports) can be tested against closed forms without a hardware model.

    NullProfile(op_time_s=1e-3)  # every forward op row takes 1 ms, whatever its size

Backward rows take `backward_factor` x that, the optimizer row `op_time_s`. The class has no
profile files (no schema rules), no peaks (its costs are fixed by construction) and no step
overhead; its record's limits are the `NullProfile`'s own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.devices.registry import DeviceClass, register, unbounded_peaks
from accelsim.profiles.software import SoftwareStack
from accelsim.workload.columns import Columns, Table


@dataclass(frozen=True)
class NullProfile:
    name: str = "null"
    device_class: str = "null"
    op_time_s: float = 1e-3
    backward_factor: float = 2.0
    op_energy_j: float = 0.0
    capacity_bytes: float = float("inf")
    tdp_w: float = float("inf")
    static_w: float = 0.0


def null_costs(profile: NullProfile, work: Table, gemms: Table, precision: str,
               stack: SoftwareStack) -> Columns:
    factor = np.where(np.asarray(work["phase"]) == "backward", profile.backward_factor, 1.0)
    n = len(work)
    return Columns({
        "compute_s": profile.op_time_s * factor,
        "memory_s": np.zeros(n),
        "overhead_s": np.zeros(n),
        "dynamic_energy_j": np.full(n, profile.op_energy_j),
        "dram_bytes": np.asarray(work["read_bytes"]) + np.asarray(work["write_bytes"]),
        "onchip_bytes": np.zeros(n),
        "cycles": np.full(n, np.nan),
    })


NULL = register(DeviceClass(
    name="null", model=null_costs, peaks=unbounded_peaks, schema=None,
    default_stack="pytorch-eager", step_overhead=False,  # NB: costs fixed by construction
    power_limits=lambda p: (p.tdp_w, p.static_w), capacity_bytes=lambda p: p.capacity_bytes,
    has_offchip_memory=lambda p: True, reads_arrays=True))
