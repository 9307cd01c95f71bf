"""Measured element-pass tables: a stack's time per element of numpy's per-call passes over
an array, by the array's working set, as a stack file gives them (`[cpu_passes]`, read by the
stack loader `accelsim.profiles.software`; priced by the CPU class model,
`accelsim.devices.cpu.passes`; written by `accelsim calibrate`).

    table = PassTable((1 << 21, 1 << 25), (1.75e-9, 3.4e-9))  # bytes: 2 and 32 MiB of fp32
    table.s_per_element(np.array([1 << 23]))     # log-log between the points, clamped outside

Passes (`PASS_NAMES`), each what numpy's kernels do per call (`accelsim.kernels.execute`):
- `cast_<fp16|bf16>`: an array's rounding to the format (`formats.round_to_format`: fp32 read,
  narrow written, narrow read, fp32 written), per element; working set: the fp32 array. The
  narrow-float kernels round a matmul's weight, input and output in every call: three passes;
  and every other op's parameters (`rounded_params`: an embedding's whole table).
- `quantize_int8`: `quantize.quantize_int8` of an fp32 operand (abs, max, divide, round, clip,
  cast), per operand element; working set: the fp32 operand (each GEMM operand on its own).
- `gemv_fp32`: a GEMV-shaped fp32 matmul (m or n of 1: BLAS streams the matrix once), per
  element of its operands; working set: their fp32 bytes.

The cost per element is not one rate: it grows as the array leaves the caches (on the 2-core
VM this was built on, the bf16 cast took 1.75 ns per element at 0.5 M elements (2 MiB of fp32)
and 3.1-3.6 at 4-8 M (16-32 MiB), `benchmarks/results/calibrate_faults.md`; a later
calibration's own table, 1.1 ns at 0.5 MiB to 3.5 at 64 MiB). The VM's reported L3 size is
not usable, so no cache knee is assumed: the measured
table is interpolated log-log and clamped at its ends.

TOML (a stack's optional `[cpu_passes.<pass>]`, one `[sources]` entry `cpu_passes.<pass>`):

    [cpu_passes.cast_bf16]
    working_set_bytes = [524288, 1048576, ...]   # strictly increasing, > 0
    ns_per_element = [1.75, 2.2, ...]             # same length, > 0
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelsim.errors import ConfigError
from accelsim.schema import SOURCE_PREFIXES

PASS_NAMES = ("cast_fp16", "cast_bf16", "quantize_int8", "gemv_fp32")
TABLE = "cpu_passes"
NS = 1e-9
MAX_POINTS = 64
MAX_NS_PER_ELEMENT = 1e6  # NB: a millisecond per element is no element pass


@dataclass(frozen=True)
class PassTable:
    """Measured seconds per element (`s_per_element_points`) at each working set
    (`working_set_bytes`, strictly increasing)."""

    working_set_bytes: tuple[float, ...]
    s_per_element_points: tuple[float, ...]

    def s_per_element(self, working_set_bytes: np.ndarray | float) -> np.ndarray:
        """Seconds per element at each working set, bytes: exact at the table's points,
        linear in log(working set) -> log(time) between them (monotone between two points),
        the end value outside the table (clamped). NB: no extrapolation beyond what was
        measured."""
        ws = np.maximum(np.asarray(working_set_bytes, dtype=float), 1.0)
        x = np.log(np.asarray(self.working_set_bytes))
        y = np.log(np.asarray(self.s_per_element_points))
        return np.exp(np.interp(np.log(ws), x, y))

    def time_s(self, elements: np.ndarray, working_set_bytes: np.ndarray) -> np.ndarray:
        """Seconds for `elements` at `working_set_bytes` each (0 where no element)."""
        elements = np.asarray(elements, dtype=float)
        return np.where(elements > 0, elements * self.s_per_element(working_set_bytes), 0.0)


def _numbers(value: Any, src: str, path: str) -> tuple[float, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(src, path, value, "expected a non-empty list of numbers")
    if len(value) > MAX_POINTS:
        raise ConfigError(src, path, len(value), f"at most {MAX_POINTS} points")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int | float) or \
                not math.isfinite(item) or item <= 0:
            raise ConfigError(src, path, item, "every value must be a finite number > 0")
    return tuple(float(v) for v in value)


def parse_pass_table(name: str, raw: Any, src: str) -> PassTable:
    """One `[cpu_passes.<name>]` table, validated (ConfigError naming file, field, value)."""
    where = f"{TABLE}.{name}"
    if name not in PASS_NAMES:
        raise ConfigError(src, where, name, f"unknown pass; expected one of "
                          f"{', '.join(PASS_NAMES)}")
    if not isinstance(raw, dict):
        raise ConfigError(src, where, raw, "expected a table")
    keys = ("working_set_bytes", "ns_per_element")
    for key in raw:
        if key not in keys:
            raise ConfigError(src, f"{where}.{key}", raw[key],
                              f"unknown key; expected one of {', '.join(keys)}")
    for key in keys:
        if key not in raw:
            raise ConfigError(src, f"{where}.{key}", None, "missing required key")
    ws = _numbers(raw["working_set_bytes"], src, f"{where}.working_set_bytes")
    ns = _numbers(raw["ns_per_element"], src, f"{where}.ns_per_element")
    if len(ws) != len(ns):
        raise ConfigError(src, f"{where}.ns_per_element", len(ns),
                          f"needs one value per working set ({len(ws)})")
    if any(b <= a for a, b in zip(ws, ws[1:], strict=False)):
        raise ConfigError(src, f"{where}.working_set_bytes", list(ws),
                          "must be strictly increasing")
    if max(ns) > MAX_NS_PER_ELEMENT:
        raise ConfigError(src, f"{where}.ns_per_element", max(ns),
                          f"must be <= {MAX_NS_PER_ELEMENT:g}")
    return PassTable(ws, tuple(v * NS for v in ns))


def split_pass_tables(raw: Mapping[str, Any], src: str
                      ) -> tuple[dict[str, Any], dict[str, PassTable], dict[str, str]]:
    """(`raw` less its `[cpu_passes]` tables and their sources, the tables by pass, their
    source texts by path): a stack file's pass tables, validated apart from the schema's
    scalar fields. Each table needs a `[sources]` entry `cpu_passes.<pass>`."""
    if TABLE not in raw:
        return dict(raw), {}, {}
    tables_raw = raw[TABLE]
    if not isinstance(tables_raw, dict) or not tables_raw:
        raise ConfigError(src, TABLE, tables_raw, "expected a table of pass tables (at least "
                          "one: [cpu_passes.<pass>]; or drop the table)")
    tables = {name: parse_pass_table(name, t, src) for name, t in tables_raw.items()}
    sources = dict(raw.get("sources") or {}) if isinstance(raw.get("sources"), dict) else {}
    nested = sources.pop(TABLE, {})
    texts = {f"{TABLE}.{k}": v for k, v in (nested.items() if isinstance(nested, dict) else ())}
    texts.update({k: sources.pop(k) for k in list(sources) if k.startswith(f"{TABLE}.")})
    for path, text in texts.items():
        if path.removeprefix(f"{TABLE}.") not in tables:
            raise ConfigError(src, f"sources.{path}", text, "names no field present in this file")
        if not isinstance(text, str) or not text.strip().startswith(SOURCE_PREFIXES):
            raise ConfigError(src, f"sources.{path}", text,
                              f"must be text starting with one of {' '.join(SOURCE_PREFIXES)}")
    for name in tables:
        if f"{TABLE}.{name}" not in texts:
            raise ConfigError(src, f"{TABLE}.{name}", None, "has no entry in [sources]")
    rest = {k: v for k, v in raw.items() if k != TABLE}
    if "sources" in raw:
        rest["sources"] = sources
    return rest, tables, {k: v.strip() for k, v in texts.items()}


def pass_table_data(tables: Mapping[str, PassTable]) -> dict[str, dict[str, list[float]]]:
    """`tables` as a stack file's `[cpu_passes]` data (the inverse of `parse_pass_table`)."""
    return {name: {"working_set_bytes": [int(w) for w in t.working_set_bytes],
                   "ns_per_element": [s / NS for s in t.s_per_element_points]}
            for name, t in tables.items()}
