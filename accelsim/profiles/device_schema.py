"""Device-profile schema: which key, in which unit, for which device class.

The contract these tables encode is documented in `accelsim.profiles.devices`. Only what is
device-specific lives here: every key a profile may have, the unit suffixes a key may take
(`clock_mhz` or `clock_ghz` -> `clock_hz`) and the peak-throughput tables. Which class may or
must have a key is not written here: each device class declares it (a `ClassSchema`, its
profile-schema rules) when it registers (`accelsim.devices.registry`, which calls
`register_class_schema`), and `profile_fields(device_class)` assembles the tables and the
registered rules into the `accelsim.schema.Field`s that the shared core checks (types, bounds,
unknown and missing keys, the `[sources]` table).

A key is shared (any class may have it: optional, or with `required=True` required in every
class) or, with `only=True`, a class key that only the classes declaring it may have. A class
lists in its `ClassSchema` the class keys it may have (`may`) and the keys it must have
(`must`: class keys, or shared ones it requires), as dotted paths ("compute.sm_count",
"host_link" for a whole table; the keys of `[secondary_memory]` follow `offchip_memory.*`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from accelsim.physical import BANDWIDTH, BYTES, FLOP_RATE, FREQUENCY, POWER
from accelsim.schema import Field, count, flag, positive, text, texts
from accelsim.workload.ops import OpKind

PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp4", "int8")
INTEGER_PRECISIONS = frozenset({"int8"})
MEMORY_TECHNOLOGIES = (
    "ddr3", "ddr4", "ddr5", "lpddr4", "lpddr4x", "lpddr5", "gddr6", "gddr6x", "hbm2", "hbm2e",
    "hbm3", "hbm3e",
)
# Spelled as the link profiles in hw_profiles/links/ where one exists; "integrated" = an SoC whose
# host CPU shares the device's DRAM.
HOST_LINK_KINDS = (
    "pcie-gen2-x1", "pcie-gen3-x4", "pcie-gen3-x16", "pcie-gen4-x16", "pcie-gen5-x16", "usb3",
    "integrated",
)
PEER_LINK_KINDS = ("nvlink2", "nvlink3", "nvlink4", "ici")
DSP_OPERAND_WIDTHS = ("int8", "int16")
OP_KINDS = tuple(kind.value for kind in OpKind)
PEAK_MODES = ("dense", "sparse")
TERA = 1e12  # peaks are written in TFLOP/s or TOP/s

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
# The physical range of each dimension (`accelsim.physical`).
SPANS = {"bytes": BYTES, "bytes_per_s": BANDWIDTH, "hz": FREQUENCY, "w": POWER}



@dataclass(frozen=True)
class ClassSchema:
    """The profile-schema rules of one device class: the class keys it may have (`may`), the
    keys it must have (`must`), as dotted paths (module docstring), and an optional
    cross-field `check(compute, raw_compute, source)` of its parsed `[compute]` table (a
    `ComputeSpec`, the table as written, the file), raising ConfigError.

        ClassSchema.of(may="compute.cuda_cores peer_link", must="compute.sm_count host_link")
    """

    may: frozenset[str] = frozenset()
    must: frozenset[str] = frozenset()
    check: Callable[[Any, Mapping[str, Any], str], None] | None = None

    @classmethod
    def of(cls, may: str = "", must: str = "",
           check: Callable[[Any, Mapping[str, Any], str], None] | None = None) -> ClassSchema:
        """Rules from space-separated paths."""
        return cls(frozenset(may.split()), frozenset(must.split()), check)


# device class -> its rules, in registration order (filled by `accelsim.devices.registry`)
_CLASS_SCHEMAS: dict[str, ClassSchema] = {}
_BUILTINS_LOADED = False


def load_builtin_classes() -> None:
    """Register the built-in device classes once (plug-in loading: importing
    `accelsim.devices` imports its class folders, each registering itself)."""
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        import accelsim.devices  # noqa: F401 - the one sanctioned upward import: plug-ins


_GENERATION = 0


def register_class_schema(device_class: str, schema: ClassSchema | None) -> None:
    """Make `device_class` a profile class with these rules (`accelsim.devices.registry`
    calls it; ValueError naming a path no table has); None forgets it (a test's toy class)."""
    if schema is None:
        _CLASS_SCHEMAS.pop(device_class, None)
    else:
        unknown = sorted((schema.may | schema.must) - _paths())
        if unknown:
            raise ValueError(f"class '{device_class}': no profile key {', '.join(unknown)}")
        _CLASS_SCHEMAS[device_class] = schema
    profile_fields.cache_clear()
    global _GENERATION
    _GENERATION += 1


def schema_generation() -> int:
    """How many times the class rules changed: a key for caches of validated profiles."""
    return _GENERATION


def device_classes() -> tuple[str, ...]:
    """The classes a profile's `class` may name, in registration order."""
    load_builtin_classes()
    return tuple(_CLASS_SCHEMAS)


def class_schema(device_class: str) -> ClassSchema:
    """The rules of a registered profile class (KeyError otherwise)."""
    if device_class not in _CLASS_SCHEMAS:
        load_builtin_classes()
    return _CLASS_SCHEMAS[device_class]


def class_field() -> Field:
    """The top-level `class` key: one of the registered classes."""
    return text("class", device_classes())


def _rule(path: str, only: bool, required: bool, device_class: str, what: str
          ) -> dict[str, Any]:
    """`required` and `rejected` of the key (or table) `path` in a profile of `device_class`:
    a shared key is allowed everywhere, a class key only where a class declares it."""
    classes = device_classes()
    declared = {c for c, s in _CLASS_SCHEMAS.items() if path in s.may | s.must}
    allowed = declared if only else set(classes)
    if device_class not in allowed:
        return {"required": False, "rejected": f"not a {what} of class '{device_class}' "
                f"(only {', '.join(sorted(allowed))})"}
    must = path in _CLASS_SCHEMAS[device_class].must if device_class in _CLASS_SCHEMAS else False
    return {"required": required or must, "rejected": None}


@dataclass(frozen=True)
class FieldSpec:
    """One profile key. `kind` is a dimension in UNITS, or "count", "str", "str_list",
    "bool"; `only`: a class key (module docstring); `required`: required in every class that
    may have it."""

    kind: str
    only: bool = False
    required: bool = False
    choices: tuple[str, ...] = ()

    def field(self, base: str, device_class: str, path: str) -> Field:
        """The key `base` (dotted `path`) as the schema core checks it in a profile of
        `device_class`: a dimensioned key is written `<base>_<unit>` and stored as
        `<base><SI suffix>`."""
        kw = _rule(path, self.only, self.required, device_class, "field")
        if self.kind == "str":
            return text(base, self.choices, **kw)
        if self.kind == "str_list":
            return texts(base, self.choices, **kw)
        if self.kind == "count":
            return count(base, **kw)
        if self.kind == "bool":
            return flag(base, **kw)
        return positive(base, attr=base + SI_SUFFIX[self.kind],
                        units=tuple(UNITS[self.kind].items()), span=SPANS[self.kind],
                        si_type=int if self.kind == "bytes" else float, **kw)


def _f(kind: str, only: bool = False, required: bool = False,
       choices: tuple[str, ...] = ()) -> FieldSpec:
    return FieldSpec(kind, only, required, choices)


_C = True  # `only`: a class key, allowed where a class declares it
TOP_LEVEL = {
    "display_name": _f("str", required=True),
    "vendor": _f("str", required=True),
    "notes": _f("str"),
    # A product sold for inference only (no training support in its toolchain), sourced.
    "inference_only": _f("bool"),
    # The foundry node as named (TSMC 12FFN -> 12, 4N -> 4), nm: scales energy per op (energy).
    "process_node_nm": _f("count"),
}
COMPUTE = {
    "clock": _f("hz"),
    "base_clock": _f("hz", _C),
    "max_turbo_clock": _f("hz", _C),
    "all_core_turbo_clock": _f("hz", _C),
    # Single-thread speed as an Ice Lake (Sunny Cove) clock: max turbo x IPC relative to it.
    "single_thread_equiv_clock": _f("hz", _C),
    "sm_count": _f("count", _C),
    "cuda_cores": _f("count", _C),
    "tensor_cores": _f("count", _C),
    "cores": _f("count", _C),
    "threads": _f("count", _C),
    "sockets": _f("count", _C),
    "simd_width_bits": _f("count", _C),
    "fma_units_per_core": _f("count", _C),
    "mxu_rows": _f("count", _C),
    "mxu_cols": _f("count", _C),
    "mxu_count": _f("count", _C),
    "dataflow": _f("str", _C, choices=("ws", "os", "is")),
    "dsp_slices": _f("count", _C),
    "luts": _f("count", _C),
    "slr_count": _f("count", _C),
    "mac_count": _f("count", _C),
    "supported_ops": _f("str_list", _C, choices=OP_KINDS),
    # The MAC units skip (clock-gate) a multiply with a zero operand: energy, not time.
    "zero_operand_gating": _f("bool"),
}
# Sub-tables of [compute]: name -> (only, required) as for a key.
COMPUTE_SUBTABLES = {
    "matrix": (False, False),
    "vector": (False, False),
    "macs_per_dsp": (_C, False),
    "overlay": (_C, False),
}
OVERLAY = {
    "name": _f("str", required=True),
    "cores": _f("count", required=True),
    "pixel_parallelism": _f("count", required=True),
    "input_channel_parallelism": _f("count", required=True),
    "output_channel_parallelism": _f("count", required=True),
    "clock": _f("hz", required=True),
    "images_per_core": _f("count"),  # optional: batch engines sharing a core's weight fetch
}
ONCHIP_MEMORY = {
    "l2_cache": _f("bytes", _C),
    "l3_cache": _f("bytes", _C),  # optional: a Cortex-A72 has none
    "shared_mem_per_sm": _f("bytes", _C),
    "register_file_per_sm": _f("bytes", _C),
    "unified_buffer": _f("bytes", _C),
    "accumulator": _f("bytes", _C),
    "vmem": _f("bytes", _C),
    "unified_buffer_bandwidth": _f("bytes_per_s", _C),
    "bram": _f("bytes", _C),
    "uram": _f("bytes", _C),  # optional: a ZU9EG has none
    "sram": _f("bytes", _C),
}
OFFCHIP_MEMORY = {
    "technology": _f("str", required=True, choices=MEMORY_TECHNOLOGIES),
    "capacity": _f("bytes"),
    "bandwidth": _f("bytes_per_s", required=True),
    "bus_width_bits": _f("count"),
    "channels": _f("count"),
}
HOST_LINK = {
    "kind": _f("str", required=True, choices=HOST_LINK_KINDS),
    "bandwidth": _f("bytes_per_s", required=True),
}
PEER_LINK = {
    "kind": _f("str", required=True, choices=PEER_LINK_KINDS),
    "links": _f("count"),
    "per_link_bandwidth": _f("bytes_per_s", required=True),
}
POWER = {
    "tdp": _f("w", required=True),
    "idle": _f("w"),
    "min": _f("w"),
    "measured_min": _f("w"),
    "measured_mean": _f("w"),
    "measured_max": _f("w"),
    # false: the TDP is not this device's known limit (a VM without a power reading): it
    # prices static power but does not throttle the clock (`registry.profile_power_limits`)
    "limits_clock": _f("bool"),
}
# Top-level tables: name -> (field spec, the path prefix of its keys, only, required).
SECTIONS: dict[str, tuple[dict[str, FieldSpec], str, bool, bool]] = {
    "compute": (COMPUTE, "compute", False, True),
    "onchip_memory": (ONCHIP_MEMORY, "onchip_memory", False, True),
    "offchip_memory": (OFFCHIP_MEMORY, "offchip_memory", False, False),
    "secondary_memory": (OFFCHIP_MEMORY, "offchip_memory", False, False),
    "host_link": (HOST_LINK, "host_link", _C, False),
    "peer_link": (PEER_LINK, "peer_link", _C, False),
    "power": (POWER, "power", False, True),
}


def _paths() -> set[str]:
    """Every dotted path a class's rules may name."""
    tables = {"": TOP_LEVEL, "compute.overlay": OVERLAY,
              **{prefix: spec for spec, prefix, _, _ in SECTIONS.values()}}
    keys = {f"{prefix}.{base}".lstrip(".") for prefix, spec in tables.items() for base in spec}
    return keys | set(SECTIONS) | {f"compute.{name}" for name in COMPUTE_SUBTABLES}


def peak_key(precision: str, mode: str | None = None) -> str:
    """How a peak is written: `peak_tflops_bf16_dense` (matrix), `peak_tops_int8` (vector)."""
    unit = "tops" if precision in INTEGER_PRECISIONS else "tflops"
    return f"peak_{unit}_{precision}" + (f"_{mode}" if mode else "")


# [compute.matrix] / [compute.vector] key -> (precision, "dense" | "sparse").
MATRIX_PEAKS = {peak_key(p, m): (p, m) for p in PRECISIONS for m in PEAK_MODES}
VECTOR_PEAKS = {peak_key(p): (p, "dense") for p in PRECISIONS}


def _table(name: str, path: str, sub: tuple[Field, ...], device_class: str, only: bool,
           required: bool) -> Field:
    return Field(name, dict, sub=sub, **_rule(path, only, required, device_class, "table"))


def _fields(spec: dict[str, FieldSpec], prefix: str, device_class: str) -> tuple[Field, ...]:
    return tuple(s.field(base, device_class, f"{prefix}.{base}".lstrip("."))
                 for base, s in spec.items())


@cache
def profile_fields(device_class: str) -> tuple[Field, ...]:
    """Every key a profile of `device_class` may have, for `accelsim.schema.parse_profile`;
    keys of other classes are declared `rejected`, so that the error says why. Assembled from
    the tables above and the classes' registered rules (cleared when a class registers)."""
    peaks = {"matrix": MATRIX_PEAKS, "vector": VECTOR_PEAKS}
    subs = {
        **{name: tuple(positive(key, TERA, required=False, span=FLOP_RATE) for key in table)
           for name, table in peaks.items()},
        "macs_per_dsp": tuple(count(width, required=False) for width in DSP_OPERAND_WIDTHS),
        "overlay": _fields(OVERLAY, "compute.overlay", device_class),
    }
    compute = (*_fields(COMPUTE, "compute", device_class),
               *(_table(name, f"compute.{name}", subs[name], device_class, *rule)
                 for name, rule in COMPUTE_SUBTABLES.items()))
    sections = (_table(name, name, compute if name == "compute" else
                       _fields(spec, prefix, device_class), device_class, only, required)
                for name, (spec, prefix, only, required) in SECTIONS.items())
    return (class_field(), *_fields(TOP_LEVEL, "", device_class), *sections)
