"""Device hardware profiles: load `hw_profiles/devices/<name>.toml` into a frozen `DeviceProfile`.

    >>> from accelsim.profiles.devices import load_profile
    >>> a100 = load_profile("a100")                 # built-in name = file stem; or a .toml path
    >>> a100.offchip_memory.bandwidth_bytes_per_s   # 2039 GB/s in the TOML
    2039000000000.0
    >>> a100.peak_flops_per_s("bf16")               # tensor cores, dense, FLOP/s
    312000000000000.0
    >>> board = load_profile("my_board.toml")       # doctest: +SKIP

THE SCHEMA (a contract with the cost models; the tables are in `device_schema.py`, which class
may or must have a key in each class's registration, `accelsim/devices/<class>/__init__.py`)

Top level: `class` (one of cpu, gpu, tpu, fpga, npu), `display_name`, `vendor`, optional `notes`,
optional `inference_only` (true for a product that cannot train, with its source), optional
`process_node_nm` (the foundry node's name in nm: it scales a GPU's energy per op, `energy`),
then the tables below and `[sources]`. A device is a composition: compute units, on-chip memory,
off-chip memory, host link, power. Unknown keys, missing keys, wrong types, values <= 0, unknown
classes / precisions / technologies / link kinds, and keys not valid for the device's class are
all rejected with `ConfigError(source=file, field=dotted.path, value=..., problem=...)`: the
shared checks of `accelsim.schema` run on the fields of the profile's class, then the cross-field
rules of [compute] (a peak exists, sparse >= dense, base clock <= rated clock, a TPU's dense
peaks agree with its arrays' geometry and clock within 1 %). Every number lies in the physical
range of its dimension (`accelsim.physical`).

Units are in every key. A dimensioned key is `<base>_<unit>` and any listed unit may be used;
the Python attribute is `<base>` plus the SI suffix:
    bytes:        _bytes _kb _kib _mb _mib _gb _gib _tb  (KB/MB/GB/TB = 10^3n, KiB/MiB/GiB = 2^10n)
                  -> `<base>_bytes` (int)
    bandwidth:    _mb_s _gb_s _gib_s _tb_s               -> `<base>_bytes_per_s` (float)
    clock:        _mhz _ghz                              -> `<base>_hz`
    power:        _w                                     -> `<base>_w`
    peaks:        peak_tflops_<p>[_dense|_sparse] (floats), peak_tops_int8[...] (int8)
                  -> FLOP/s in a dict keyed by precision (OP/s for int8; 1 MAC = 2 ops)
Counts (`sm_count`, `cores`, `mxu_rows`, `dsp_slices`, `simd_width_bits`, ...) are whole numbers.
Precisions: fp32, tf32, fp16, bf16, fp8, fp4 (NVFP4 / MXFP4), int8.

[compute]  all classes. `clock_<mhz>` is the clock the peaks are rated at (GPU boost, CPU base,
    TPU core, FPGA kernel clock); required for gpu, tpu, fpga, cpu.
    gpu: sm_count (req; AMD CUs), cuda_cores, tensor_cores, base_clock
    cpu: cores, sockets (1 per profile), simd_width_bits, fma_units_per_core (all req), threads,
         base_clock, max_turbo_clock, all_core_turbo_clock, single_thread_equiv_clock
         (single-thread speed as an Ice Lake-core clock: it scales framework host time)
    tpu: mxu_rows, mxu_cols, mxu_count (req; mxu_count is per chip), cores (TensorCores)
    fpga: dsp_slices (req), luts, slr_count
    npu: mac_count (int8 MACs/cycle), supported_ops (`OpKind` values it runs; absent = all; the
         others fall back to the host), the GPU counts for an SoC GPU (Jetson), and optionally
         the MAC array's geometry as mxu_rows, mxu_cols, mxu_count, dataflow (folded as a TPU's)
    all: zero_operand_gating (bool, sourced; absent = false): the MAC units spend no switching
         energy on a multiply with a zero operand (`accelsim.devices.sparsity`; time unchanged)
  [compute.matrix]  matrix-engine peaks (tensor cores, MXU, AMX, NPU MAC array, FPGA DSP fabric);
    keys must end in _dense or _sparse (2:4 structured sparsity); sparse >= dense.
  [compute.vector]  SIMD / CUDA-core / vector-unit peaks, no _dense/_sparse suffix.
    At least one peak (matrix or vector) is required. Only precisions the hardware runs appear.
  [compute.macs_per_dsp]  fpga (req): MACs per DSP slice per cycle by operand width (int8, int16).
  [compute.overlay]  fpga (req): a DPU-like engine: name, cores, pixel_parallelism,
    input_channel_parallelism, output_channel_parallelism, clock_<mhz>; optional
    images_per_core (batch engines of one core sharing its weight fetch; absent: 1).
[onchip_memory]  all classes (the table must be there; it may be empty where nothing is
    published): l2_cache (req gpu), l3_cache (gpu, cpu), shared_mem_per_sm, register_file_per_sm,
    unified_buffer, accumulator, vmem, unified_buffer_bandwidth (tpu), bram (req fpga), uram
    (fpga), sram (npu). `OnchipMemorySpec.capacity_bytes` sums the device-wide ones.
[offchip_memory]  required except npu (an npu without it streams from the host over host_link):
    technology (ddr3 ddr4 ddr5 lpddr4 lpddr4x lpddr5 gddr6 gddr6x hbm2 hbm2e hbm3 hbm3e),
    capacity (req except cpu; on a cpu the maximum supported), bandwidth (req), bus_width_bits,
    channels.
[secondary_memory]  optional second DRAM, same keys (Alveo U280: DDR4 beside the HBM2).
[host_link]  required except cpu (a cpu is the host): kind (pcie-gen2-x1 pcie-gen3-x4
    pcie-gen3-x16 pcie-gen4-x16 pcie-gen5-x16 usb3 integrated; spelled as the hw_profiles/links/
    names where one exists), bandwidth per direction (theoretical).
[peer_link]  gpu, tpu, optional: kind (nvlink2 nvlink3 nvlink4 ici), links,
    per_link_bandwidth (per direction).
[power]  tdp (req), idle, min (lowest power mode), measured_min, measured_mean, measured_max,
    limits_clock (bool, default true; false: the TDP is not a known limit of this device, e.g. a
    calibrated VM without a power reading: it prices static power, and nothing is power-bound).

[sources]  keys are dotted field paths as written ("compute.matrix.peak_tflops_bf16_dense");
every numeric field must have one, and every key must name a field present in the file, except
`not found:` entries, which explain why a field the class allows is absent. The vocabulary is the
project's (`accelsim.schema`): "[TAG] url" (a tag of shared/reference/hardware_specs.csv),
"datasheet:" (a document read for this file), "derived:" (formula from cited inputs), "defined:"
(a choice of this profile), "proxy:" (a neighbouring figure standing in), "unverified:" (recalled,
not re-read), "assumed:" (a placeholder), "not found:". `DeviceProfile.flagged_fields()` lists
the fields resting on proxy / unverified / assumed figures, for reports.

ENERGY constants are not in device profiles: `hw_profiles/energy/constants.toml`, loaded by
`accelsim.profiles.energy.load_energy_constants()` (per-op and per-MAC energy per precision,
SRAM read energy, off-chip energy keyed by `offchip_memory.technology`, link I/O energy).
"""

from __future__ import annotations

import dataclasses
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from accelsim.datafiles import builtin_files
from accelsim.errors import AccelsimError, ConfigError
from accelsim.profiles.device_schema import (
    MATRIX_PEAKS,
    VECTOR_PEAKS,
    class_field,
    class_schema,
    profile_fields,
    schema_generation,
)
from accelsim.profiles.device_types import (
    ComputeSpec,
    DeviceProfile,
    HostLinkSpec,
    OffchipMemorySpec,
    OnchipMemorySpec,
    OverlaySpec,
    PeerLinkSpec,
    PowerSpec,
)
from accelsim.schema import parse_field
from accelsim.schema import parse_profile as parse_sourced
from accelsim.tomlfiles import find_profile, parse_toml_text, read_text_file

__all__ = [
    "DeviceProfile",
    "builtin_profile_names",
    "list_profiles",
    "load_all_profiles",
    "load_profile",
    "load_profile_file",
    "parse_profile",
]

_SECTION_TYPES = {
    "onchip_memory": OnchipMemorySpec,
    "offchip_memory": OffchipMemorySpec,
    "secondary_memory": OffchipMemorySpec,
    "host_link": HostLinkSpec,
    "peer_link": PeerLinkSpec,
    "power": PowerSpec,
}


def builtin_profile_names() -> list[str]:
    """Names of the built-in device profiles (file stems under hw_profiles/devices/)."""
    return sorted(builtin_files("hw_profiles", "devices/*.toml"))


def load_profile(name_or_path: str | os.PathLike[str]) -> DeviceProfile:
    """Load a built-in profile by name ("a100") or a user profile by path (a Path, or a string
    ending in .toml). An unknown name raises UnknownNameError listing the built-ins."""
    if isinstance(name_or_path, os.PathLike):
        name_or_path = Path(name_or_path)
    return load_profile_file(find_profile(name_or_path, "devices/*.toml", "device profile"))


def load_profile_file(path: str | os.PathLike[str]) -> DeviceProfile:
    """Load and validate one profile file; its name is the file stem. Validated once per
    process for each text of the file (and set of registered classes): a sweep loading the
    same profile at every point pays for it once, an edited file is read anew."""
    path = Path(path)
    return _validated(path, read_text_file(path), schema_generation())


@lru_cache(maxsize=256)
def _validated(path: Path, text: str, _generation: int) -> DeviceProfile:
    # NB: keyed by the whole text (read anyway), not the mtime: never stale within the file
    # system's timestamp resolution. The profile is frozen; its tables are shared read-only.
    return parse_profile(parse_toml_text(str(path), text), name=path.stem, source=str(path))


def list_profiles() -> list[DeviceProfile]:
    """Every built-in profile, loaded and validated, sorted by name."""
    return [load_profile(name) for name in builtin_profile_names()]


def load_all_profiles() -> dict[str, DeviceProfile]:
    """Every built-in profile, loaded and validated, keyed by name."""
    return {profile.name: profile for profile in list_profiles()}


def parse_profile(raw: dict[str, Any], name: str, source: str) -> DeviceProfile:
    """Validate an already-parsed TOML document and build the profile (`source` names it in
    errors). The shared core checks every key against the fields of the profile's class; the
    cross-field rules of the [compute] table are checked here, then the class's own
    (`ClassSchema.check`: a TPU's peaks against its arrays)."""
    device_class = parse_field(raw, class_field(), source)
    values, sources = parse_sourced(raw, profile_fields(device_class), source)
    sections = {section: spec_type(**values[section])
                for section, spec_type in _SECTION_TYPES.items() if values[section] is not None}
    compute = _compute(values["compute"], raw["compute"], source)
    check = class_schema(device_class).check
    if check is not None:
        check(compute, raw["compute"], source)
    return DeviceProfile(
        name=name,
        device_class=device_class,
        display_name=values["display_name"],
        vendor=values["vendor"],
        notes=values["notes"],
        inference_only=values["inference_only"],
        process_node_nm=values["process_node_nm"],
        source_path=source,
        sources=sources,
        compute=compute,
        **sections,
    )


def _compute(values: dict[str, Any], raw: dict[str, Any], source: str) -> ComputeSpec:
    """The [compute] table, parsed by the core (`values`) and as written (`raw`)."""
    matrix, vector = values.pop("matrix"), values.pop("vector")
    dense, sparse = _peaks(matrix, raw.get("matrix", {}), MATRIX_PEAKS)
    vector_peaks, _ = _peaks(vector, raw.get("vector", {}), VECTOR_PEAKS)
    if not dense and not sparse and not vector_peaks:
        raise ConfigError(source, "compute.matrix", {}, "no peak throughput given; add at least "
                          "one compute.matrix or compute.vector peak")
    for key in raw.get("matrix", {}):
        precision, mode = MATRIX_PEAKS[key]
        if mode == "sparse" and precision in dense and sparse[precision] < dense[precision]:
            raise ConfigError(source, f"compute.matrix.{key}", raw["matrix"][key],
                              "sparse peak is below the dense peak")
    clock, base = values["clock_hz"], values["base_clock_hz"]
    if clock is not None and base is not None and base > clock:
        raise ConfigError(source, "compute.base_clock", base, f"above the rated clock {clock:g} Hz")
    macs = values.pop("macs_per_dsp")
    macs_per_dsp = {width: macs[width] for width in raw.get("macs_per_dsp", {})}
    if macs is not None and not macs_per_dsp:
        raise ConfigError(source, "compute.macs_per_dsp", {}, "must give at least one width")
    overlay = values.pop("overlay")
    return ComputeSpec(
        **values,
        matrix_peak_flops_per_s=dense,
        matrix_sparse_peak_flops_per_s=sparse,
        vector_peak_flops_per_s=vector_peaks,
        macs_per_dsp=macs_per_dsp,
        overlay=None if overlay is None else OverlaySpec(**overlay),
    )


def _peaks(values: dict[str, float] | None, raw: dict[str, Any],
           table: dict[str, tuple[str, str]]) -> tuple[dict[str, float], dict[str, float]]:
    """({precision: dense FLOP/s}, {precision: sparse FLOP/s}) in the order the file lists them
    (the first of equal peaks is the one reports show)."""
    dense: dict[str, float] = {}
    sparse: dict[str, float] = {}
    for key in raw:
        precision, mode = table[key]
        (sparse if mode == "sparse" else dense)[precision] = (values or {})[key]
    return dense, sparse


def with_dataflow(profile: DeviceProfile, dataflow: str) -> DeviceProfile:
    """A copy of a systolic-array profile running another dataflow ("ws", "os" or "is")."""
    if profile.device_class != "tpu":
        raise AccelsimError(f"--dataflow applies to systolic arrays (tpu), not to "
                            f"{profile.name} ({profile.device_class})")
    return dataclasses.replace(profile, compute=dataclasses.replace(profile.compute,
                                                                    dataflow=dataflow))
