"""Measured operand sparsity in the cost model: zero gating (energy) and 2:4 structured
sparsity on tensor cores (time), from what the kernels computed (`accelsim.kernels.measure`).

    costs = with_measured_sparsity(profile, work, costs, "fp16", measurement.layers)

Applied to the class model's cost columns before `core.finish` (so the power cap and static
energy see the result), on forward rows only (NB: backward GEMMs produce dense gradients and
read the weights transposed, which 2:4 hardware does not accelerate; their operand zeros are
not measured). Per forward matmul row:
- energy, on a device whose profile sets `compute.zero_operand_gating`: the MAC energy
  (`energy.arithmetic_energy_j`) scales by the share of products with both operands non-zero,
  (1 - input_sparsity) x (1 - weight_sparsity). NB: zeros taken as independent between the
  operands; memory energy is unchanged (zeros are stored and moved like any value).
- time, on a GPU with a 2:4 sparse tensor-core peak at the precision, where the row runs on
  tensor cores and its weights are 2:4 sparse: compute_s x dense peak / sparse peak (1/2 on
  A100 and H100). NB: the datasheet's sparse rate, at the class model's dense efficiency; the
  row's memory time and overhead are unchanged, so its time falls by at most that factor.
The measured columns (output_error, input_sparsity, weight_sparsity) join the cost columns and
so the layer table; rows with no measurement (backward, optimizer, ops without operands)
hold NaN.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices.energy import arithmetic_energy_j, energy_scales
from accelsim.workload.columns import Columns, Table

MEASURED = ("output_error", "input_sparsity", "weight_sparsity")


def zero_gating(profile: Any) -> bool:
    """Whether the device's MAC units spend no energy on a zero operand (profile field)."""
    return bool(getattr(getattr(profile, "compute", None), "zero_operand_gating", False))


def sparse_speedup(profile: Any, precision: str) -> float | None:
    """Dense / 2:4-sparse matrix peak at `precision` (<= 1), None where no sparse peak."""
    c = getattr(profile, "compute", None)
    if c is None or profile.device_class != "gpu":
        return None
    dense = c.matrix_peak_flops_per_s.get(precision)
    sparse = c.matrix_sparse_peak_flops_per_s.get(precision)
    return None if not dense or not sparse else dense / sparse


def per_row(work: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """The measurement of each work row's op (forward rows; NaN elsewhere), aligned to `work`."""
    by_op = measured.set_index("op_index")
    forward = (work["phase"] == "forward").to_numpy()
    idx = work["op_index"].to_numpy()
    out = pd.DataFrame(index=work.index)
    for col in (*MEASURED, "weights_2_4"):
        values = by_op[col].reindex(idx).to_numpy(dtype=float)
        out[col] = np.where(forward, values, np.nan)
    return out


def with_measured_sparsity(profile: Any, work: Table, costs: Table,
                           precision: str, measured: pd.DataFrame) -> pd.DataFrame:
    """`costs` with zero gating and 2:4 time applied (see the module docstring) and the
    measured columns added. `precision`: the profile key the matrix units run at."""
    work, costs = Columns.of(work).to_frame(), Columns.of(costs).to_frame()
    m = per_row(work, measured)
    out = costs.copy()
    for col in MEASURED:
        out[col] = m[col].to_numpy()
    matmul = work["matmul"].to_numpy(dtype=bool) & (work["phase"] == "forward").to_numpy()
    on_device = (costs["unit"] != "host").to_numpy() if "unit" in costs else np.ones(len(out),
                                                                                      bool)
    if zero_gating(profile):
        s_in = np.nan_to_num(m["input_sparsity"].to_numpy())
        s_w = np.nan_to_num(m["weight_sparsity"].to_numpy())
        zero_products = 1.0 - (1.0 - s_in) * (1.0 - s_w)
        flops = np.where(matmul & on_device, work["flops"].to_numpy(dtype=float), 0.0)
        mac_j = arithmetic_energy_j(flops, np.zeros(len(out)), precision,
                                    energy_scales(profile)[0])
        out["dynamic_energy_j"] = out["dynamic_energy_j"] - zero_products * mac_j
    ratio = sparse_speedup(profile, precision)
    if ratio is not None and "unit" in costs:
        skip = (m["weights_2_4"].to_numpy() == 1.0) & matmul & (
            costs["unit"] == "tensor_core").to_numpy()
        out["compute_s"] = np.where(skip, out["compute_s"] * ratio, out["compute_s"])
    return out
