"""FPGA cards: GEMMs on a DPU-like overlay engine (int8) or on the DSP fabric at a bit width.

Two compute paths, both from the profile:

- overlay (`compute.overlay`, int8 requests): `cores` independent cores of `images_per_core`
  batch engines each (DPUCADF8H: 4; DPUCZDX8G: 1), an engine a pixel x input-channel x
  output-channel array (PP x ICP x OCP int8 MACs per cycle, at the overlay clock), as AMD's
  DPUCZDX8G (PG338). A GEMM (m = output pixels x batch, n = output channels, k = input
  channels x kernel taps) takes ceil(m / PP) * ceil(n / OCP) * ceil(k / ICP) cycles per
  instance, the tiles shared round-robin over the engines the batch keeps busy (one image
  per engine: a batch smaller than the engines leaves the rest idle, `busy_engines`): ceil
  quantisation is the engine's mapping loss. NB: k is quantised as a whole; a real DPU
  quantises the input channels of each kernel tap, so layers with few input channels (a
  first RGB conv) come out optimistic. Each run of a core reads the weights from DRAM once
  for its images (`weight_fetches`): independent DPUCZDX8G cores each fetch their own.
- DSP fabric (no overlay, or fp8 / fp16 / bf16): dsp_slices x macs_per_dsp[width] x clock,
  int8 packing two MACs per DSP48E2 where the profile says so (WP486), 16-bit operands one.
  NB: an ideal GEMM engine using every DSP every cycle (an upper bound); fp16/bf16 are costed
  at the 16-bit integer width (the mantissa multiply; exponent logic in LUTs, not counted).
  fp32 / tf32 are rejected: the profile publishes no MACs per DSP for them.

Non-matmul ops run on the overlay's misc engine, NB: one element op per PP x OCP lane per busy
engine per cycle (the width of one output tile), or on the fabric at one op per DSP MAC lane.

The software stack (`software`; Vitis AI by default) decides what fuses: the op groups its
`graph.fuses` names (vitis-ai: normalisation and elementwise) join their producer
(`stack_costs.stack_fused_rows`; NB: BN folded, activations and residual adds applied as a tile
drains through the misc engine, the excess over the producer's time charged as on an NPU; on
the fabric the fused work shares its producer's DSP lanes and costs its own time there),
moving only a residual input. Every other overlay layer's tile cycles are divided by
`fitted.overlay_mac_efficiency` (hw_profiles/efficiency/fpga.toml: one factor for every DPU
board, fitted on the ZCU102 and Alveo U200 rows of calibration_measurements.csv by
`benchmarks/fidelity/fidelity_dpu.py`) times the stack's `tensor_core` modifier (capped at 1); its
`cuda_core` and `dram_bandwidth` modifiers scale the misc engine and DRAM, its
`host.per_kernel_us.fpga` is waited on per unfused kernel beyond its own time (issue overlaps
the device, as on a GPU), and a stack with weight casts or layout conversions is refused
(`stack_costs.compiled_stack`). NB: no per-layer dispatch time:
those rows (large CNNs, every engine busy) cannot separate it from the MAC efficiency.
On-chip BRAM + URAM hold the tiles, half of them double-buffering: `mapping.refetch_bytes`
decides the extra DDR/HBM traffic when a layer does not fit. NB: only the primary off-chip
memory (HBM on the U280) is used; `secondary_memory` is not.

    fpga_costs(load_profile("alveo-u250"), work, gemms, "int8", default_stack("fpga"), batch=8)
"""

from __future__ import annotations

import numpy as np

from accelsim.devices.mapping import (
    DOUBLE_BUFFERED_RESIDENT_FRACTION,
    drain_excess_s,
    kernel_counts,
    onchip_capacity_bytes,
    operand_bytes,
    per_row,
    refetch_bytes,
    row_energy_j,
    row_gemms,
    vector_flops,
)
from accelsim.devices.stack_costs import (
    capped_factor,
    compiled_stack,
    host_issue_wait_s,
    stack_fused_rows,
)
from accelsim.errors import PrecisionError
from accelsim.formats import get_format
from accelsim.profiles.device_types import DeviceProfile, OverlaySpec
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.software import SoftwareStack
from accelsim.workload.columns import Columns, Table

# DSP operand width that carries each precision (profile key of compute.macs_per_dsp).
# NB: fp8 runs one MAC per DSP (the int16 width): the two-MACs-per-DSP int8 packing (AMD WP486)
# adds two integer products in one wide multiplier, which floating-point operands (each with
# its own exponent) do not allow; the exponent add and alignment are taken as free in LUTs.
DSP_WIDTH = {"int8": "int8", "fp8": "int16", "fp16": "int16", "bf16": "int16"}


def dsp_width(profile: DeviceProfile, precision: str) -> str:
    """The DSP operand width (`compute.macs_per_dsp` key) a precision runs at."""
    width = DSP_WIDTH.get(precision)
    if width is None or width not in profile.compute.macs_per_dsp:
        known = sorted(p for p, w in DSP_WIDTH.items() if w in profile.compute.macs_per_dsp)
        runs = sorted({*known, *(("int8",) if profile.compute.overlay is not None else ())})
        raise PrecisionError(profile.name, precision, runs,
                             f"{profile.name}: the DSP fabric is modelled for "
                             f"{', '.join(known)}, not {precision}")
    return width


def dsp_macs_per_s(profile: DeviceProfile, width: str) -> float:
    """MACs per second of the whole DSP fabric at operand width `width` ("int8", "int16")."""
    c = profile.compute
    return float(c.dsp_slices * c.macs_per_dsp[width] * c.clock_hz)


def overlay_cycles(m: np.ndarray, n: np.ndarray, k: np.ndarray, count: np.ndarray,
                   ov: OverlaySpec, busy_engines: int | None = None) -> np.ndarray:
    """Cycles of `count` GEMMs on the overlay: PP x ICP x OCP tiles over its engines (or the
    `busy_engines` of them a batch smaller than the engines keeps busy)."""
    tiles = (np.ceil(np.asarray(m, float) / ov.pixel_parallelism)
             * np.ceil(np.asarray(n, float) / ov.output_channel_parallelism)
             * np.ceil(np.asarray(k, float) / ov.input_channel_parallelism))
    return np.ceil(np.asarray(count, float) * tiles / (busy_engines or ov.engines))


def busy_engines(batch: int | None, ov: OverlaySpec) -> int:
    """Engines a batch keeps busy: one image per engine (a DPU core runs one image's
    instruction stream; it does not split an image over the other cores)."""
    # NB: a batch that does not fill the engines evenly (5 images on 2 x 4) is spread as if
    # each busy engine had one image; the last run's idle engines are not charged.
    return ov.engines if batch is None else max(1, min(ov.engines, int(batch)))


def mapping_efficiency(m: np.ndarray, n: np.ndarray, k: np.ndarray, ov: OverlaySpec
                       ) -> np.ndarray:
    """Useful / spent MACs of one GEMM instance on the overlay (ceil quantisation of its tiles
    and of the tiles over the cores)."""
    spent = overlay_cycles(m, n, k, 1, ov) * ov.macs_per_cycle
    return np.asarray(m, float) * n * k / spent


def _overlay(profile: DeviceProfile, precision: str) -> OverlaySpec | None:
    ov = profile.compute.overlay
    return ov if ov is not None and precision == "int8" else None


def weight_fetches(batch: int | None, ov: OverlaySpec | None) -> float:
    """How often a batch reads the weights from DRAM: once per run of a core (its
    `images_per_core` images share one fetch; independent cores each fetch their own, as a
    DPUCZDX8G core runs a batch-1 instruction stream); once without an overlay or a batch."""
    if ov is None or batch is None:
        return 1.0
    # NB: no weights stay on chip from one run to the next (the DPU's weight buffer holds a
    # layer's tile, not the network); a layer's own re-reads are `mapping.refetch_bytes`'.
    return float(np.ceil(batch / ov.batch_engines))


def fpga_costs(profile: DeviceProfile, work: Table, gemms: Table,
               precision: str, stack: SoftwareStack, batch: int | None = None
               ) -> Columns:
    """Cost of each work row on an FPGA card (overlay for int8, else the DSP fabric) under the
    software stack `stack` (its fusion, efficiency modifiers and per-kernel host time);
    `batch`: the images in `work` (None: the weights are read once)."""
    compiled_stack(stack, "fpga")
    n_rows = len(work)
    g = row_gemms(work, gemms)
    macs = per_row(g["macs"], g["row"], n_rows)
    vec = vector_flops(work, macs)
    ov = _overlay(profile, precision)
    width_bytes = get_format(precision).bytes_per_element
    fused = stack_fused_rows(work, stack)
    if ov is not None:
        mac_efficiency = capped_factor(
            stack, "fpga", "tensor_core", load_efficiency("fpga")["fitted.overlay_mac_efficiency"])
        clock_hz = ov.clock_hz
        busy = busy_engines(batch, ov)
        tile_cycles = per_row(overlay_cycles(g["m"], g["n"], g["k"], g["count"], ov, busy),
                              g["row"], n_rows)
        misc_ops_per_cycle = busy * ov.pixel_parallelism * ov.output_channel_parallelism
        # Buffer reads per busy cycle and engine: PP x ICP activations and ICP x OCP weights.
        per_cycle_bytes = busy * width_bytes * ov.input_channel_parallelism * (
            ov.pixel_parallelism + ov.output_channel_parallelism)
    else:
        mac_efficiency = capped_factor(stack, "fpga", "tensor_core")
        width = dsp_width(profile, precision)
        clock_hz = float(profile.compute.clock_hz)
        lanes = dsp_macs_per_s(profile, width) / clock_hz
        tile_cycles = np.ceil(macs / lanes)
        misc_ops_per_cycle = lanes
        per_cycle_bytes = 0.0
    mm_cycles = tile_cycles / mac_efficiency
    misc_rate = misc_ops_per_cycle * capped_factor(stack, "fpga", "cuda_core")
    misc_cycles = np.ceil(vec / misc_rate)
    # NB: a matmul row's own vector work (bias, activation) runs after its GEMMs.
    compute_cycles = np.where(fused, 0.0, np.ceil(mm_cycles) + misc_cycles)
    acts, weights, outs = operand_bytes(work)
    onchip = profile.onchip_memory
    capacity = onchip_capacity_bytes(onchip.bram_bytes, onchip.uram_bytes)
    residual = np.maximum(np.asarray(work["read_bytes"], dtype=float) - outs, 0.0)
    dram = np.where(fused, residual, acts + weights * weight_fetches(batch, ov) + outs
                    + refetch_bytes(acts, weights, capacity, DOUBLE_BUFFERED_RESIDENT_FRACTION))
    # NB: without an overlay the fabric's buffer traffic is taken as each operand once.
    # NB: buffer reads count the busy tile cycles, not the stalls the efficiency adds.
    buffer = np.where(fused, residual, tile_cycles * per_cycle_bytes + acts + weights + outs)
    bandwidth = (profile.offchip_memory.bandwidth_bytes_per_s
                 * capped_factor(stack, "fpga", "dram_bandwidth"))
    memory_s = dram / bandwidth
    compute_s = compute_cycles / clock_hz
    kernels = np.where(fused, 0.0, kernel_counts(work))
    overhead_s = host_issue_wait_s(stack, "fpga", kernels, np.maximum(compute_s, memory_s))
    if fused.any() and ov is not None:
        # Fused work drains through the misc engine while a GEMM producer runs: free while the
        # engine keeps up, the excess charged where it does not (as on an NPU). A non-matmul
        # producer occupies the misc engine itself: its fused work queues behind it.
        own_s = np.where(np.asarray(work["matmul"], dtype=bool), np.maximum(compute_s, memory_s),
                         0.0)
        compute_s = np.where(fused, drain_excess_s(work, fused, misc_cycles / clock_hz, own_s),
                             compute_s)
    elif fused.any():
        # On the fabric the fused work shares the DSP lanes of its producer: it saves the DRAM
        # round trip, not its own time (as an NPU's matmuls on its vector path).
        compute_s = np.where(fused, misc_cycles / clock_hz, compute_s)
    stall = np.ceil(np.maximum((memory_s - compute_s) * clock_hz, 0.0))
    return Columns({
        "compute_s": compute_s,
        "memory_s": memory_s,
        "overhead_s": overhead_s,
        "dynamic_energy_j": row_energy_j(profile, precision, macs, vec, dram, buffer),
        "dram_bytes": dram,
        "onchip_bytes": buffer,
        "cycles": np.ceil(compute_s * clock_hz) + stall,
        "unit": np.where(fused, "fused", "overlay" if ov is not None else "fabric"),
    })
