"""The CPU class model: cores x SIMD lanes x FMA units x clock per precision (AMX where the
profile lists a matrix engine), cache-blocked GEMMs over the cores, DRAM bandwidth, and a small
framework overhead per op. Also the host fallback of the NPU model.

    costs = cpu_costs(load_profile("xeon-8480"), work, gemms, "bf16", "eager")

Per row of the work table:
- matmul rows run on the matrix engine (AMX) when it lists the precision, else on the vector
  units at the precision's listed peak, else at the fp32 vector peak (`vector_peak_flops_per_s`);
  compute_s = FLOPs x core quantization / (peak x GEMM efficiency); DRAM bytes = compulsory +
  last-level-cache re-reads (`tiling`).
- other rows stream their bytes at the sustained DRAM bandwidth; their FLOPs run on the vector
  units.
- overhead: framework dispatch per op (eager) or per unfused op (compiled, which fuses
  elementwise and normalisation ops into their producer as on the GPU). On a CPU the host *is*
  the device, so dispatch is serial with the math.
Peaks, core count, SIMD width, FMA units, clock, L3 and bandwidth come from the profile;
efficiencies and overheads from `hw_profiles/efficiency/cpu.toml` (all assumed, none fitted).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices.core import device_model
from accelsim.devices.efficiency import load_efficiency
from accelsim.devices.mapping import fused_rows, kernel_counts, row_energy_j
from accelsim.devices.tiling import core_costs, row_gemm_factors, row_traffic_bytes
from accelsim.errors import AccelsimError
from accelsim.kernels.formats import get_format

SOFTWARE = ("eager", "compiled")
FLOPS_PER_FMA = 2
FP32_BITS = 32


def fp32_vector_peak_flops_per_s(profile: Any) -> float:
    """fp32 vector peak: the profile's figure, else cores x (SIMD bits / 32) lanes x FMA units
    x 2 FLOPs x clock (the same formula the profiles' figures are derived with)."""
    compute = profile.compute
    if "fp32" in compute.vector_peak_flops_per_s:
        return float(compute.vector_peak_flops_per_s["fp32"])
    parts = (compute.cores, compute.simd_width_bits, compute.fma_units_per_core, compute.clock_hz)
    if any(p is None for p in parts):
        raise AccelsimError(f"{profile.name}: the CPU model needs cores, simd_width_bits, "
                            "fma_units_per_core and clock, or a vector fp32 peak")
    cores, simd_bits, fma_units, clock_hz = parts
    return float(cores * (simd_bits / FP32_BITS) * fma_units * FLOPS_PER_FMA * clock_hz)


def vector_peak_flops_per_s(profile: Any, precision: str) -> float:
    """Vector peak at `precision`: listed, else fp32's. NB: a precision without a listed vector
    peak is converted to fp32 in registers (no native narrow FMA assumed); storage stays narrow."""
    listed = profile.compute.vector_peak_flops_per_s.get(precision)
    return float(listed) if listed is not None else fp32_vector_peak_flops_per_s(profile)


def matmul_path(profile: Any, precision: str) -> tuple[str, float]:
    """("amx", peak) where the matrix engine lists `precision`, else ("vector", peak)."""
    matrix = profile.compute.matrix_peak_flops_per_s
    if precision in matrix:
        return "amx", float(matrix[precision])
    return "vector", vector_peak_flops_per_s(profile, precision)


@device_model("cpu")
def cpu_costs(profile: Any, work: pd.DataFrame, gemms: pd.DataFrame, precision: str,
              software: str) -> pd.DataFrame:
    """Cost columns (core.COST_COLUMNS + `unit`, `kernels`) of every work row on a CPU."""
    if software not in SOFTWARE:
        raise AccelsimError(f"software '{software}': choose one of {', '.join(SOFTWARE)}")
    eff = load_efficiency("cpu")
    compute = profile.compute
    unit, matmul_peak = matmul_path(profile, precision)
    cores = float(compute.cores or 1)
    clock_hz = float(compute.clock_hz) if compute.clock_hz else float("nan")
    mem = profile.offchip_memory
    if mem is None:
        raise AccelsimError(f"{profile.name}: the CPU model needs offchip_memory.bandwidth")
    width = get_format(precision).bytes_per_element
    tile_m, tile_n = eff["assumed.core_tile"]

    # NB: a profile without a cache size gets compulsory traffic only (the ideal-reuse bound).
    factors = row_gemm_factors(work, gemms, width, tile_m, tile_n, cores,
                               eff["assumed.split_k_min_k"],
                               profile.onchip_memory.capacity_bytes,
                               eff["assumed.cache_usable_fraction"])
    matmul = work["matmul"].to_numpy(dtype=bool)
    flops = work["flops"].to_numpy(dtype=float)
    quant = factors["quantization"].to_numpy()
    vector_rate = vector_peak_flops_per_s(profile, precision) * eff["assumed.vector_efficiency"]
    compute_s = np.where(matmul, flops * quant / (matmul_peak * eff["assumed.gemm_efficiency"]),
                         flops / vector_rate)

    fused = fused_rows(work) if software == "compiled" else np.zeros(len(work), dtype=bool)
    dram, onchip = row_traffic_bytes(work, factors, fused)  # on-chip: through the caches
    memory_s = dram / (float(mem.bandwidth_bytes_per_s) * eff["assumed.dram_bandwidth_efficiency"])
    # NB: a backward matmul's two GEMMs are two ops to the framework, as on the GPU.
    ops = np.where(fused, 0.0, kernel_counts(work))
    per_op_s = eff[f"assumed.{software}_overhead_per_op_s"]
    overhead_s = ops * per_op_s

    energy_j = row_energy_j(profile, precision, np.where(matmul, flops / 2, 0.0),
                            np.where(matmul, 0.0, flops), dram, onchip)
    return core_costs(work, compute_s, memory_s, overhead_s, energy_j, dram, onchip, clock_hz,
                      np.where(fused, "fused", np.where(matmul, unit, "vector")), ops)
