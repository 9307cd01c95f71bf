"""The null device: fixed, known costs per op, so everything above the device layer (the
pipeline, results, reports) can be tested against closed forms without a hardware model.

    NullProfile(op_time_s=1e-3)  # every forward op row takes 1 ms, whatever its size

Backward rows take `backward_factor` x that, the optimizer row `op_time_s`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from accelsim.devices.core import device_model


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


@device_model("null")
def null_costs(profile: NullProfile, work: pd.DataFrame, gemms: pd.DataFrame, precision: str,
               software: str) -> pd.DataFrame:
    factor = np.where(work["phase"] == "backward", profile.backward_factor, 1.0)
    n = len(work)
    return pd.DataFrame({
        "compute_s": profile.op_time_s * factor,
        "memory_s": np.zeros(n),
        "overhead_s": np.zeros(n),
        "dynamic_energy_j": np.full(n, profile.op_energy_j),
        "dram_bytes": work["read_bytes"].to_numpy() + work["write_bytes"].to_numpy(),
        "onchip_bytes": np.zeros(n),
        "cycles": np.full(n, np.nan),
    }, index=work.index)
