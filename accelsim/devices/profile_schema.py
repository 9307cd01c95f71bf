"""Schema tables for device profiles and the checks shared with the energy-constants loader.

The contract these tables encode is documented in `accelsim.devices.profile`; this module only
holds the data (which key, which unit, which device class) and the small checks that read it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import NoReturn

from accelsim.errors import ConfigError
from accelsim.schema import SOURCE_PREFIXES
from accelsim.workload.ops import OpKind

DEVICE_CLASSES = ("cpu", "gpu", "tpu", "fpga", "npu")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")
INTEGER_PRECISIONS = frozenset({"int8"})
MEMORY_TECHNOLOGIES = (
    "ddr3", "ddr4", "ddr5", "lpddr4x", "lpddr5", "gddr6", "hbm2", "hbm2e", "hbm3", "hbm3e",
)
# Spelled as the link profiles in hw_profiles/links/ where one exists; "integrated" = an SoC whose
# host CPU shares the device's DRAM.
HOST_LINK_KINDS = (
    "pcie-gen3-x4", "pcie-gen3-x16", "pcie-gen4-x16", "pcie-gen5-x16", "usb3", "integrated",
)
PEER_LINK_KINDS = ("nvlink2", "nvlink3", "nvlink4", "ici")
DSP_OPERAND_WIDTHS = ("int8", "int16")
OP_KINDS = tuple(kind.value for kind in OpKind)
NOT_FOUND = "not found:"

# TOML unit suffix -> factor to the SI unit of the dimension.
UNITS: dict[str, dict[str, float]] = {
    "bytes": {
        "bytes": 1.0, "kb": 1e3, "kib": 2.0**10, "mb": 1e6, "mib": 2.0**20,
        "gb": 1e9, "gib": 2.0**30, "tb": 1e12,
    },
    "bytes_per_s": {"mb_s": 1e6, "gb_s": 1e9, "gib_s": 2.0**30, "tb_s": 1e12},
    "hz": {"mhz": 1e6, "ghz": 1e9},
    "w": {"w": 1.0},
}
# Python attribute suffix of each dimension: `clock_mhz` in TOML is `clock_hz` in Python.
SI_SUFFIX = {"bytes": "_bytes", "bytes_per_s": "_bytes_per_s", "hz": "_hz", "w": "_w"}

_ALL = frozenset(DEVICE_CLASSES)
_NONE: frozenset[str] = frozenset()


@dataclass(frozen=True)
class FieldSpec:
    """One profile key. `kind` is a dimension in UNITS, or "count", "str", "str_list"."""

    kind: str
    allowed: frozenset[str] = _ALL
    required: frozenset[str] = _NONE
    choices: tuple[str, ...] = ()

    def attr(self, base: str) -> str:
        """Python attribute name for the key with base name `base`."""
        return base + SI_SUFFIX.get(self.kind, "")

    def spelling(self, base: str) -> str:
        """How the key is written in TOML, e.g. 'clock_<mhz|ghz>'."""
        if self.kind in UNITS:
            return f"{base}_<{'|'.join(UNITS[self.kind])}>"
        return base


def _f(kind: str, allowed: str = "", required: str = "",
       choices: tuple[str, ...] = ()) -> FieldSpec:
    allowed_set = frozenset(allowed.split()) if allowed else _ALL
    required_set = _ALL & allowed_set if required == "*" else frozenset(required.split())
    return FieldSpec(kind, allowed_set, required_set, choices)


TOP_LEVEL = {
    "class": _f("str", required="*", choices=DEVICE_CLASSES),
    "display_name": _f("str", required="*"),
    "vendor": _f("str", required="*"),
    "notes": _f("str"),
}
COMPUTE = {
    "clock": _f("hz", required="gpu tpu fpga cpu"),
    "base_clock": _f("hz", "gpu cpu"),
    "max_turbo_clock": _f("hz", "cpu"),
    "all_core_turbo_clock": _f("hz", "cpu"),
    "sm_count": _f("count", "gpu npu", "gpu"),
    "cuda_cores": _f("count", "gpu npu"),
    "tensor_cores": _f("count", "gpu npu"),
    "cores": _f("count", "cpu tpu", "cpu"),
    "threads": _f("count", "cpu"),
    "sockets": _f("count", "cpu", "cpu"),
    "simd_width_bits": _f("count", "cpu", "cpu"),
    "fma_units_per_core": _f("count", "cpu", "cpu"),
    "mxu_rows": _f("count", "tpu npu", "tpu"),
    "mxu_cols": _f("count", "tpu npu", "tpu"),
    "mxu_count": _f("count", "tpu npu", "tpu"),
    "dataflow": _f("str", "tpu npu", choices=("ws", "os", "is")),
    "dsp_slices": _f("count", "fpga", "fpga"),
    "luts": _f("count", "fpga"),
    "slr_count": _f("count", "fpga"),
    "mac_count": _f("count", "npu"),
    "supported_ops": _f("str_list", "npu"),
}
# Sub-tables of [compute]: name -> (classes allowed, classes required).
COMPUTE_SUBTABLES = {
    "matrix": (_ALL, _NONE),
    "vector": (_ALL, _NONE),
    "macs_per_dsp": (frozenset({"fpga"}), frozenset({"fpga"})),
    "overlay": (frozenset({"fpga"}), frozenset({"fpga"})),
}
OVERLAY = {
    "name": _f("str", required="*"),
    "cores": _f("count", required="*"),
    "pixel_parallelism": _f("count", required="*"),
    "input_channel_parallelism": _f("count", required="*"),
    "output_channel_parallelism": _f("count", required="*"),
    "clock": _f("hz", required="*"),
}
ONCHIP_MEMORY = {
    "l2_cache": _f("bytes", "gpu npu", "gpu"),
    "l3_cache": _f("bytes", "gpu cpu", "cpu"),
    "shared_mem_per_sm": _f("bytes", "gpu npu"),
    "register_file_per_sm": _f("bytes", "gpu npu"),
    "unified_buffer": _f("bytes", "tpu"),
    "accumulator": _f("bytes", "tpu"),
    "vmem": _f("bytes", "tpu"),
    "unified_buffer_bandwidth": _f("bytes_per_s", "tpu"),
    "bram": _f("bytes", "fpga", "fpga"),
    "uram": _f("bytes", "fpga", "fpga"),
    "sram": _f("bytes", "npu"),
}
OFFCHIP_MEMORY = {
    "technology": _f("str", required="*", choices=MEMORY_TECHNOLOGIES),
    "capacity": _f("bytes", required="gpu tpu fpga npu"),
    "bandwidth": _f("bytes_per_s", required="*"),
    "bus_width_bits": _f("count"),
    "channels": _f("count"),
}
HOST_LINK = {
    "kind": _f("str", required="*", choices=HOST_LINK_KINDS),
    "bandwidth": _f("bytes_per_s", required="*"),
}
PEER_LINK = {
    "kind": _f("str", required="*", choices=PEER_LINK_KINDS),
    "links": _f("count"),
    "per_link_bandwidth": _f("bytes_per_s", required="*"),
}
POWER = {
    "tdp": _f("w", required="*"),
    "idle": _f("w"),
    "min": _f("w"),
    "measured_min": _f("w"),
    "measured_mean": _f("w"),
    "measured_max": _f("w"),
}
# Top-level tables: name -> (field spec, classes allowed, classes required).
SECTIONS: dict[str, tuple[dict[str, FieldSpec], frozenset[str], frozenset[str]]] = {
    "compute": (COMPUTE, _ALL, _ALL),
    "onchip_memory": (ONCHIP_MEMORY, _ALL, _ALL),
    "offchip_memory": (OFFCHIP_MEMORY, _ALL, _ALL - {"npu"}),
    "secondary_memory": (OFFCHIP_MEMORY, _ALL, _NONE),
    "host_link": (HOST_LINK, _ALL - {"cpu"}, _ALL - {"cpu"}),
    "peer_link": (PEER_LINK, frozenset({"gpu", "tpu"}), _NONE),
    "power": (POWER, _ALL, _ALL),
}

PEAK_KEY = re.compile(r"^peak_(tflops|tops)_([a-z0-9]+?)(?:_(dense|sparse))?$")


def fail(source: str, field: str, value: object, problem: str) -> NoReturn:
    """Raise the ConfigError every check in this package raises."""
    raise ConfigError(source=source, field=field, value=value, problem=problem)


def match_key(key: str, spec: dict[str, FieldSpec]) -> tuple[str, str | None] | None:
    """(base name, unit suffix or None) of a TOML key, or None when the key is not in `spec`."""
    if key in spec and spec[key].kind not in UNITS:
        return key, None
    for base, field in spec.items():
        if field.kind in UNITS and key.startswith(base + "_"):
            unit = key[len(base) + 1 :]
            if unit in UNITS[field.kind]:
                return base, unit
    return None


def check_number(source: str, path: str, value: object, integer: bool = False) -> float:
    """A finite number > 0 (an int when `integer`); bools are not numbers here."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        fail(source, path, value, "must be a number")
    if integer and not isinstance(value, int):
        fail(source, path, value, "must be a whole number (a count)")
    if not math.isfinite(value) or value <= 0:
        fail(source, path, value, "must be greater than zero")
    return float(value)


def check_string(source: str, path: str, value: object, choices: tuple[str, ...] = ()) -> str:
    """A non-empty string, one of `choices` when given."""
    if not isinstance(value, str) or not value.strip():
        fail(source, path, value, "must be a non-empty string")
    if choices and value not in choices:
        fail(source, path, value, f"unknown value; choose one of: {', '.join(choices)}")
    return value


def check_table(source: str, path: str, value: object) -> dict[str, object]:
    """A TOML table (a dict)."""
    if not isinstance(value, dict):
        fail(source, path, value, "must be a table")
    return value


def check_sources(source: str, raw: object) -> dict[str, str]:
    """The [sources] table: dotted field path -> text starting with one of SOURCE_PREFIXES."""
    table = check_table(source, "sources", raw)
    out: dict[str, str] = {}
    for key, text in table.items():
        if not isinstance(text, str) or not text.strip().startswith(SOURCE_PREFIXES):
            fail(source, f"sources.{key}", text,
                 f"must be text starting with one of: {' '.join(SOURCE_PREFIXES)}")
        out[key] = text.strip()
    return out


def declared(path: str, device_class: str) -> bool:
    """Whether dotted `path` (a key as written, any unit) is a field a `device_class` profile
    may have; used for `not found:` sources, which name absent fields."""
    parts = path.split(".")
    if len(parts) == 1:
        return parts[0] in TOP_LEVEL
    section, key = parts[0], parts[-1]
    if section not in SECTIONS or device_class not in SECTIONS[section][1]:
        return False
    if len(parts) == 2:
        matched = match_key(key, SECTIONS[section][0])
        return matched is not None and device_class in SECTIONS[section][0][matched[0]].allowed
    if section != "compute" or len(parts) != 3 or parts[1] not in COMPUTE_SUBTABLES:
        return False
    if device_class not in COMPUTE_SUBTABLES[parts[1]][0]:
        return False
    if parts[1] in ("matrix", "vector"):
        found = PEAK_KEY.match(key)
        return found is not None and found.group(2) in PRECISIONS
    if parts[1] == "macs_per_dsp":
        return key in DSP_OPERAND_WIDTHS
    return match_key(key, OVERLAY) is not None


def check_cited(source: str, device_class: str, numeric: dict[str, object], leaves: set[str],
                sources: dict[str, str]) -> None:
    """Every numeric field has a source; every source names a field that is present, except a
    `not found:` source, which names a declared field that is absent."""
    for path, value in numeric.items():
        if path not in sources:
            fail(source, path, value, "numeric field has no entry in [sources]")
    for key, text in sources.items():
        if text.startswith(NOT_FOUND):
            if key in leaves:
                fail(source, f"sources.{key}", text, "says 'not found' but the field has a value")
            if not declared(key, device_class):
                fail(source, f"sources.{key}", text, "names no field of this profile's class")
        elif key not in leaves:
            fail(source, f"sources.{key}", text, "names no field present in this file")
