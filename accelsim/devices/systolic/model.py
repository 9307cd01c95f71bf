"""TPU-like systolic arrays: GEMMs folded onto R x C arrays, as SCALE-Sim counts them.

A GEMM (M x K) @ (K x N) maps onto the array by dataflow (Samajdar et al., "SCALE-Sim:
Systolic CNN Accelerator Simulator", arXiv:1811.02883, 2018; "A Systematic Methodology for
Characterizing Scalability of DNN Accelerators using SCALE-Sim", ISPASS 2020, sec. III):

    dataflow  pinned in the PEs     spatial rows S_R  spatial cols S_C  temporal T
    ws        weights (K x N)       K                 N                 M
    is        inputs  (K x M)       K                 M                 N
    os        outputs (M x N)       M                 N                 K

folds F = ceil(S_R / R) * ceil(S_C / C), a partial fold charged in full, and cycles

    ws, is:  F * (2R + C + T - 2) - 1    (R cycles of weight/input preload, then the skewed
                                          stream: T + R + C - 2 cycles until the last partial
                                          sum leaves the bottom row)
    os:      F * (R + C + T - 2) - 1     (skewed operands meet in the last PE after R + C - 2
                                          cycles, then T MACs; the output drain is overlapped)

The "- 1" is SCALE-Sim's convention of reporting the stamp of the last cycle, cycles numbered
from 0. NB: the ISPASS 2020 paper writes 2 S_R + S_C + T - 2 for every dataflow; the os
formula here leaves out the R-cycle output drain, as the issue that specified it does.
`mxu_count` arrays share the folds of a GEMM (round-robin). `accelsim.devices.
systolic_emulator` steps a PE grid cycle by cycle and reproduces these counts exactly.

Memory: the built-in TPU profiles publish a unified buffer, and DRAM traffic follows it
(`buffer_dram_bytes`), stalls being memory time beyond compute time. An array read from a
SCALE-Sim .cfg (`operand_srams` set) is timed by SCALE-Sim's memory model instead
(`systolic.memory`): its three SRAMs, one DRAM port per operand, per-layer stall cycles.

Software stack (`software`; jax-xla by default): the rows of the op groups its `graph.fuses`
names (XLA: normalisation and elementwise) fuse into their producer, draining through the
vector unit while it runs (free while the vector unit keeps up, the excess charged, as on an
NPU) and moving only an input the producer did not write; its `[efficiency]` modifiers divide
the MXU cycles (`tensor_core`), vector cycles (`cuda_core`) and DRAM bandwidth
(`dram_bandwidth`), each capped at 1 (a factor of 1 is SCALE-Sim's count at the datasheet
rate); `host.per_kernel_us.tpu` per unfused kernel is waited on beyond the kernel's own
time (issue overlaps the device, as on a GPU); weight casts and layout
conversions are refused (`stack_costs.compiled_stack`). A stack that changes none of these leaves
the counts exactly SCALE-Sim's.

Dataflow is a property of the array, `compute.dataflow` in the profile ("ws", "os" or "is";
absent: weight stationary, the TPU's). `accelsim simulate --dataflow` overrides it.

    gemm_cycles(m=100, n=64, k=300, rows=128, cols=128, dataflow="ws")  # 3 * 482 - 1 = 1445
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accelsim.devices.mapping import (
    ACCUMULATOR_BYTES_PER_ELEMENT,
    drain_excess_s,
    kernel_counts,
    listed_vector_peak,
    mac_weighted,
    operand_bytes,
    per_row,
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
from accelsim.errors import AccelsimError, PrecisionError
from accelsim.formats import get_format
from accelsim.profiles.device_types import DeviceProfile
from accelsim.profiles.software import SoftwareStack
from accelsim.workload.columns import Columns, Table

DATAFLOWS = ("ws", "os", "is")
DEFAULT_DATAFLOW = "ws"
# Float precisions an MXU without them runs as one bf16 pass (XLA's default matmul precision
# on TPUs): an architectural convention, not a device figure.
_BF16_PASS = frozenset({"fp32", "tf32", "fp16"})

Array = np.ndarray | float | int


def dataflow_of(profile: DeviceProfile) -> str:
    """The dataflow of a profile's arrays (weight stationary unless it says otherwise)."""
    return profile.compute.dataflow or DEFAULT_DATAFLOW


def _check(dataflow: str) -> None:
    if dataflow not in DATAFLOWS:
        raise AccelsimError(f"dataflow '{dataflow}': choose one of {', '.join(DATAFLOWS)}")


def array_mapping(m: Array, n: Array, k: Array, dataflow: str) -> tuple[Array, Array, Array]:
    """(S_R, S_C, T): the GEMM dimensions laid along the array rows, columns and time."""
    _check(dataflow)
    if dataflow == "ws":
        return k, n, m
    if dataflow == "is":
        return k, m, n
    return m, n, k


def fold_counts(m: Array, n: Array, k: Array, rows: int, cols: int, dataflow: str
                ) -> tuple[np.ndarray, np.ndarray]:
    """(row folds ceil(S_R / R), column folds ceil(S_C / C)); partial folds count whole."""
    sr, sc, _ = array_mapping(m, n, k, dataflow)
    return np.ceil(np.asarray(sr, float) / rows), np.ceil(np.asarray(sc, float) / cols)


def cycles_per_fold(rows: int, cols: int, t: Array, dataflow: str) -> np.ndarray:
    """Cycles of one fold: 2R + C + T - 2 (ws, is) or R + C + T - 2 (os)."""
    _check(dataflow)
    preload = rows if dataflow in ("ws", "is") else 0
    return preload + rows + cols + np.asarray(t, float) - 2


def gemm_cycles(m: Array, n: Array, k: Array, rows: int, cols: int, dataflow: str,
                count: Array = 1, arrays: int = 1) -> np.ndarray:
    """SCALE-Sim cycles of `count` independent GEMMs on `arrays` R x C arrays sharing the
    folds: ceil(count * F / arrays) * cycles_per_fold - 1. Vectorised over m, n, k, count."""
    fr, fc = fold_counts(m, n, k, rows, cols, dataflow)
    _, _, t = array_mapping(m, n, k, dataflow)
    rounds = np.ceil(np.asarray(count, float) * fr * fc / arrays)
    return rounds * cycles_per_fold(rows, cols, t, dataflow) - 1


def packed_rounds(m: Array, n: Array, k: Array, count: Array, rows: int, cols: int,
                  dataflow: str) -> np.ndarray:
    """Fold rounds of `count` independent GEMMs (the groups of a grouped or depthwise conv) when
    those small enough share one fold block-diagonally: a group takes S_R rows and S_C columns,
    groups take disjoint rows and columns (they must not share a row's operand stream nor a
    column's partial sums), so min(R // S_R, C // S_C) of them fit one fold; a group wider
    than the array folds alone. ceil(count / per_fold) rounds, to pass as `gemm_cycles`'s
    count. A depthwise conv (ws: S_R = taps, S_C = 1) keeps R // taps x taps of the R x C
    MACs busy: about 1/C of the array.
    NB: SCALE-Sim maps one group per fold; block-diagonal packing is the compiler's choice.

        packed_rounds(3136, 1, 9, 144, 64, 64, "ws")  # ceil(144 / 7) = 21
    """
    sr, sc, _ = array_mapping(m, n, k, dataflow)
    sr, sc = np.asarray(sr, float), np.asarray(sc, float)
    fits = (sr <= rows) & (sc <= cols)
    per_fold = np.where(fits, np.minimum(rows // np.maximum(sr, 1.0),
                                         cols // np.maximum(sc, 1.0)), 1.0)
    return np.ceil(np.asarray(count, float) / np.maximum(per_fold, 1.0))


def reuse_factors(m: Array, n: Array, k: Array, rows: int, cols: int, dataflow: str
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """How often each operand passes between buffer and array (SCALE-Sim's SRAM traffic):
    (input passes, weight passes, partial-sum passes). The pinned operand passes once; the
    streamed one once per fold along the other array dimension; partial sums once per row
    fold (ws, is: accumulated over K folds) or once (os: they stay in the PEs)."""
    fr, fc = fold_counts(m, n, k, rows, cols, dataflow)
    one = np.ones_like(fr)
    if dataflow == "ws":
        return fc, one, fr
    if dataflow == "is":
        return one, fc, fr
    return fc, fr, one


def stall_cycles(compute_cycles: np.ndarray, memory_s: np.ndarray, clock_hz: float
                 ) -> np.ndarray:
    """Cycles the array waits on memory: memory time in cycles beyond the compute cycles.
    NB: compute and memory overlap perfectly (double buffering), so only the excess stalls."""
    return np.ceil(np.maximum(memory_s * clock_hz - compute_cycles, 0.0))


def mxu_precision(profile: DeviceProfile, precision: str) -> str:
    """The precision the MXU runs a request at: itself when the matrix peak table lists it;
    fp32 / tf32 / fp16 as bf16 where the MXU has bf16; otherwise an error."""
    supported = profile.supported_precisions(tensor=True)
    if precision in supported:
        return precision
    if precision in _BF16_PASS and "bf16" in supported:
        return "bf16"  # NB: one bf16 pass; XLA's HIGHEST precision (3 to 6 passes) not modelled
    raise PrecisionError(profile.name, precision, supported,
                         f"{profile.name}: the matrix units run {', '.join(supported)}, "
                         f"not {precision}")


def vector_ops_per_s(profile: DeviceProfile, precision: str) -> float:
    """Throughput of the vector unit (activations, normalisation, pooling, updates), op/s:
    the profile's vector peak at `precision` (or fp32) when published, else one element op
    per MXU column lane per cycle over all MXUs."""
    listed = listed_vector_peak(profile, precision)
    if listed is not None:
        return listed
    c = profile.compute
    # NB: derived, not published: TPU v1's activation unit consumes one mxu_cols-wide
    # accumulator row per cycle (Jouppi et al. 2017); later TPUs' VPUs are wider.
    return float(c.mxu_count * c.mxu_cols * c.clock_hz)


def buffer_dram_bytes(profile: DeviceProfile, work: Table, g: Table,
                      dataflow: str, rows: int, cols: int, width: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(DRAM bytes, buffer bytes) per work row. DRAM: each operand once (compulsory), plus an
    operand larger than half the unified buffer re-fetched on every pass `reuse_factors`
    gives it, plus partial sums spilled (written and read back) on every extra row fold when
    one fold's outputs (T x C x 4 bytes) overflow the accumulators (or the pinned operand
    re-read per accumulator-sized chunk of T, if cheaper). `width`: bytes per operand element.
    Buffer: SCALE-Sim's SRAM traffic, operands x passes."""
    n_rows = len(work)
    onchip = profile.onchip_memory
    # NB: a profile without unified_buffer / vmem (TPU v3, v4 publish none) gets compulsory
    # traffic only: the ideal-reuse bound.
    ub = onchip.unified_buffer_bytes or onchip.vmem_bytes
    acc = onchip.accumulator_bytes or (ub / 2.0 if ub else None)
    acts, weights, outs = operand_bytes(work)
    in_p, w_p, ps_p = reuse_factors(g["m"], g["n"], g["k"], rows, cols, dataflow)
    in_pass = mac_weighted(in_p, g, n_rows)
    w_pass = mac_weighted(w_p, g, n_rows)
    _, _, t = array_mapping(np.asarray(g["m"]), np.asarray(g["n"]), np.asarray(g["k"]), dataflow)
    psum_elems = np.asarray(g["m"]) * np.asarray(g["n"]) * np.asarray(g["count"])
    psum_bytes = psum_elems * ACCUMULATOR_BYTES_PER_ELEMENT
    dram = acts + weights + outs
    if ub is not None:
        # NB: half the buffer holds the operand; the other half the tiles in flight.
        dram = dram + np.where(acts > ub / 2, acts * (in_pass - 1), 0.0)
        dram = dram + np.where(weights > ub / 2, weights * (w_pass - 1), 0.0)
    if acc is not None:
        # One fold's outputs overflow the accumulators: either spill partial sums on every
        # extra row fold, or cut T into accumulator-sized chunks and re-read the pinned
        # operand per chunk; the cheaper is taken (NB: cycles stay SCALE-Sim's, whole T).
        slice_bytes = np.asarray(t, float) * cols * ACCUMULATOR_BYTES_PER_ELEMENT
        chunks = np.ceil(slice_bytes / acc)
        pinned_bytes = np.where(dataflow == "is", g["m"] * g["k"], g["k"] * g["n"])
        pinned_bytes = pinned_bytes * np.asarray(g["count"]) * width
        spill_bytes = np.minimum(2.0 * psum_bytes * (ps_p - 1), pinned_bytes * (chunks - 1))
        if dataflow != "os":
            dram = dram + per_row(np.where(chunks > 1, spill_bytes, 0.0), g["row"], n_rows)
    no_gemm = per_row(g["macs"], g["row"], n_rows) == 0
    buffer = per_row(psum_bytes * ps_p, g["row"], n_rows) + acts * in_pass + weights * w_pass
    buffer = np.where(no_gemm, acts + weights + outs, buffer + outs)
    return dram, buffer


def systolic_costs(profile: DeviceProfile, work: Table, gemms: Table,
                   precision: str, stack: SoftwareStack,
                   dataflow: str | None = None) -> Columns:
    """Cost of each work row on a TPU-like chip: GEMMs folded onto its MXUs (`dataflow`, or
    the profile's), the rest on its vector unit, DRAM traffic set by the unified buffer,
    stalls where DRAM (or the buffer's bandwidth) cannot feed the arrays; the software stack's
    fusion, efficiency modifiers and per-kernel host time (`_with_stack`)."""
    compiled_stack(stack, "tpu")
    flow = dataflow or dataflow_of(profile)
    _check(flow)
    run = mxu_precision(profile, precision)
    c = profile.compute
    rows, cols, clock_hz = int(c.mxu_rows), int(c.mxu_cols), float(c.clock_hz)
    n_rows = len(work)
    g = row_gemms(work, gemms)
    macs = per_row(g["macs"], g["row"], n_rows)
    mxu_cycles = per_row(gemm_cycles(g["m"], g["n"], g["k"], rows, cols, flow, g["count"],
                                     int(c.mxu_count)), g["row"], n_rows)
    vec = vector_flops(work, macs)
    # NB: vector work of a matmul row (softmax, gates) runs after its GEMMs, not overlapped.
    compute_cycles = mxu_cycles + np.ceil(vec / vector_ops_per_s(profile, run) * clock_hz)
    dram, buffer = buffer_dram_bytes(profile, work, g, flow, rows, cols,
                                     get_format(precision).bytes_per_element)
    memory_s = dram / profile.offchip_memory.bandwidth_bytes_per_s
    ub_bw = profile.onchip_memory.unified_buffer_bandwidth_bytes_per_s
    if ub_bw is not None:
        acts, _, outs = operand_bytes(work)
        in_pass = mac_weighted(reuse_factors(g["m"], g["n"], g["k"], rows, cols, flow)[0],
                               g, n_rows)
        # NB: only activations in and results out use the buffer's port; weights arrive
        # through the weight FIFO and partial sums live in the accumulators.
        memory_s = np.maximum(memory_s, (acts * in_pass + outs) / ub_bw)
    stalls = stall_cycles(compute_cycles, memory_s, clock_hz)
    if profile.operand_srams is not None:  # SCALE-Sim's SRAMs: `systolic.memory`
        from accelsim.devices.systolic.memory import sram_rows

        srams = sram_rows(g, rows, cols, flow, profile.operand_srams, n_rows)
        gemm_row = macs > 0
        compute_cycles = np.where(gemm_row, compute_cycles - mxu_cycles
                                  + np.asarray(srams["compute_cycles"]), compute_cycles)
        stalls = np.where(gemm_row, np.asarray(srams["stall_cycles"]), stalls)
        memory_s = np.where(gemm_row, (compute_cycles + stalls) / clock_hz, memory_s)
        # NB: floored at each operand once: a strided 1 x 1 conv's windows skip input rows
        # SCALE-Sim never fetches, which the work table counts as read.
        compulsory = sum(operand_bytes(work))
        dram = np.where(gemm_row, np.maximum(np.asarray(srams["dram_words"])
                                             * get_format(precision).bytes_per_element,
                                             compulsory), dram)
    energy = row_energy_j(profile, run, macs, vec, dram, buffer)
    costs = pd.DataFrame({
        "compute_s": compute_cycles / clock_hz,
        "memory_s": memory_s,
        "overhead_s": np.zeros(n_rows),
        "dynamic_energy_j": energy,
        "dram_bytes": dram,
        "onchip_bytes": buffer,
        "cycles": compute_cycles + stalls,
        "stall_cycles": stalls,
    })
    vec_cycles = np.ceil(vec / vector_ops_per_s(profile, run) * clock_hz)
    out = _with_stack(costs, work, stack, vec_cycles, clock_hz,
                      profile.offchip_memory.bandwidth_bytes_per_s)
    # A fused row moves only its residual bytes (`_with_stack`); its energy follows them (the
    # same inputs give the same energy on every other row).
    out["dynamic_energy_j"] = row_energy_j(profile, run, macs, vec, np.asarray(out["dram_bytes"]),
                                           np.asarray(out["onchip_bytes"]))
    return Columns.of(out)


def _with_stack(costs: pd.DataFrame, work: Table, stack: SoftwareStack,
                vec_cycles: np.ndarray, clock_hz: float, dram_bytes_per_s: float
                ) -> pd.DataFrame:
    """`costs` under the software stack: MXU cycles over its `tensor_core` modifier, vector
    cycles (`vec_cycles`, at the datasheet rate) over `cuda_core`, memory time over
    `dram_bandwidth` (each capped at 1: a factor of 1 is SCALE-Sim's count at the datasheet
    rate); rows of the op groups its `graph.fuses` names drain through the vector unit while
    their producer runs (XLA's fusion; free while the vector unit keeps up, the excess
    charged, as on an NPU), moving only an input the producer did not write;
    `host.per_kernel_us.tpu` per unfused kernel beyond its own time. Rows the stack leaves
    alone keep their counts exactly."""
    tc, cc, dm = (capped_factor(stack, "tpu", k) for k in ("tensor_core", "cuda_core",
                                                     "dram_bandwidth"))
    fused = stack_fused_rows(work, stack)
    host_s = stack.per_kernel_s.get("tpu", 0.0)
    if (tc, cc, dm) == (1.0, 1.0, 1.0) and not fused.any() and host_s == 0:
        return costs
    out = costs.copy()
    cycles_in = np.asarray(out["cycles"]) - np.asarray(out["stall_cycles"])
    vec_cycles = np.minimum(vec_cycles, cycles_in)
    vec_cycles_run = np.ceil(vec_cycles / cc)
    compute_cycles = np.ceil((cycles_in - vec_cycles) / tc) + vec_cycles_run
    memory_s = np.asarray(out["memory_s"]) / dm
    if fused.any():
        outs = np.asarray(work["write_bytes"], dtype=float)
        residual = np.maximum(np.asarray(work["read_bytes"], dtype=float) - outs, 0.0)
        out["dram_bytes"] = np.where(fused, residual, out["dram_bytes"])
        out["onchip_bytes"] = np.where(fused, residual, out["onchip_bytes"])
        memory_s = np.where(fused, residual / (dram_bytes_per_s * dm), memory_s)
        compute_s = compute_cycles / clock_hz
        own_s = np.where(np.asarray(work["matmul"], dtype=bool), np.maximum(compute_s, memory_s),
                         0.0)
        # NB: the fused work drains through the vector unit over the producer's whole time,
        # perfectly overlapped (`mapping.drain_excess_s`); only its excess is charged.
        drain_s = drain_excess_s(work, fused, vec_cycles_run / clock_hz, own_s)
        compute_cycles = np.where(fused, np.ceil(drain_s * clock_hz), compute_cycles)
        out["unit"] = np.where(fused, "fused", np.where(work["matmul"], "mxu", "vector"))
    changed = fused | ((tc, cc, dm) != (1.0, 1.0, 1.0))
    stalls = stall_cycles(compute_cycles, memory_s, clock_hz)
    out["compute_s"] = np.where(changed, compute_cycles / clock_hz, out["compute_s"])
    out["memory_s"] = np.where(changed, memory_s, out["memory_s"])
    out["stall_cycles"] = np.where(changed, stalls, out["stall_cycles"])
    out["cycles"] = np.where(changed, compute_cycles + stalls, out["cycles"])
    out["overhead_s"] = host_issue_wait_s(stack, "tpu", np.where(fused, 0.0, kernel_counts(
        work)), np.maximum(np.asarray(out["compute_s"]), np.asarray(out["memory_s"])))
    return out
