"""The NPU class: a MAC array under a power envelope, a small SRAM, LPDDR (or none), and a host
CPU for the ops it cannot run (`model`; its GEMMs fold onto the array with the systolic fold
formula, `accelsim.devices.systolic.model`). This file is its one registration: its record
(`accelsim.devices.registry.DeviceClass`), its peaks and its profile-schema rules. The host
CPU comes from the system (`estimate(host_cpu=...)`), else from the record's `host_fallback`
profile; its class model is the registry's record of the host profile's class.
"""

from __future__ import annotations

from typing import Any

from accelsim.devices.npu.model import DEFAULT_HOST, matmul_rate, npu_costs, vector_rate
from accelsim.devices.registry import DeviceClass, register
from accelsim.profiles.device_schema import ClassSchema


def peaks(profile: Any, precision: str) -> tuple[float, float]:
    """(the MAC array's or, where it lacks the precision, the vector path's peak; the vector
    path's), FLOP/s (OP/s for int8)."""
    _, mac_per_s = matmul_rate(profile, precision)
    return 2.0 * mac_per_s, vector_rate(profile, precision, mac_per_s)


SCHEMA = ClassSchema.of(
    may="compute.sm_count compute.cuda_cores compute.tensor_cores compute.mxu_rows "
        "compute.mxu_cols compute.mxu_count compute.dataflow compute.mac_count "
        "compute.supported_ops onchip_memory.l2_cache onchip_memory.shared_mem_per_sm "
        "onchip_memory.register_file_per_sm onchip_memory.sram",
    must="offchip_memory.capacity host_link")

NPU = register(DeviceClass(name="npu", model=npu_costs, peaks=peaks, schema=SCHEMA,
                           default_stack="tflite-edgetpu", host_fallback=DEFAULT_HOST,
                           reads_arrays=True))
