"""The GPU class: tensor cores or CUDA cores, CTA tiles in waves over the SMs (`model`, with the
GEMM shape efficiency in `gemm`). This file is its one registration: its record
(`accelsim.devices.registry.DeviceClass`), its peaks and its profile-schema rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.devices.gpu.model import (
    gpu_costs,
    matmul_path,
    tf32_rows,
    vector_peak_flops_per_s,
)
from accelsim.devices.registry import DeviceClass, register
from accelsim.profiles.device_schema import ClassSchema
from accelsim.profiles.software import SoftwareStack
from accelsim.workload.columns import Table


def peaks(profile: Any, precision: str) -> tuple[float, float]:
    """(the matmul path's peak at `precision`: tensor cores, else CUDA cores; the CUDA-core
    peak of non-matmul math), FLOP/s."""
    return matmul_path(profile, precision)[1], vector_peak_flops_per_s(profile, precision)


def tf32_row_peaks(profile: Any, layers: Table, precision: str, matmul: np.ndarray,
                   peak: np.ndarray) -> np.ndarray:
    """Per row, the matrix-path `peak`, raised to the tf32 tensor-core peak on the fp32 rows a
    stack ran on tensor cores (`model.tf32_rows`: their `unit` says so)."""
    if precision != "fp32" or "unit" not in layers:
        return peak
    tf32 = profile.compute.matrix_peak_flops_per_s.get("tf32")
    if tf32 is None:
        return peak
    on_tf32 = matmul & (np.asarray(layers["unit"]) == "tensor_core")
    return np.where(on_tf32, np.maximum(peak, float(tf32)), peak)


_GROUP_WORDS = {"conv": "convolutions", "matmul": "other matmuls"}


def tf32_notes(profile: Any, work: Table, gemms: Table, stack: SoftwareStack,
               precision: str) -> list[str]:
    """Where an fp32 run's GEMMs ran, on a GPU whose tensor cores run TF32: as TF32 on tensor
    cores or in fp32 on CUDA cores (`model.tf32_rows`), and whose choice that was."""
    del gemms
    if precision != "fp32" or "tf32" not in profile.compute.matrix_peak_flops_per_s:
        return []
    on_tf32 = int(tf32_rows(work, stack, profile, precision).sum())
    n_gemm = int(np.asarray(work["matmul"], dtype=bool).sum())
    whose = ("as asked" if stack.tf32_asked is not None
             else f"{stack.name}'s default for fp32")
    if on_tf32:
        groups = " and ".join(_GROUP_WORDS[g] for g in stack.fp32_on_tf32)
        return [f"TF32: fp32 {groups} ran as TF32 on tensor cores ({on_tf32} of {n_gemm} GEMM "
                f"rows, {whose}); --tf32 off keeps every fp32 GEMM on CUDA cores"]
    if stack.fp32_on_tf32:  # the stack would, but the model has no GEMM of those groups
        groups = " and ".join(_GROUP_WORDS[g] for g in stack.fp32_on_tf32)
        return [f"TF32: {whose} runs fp32 {groups} as TF32, and this model has none: every "
                "fp32 GEMM ran on CUDA cores; --tf32 on runs them all as TF32"]
    return [f"TF32 off ({whose}): every fp32 GEMM ran in fp32 on CUDA cores; --tf32 on runs "
            "them as TF32 on tensor cores"]


SCHEMA = ClassSchema.of(
    may="compute.base_clock compute.cuda_cores compute.tensor_cores onchip_memory.l3_cache "
        "onchip_memory.shared_mem_per_sm onchip_memory.register_file_per_sm peer_link",
    must="compute.clock compute.sm_count onchip_memory.l2_cache offchip_memory "
         "offchip_memory.capacity host_link")

GPU = register(DeviceClass(name="gpu", model=gpu_costs, peaks=peaks, schema=SCHEMA,
                           default_stack="pytorch-eager", dvfs=True,
                           row_matrix_peaks=tf32_row_peaks, notes=tf32_notes, reads_arrays=True))
