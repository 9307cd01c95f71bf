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
- overhead: the software stack's dispatch time per unfused op (`hw_profiles/software/`; a
  stack that fuses joins elementwise / normalisation ops to their producer as on the GPU),
  scaled by the CPU's own single-thread clock. On a CPU the host *is* the device, so dispatch
  is serial with the math.
Peaks, core count, SIMD width, FMA units, clock, L3 and bandwidth come from the profile;
efficiencies from `hw_profiles/efficiency/cpu.toml` (all assumed, none fitted), except where
the stack gives its own measured ones (`[cpu_efficiency]`, written by `accelsim calibrate`):
GEMM, convolution and attention rows at the precision, vector math and DRAM streams (per op
kind where given), and the stack's per-core GEMM tile (`[cpu_tiling]`) where it gives one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices.core import device_model
from accelsim.devices.efficiency import load_efficiency
from accelsim.devices.mapping import kernel_counts, row_energy_j
from accelsim.devices.software import (
    SoftwareStack,
    host_single_thread_hz,
    resolve_software,
    stack_fused_rows,
)
from accelsim.devices.tiling import core_costs, row_gemm_factors, row_traffic_bytes
from accelsim.errors import AccelsimError
from accelsim.kernels.formats import get_format
from accelsim.workload.ops import OpKind

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


_CONV_OPS = (OpKind.CONV2D.value, OpKind.CONV3D.value, OpKind.CONV_TRANSPOSE3D.value)
# Non-matmul ops whose time a CPU spends on arithmetic (transcendentals, reductions) rather than
# on moving bytes: a stack's own figure for such an op kind is a vector efficiency; for any
# other non-matmul op kind, a DRAM stream efficiency.
VECTOR_OPS = frozenset(k.value for k in (
    OpKind.GELU, OpKind.SIGMOID, OpKind.TANH, OpKind.SILU, OpKind.SOFTMAX, OpKind.LAYERNORM,
    OpKind.RMSNORM, OpKind.BATCHNORM, OpKind.INSTANCENORM, OpKind.ROPE))


def stack_efficiencies(work: pd.DataFrame, stack: SoftwareStack, precision: str,
                       eff: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(GEMM, vector and DRAM stream efficiency per row): the stack's measured
    `[cpu_efficiency]` where it gives them (an op kind's own figure first, then its group's: a
    convolution or attention row falls back to the stack's GEMM figure), else the class
    factors of `hw_profiles/efficiency/cpu.toml`."""
    def factor(kernel: str, default: float) -> float:
        value = stack.cpu_factor(kernel, precision)
        return default if value is None else value

    gemm = factor("gemm", eff["assumed.gemm_efficiency"])
    vector = factor("vector", eff["assumed.vector_efficiency"])
    stream = factor("stream", eff["assumed.dram_bandwidth_efficiency"])
    by_op = {}
    for op in work["op"].unique():
        matmul = (factor("conv", gemm) if op in _CONV_OPS else
                  factor("attention", gemm) if op == OpKind.ATTENTION.value else gemm)
        by_op[op] = (matmul, factor(op, vector) if op in VECTOR_OPS else vector,
                     stream if op in VECTOR_OPS else factor(op, stream))
    rows = np.array([by_op[op] for op in work["op"]], dtype=float).reshape(-1, 3)
    return rows[:, 0], rows[:, 1], rows[:, 2]


@device_model("cpu")
def cpu_costs(profile: Any, work: pd.DataFrame, gemms: pd.DataFrame, precision: str,
              software: str | SoftwareStack) -> pd.DataFrame:
    """Cost columns (core.COST_COLUMNS + `unit`, `kernels`) of every work row on a CPU under
    the software stack `software` (a name or a `SoftwareStack`)."""
    # NB: on a CPU the host is the device: its own single-thread clock scales the dispatch.
    stack = resolve_software(software, "cpu")[0].on_host(host_single_thread_hz(profile))
    eff = load_efficiency("cpu")
    compute = profile.compute
    unit, matmul_peak = matmul_path(profile, precision)
    cores = float(compute.cores or 1)
    clock_hz = float(compute.clock_hz) if compute.clock_hz else float("nan")
    mem = profile.offchip_memory
    if mem is None:
        raise AccelsimError(f"{profile.name}: the CPU model needs offchip_memory.bandwidth")
    width = get_format(precision).bytes_per_element
    tile_m, tile_n = stack.cpu_core_tile or eff["assumed.core_tile"]

    # NB: a profile without a cache size gets compulsory traffic only (the ideal-reuse bound).
    factors = row_gemm_factors(work, gemms, width, tile_m, tile_n, cores,
                               eff["assumed.split_k_min_k"],
                               profile.onchip_memory.capacity_bytes,
                               eff["assumed.cache_usable_fraction"])
    matmul = work["matmul"].to_numpy(dtype=bool)
    flops = work["flops"].to_numpy(dtype=float)
    quant = factors["quantization"].to_numpy()
    gemm_eff, vector_eff, stream_eff = stack_efficiencies(work, stack, precision, eff)
    vector_rate = vector_peak_flops_per_s(profile, precision) * vector_eff
    compute_s = np.where(matmul, flops * quant / (matmul_peak * gemm_eff), flops / vector_rate)

    fused = stack_fused_rows(work, stack)
    dram, onchip = row_traffic_bytes(work, factors, fused)  # on-chip: through the caches
    memory_s = dram / (float(mem.bandwidth_bytes_per_s) * stream_eff)
    # NB: a backward matmul's two GEMMs are two ops to the framework, as on the GPU.
    ops = np.where(fused, 0.0, kernel_counts(work))
    overhead_s = ops * stack.host_per_kernel_s("cpu")

    energy_j = row_energy_j(profile, precision, np.where(matmul, flops / 2, 0.0),
                            np.where(matmul, 0.0, flops), dram, onchip)
    return core_costs(work, compute_s, memory_s, overhead_s, energy_j, dram, onchip, clock_hz,
                      np.where(fused, "fused", np.where(matmul, unit, "vector")), ops)
