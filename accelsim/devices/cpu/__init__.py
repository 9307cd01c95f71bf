"""The CPU class: cores x SIMD lanes x FMA units x clock (AMX where listed), GEMMs as a BLAS
runs them (`model`; `blas`: Goto's algorithm, `passes`: measured element passes, `alloc`:
fresh-page faults of numpy's temporaries). This file is its one registration: its record
(`accelsim.devices.registry.DeviceClass`), its peaks and its profile-schema rules.
"""

from __future__ import annotations

from typing import Any

from accelsim.devices.cpu.model import cpu_costs, matmul_path, vector_peak_flops_per_s
from accelsim.devices.registry import DeviceClass, register
from accelsim.profiles.device_schema import ClassSchema


def peaks(profile: Any, precision: str) -> tuple[float, float]:
    """(the matmul path's peak at `precision`: AMX, else the vector units; the vector peak),
    FLOP/s."""
    return matmul_path(profile, precision)[1], vector_peak_flops_per_s(profile, precision)


SCHEMA = ClassSchema.of(
    may="compute.base_clock compute.max_turbo_clock compute.all_core_turbo_clock "
        "compute.single_thread_equiv_clock compute.threads onchip_memory.l3_cache",
    must="compute.clock compute.cores compute.sockets compute.simd_width_bits "
         "compute.fma_units_per_core offchip_memory")

CPU = register(DeviceClass(name="cpu", model=cpu_costs, peaks=peaks, schema=SCHEMA,
                           default_stack="pytorch-eager", reads_arrays=True))
