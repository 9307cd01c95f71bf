"""Device hardware profiles: load `hw_profiles/devices/<name>.toml` into a frozen `DeviceProfile`.

    >>> from accelsim.devices.profile import load_profile
    >>> a100 = load_profile("a100")                 # built-in name = file stem; or a .toml path
    >>> a100.offchip_memory.bandwidth_bytes_per_s   # 2039 GB/s in the TOML
    2039000000000.0
    >>> a100.peak_flops_per_s("bf16")               # tensor cores, dense, FLOP/s
    312000000000000.0
    >>> board = load_profile("my_board.toml")       # doctest: +SKIP

THE SCHEMA (a contract with the cost models; the tables are in `profile_schema.py`)

Top level: `class` (one of cpu, gpu, tpu, fpga, npu), `display_name`, `vendor`, optional `notes`,
then the tables below and `[sources]`. A device is a composition: compute units, on-chip memory,
off-chip memory, host link, power. Unknown keys, missing keys, wrong types, values <= 0, unknown
classes / precisions / technologies / link kinds, and keys not valid for the device's class are
all rejected with `ConfigError(source=file, field=dotted.path, value=..., problem=...)`.

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
Precisions: fp32, tf32, fp16, bf16, fp8, int8.

[compute]  all classes. `clock_<mhz>` is the clock the peaks are rated at (GPU boost, CPU base,
    TPU core, FPGA kernel clock); required for gpu, tpu, fpga, cpu.
    gpu: sm_count (req; AMD CUs), cuda_cores, tensor_cores, base_clock
    cpu: cores, sockets (1 per profile), simd_width_bits, fma_units_per_core (all req), threads,
         base_clock, max_turbo_clock, all_core_turbo_clock
    tpu: mxu_rows, mxu_cols, mxu_count (req; mxu_count is per chip), cores (TensorCores)
    fpga: dsp_slices (req), luts, slr_count
    npu: mac_count (int8 MACs/cycle), supported_ops (`OpKind` values it runs; absent = all; the
         others fall back to the host), the GPU counts for an SoC GPU (Jetson), and optionally
         the MAC array's geometry as mxu_rows, mxu_cols, mxu_count, dataflow (folded as a TPU's)
  [compute.matrix]  matrix-engine peaks (tensor cores, MXU, AMX, NPU MAC array, FPGA DSP fabric);
    keys must end in _dense or _sparse (2:4 structured sparsity); sparse >= dense.
  [compute.vector]  SIMD / CUDA-core / vector-unit peaks, no _dense/_sparse suffix.
    At least one peak (matrix or vector) is required. Only precisions the hardware runs appear.
  [compute.macs_per_dsp]  fpga (req): MACs per DSP slice per cycle by operand width (int8, int16).
  [compute.overlay]  fpga (req): a DPU-like engine: name, cores, pixel_parallelism,
    input_channel_parallelism, output_channel_parallelism, clock_<mhz>.
[onchip_memory]  all classes (the table must be there; it may be empty where nothing is
    published): l2_cache (req gpu), l3_cache (req cpu), shared_mem_per_sm, register_file_per_sm,
    unified_buffer, accumulator, vmem, unified_buffer_bandwidth (tpu), bram, uram (req fpga),
    sram (npu). `OnchipMemorySpec.capacity_bytes` sums the device-wide ones.
[offchip_memory]  required except npu (an npu without it streams from the host over host_link):
    technology (ddr3 ddr4 ddr5 lpddr4x lpddr5 gddr6 hbm2 hbm2e hbm3 hbm3e), capacity (req except
    cpu; on a cpu the maximum supported), bandwidth (req), bus_width_bits, channels.
[secondary_memory]  optional second DRAM, same keys (Alveo U280: DDR4 beside the HBM2).
[host_link]  required except cpu (a cpu is the host): kind (pcie-gen3-x4 pcie-gen3-x16
    pcie-gen4-x16 pcie-gen5-x16 usb3 integrated; spelled as the hw_profiles/links/ names where one
    exists), bandwidth per direction (theoretical).
[peer_link]  gpu, tpu, optional: kind (nvlink2 nvlink3 nvlink4 ici), links,
    per_link_bandwidth (per direction).
[power]  tdp (req), idle, min (lowest power mode), measured_min, measured_mean, measured_max.

[sources]  keys are dotted field paths as written ("compute.matrix.peak_tflops_bf16_dense");
every numeric field must have one, and every key must name a field present in the file, except
`not found:` entries, which explain why a field the class allows is absent. The vocabulary is the
project's (`accelsim.schema`): "[TAG] url" (a tag of shared/reference/hardware_specs.csv),
"datasheet:" (a document read for this file), "derived:" (formula from cited inputs), "defined:"
(a choice of this profile), "proxy:" (a neighbouring figure standing in), "unverified:" (recalled,
not re-read), "assumed:" (a placeholder), "not found:". `DeviceProfile.flagged_fields()` lists
the fields resting on proxy / unverified / assumed figures, for reports.

ENERGY constants are not in device profiles: `hw_profiles/energy/constants.toml`, loaded by
`accelsim.devices.profile_energy.load_energy_constants()` (per-op and per-MAC energy per precision,
SRAM read energy, off-chip energy keyed by `offchip_memory.technology`, link I/O energy).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from accelsim.datafiles import builtin_files
from accelsim.devices.profile_schema import (
    COMPUTE,
    COMPUTE_SUBTABLES,
    DEVICE_CLASSES,
    DSP_OPERAND_WIDTHS,
    INTEGER_PRECISIONS,
    OP_KINDS,
    OVERLAY,
    PEAK_KEY,
    PRECISIONS,
    SECTIONS,
    TOP_LEVEL,
    UNITS,
    FieldSpec,
    check_cited,
    check_number,
    check_sources,
    check_string,
    check_table,
    fail,
    match_key,
)
from accelsim.devices.profile_types import (
    ComputeSpec,
    DeviceProfile,
    HostLinkSpec,
    OffchipMemorySpec,
    OnchipMemorySpec,
    OverlaySpec,
    PeerLinkSpec,
    PowerSpec,
)
from accelsim.errors import AccelsimError
from accelsim.schema import find_profile, read_toml

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
    """Load and validate one profile file; its name is the file stem."""
    path = Path(path)
    return parse_profile(read_toml(path), name=path.stem, source=str(path))


def list_profiles() -> list[DeviceProfile]:
    """Every built-in profile, loaded and validated, sorted by name."""
    return [load_profile(name) for name in builtin_profile_names()]


def load_all_profiles() -> dict[str, DeviceProfile]:
    """Every built-in profile, loaded and validated, keyed by name."""
    return {profile.name: profile for profile in list_profiles()}


def parse_profile(raw: dict[str, object], name: str, source: str) -> DeviceProfile:
    """Validate an already-parsed TOML document and build the profile (`source` names it in
    errors)."""
    known = set(TOP_LEVEL) | set(SECTIONS) | {"sources"}
    for key, value in raw.items():
        if key not in known:
            fail(source, key, value, f"unknown key; allowed here: {', '.join(sorted(known))}")
    if "class" not in raw:
        fail(source, "class", None, f"required field missing; one of: {', '.join(DEVICE_CLASSES)}")
    device_class = check_string(source, "class", raw["class"], DEVICE_CLASSES)
    if "sources" not in raw:
        fail(source, "sources", None, "required table missing (every number needs a source)")
    sources = check_sources(source, raw["sources"])
    reader = _Reader(source, device_class)
    top = reader.fields({k: v for k, v in raw.items() if k in TOP_LEVEL}, "", TOP_LEVEL)

    sections: dict[str, object] = {}
    for section, (spec, allowed, required) in SECTIONS.items():
        if section not in raw:
            if device_class in required:
                fail(source, section, None, f"required table missing for class '{device_class}'")
            continue
        if device_class not in allowed:
            fail(source, section, raw[section], f"not a table of class '{device_class}'")
        table = check_table(source, section, raw[section])
        if section == "compute":
            sections[section] = reader.compute(table)
        else:
            sections[section] = _SECTION_TYPES[section](**reader.fields(table, section, spec))

    check_cited(source, device_class, reader.numeric, reader.leaves, sources)
    return DeviceProfile(
        name=name,
        device_class=device_class,
        display_name=top["display_name"],
        vendor=top["vendor"],
        notes=top.get("notes"),
        source_path=source,
        sources=sources,
        **sections,
    )


class _Reader:
    """Walks one profile, converting values to SI and remembering every leaf path it saw."""

    def __init__(self, source: str, device_class: str) -> None:
        self.source, self.device_class = source, device_class
        self.numeric: dict[str, object] = {}
        self.leaves: set[str] = set()

    def fields(self, table: dict[str, object], path: str,
               spec: dict[str, FieldSpec]) -> dict[str, object]:
        """Check and convert the scalar keys of one table against `spec`."""
        out: dict[str, object] = {}
        for key, value in table.items():
            fpath = f"{path}.{key}" if path else key
            matched = match_key(key, spec)
            if matched is None:
                allowed = [s.spelling(b) for b, s in spec.items() if self.device_class in s.allowed]
                fail(self.source, fpath, value, f"unknown key; allowed here for class "
                     f"'{self.device_class}': {', '.join(allowed) or '(none)'}")
            base, unit = matched
            field = spec[base]
            if self.device_class not in field.allowed:
                fail(self.source, fpath, value, f"not a field of class '{self.device_class}' "
                     f"(only {', '.join(sorted(field.allowed))})")
            attr = field.attr(base)
            if attr in out:
                fail(self.source, fpath, value, f"'{base}' is given twice (in two units)")
            out[attr] = self._value(fpath, value, field, unit)
        for base, field in spec.items():
            if self.device_class in field.required and field.attr(base) not in out:
                where = f"{path}.{base}" if path else base
                fail(self.source, where, None, f"required field missing for class "
                     f"'{self.device_class}'; write it as {field.spelling(base)}")
        return out

    def _value(self, path: str, value: object, field: FieldSpec, unit: str | None) -> object:
        self.leaves.add(path)
        if field.kind == "str":
            return check_string(self.source, path, value, field.choices)
        if field.kind == "str_list":
            return self._op_list(path, value)
        self.numeric[path] = value
        number = check_number(self.source, path, value, integer=field.kind == "count")
        if field.kind == "count":
            return int(number)
        si = number * UNITS[field.kind][unit or ""]
        return int(round(si)) if field.kind == "bytes" else si

    def _op_list(self, path: str, value: object) -> tuple[str, ...]:
        if not isinstance(value, list) or not value:
            fail(self.source, path, value, "must be a non-empty list of op kinds")
        for op in value:
            if op not in OP_KINDS:
                fail(self.source, path, op, f"unknown op kind; choose from: {', '.join(OP_KINDS)}")
        if len(set(value)) != len(value):
            fail(self.source, path, value, "lists an op kind twice")
        return tuple(value)

    def compute(self, table: dict[str, object]) -> ComputeSpec:
        """The [compute] table and its sub-tables."""
        subs: dict[str, dict[str, object]] = {}
        for sub, (allowed, required) in COMPUTE_SUBTABLES.items():
            path = f"compute.{sub}"
            if sub not in table:
                if self.device_class in required:
                    fail(self.source, path, None,
                         f"required table missing for class '{self.device_class}'")
                continue
            if self.device_class not in allowed:
                fail(self.source, path, table[sub], f"not a table of class '{self.device_class}'")
            subs[sub] = check_table(self.source, path, table[sub])
        scalars = {k: v for k, v in table.items() if k not in COMPUTE_SUBTABLES}
        values = self.fields(scalars, "compute", COMPUTE)
        dense, sparse = self._peaks(subs.get("matrix", {}), "compute.matrix", matrix=True)
        vector, _ = self._peaks(subs.get("vector", {}), "compute.vector", matrix=False)
        if not dense and not sparse and not vector:
            fail(self.source, "compute.matrix", {}, "no peak throughput given; add at least one "
                 "compute.matrix or compute.vector peak")
        clock, base = values.get("clock_hz"), values.get("base_clock_hz")
        if clock is not None and base is not None and base > clock:
            fail(self.source, "compute.base_clock", base, f"above the rated clock {clock:g} Hz")
        overlay = None
        if "overlay" in subs:
            overlay = OverlaySpec(**self.fields(subs["overlay"], "compute.overlay", OVERLAY))
        return ComputeSpec(
            **values,
            matrix_peak_flops_per_s=dense,
            matrix_sparse_peak_flops_per_s=sparse,
            vector_peak_flops_per_s=vector,
            macs_per_dsp=self._macs_per_dsp(subs.get("macs_per_dsp")),
            overlay=overlay,
        )

    def _peaks(self, table: dict[str, object], path: str,
               matrix: bool) -> tuple[dict[str, float], dict[str, float]]:
        """Peak keys -> ({precision: dense FLOP/s}, {precision: sparse FLOP/s})."""
        dense: dict[str, float] = {}
        sparse: dict[str, float] = {}
        sparse_paths: dict[str, tuple[str, object]] = {}
        for key, value in table.items():
            fpath = f"{path}.{key}"
            found = PEAK_KEY.match(key)
            if found is None:
                form = "peak_<tflops|tops>_<precision>" + ("_<dense|sparse>" if matrix else "")
                fail(self.source, fpath, value, f"unknown key; peaks are written {form}")
            unit, precision, mode = found.groups()
            if precision not in PRECISIONS:
                fail(self.source, fpath, value,
                     f"unknown precision '{precision}'; choose one of: {', '.join(PRECISIONS)}")
            want = "tops" if precision in INTEGER_PRECISIONS else "tflops"
            if unit != want:
                fail(self.source, fpath, value, f"{precision} throughput is written in {want}")
            if matrix and mode is None:
                fail(self.source, fpath, value, "matrix peaks end in _dense or _sparse")
            if not matrix and mode is not None:
                fail(self.source, fpath, value, "vector peaks have no _dense/_sparse suffix")
            self.leaves.add(fpath)
            self.numeric[fpath] = value
            flops = check_number(self.source, fpath, value) * 1e12
            (sparse if mode == "sparse" else dense)[precision] = flops
            if mode == "sparse":
                sparse_paths[precision] = (fpath, value)
        for precision, (fpath, value) in sparse_paths.items():
            if precision in dense and sparse[precision] < dense[precision]:
                fail(self.source, fpath, value, "sparse peak is below the dense peak")
        return dense, sparse

    def _macs_per_dsp(self, table: dict[str, object] | None) -> dict[str, int]:
        out: dict[str, int] = {}
        for key, value in (table or {}).items():
            fpath = f"compute.macs_per_dsp.{key}"
            if key not in DSP_OPERAND_WIDTHS:
                fail(self.source, fpath, value,
                     f"unknown operand width; choose one of: {', '.join(DSP_OPERAND_WIDTHS)}")
            self.leaves.add(fpath)
            self.numeric[fpath] = value
            out[key] = int(check_number(self.source, fpath, value, integer=True))
        if table is not None and not out:
            fail(self.source, "compute.macs_per_dsp", table, "must give at least one width")
        return out


def with_dataflow(profile: DeviceProfile, dataflow: str) -> DeviceProfile:
    """A copy of a systolic-array profile running another dataflow ("ws", "os" or "is")."""
    if profile.device_class != "tpu":
        raise AccelsimError(f"--dataflow applies to systolic arrays (tpu), not to "
                            f"{profile.name} ({profile.device_class})")
    return dataclasses.replace(profile, compute=dataclasses.replace(profile.compute,
                                                                    dataflow=dataflow))
