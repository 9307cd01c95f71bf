"""Device-profile schema: which key, in which unit, for which device class.

The contract these tables encode is documented in `accelsim.devices.profile`. Only what is
device-specific lives here: the per-class allowed / required sets, the unit suffixes a key may
take (`clock_mhz` or `clock_ghz` -> `clock_hz`) and the peak-throughput tables.
`profile_fields(device_class)` turns them into the `accelsim.schema.Field`s that the shared core
checks (types, bounds, unknown and missing keys, the `[sources]` table).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from accelsim.physical import BANDWIDTH, BYTES, FLOP_RATE, FREQUENCY, POWER
from accelsim.schema import Field, count, flag, positive, text, texts
from accelsim.workload.ops import OpKind

DEVICE_CLASSES = ("cpu", "gpu", "tpu", "fpga", "npu")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")
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

_ALL = frozenset(DEVICE_CLASSES)
_NONE: frozenset[str] = frozenset()


def _rejected(what: str, device_class: str, allowed: frozenset[str]) -> str | None:
    """Why a key of another device class is refused; None when `device_class` may have it."""
    if device_class in allowed:
        return None
    return f"not a {what} of class '{device_class}' (only {', '.join(sorted(allowed))})"


@dataclass(frozen=True)
class FieldSpec:
    """One profile key. `kind` is a dimension in UNITS, or "count", "str", "str_list",
    "bool"."""

    kind: str
    allowed: frozenset[str] = _ALL
    required: frozenset[str] = _NONE
    choices: tuple[str, ...] = ()

    def field(self, base: str, device_class: str) -> Field:
        """The key `base` as the schema core checks it in a profile of `device_class`: a
        dimensioned key is written `<base>_<unit>` and stored as `<base><SI suffix>`."""
        kw = {"required": device_class in self.required,
              "rejected": _rejected("field", device_class, self.allowed)}
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


def _f(kind: str, allowed: str = "", required: str = "",
       choices: tuple[str, ...] = ()) -> FieldSpec:
    allowed_set = frozenset(allowed.split()) if allowed else _ALL
    required_set = _ALL & allowed_set if required == "*" else frozenset(required.split())
    return FieldSpec(kind, allowed_set, required_set, choices)


CLASS_FIELD = text("class", DEVICE_CLASSES)
TOP_LEVEL = {
    "display_name": _f("str", required="*"),
    "vendor": _f("str", required="*"),
    "notes": _f("str"),
    # A product sold for inference only (no training support in its toolchain), sourced.
    "inference_only": _f("bool"),
    # The foundry node as named (TSMC 12FFN -> 12, 4N -> 4), nm: scales energy per op (energy).
    "process_node_nm": _f("count"),
}
COMPUTE = {
    "clock": _f("hz", required="gpu tpu fpga cpu"),
    "base_clock": _f("hz", "gpu cpu"),
    "max_turbo_clock": _f("hz", "cpu"),
    "all_core_turbo_clock": _f("hz", "cpu"),
    # Single-thread speed as an Ice Lake (Sunny Cove) clock: max turbo x IPC relative to it.
    "single_thread_equiv_clock": _f("hz", "cpu"),
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
    "supported_ops": _f("str_list", "npu", choices=OP_KINDS),
    # The MAC units skip (clock-gate) a multiply with a zero operand: energy, not time.
    "zero_operand_gating": _f("bool"),
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
    "images_per_core": _f("count"),  # optional: batch engines sharing a core's weight fetch
}
ONCHIP_MEMORY = {
    "l2_cache": _f("bytes", "gpu npu", "gpu"),
    "l3_cache": _f("bytes", "gpu cpu"),  # optional: a Cortex-A72 has none
    "shared_mem_per_sm": _f("bytes", "gpu npu"),
    "register_file_per_sm": _f("bytes", "gpu npu"),
    "unified_buffer": _f("bytes", "tpu"),
    "accumulator": _f("bytes", "tpu"),
    "vmem": _f("bytes", "tpu"),
    "unified_buffer_bandwidth": _f("bytes_per_s", "tpu"),
    "bram": _f("bytes", "fpga", "fpga"),
    "uram": _f("bytes", "fpga"),  # optional: a ZU9EG has none
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


def peak_key(precision: str, mode: str | None = None) -> str:
    """How a peak is written: `peak_tflops_bf16_dense` (matrix), `peak_tops_int8` (vector)."""
    unit = "tops" if precision in INTEGER_PRECISIONS else "tflops"
    return f"peak_{unit}_{precision}" + (f"_{mode}" if mode else "")


# [compute.matrix] / [compute.vector] key -> (precision, "dense" | "sparse").
MATRIX_PEAKS = {peak_key(p, m): (p, m) for p in PRECISIONS for m in PEAK_MODES}
VECTOR_PEAKS = {peak_key(p): (p, "dense") for p in PRECISIONS}


def _table(name: str, sub: tuple[Field, ...], device_class: str, allowed: frozenset[str],
           required: frozenset[str]) -> Field:
    return Field(name, dict, sub=sub, required=device_class in required,
                 rejected=_rejected("table", device_class, allowed))


def _fields(spec: dict[str, FieldSpec], device_class: str) -> tuple[Field, ...]:
    return tuple(s.field(base, device_class) for base, s in spec.items())


@cache
def profile_fields(device_class: str) -> tuple[Field, ...]:
    """Every key a profile of `device_class` may have, for `accelsim.schema.parse_profile`;
    keys of other classes are declared `rejected`, so that the error says why."""
    peaks = {"matrix": MATRIX_PEAKS, "vector": VECTOR_PEAKS}
    subs = {
        **{name: tuple(positive(key, TERA, required=False, span=FLOP_RATE) for key in table)
           for name, table in peaks.items()},
        "macs_per_dsp": tuple(count(width, required=False) for width in DSP_OPERAND_WIDTHS),
        "overlay": _fields(OVERLAY, device_class),
    }
    compute = (*_fields(COMPUTE, device_class),
               *(_table(name, subs[name], device_class, *sets)
                 for name, sets in COMPUTE_SUBTABLES.items()))
    sections = (_table(name, compute if name == "compute" else _fields(spec, device_class),
                       device_class, allowed, required)
                for name, (spec, allowed, required) in SECTIONS.items())
    return (CLASS_FIELD, *_fields(TOP_LEVEL, device_class), *sections)
