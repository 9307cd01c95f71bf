"""The FPGA class: GEMMs on a DPU-like overlay (int8) or on the DSP fabric at a bit width
(`model`). This file is its one registration: its record
(`accelsim.devices.registry.DeviceClass`), its peaks and its profile-schema rules.
"""

from __future__ import annotations

from typing import Any

from accelsim.devices.fpga.model import dsp_macs_per_s, dsp_width, fpga_costs
from accelsim.devices.registry import DeviceClass, register
from accelsim.profiles.device_schema import ClassSchema


def peaks(profile: Any, precision: str) -> tuple[float, float]:
    """(matrix, vector) peak OP/s: the overlay's int8 MAC array and its misc engine (one
    element op per PP x OCP lane per cycle) for int8 on an overlay, else the DSP fabric at
    the precision's operand width (one element op per MAC)."""
    ov = profile.compute.overlay
    if ov is not None and precision == "int8":
        return (ov.peak_int8_ops_per_s,
                ov.engines * ov.pixel_parallelism * ov.output_channel_parallelism * ov.clock_hz)
    macs_per_s = dsp_macs_per_s(profile, dsp_width(profile, precision))
    return 2.0 * macs_per_s, macs_per_s


SCHEMA = ClassSchema.of(
    may="compute.luts compute.slr_count onchip_memory.uram",
    must="compute.clock compute.dsp_slices compute.macs_per_dsp compute.overlay "
         "onchip_memory.bram offchip_memory offchip_memory.capacity host_link")

# takes_batch: a DPU core fetches the weights once per run of its images
FPGA = register(DeviceClass(name="fpga", model=fpga_costs, peaks=peaks, schema=SCHEMA,
                            default_stack="vitis-ai", takes_batch=True, reads_arrays=True))
