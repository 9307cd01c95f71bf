"""The CPU class model: cores x SIMD lanes x FMA units x clock per precision (AMX where the
profile lists a matrix engine), cache-blocked GEMMs over the cores, DRAM bandwidth, and a small
framework overhead per op. Also the host fallback of the NPU model.

    costs = cpu_costs(load_profile("xeon-8480"), work, gemms, "bf16", default_stack("cpu"))

Per row of the work table:
- matmul rows run on the matrix engine (AMX) when it lists the precision, else on the vector
  units at the precision's listed peak, else at the fp32 vector peak (`vector_peak_flops_per_s`);
  as a BLAS library runs them (`cpu.blas`, Goto's algorithm): compute_s = FLOPs x micro-tile
  quantisation over the cores / (peak x GEMM efficiency) + the packing pass over both operands
  (pack bytes / sustained bandwidth), serial with it; DRAM bytes = compulsory + last-level-cache
  re-reads, streamed at the stack's `gemv` figure (else its `pack` figure, else its stream one).
  Except under a stack that quantises an integer precision per call (its `quantize_<precision>`
  figure, as numpy's int8 kernels do: `quantized_rows`): such a GEMM is the quantisation of
  both fp32 operands ((m k + k n) x 4 B / (bandwidth x quantize figure)) then an integer loop
  at the GEMM efficiency with no micro-tile waste, no packing and no separate cast. Under a
  stack with `[allocator]` figures, the fresh pages of the per-call temporaries at or above
  its mmap threshold add their measured fault time (`cpu.alloc`, `fault_s`). Under a stack
  with `[cpu_passes]` tables (`cpu_passes`), the weight casts, the per-call quantisation and a
  GEMV's stream take the measured time per element at their working set instead of their
  bytes at one fitted figure, and a narrow-float op's rounding of its parameters (an
  embedding's whole table) is charged serial with its lookup. Where packing,
  cast, transpose and quantisation traffic goes (DRAM or on-chip), for time and energy
  alike: `serial_traffic_bytes`.
- other rows stream their bytes at the sustained DRAM bandwidth; their FLOPs run on the vector
  units.
- overhead: the software stack's dispatch time per unfused op (`hw_profiles/software/`; a
  stack that fuses joins elementwise / normalisation ops to their producer as on the GPU),
  scaled by the CPU's own single-thread clock. On a CPU the host *is* the device, so dispatch
  is serial with the math.
- the stack's graph fields, as on the GPU: autocast weight casts (`graph.weight_casts`: a cast
  op per weighted matmul per forward below 32 bits) and layout conversions around convolutions
  on the matrix engine (`graph.layout_conversions_per_conv`), each a separate op streaming
  its bytes serially; its `[efficiency]` modifiers multiply the CPU's factors (`cpu_modifiers`).
Peaks, core count, SIMD width, FMA units, clock, L3 and bandwidth come from the profile;
efficiencies from `hw_profiles/efficiency/cpu.toml` (all assumed, none fitted), except where
the stack gives its own measured ones (`[cpu_efficiency]`, written by `accelsim calibrate`):
GEMM, convolution and attention rows at the precision, vector math and DRAM streams (per op
kind where given), and the stack's GEMM micro-tile (`[cpu_tiling]`) where it gives one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices.cpu.alloc import fresh_bytes, fresh_pages
from accelsim.devices.cpu.blas import PACK_PASSES, blas_gemm_terms, pack_bytes
from accelsim.devices.cpu.passes import FP32_BYTES, pass_times_s
from accelsim.devices.mapping import kernel_counts, per_row, row_energy_j, row_gemms
from accelsim.devices.stack_costs import (
    amp_weight_casts,
    layout_conversions,
    stack_fused_rows,
)
from accelsim.devices.tiling import core_costs, row_traffic_bytes
from accelsim.errors import AccelsimError
from accelsim.formats import get_format
from accelsim.kernels.execute import INT8_KINDS
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.software import CPU_VECTOR_OPS, SoftwareStack
from accelsim.profiles.stack_choice import host_single_thread_hz
from accelsim.workload.columns import Columns, Table, is_in
from accelsim.workload.ops import MATMUL_KINDS, OpKind
from accelsim.workload.work import MASTER_WEIGHT_BYTES

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


# Op kinds whose operands an integer-quantising stack quantises per call (`quantized_rows`).
QUANTIZED_OPS = frozenset(k.value for k in INT8_KINDS)
_CONV_OPS = (OpKind.CONV2D.value, OpKind.CONV3D.value, OpKind.CONV_TRANSPOSE3D.value)
_MATMUL_OPS = frozenset(k.value for k in MATMUL_KINDS)
# Non-matmul ops whose stack figure is a vector efficiency (`software.CPU_VECTOR_OPS`).
VECTOR_OPS = CPU_VECTOR_OPS


def _modified(factor: float, modifier: float) -> float:
    """`factor` x a stack's `modifier`, capped at 1 (NB: a stack's modifier cannot lift a unit
    above its peak; a measured factor already above 1, a cache-resident stream, is kept)."""
    return min(factor * modifier, max(factor, 1.0))


def cpu_modifiers(stack: SoftwareStack, unit: str) -> tuple[float, float, float]:
    """The stack's `[efficiency]` modifiers of (matmul, vector, DRAM stream) factors on a CPU
    whose matmuls run on `unit` ("amx" or "vector"): the matrix engine takes the stack's
    `tensor_core` modifier, the vector units its `cuda_core` (NB: the GPU's names for its
    matrix and vector units), streams its `dram_bandwidth`."""
    matmul = stack.modifier("tensor_core" if unit == "amx" else "cuda_core", "cpu")
    return (matmul, stack.modifier("cuda_core", "cpu"),
            stack.modifier("dram_bandwidth", "cpu"))


def stack_efficiencies(work: Table, stack: SoftwareStack, precision: str,
                       eff: dict[str, Any], unit: str = "vector"
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(GEMM, vector and DRAM stream efficiency per row): the stack's measured
    `[cpu_efficiency]` where it gives them (an op kind's own figure first, then its group's: a
    convolution or attention row falls back to the stack's GEMM figure), else the class
    factors of `hw_profiles/efficiency/cpu.toml`; each times the stack's modifier of its unit
    (`cpu_modifiers`, capped at 1)."""
    def factor(kernel: str, default: float) -> float:
        value = stack.cpu_factor(kernel, precision)
        return default if value is None else value

    gemm = factor("gemm", eff["assumed.gemm_efficiency"])
    vector = factor("vector", eff["assumed.vector_efficiency"])
    stream = factor("stream", eff["assumed.dram_bandwidth_efficiency"])
    mods = cpu_modifiers(stack, unit)
    by_op = {}
    for op in dict.fromkeys(np.asarray(work["op"])):  # each kind once, in table order
        matmul = (factor("conv", gemm) if op in _CONV_OPS else
                  factor("attention", gemm) if op == OpKind.ATTENTION.value else gemm)
        # NB: a matmul kind's own figure (`attention_<p>`) is its math's, not a stream's: its
        # operands stream at the stack's stream figure (pack or gemv where it gives them)
        raw = (matmul, factor(op, vector) if op in VECTOR_OPS else vector,
               stream if op in VECTOR_OPS or op in _MATMUL_OPS else factor(op, stream))
        by_op[op] = tuple(_modified(f, m) for f, m in zip(raw, mods, strict=True))
    rows = np.array([by_op[op] for op in work["op"]], dtype=float).reshape(-1, 3)
    return rows[:, 0], rows[:, 1], rows[:, 2]


def pack_efficiency(stack: SoftwareStack, precision: str, stream_eff: np.ndarray
                    ) -> np.ndarray:
    """Fraction of DRAM bandwidth a matmul's packing and weight-cast passes and its operand
    streams sustain, per row:
    the stack's `pack_<precision>` (times its `dram_bandwidth` modifier, capped at 1), else the
    row's stream efficiency `stream_eff` (which carries the modifier already)."""
    own = stack.cpu_factor("pack", precision)
    if own is None:
        return stream_eff
    return np.full(len(stream_eff), _modified(own, stack.modifier("dram_bandwidth", "cpu")))


def micro_tile(profile: Any, stack: SoftwareStack, unit: str,
               eff: dict[str, Any]) -> tuple[int, int]:
    """The GEMM micro-tile (rows along M, columns along N): the stack's `[cpu_tiling]`, else
    the class's for the matrix engine or the profile's SIMD width (the widest listed width
    not above it; the narrowest for a narrower profile)."""
    if stack.cpu_micro_tile is not None:
        return stack.cpu_micro_tile
    if unit == "amx":
        return tuple(eff["assumed.micro_tile.amx"])
    widths = sorted(int(k.rsplit("_", 1)[1]) for k in eff
                    if k.startswith("assumed.micro_tile.simd_"))
    bits = profile.compute.simd_width_bits or widths[0]
    width = max([w for w in widths if w <= bits] or widths[:1])
    return tuple(eff[f"assumed.micro_tile.simd_{width}"])


def quantized_rows(work: Table, stack: SoftwareStack, precision: str) -> np.ndarray:
    """Rows whose GEMM the stack quantises per call: an integer `precision`, a stack that gives
    its `quantize_<precision>` figure or pass table, and an op the int8 kernels quantise
    (`kernels.execute.INT8_KINDS`; NB: attention and lstm run their fp32 kernels there), in
    the forward pass (NB: backward rows keep the BLAS model; the kernels have no int8 backward).
    """
    priced = stack.cpu_factor("quantize", precision) is not None or \
        f"quantize_{precision}" in stack.cpu_passes
    if not get_format(precision).is_integer or not priced:
        return np.zeros(len(work), dtype=bool)
    return (np.asarray(work["matmul"], dtype=bool) & is_in(np.asarray(work["op"]), QUANTIZED_OPS)
            & (np.asarray(work["phase"]) == "forward"))


def quantize_bytes(work: Table, gemms: Table, rows: np.ndarray) -> np.ndarray:
    """Per work row, the fp32 operand bytes its per-call quantisation reads: (m x k + k x n) x
    count x 4 for the `rows` (`quantized_rows`), else 0. numpy's int8 kernels quantise both
    operands on every call (abs, max, divide, round, clip, cast; then an int32 copy of each),
    so the cost is a fixed number of passes over both operands, priced at the stack's
    `quantize_<precision>` figure. NB: a convolution's m x k is its im2col matrix (the kernels
    quantise the input, then im2col it in int8: a pass over m x k); the output's rescale
    (m x n) is left out (m x n is small beside k x n for skinny GEMMs and beside the MACs for
    large ones)."""
    g = row_gemms(work, gemms)
    m, n, k, count = (np.asarray(g[c], dtype=float) for c in ("m", "n", "k", "count"))
    moved = per_row(MASTER_WEIGHT_BYTES * count * (m * k + k * n), g["row"], len(work))
    return np.where(rows, moved, 0.0)


def serial_stream_bytes(profile: Any, work: Table, gemms: Table, precision: str,
                        stack: SoftwareStack) -> pd.DataFrame:
    """Per row, what the cores stream serially with the row's math, in bytes: `pack` (BLAS
    packing, `cpu.blas.pack_bytes`), `cast` (autocast weight casts: fp32 read, narrow written),
    `transpose` (layout conversions: the conv's input activation read and written) and
    `quantize` (per-call quantisation of both operands, `quantize_bytes`: such a row has no
    packing and no separate cast), with the extra ops they add (`casts`, `transposes`)."""
    width = get_format(precision).bytes_per_element
    unit, _ = matmul_path(profile, precision)
    quantized = quantized_rows(work, stack, precision)
    casts = np.where(quantized, 0.0, amp_weight_casts(work, precision, stack.weight_casts))
    transposes = layout_conversions(work, stack, unit == "amx")
    activation_bytes = (np.asarray(work["read_bytes"], dtype=float)
                        - np.asarray(work["weight_bytes"], dtype=float))
    return pd.DataFrame({
        "pack": np.where(quantized, 0.0, pack_bytes(work, gemms, width)),
        "cast": casts * np.asarray(work["weight_bytes"], dtype=float) * (
            MASTER_WEIGHT_BYTES / width + 1.0),
        "transpose": transposes * 2.0 * activation_bytes,
        "quantize": quantize_bytes(work, gemms, quantized),
        "casts": casts, "transposes": transposes})


def fault_s(work: Table, gemms: Table, precision: str, stack: SoftwareStack
            ) -> tuple[np.ndarray, np.ndarray]:
    """(per row, the time faulting in the fresh pages of its per-call temporaries, s; those
    bytes): pages (`cpu.alloc.fresh_bytes` at the stack's mmap threshold, whole pages) x the
    stack's measured time per fresh page; zeros under a stack without `[allocator]` figures
    (every built-in stack: their frameworks keep caching allocators)."""
    if stack.allocator is None:
        return np.zeros(len(work)), np.zeros(len(work))
    page_s, page_bytes, threshold_bytes = stack.allocator
    fresh = fresh_bytes(work, gemms, precision, quantized_rows(work, stack, precision),
                        stack.weight_casts, threshold_bytes, page_bytes)
    return fresh_pages(fresh, page_bytes) * page_s, fresh


def serial_traffic_bytes(serial: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(DRAM bytes, on-chip bytes) per row of its serial passes (`serial_stream_bytes`) beyond
    the operands' compulsory traffic: the one place that decides where that traffic goes, for
    time and energy alike. Weight casts and layout transposes are ops of their own that read
    and write their arrays in DRAM: DRAM bytes, in the row's memory time as well as its
    serial time. A BLAS pack reads each operand once, which is the operand's compulsory DRAM
    read (no DRAM byte added: its time is priced per pack byte at the stack's `pack` figure of
    the DRAM bandwidth because that read streams from DRAM), and writes the packed copy into
    L2 / L3 (`PACK_PASSES`: half the pack bytes, on-chip). Per-call quantisation reads the
    fp32 operands (their compulsory read) and passes its temporaries through the caches
    (on-chip). NB: counting the pack's bytes as DRAM bytes beside the operands would ask more
    of DRAM than the row's time allows (the roofline); counting all of them on-chip would
    count the read twice."""
    dram = (serial["cast"] + serial["transpose"]).to_numpy(dtype=float)
    onchip = (serial["pack"] / PACK_PASSES + serial["quantize"]).to_numpy(dtype=float)
    return dram, onchip


def _quantize_rate_s(serial: pd.DataFrame, stack: SoftwareStack, precision: str, mem: Any
                     ) -> np.ndarray:
    """Per row, the quantisation bytes at the stack's `quantize_<precision>` figure, s (NaN
    where the stack gives no figure: only its pass table prices such rows)."""
    own = stack.cpu_factor("quantize", precision)
    if own is None:
        return np.full(len(serial), np.nan)
    eff = _modified(own, stack.modifier("dram_bandwidth", "cpu"))
    return np.asarray(serial["quantize"]) / (float(mem.bandwidth_bytes_per_s) * eff)


def cpu_costs(profile: Any, work: Table, gemms: Table, precision: str,
              stack: SoftwareStack) -> Columns:
    """Cost columns (core.COST_COLUMNS + `unit`, `kernels`) of every work row on a CPU under
    the software stack `stack` (resolved at the edge: `resolve_software`)."""
    # NB: on a CPU the host is the device: its own single-thread clock scales the dispatch.
    stack = stack.on_host(host_single_thread_hz(profile))
    eff = load_efficiency("cpu")
    compute = profile.compute
    unit, matmul_peak = matmul_path(profile, precision)
    cores = float(compute.cores or 1)
    clock_hz = float(compute.clock_hz) if compute.clock_hz else float("nan")
    mem = profile.offchip_memory
    if mem is None:
        raise AccelsimError(f"{profile.name}: the CPU model needs offchip_memory.bandwidth")
    width = get_format(precision).bytes_per_element

    # NB: a profile without a cache size gets compulsory traffic only (the ideal-reuse bound).
    factors = blas_gemm_terms(work, gemms, width, micro_tile(profile, stack, unit, eff), cores,
                              profile.onchip_memory.capacity_bytes,
                              eff["assumed.cache_usable_fraction"],
                              tuple(eff["assumed.onchip_block"]))
    matmul = np.asarray(work["matmul"], dtype=bool)
    flops = np.asarray(work["flops"], dtype=float)
    quantized = quantized_rows(work, stack, precision)
    # NB: numpy's integer matmul is its own loop, one output element at a time (a dot product
    # over k; no BLAS, no micro-tile, one thread), so no tile edge is wasted on such a row.
    quant = np.where(quantized, 1.0, np.asarray(factors["quantization"]))
    gemm_eff, vector_eff, stream_eff = stack_efficiencies(work, stack, precision, eff, unit)
    vector_rate = vector_peak_flops_per_s(profile, precision) * vector_eff
    stream_rate = float(mem.bandwidth_bytes_per_s) * stream_eff
    serial = serial_stream_bytes(profile, work, gemms, precision, stack)
    extra_dram, extra_onchip = serial_traffic_bytes(serial)
    # NB: packing, casts and transposes are passes of the cores over memory before the math
    # (Goto packs ahead of its macro-kernel; casts and transposes are ops of their own), so
    # they add to its time rather than overlapping it. Packing and casts run at the stack's
    # `pack` figure where it gives one, else at the row's stream efficiency.
    pack_rate = float(mem.bandwidth_bytes_per_s) * pack_efficiency(stack, precision, stream_eff)
    # NB: a pass the stack's `[cpu_passes]` tables price (measured per element by working set)
    # takes the table's time instead of its bytes at a fitted rate (`cpu_passes`)
    passes = pass_times_s(work, gemms, precision, stack.cpu_passes, quantized,
                          np.asarray(serial["casts"]), width, stack.weight_casts)
    cast_s = np.where(passes["cast"], passes["cast_s"], np.asarray(serial["cast"]) / pack_rate)
    serial_s = np.asarray(serial["pack"]) / pack_rate + cast_s + \
        np.asarray(serial["transpose"]) / stream_rate
    if quantized.any():
        # (only the quantized rows: a stack without a `quantize_<p>` figure prices them by
        # its pass table alone, NaN elsewhere, which must not reach the other rows)
        quantize_s = np.where(passes["quantize"], passes["quantize_s"],
                              _quantize_rate_s(serial, stack, precision, mem))
        serial_s = serial_s + np.where(quantized, quantize_s, 0.0)
    # NB: a matmul streams its operands from DRAM at the stack's `gemv` figure, else at its
    # packing figure (both fitted on matmuls; its stream ops' figure carries their own
    # per-element work, e.g. numpy's bf16 rounding)
    gemv = stack.cpu_factor("gemv", precision)
    operand_rate = pack_rate if gemv is None else float(mem.bandwidth_bytes_per_s) * _modified(
        gemv, stack.modifier("dram_bandwidth", "cpu"))
    stream_rate = np.where(matmul, operand_rate, stream_rate)
    # NB: fresh pages are faulted in serially with the math (the kernel zero-fills each)
    faults_s, fresh = fault_s(work, gemms, precision, stack)
    compute_s = np.where(matmul, flops * quant / (matmul_peak * gemm_eff),
                         flops / vector_rate) + serial_s + faults_s

    fused = stack_fused_rows(work, stack)
    dram, onchip = row_traffic_bytes(work, factors, fused)  # on-chip: through the caches
    dram = dram + extra_dram
    # NB: the kernel zero-fills fresh pages through the caches (then written back as the
    # array is; that write-back is not counted, as no temporary's is)
    onchip = onchip + extra_onchip + fresh
    memory_s = dram / stream_rate
    # NB: a GEMV under a `gemv_fp32` table: its weight cast, then BLAS's stream of both
    # operands, serial (numpy casts before it multiplies); its math hides under the stream
    memory_s = np.where(passes["gemv"], passes["gemv_s"] + cast_s, memory_s)
    # NB: rounding an op's parameters (an embedding's table) precedes its lookup's stream,
    # serial with it as with its math; its fp32 read and write are DRAM bytes (for energy:
    # the table prices their time)
    memory_s = memory_s + passes["params_s"]
    dram = dram + 2 * FP32_BYTES * passes["params"]
    # NB: a backward matmul's two GEMMs are two ops to the framework, as on the GPU.
    ops = np.where(fused, 0.0, kernel_counts(work)) + np.asarray(serial["casts"]) + \
        np.asarray(serial["transposes"])
    overhead_s = ops * stack.host_per_kernel_s("cpu")

    energy_j = row_energy_j(profile, precision, np.where(matmul, flops / 2, 0.0),
                            np.where(matmul, 0.0, flops), dram, onchip)
    return core_costs(work, compute_s, memory_s, overhead_s, energy_j, dram, onchip, clock_hz,
                      np.where(fused, "fused", np.where(matmul, unit, "vector")), ops)
