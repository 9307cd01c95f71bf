"""NPUs (Edge TPU, Ascend 310, Jetson Orin): a MAC array under a power envelope, a small SRAM,
LPDDR (or none), and a host CPU for the ops the NPU cannot run.

Per row of the work table:
- matmul rows run on the MAC array at mac_count x clock when the profile gives both, else at
  its matrix peak at the precision (OP/s / 2). A precision without a matrix peak runs on the
  vector path if the profile lists one there (fp32 on the Orin's CUDA cores); any other is
  rejected with the precisions the device runs (NB: no silent quantisation; ask for int8).
- MAC-array geometry: a profile that gives `mxu_rows` x `mxu_cols` (x `mxu_count`, `dataflow`)
  folds each GEMM onto the array with `systolic.gemm_cycles` (SCALE-Sim), the groups of a
  grouped / depthwise conv packed block-diagonally (`systolic.packed_rounds`): a depthwise
  conv keeps about 1/cols of the array busy. Without a geometry the mapping is ideal (NB).
- NPU toolchains (Edge TPU compiler, TensorRT for DLA) compile ahead of time: the op groups
  the software stack's `graph.fuses` names (tflite-edgetpu: normalisation and elementwise)
  fuse into their producer (`stack_costs.stack_fused_rows`; NB: BN folded, activation applied as
  the array's outputs drain), so a
  fused row costs no time and moves only the inputs its producer did not write (a residual);
  its energy is spent within its producer's time (`core.finish` caps their power together).
  Where matmuls run on the vector path (fp32 on the Orin's CUDA cores), fused work shares that
  unit and costs its vector time. Nothing fuses into a row the host runs.
- every other NPU kernel pays `fitted.layer_dispatch_s` of hw_profiles/efficiency/npu.toml
  (layer set-up: instruction / descriptor issue, weights into the array, pipeline sync), not
  overlapped, and waits for the stack's `host.per_kernel_us.npu` (0 for tflite-edgetpu) where
  it exceeds the kernel's own time and dispatch (issue overlaps the device's work); the dispatch
  fitted on one measurement (named there), held out on the others
  (benchmarks/results/fidelity_other.md). Column `kernels` counts them. The stack's
  `[efficiency]` modifiers scale the MAC array, vector path and DRAM rates (capped at 1);
  a stack with `weight_casts` or layout conversions is refused (`stack_costs.compiled_stack`).
- other rows run on the vector path: the vector peak at the precision (or fp32), else one
  element op per MAC lane per cycle (NB: an upper bound, no vector figure published).
- DRAM traffic: each operand once, plus `mapping.refetch_bytes` (half the SRAM resident, half
  double-buffering) when a layer does not fit the on-chip SRAM (the L2 on the Orin). An NPU
  without DRAM (the Edge TPU) keeps the parameters that fit in its SRAM and streams the rest
  from the host for every batch (Coral's parameter caching), costed on the host link;
  activations that overflow the SRAM stream too.
- the power envelope is the TDP cap of `core.finish`.
- ops outside `compute.supported_ops` (absent = all run) fall back to the host CPU
  (`host`: the system's own CPU profile; `DEFAULT_HOST` stands in only where there is none,
  e.g. an inline CPU of a system file, and the estimate says so; the registry's record gives
  the host and its class model, `registry.DeviceClass.cost`): the host's class model
  costs them (at the same precision, else fp32), and the row pays the host-link transfer of
  its input when the row before it ran on the NPU and of its output when the row after does.
  Column `unit` says where each row ran ("npu", "fused" or "host"). A host row's time is all
  `overhead_s`; its energy (host dynamic + host static + link) is its `dynamic_energy_j`, the
  host's part of it `host_energy_j` (reported apart from the device's), and it is marked
  `power_capped` False: the NPU's TDP does not throttle the host.

Jetson AGX Orin: its profile is the whole module (GPU + 2 DLAs sharing LPDDR5) as one NPU:
int8 at the combined peak (NB: the GPU and the DLAs perfectly sharing every layer), fp32 on
the GPU's CUDA cores, every op supported, the host link the shared DRAM.

    npu_costs(load_profile("edge-tpu"), work, gemms, "int8", default_stack("npu"))
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accelsim.devices.core import ClassModel, finish
from accelsim.devices.mapping import (
    DOUBLE_BUFFERED_RESIDENT_FRACTION,
    drain_excess_s,
    kernel_counts,
    link_energy_j,
    listed_vector_peak,
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
from accelsim.devices.systolic import model as systolic
from accelsim.errors import AccelsimError, PrecisionError
from accelsim.profiles.device_types import DeviceProfile
from accelsim.profiles.efficiency import load_efficiency
from accelsim.profiles.software import SoftwareStack
from accelsim.workload.columns import Columns, Table, is_in

DEFAULT_HOST = "xeon-8380"  # stand-in host CPU for unsupported ops when no CPU profile is given
# (the class record's `host_fallback`: the registry loads it and passes it in)


def matmul_rate(profile: DeviceProfile, precision: str) -> tuple[str, float]:
    """(path, MAC/s) of matmuls at `precision`: ("matrix", ...) or ("vector", ...)."""
    c = profile.compute
    if precision in c.matrix_peak_flops_per_s:
        if c.mac_count is not None and c.clock_hz is not None and precision == "int8":
            return "matrix", float(c.mac_count * c.clock_hz)
        return "matrix", c.matrix_peak_flops_per_s[precision] / 2.0
    if precision in c.vector_peak_flops_per_s:
        return "vector", c.vector_peak_flops_per_s[precision] / 2.0
    runs = sorted({*c.matrix_peak_flops_per_s, *c.vector_peak_flops_per_s})
    raise PrecisionError(profile.name, precision, runs,
                         f"{profile.name} cannot run {precision}; it runs: {', '.join(runs)} "
                         "(quantise the model to one of them)")


def vector_rate(profile: DeviceProfile, precision: str, mac_per_s: float) -> float:
    """Element op/s of non-matmul work (see module docstring)."""
    listed = listed_vector_peak(profile, precision)
    # NB: one element op per MAC lane per cycle where no vector peak is published.
    return mac_per_s if listed is None else listed


def array_matmul_s(profile: DeviceProfile, g: pd.DataFrame, n_rows: int, precision: str,
                   mac_per_s: float) -> np.ndarray | None:
    """Seconds of each row's GEMMs folded onto the MAC array (module docstring), None when the
    profile gives no geometry. NB: at a precision whose rate differs from the array's int8 rate
    (rows x cols x count x clock) the cycles scale by the ratio of the rates."""
    c = profile.compute
    if c.mxu_rows is None or c.mxu_cols is None or c.clock_hz is None:
        return None
    rows, cols, arrays = int(c.mxu_rows), int(c.mxu_cols), int(c.mxu_count or 1)
    flow = systolic.dataflow_of(profile)
    rounds = systolic.packed_rounds(g["m"], g["n"], g["k"], g["count"], rows, cols, flow)
    cycles = systolic.gemm_cycles(g["m"], g["n"], g["k"], rows, cols, flow, rounds, arrays)
    cycles = np.where(np.asarray(g["macs"]) > 0, cycles, 0.0)
    array_mac_per_s = rows * cols * arrays * float(c.clock_hz)
    return per_row(cycles, g["row"], n_rows) / float(c.clock_hz) * (array_mac_per_s / mac_per_s)


def on_npu(profile: DeviceProfile, work: Table) -> np.ndarray:
    """True for rows whose op kind the NPU runs (all when `supported_ops` is absent)."""
    ops = profile.compute.supported_ops
    if ops is None:
        return np.ones(len(work), dtype=bool)
    return is_in(np.asarray(work["op"]), ops)


def streamed_bytes(profile: DeviceProfile, work: Table, capacity: float | None
                   ) -> np.ndarray:
    """Off-chip bytes per row (see module docstring: DRAM, or the host link without DRAM)."""
    acts, weights, outs = operand_bytes(work)
    if profile.offchip_memory is not None:
        return acts + weights + outs + refetch_bytes(acts, weights, capacity,
                                                     DOUBLE_BUFFERED_RESIDENT_FRACTION)
    if capacity is None:
        raise AccelsimError(f"{profile.name}: an NPU without DRAM needs onchip_memory.sram")
    forward = np.asarray(work["phase"]) == "forward"
    total_weights = float(weights[forward].sum())
    cached = 1.0 if total_weights <= capacity else capacity / total_weights
    # NB: parameter caching spread uniformly over the layers (Coral caches in layer order).
    return weights * (1.0 - cached) + np.maximum(acts + outs - capacity, 0.0)


def host_time_energy(host: DeviceProfile, host_model: ClassModel, work: Table,
                     gemms: Table, precision: str, stack: SoftwareStack
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(time_s, energy_j) of `work` rows on the host CPU, through its class model `host_model`
    and `finish` (the host's own TDP and static power). A precision the CPU model rejects runs
    in fp32 (NB: TFLite's int8 CPU kernels would be faster)."""
    from accelsim.devices.energy import static_power_w

    try:
        costs = host_model(host, work, gemms, precision, stack)
    except AccelsimError:
        costs = host_model(host, work, gemms, "fp32", stack)
    done = finish(work, costs, host.power.tdp_w, static_power_w(host))
    return np.asarray(done["time_s"], dtype=float), np.asarray(done["energy_j"], dtype=float)


def _boundaries(work: Table, host_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(input crosses, output crosses): a host row whose previous / next row in the same phase
    ran on the NPU. NB: table order stands in for graph edges."""
    phase = np.asarray(work["phase"])
    same_prev = np.r_[False, phase[1:] == phase[:-1]]
    same_next = np.r_[phase[:-1] == phase[1:], False]
    npu_prev = np.r_[False, ~host_rows[:-1]]
    npu_next = np.r_[~host_rows[1:], False]
    return host_rows & same_prev & npu_prev, host_rows & same_next & npu_next


def npu_costs(profile: DeviceProfile, work: Table, gemms: Table,
              precision: str, stack: SoftwareStack, host: DeviceProfile | None = None,
              host_model: ClassModel | None = None,
              host_stack: SoftwareStack | None = None) -> Columns:
    """Cost of each work row on an NPU, with host fallback (see module docstring): `host` runs
    the ops the NPU cannot, costed by `host_model` (its class's model; the registry's record
    passes both, `DeviceClass.cost`)."""
    compiled_stack(stack, "npu")
    n_rows = len(work)
    path, datasheet_mac_per_s = matmul_rate(profile, precision)
    # NB: the stack's modifiers scale the array (tensor_core) or the vector path the matmuls
    # run on (cuda_core), the vector unit and the DRAM, each capped at the datasheet rate.
    mac_per_s = datasheet_mac_per_s * capped_factor(
        stack, "npu", "tensor_core" if path == "matrix" else "cuda_core")
    g = row_gemms(work, gemms)
    macs = per_row(g["macs"], g["row"], n_rows)
    vec = vector_flops(work, macs)
    folded_s = array_matmul_s(profile, g, n_rows, precision, mac_per_s)
    matmul_s = macs / mac_per_s if folded_s is None else folded_s
    host_rows = ~on_npu(profile, work)
    fused = stack_fused_rows(work, stack, ~host_rows)
    vec_s = vec / (vector_rate(profile, precision, datasheet_mac_per_s)
                   * capped_factor(stack, "npu", "cuda_core"))
    # Fused work drains through the post-processing unit beside the MAC array while the
    # producer runs: free while that unit keeps up, the excess charged where it does not
    # (`mapping.drain_excess_s`, below); where matmuls run on the vector path it shares their
    # unit and costs its time there.
    compute_s = np.where(fused, 0.0 if path == "matrix" else vec_s, matmul_s + vec_s)
    onchip = profile.onchip_memory
    capacity = onchip_capacity_bytes(onchip.sram_bytes) or onchip_capacity_bytes(
        onchip.l2_cache_bytes)  # NB: the Orin's L2 stands in for an NPU SRAM
    acts, weights, outs = operand_bytes(work)
    residual = np.maximum(np.asarray(work["read_bytes"], dtype=float) - outs, 0.0)
    has_dram = profile.offchip_memory is not None
    off = np.where(fused, residual if has_dram else 0.0, streamed_bytes(profile, work, capacity))
    moved_onchip = np.where(fused, residual, acts + weights + outs)
    link = profile.host_link
    if has_dram:
        memory_s = off / (profile.offchip_memory.bandwidth_bytes_per_s
                          * capped_factor(stack, "npu", "dram_bandwidth"))
        energy = row_energy_j(profile, precision, macs, vec, off, moved_onchip)
    else:
        memory_s = off / link.bandwidth_bytes_per_s
        energy = (row_energy_j(profile, precision, macs, vec, np.zeros(n_rows), moved_onchip)
                  + link_energy_j(off, link.kind))
    kernels = np.where(fused, 0.0, kernel_counts(work))
    overhead_s = kernels * load_efficiency("npu")["fitted.layer_dispatch_s"]
    overhead_s = overhead_s + host_issue_wait_s(stack, "npu", kernels,
                                                np.maximum(compute_s, memory_s) + overhead_s)
    if path == "matrix":
        kernel_s = np.maximum(compute_s, memory_s) + overhead_s
        compute_s = np.where(fused, drain_excess_s(work, fused, vec_s, kernel_s), compute_s)
    clock_hz = profile.compute.clock_hz
    cycles = ((np.maximum(compute_s, memory_s) + overhead_s) * clock_hz
              if clock_hz is not None else np.full(n_rows, np.nan))
    out = pd.DataFrame({
        "compute_s": compute_s, "memory_s": memory_s, "overhead_s": overhead_s,
        "dynamic_energy_j": energy, "dram_bytes": off, "onchip_bytes": moved_onchip,
        "cycles": cycles, "unit": np.where(fused, "fused", "npu"), "power_capped": True,
        "kernels": kernels, "host_energy_j": 0.0,
    })
    if not host_rows.any():
        return Columns.of(out)
    if host is None or host_model is None:
        raise AccelsimError(f"{profile.name} cannot run {sorted(set(work['op'][host_rows]))} "
                            "and was given no host CPU to run them")
    host_work = Columns.of(work).take(host_rows)
    host_s, host_j = host_time_energy(host, host_model, host_work, gemms, precision,
                                      host_stack or stack)
    cross_in, cross_out = _boundaries(work, host_rows)
    moved = (np.where(cross_in, acts, 0.0) + np.where(cross_out, outs, 0.0))[host_rows]
    out.loc[host_rows, ["compute_s", "memory_s", "onchip_bytes"]] = 0.0
    out.loc[host_rows, "overhead_s"] = host_s + moved / link.bandwidth_bytes_per_s
    out.loc[host_rows, "dynamic_energy_j"] = link_energy_j(moved, link.kind) + host_j
    out.loc[host_rows, "host_energy_j"] = host_j
    out.loc[host_rows, "dram_bytes"] = moved if profile.offchip_memory is not None else 0.0
    out.loc[host_rows, "cycles"] = np.nan
    out.loc[host_rows, "unit"] = "host"
    out.loc[host_rows, "power_capped"] = False
    out.loc[host_rows, "kernels"] = 0.0
    return Columns.of(out)
