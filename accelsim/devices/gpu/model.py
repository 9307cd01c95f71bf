"""The GPU class model: tensor cores or CUDA cores, CTA tiles in waves over the SMs, L2 reuse,
DRAM streams, kernel launch and framework overhead, under a software stack (a `SoftwareStack`,
resolved at the edge).

    costs = gpu_costs(load_profile("a100"), work, gemms, "fp16", builtin_stacks()["pytorch-eager"])

Per row of the work table:
- matmul rows run on tensor cores when the precision has a matrix-engine peak on the device,
  else on CUDA cores (fp32 on V100/A100/H100; tf32 only where listed); a precision with neither
  raises AccelsimError (bf16 on V100, fp8 on A100). An fp32 run's conv / other matmul rows
  run as tf32 on tensor cores where the stack says so (`fp32_on_tf32`: PyTorch's, TensorFlow's
  and TensorRT's TF32 defaults) and the device lists tf32 (`tf32_rows`).
  compute_s = FLOPs x quantization / (peak x efficiency), the quantization from each GEMM's
  shape (`gpu.gemm`: CTA tiles in waves over the SMs at the tile's occupancy, split-K, the
  pipeline fill of short K, and for fp32 the Winograd algorithm where the autotuner would
  pick it); DRAM bytes = compulsory bytes + L2 re-reads (`tiling`) + Winograd's transforms,
  less the inputs still resident in L2 from the kernel that wrote them (`residency`).
- other rows stream their bytes at the achievable DRAM bandwidth; their FLOPs run on the CUDA
  cores at the precision's vector peak (fp32's where the profile lists none: NB PyTorch
  computes half-precision elementwise math in fp32 registers).
- the software stack (`hw_profiles/software/`, `accelsim.profiles.software`) sets the rest:
  every kernel pays a launch gap on the GPU, and the host's framework time per kernel (the
  stack's, scaled to the host CPU) overlaps the GPU's work: a kernel shorter than it leaves
  the GPU idle. Rows of the op groups the stack fuses join their producer kernel (their
  overhead vanishes, their DRAM traffic shrinks to inputs the producer did not write). A stack
  with weight casts (autocast) adds one cast kernel per weighted matmul per forward
  (`stack_costs.amp_weight_casts`); its layout conversions add transposes around tensor-core
  convs; its efficiency modifiers multiply the factors below (capped at 1).
Peaks, SM count, L2, bandwidth and clock come from the profile; efficiencies, tiles and
overheads from `hw_profiles/efficiency/gpu.toml` (fitted ones named with their fit set).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.devices.energy import offchip_energy_j
from accelsim.devices.gpu.gemm import gemm_factors
from accelsim.devices.mapping import kernel_counts, listed_vector_peak, row_energy_j, row_gemms
from accelsim.devices.residency import resident_read_bytes
from accelsim.devices.stack_costs import (
    amp_weight_casts,
    capped_factor,
    host_issue_wait_s,
    layout_conversions,
    stack_fused_rows,
)
from accelsim.devices.tiling import core_costs, row_traffic_bytes
from accelsim.errors import AccelsimError, PrecisionError
from accelsim.formats import get_format
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.software import SoftwareStack
from accelsim.workload.columns import Columns, Table, is_in
from accelsim.workload.ops import OpKind
from accelsim.workload.work import MASTER_WEIGHT_BYTES

CONV_OPS = frozenset(k.value for k in (OpKind.CONV2D, OpKind.CONV3D, OpKind.CONV_TRANSPOSE3D))


def matmul_path(profile: Any, precision: str) -> tuple[str, float]:
    """Where matmuls at `precision` run on a GPU and at what peak: ("tensor_core", FLOP/s) when
    the matrix engine lists the precision, else ("cuda_core", FLOP/s); raises otherwise."""
    matrix = profile.compute.matrix_peak_flops_per_s
    vector = profile.compute.vector_peak_flops_per_s
    if precision in matrix:
        return "tensor_core", float(matrix[precision])
    if precision in vector:
        return "cuda_core", float(vector[precision])
    runs = sorted({*matrix, *vector})
    raise PrecisionError(profile.name, precision, runs,
                         f"{profile.name} cannot run {precision} matmuls (no tensor-core or "
                         f"CUDA-core peak for it); it runs: {', '.join(runs)}")


def vector_peak_flops_per_s(profile: Any, precision: str) -> float:
    """CUDA-core peak for non-matmul math at `precision` (fp32's where not listed)."""
    listed = listed_vector_peak(profile, precision)
    if listed is None:
        raise AccelsimError(f"{profile.name} lists no CUDA-core (vector) peak")
    return listed


def tf32_rows(work: Table, stack: SoftwareStack, profile: Any, precision: str
              ) -> np.ndarray:
    """Matmul rows an fp32 run executes as tf32 on tensor cores: those of the op groups in the
    stack's `fp32_on_tf32` ("conv": convolutions; "matmul": the other matmul-like ops), on a
    device whose tensor cores list tf32 (Ampere and later). NB: operands stay fp32 in memory
    (tf32 is stored in 4 bytes), and energy is costed at fp32's."""
    if (precision != "fp32" or not stack.fp32_on_tf32
            or "tf32" not in profile.compute.matrix_peak_flops_per_s):
        return np.zeros(len(work), dtype=bool)
    conv = is_in(np.asarray(work["op"]), CONV_OPS)
    groups = {"conv": conv, "matmul": ~conv}
    picked = np.logical_or.reduce([groups[g] for g in stack.fp32_on_tf32])
    return np.asarray(work["matmul"], dtype=bool) & picked


def _require(profile: Any, value: Any, field: str) -> float:
    if value is None:
        raise AccelsimError(f"{profile.name}: the GPU model needs {field}, which the profile "
                            "does not publish")
    return float(value)


def gpu_costs(profile: Any, work: Table, gemms: Table, precision: str,
              stack: SoftwareStack) -> Columns:
    """Cost columns (core.COST_COLUMNS + `unit`, `kernels`) of every work row on a GPU under
    the software stack `stack` (resolved at the edge, on its host: `resolve_software`)."""
    work, gemms = Columns.of(work), Columns.of(gemms)
    eff = load_efficiency("gpu")
    unit, matmul_peak = matmul_path(profile, precision)
    _require(profile, profile.compute.sm_count, "compute.sm_count")
    clock_hz = _require(profile, profile.compute.clock_hz, "compute.clock_hz")
    _require(profile, profile.onchip_memory.l2_cache_bytes, "onchip_memory.l2_cache")
    mem = profile.offchip_memory
    bandwidth = _require(profile, None if mem is None else mem.bandwidth_bytes_per_s,
                         "offchip_memory.bandwidth")
    width = get_format(precision).bytes_per_element

    def gemm_eff(core: str) -> float:  # NB: a stack's modifier cannot lift it above 1 (peak)
        return capped_factor(stack, "gpu", core, eff[f"fitted.{core}_efficiency"])

    achievable_bw = bandwidth * capped_factor(stack, "gpu", "dram_bandwidth",
                                              eff["fitted.dram_bandwidth_efficiency"])

    rows = row_gemms(work, gemms)  # (for both paths of an fp32 run)
    factors = gemm_factors(work, gemms, profile, precision, unit, eff, width, matmul_peak,
                           bandwidth, rows)
    row_unit = np.full(len(work), unit, dtype=object)
    rate = np.full(len(work), matmul_peak * gemm_eff(unit))
    on_tf32 = tf32_rows(work, stack, profile, precision)
    if on_tf32.any():  # the stack runs these fp32 GEMMs as tf32 on tensor cores
        tf32_peak = float(profile.compute.matrix_peak_flops_per_s["tf32"])
        tf32 = gemm_factors(work, gemms, profile, "tf32", "tensor_core", eff, width,
                            tf32_peak, bandwidth, rows)
        factors = Columns({c: np.where(on_tf32, tf32[c], factors[c]) for c in factors})
        row_unit[on_tf32] = "tensor_core"
        rate[on_tf32] = tf32_peak * gemm_eff("tensor_core")
    matmul = np.asarray(work["matmul"], dtype=bool)
    flops = np.asarray(work["flops"], dtype=float)
    quant = factors["quantization"]

    vector_rate = vector_peak_flops_per_s(profile, precision) * gemm_eff("cuda_core")
    compute_s = np.where(matmul, flops * quant / rate, flops / vector_rate)

    fused = stack_fused_rows(work, stack)
    casts = amp_weight_casts(work, precision, stack.weight_casts)
    transposes = layout_conversions(work, stack, True) * (matmul & (row_unit == "tensor_core"))
    dram, onchip = row_traffic_bytes(work, factors, fused)  # on-chip: through L2
    weight_bytes = np.asarray(work["weight_bytes"], dtype=float)
    activation_bytes = np.asarray(work["read_bytes"], dtype=float) - weight_bytes
    # NB: a transpose reads and writes the conv's input activation once through DRAM.
    dram = dram + factors["transform_bytes"] + casts * weight_bytes * (
        MASTER_WEIGHT_BYTES / width + 1.0) + transposes * 2.0 * activation_bytes
    # inputs a recent kernel wrote are read from L2 while they still fit there (`residency`)
    resident = resident_read_bytes(work, dram, fused, float(profile.onchip_memory.l2_cache_bytes))
    dram = dram - resident
    memory_s = dram / achievable_bw

    # NB: non-fused Winograd adds its filter, input and output transform kernels around the
    # batched GEMM (cuDNN WINOGRAD_NONFUSED); the direct-vs-Winograd pick leaves them out.
    winograd_kernels = (eff["assumed.winograd_transform_kernels"]
                        * np.asarray(factors["winograd"], dtype=float))
    kernels = (np.where(fused, 0.0, kernel_counts(work)) + casts + transposes
               + winograd_kernels)
    stack.host_per_kernel_s("gpu")  # a GPU stack must give it (ConfigError otherwise)
    busy_s = np.maximum(compute_s, memory_s)
    # NB: host work overlaps the GPU kernel by kernel (asynchronous launch); the GPU idles only
    # when a kernel is shorter than the host time that issues the next one.
    overhead_s = kernels * eff["assumed.kernel_launch_s"] + host_issue_wait_s(
        stack, "gpu", kernels, busy_s)

    executed = flops * factors["executed_fraction"]  # Winograd: fewer multiplies
    energy_j = row_energy_j(profile, precision, np.where(matmul, executed / 2, 0.0),
                            np.where(matmul, 0.0, flops), dram, onchip)
    costs = core_costs(work, compute_s, memory_s, overhead_s, energy_j, dram, onchip, clock_hz,
                       np.where(fused, "fused", np.where(matmul, row_unit, "cuda_core")),
                       kernels)
    return costs.assign(
        offchip_energy_j=offchip_energy_j(profile, dram),  # DVFS leaves it unscaled
        executed_flops=executed,  # what the invariants hold to the peak
        resident_bytes=resident)  # inputs read from L2 (the invariants count them)
