"""The systolic-array class (profile class "tpu"): GEMMs folded onto R x C arrays in a dataflow,
SCALE-Sim's fold formula (`model`), its SRAM and DRAM streams (`sram`, `streams`, `im2col`,
`memory`), a cycle emulator (`emulator`), and SCALE-Sim's `.cfg` reader and reports
(`scalesim`). This file is its one registration: its record
(`accelsim.devices.registry.DeviceClass`), its peaks and its profile-schema rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelsim.devices.registry import DeviceClass, register
from accelsim.devices.systolic.model import mxu_precision, systolic_costs, vector_ops_per_s
from accelsim.errors import ConfigError
from accelsim.profiles.device_schema import MATRIX_PEAKS, ClassSchema
from accelsim.workload.columns import Table

# NB: listed peaks are rounded (TPU v3: 123 TFLOP/s for 2 x 128 x 128 x 4 x 940 MHz = 123.2).
SYSTOLIC_PEAK_TOLERANCE = 0.01


def geometry_flops_per_s(c: Any) -> float:
    """2 FLOPs per MAC x rows x cols MACs per cycle per array x `mxu_count` arrays x clock."""
    return 2.0 * c.mxu_rows * c.mxu_cols * c.mxu_count * c.clock_hz


def peaks(profile: Any, precision: str) -> tuple[float, float]:
    """(the arrays' peak at the format they run `precision` in, the vector unit's), FLOP/s.
    The model times GEMMs from the arrays' geometry and clock; the listed peak is that figure
    rounded (the loader holds them within 1 %), so the geometry is the unit's true ceiling."""
    run = mxu_precision(profile, precision)
    c = profile.compute
    return (max(c.matrix_peak_flops_per_s[run], geometry_flops_per_s(c)),
            vector_ops_per_s(profile, run))


def check_peaks(c: Any, raw: Mapping[str, Any], source: str) -> None:
    """A TPU's dense matrix peaks must agree with its arrays (`geometry_flops_per_s`). The
    systolic model times GEMMs from that geometry, so a peak that disagrees would be ignored
    without a word."""
    if None in (c.mxu_rows, c.mxu_cols, c.mxu_count, c.clock_hz):
        return
    geometry = geometry_flops_per_s(c)
    for key, value in raw.get("matrix", {}).items():
        precision, mode = MATRIX_PEAKS[key]
        peak = c.matrix_peak_flops_per_s.get(precision) if mode == "dense" else None
        if peak is not None and abs(peak - geometry) > SYSTOLIC_PEAK_TOLERANCE * geometry:
            raise ConfigError(source, f"compute.matrix.{key}", value,
                              f"disagrees with 2 x mxu_rows x mxu_cols x mxu_count x clock = "
                              f"{geometry / 1e12:.4g} T/s, from which the systolic model times "
                              "GEMMs")


def sram_notes(profile: Any, work: Table, gemms: Table, stack: Any,
               precision: str) -> list[str]:
    """The note of SCALE-Sim's SRAM model (a profile read from a `.cfg`: `operand_srams`) on
    the layers it times without addresses (the stack and precision do not change it)."""
    del stack, precision
    srams = getattr(profile, "operand_srams", None)
    if srams is None:
        return []
    from accelsim.devices.mapping import row_gemms
    from accelsim.devices.systolic.memory import address_free_note

    note = address_free_note(work, row_gemms(work, gemms), srams)
    return [note] if note else []


SCHEMA = ClassSchema.of(
    may="compute.cores compute.dataflow onchip_memory.unified_buffer onchip_memory.accumulator "
        "onchip_memory.vmem onchip_memory.unified_buffer_bandwidth peer_link",
    must="compute.clock compute.mxu_rows compute.mxu_cols compute.mxu_count offchip_memory "
         "offchip_memory.capacity host_link",
    check=check_peaks)

SYSTOLIC = register(DeviceClass(name="tpu", model=systolic_costs, peaks=peaks, schema=SCHEMA,
                                default_stack="jax-xla", notes=sram_notes,
                                matrix_precision=mxu_precision, reads_arrays=True))
