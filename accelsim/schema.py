"""One validation core for every hardware-data file (devices, energy, links, storage, datasets,
systems) and for workload scenarios.

A profile is a TOML file: tables of fields whose keys carry their unit (`latency_us`,
`clock_mhz`), plus a `[sources]` table that maps each field path (dotted for sub-tables:
``"host.dram_gb"``) to where the figure came from. A loader declares its fields once as a tuple
of `Field`s and calls `parse_profile` (or `parse_fields` for files without sources). The
contract, enforced with `ConfigError(file, field, value, problem)`:

- every key is declared (no typos) and every required key is present; a declared key may be
  `rejected` in this variant of the schema (a field of another device class), with the reason;
- values have the declared type: a bool is not a number, 1.5 is not an integer, NaN and inf are
  not numbers, strings are not empty, a list is a non-empty list of distinct `choices`;
- values are possible: bounds (`low`, `high`) and `choices` hold, and a number converted to
  SI lies in its field's physical `span` (`accelsim.physical`: bytes, bandwidths, clocks,
  powers, times, energies), so that no value overflows, vanishes or divides by ~0 downstream;
- a key with `units` is written ``<key>_<unit>`` in any of them, once (``clock_mhz`` or
  ``clock_ghz``), and is converted by that unit's factor;
- every number (and any field declared ``sourced=True``) has a `[sources]` entry; every entry
  starts with one of `SOURCE_PREFIXES` and names a field present in the file, except a
  ``not found:`` entry, which explains why a declared field is absent (never beside a value).

Source vocabulary (the first word tells how far to trust the figure):
``[TAG] ...`` a tag of `shared/reference/hardware_specs.csv`; ``datasheet: ...`` a primary
document read for this file; ``derived: ...`` computed from cited inputs, formula shown;
``defined: ...`` a choice made by this profile (a synthetic dataset, a system's make-up);
``fitted: ...`` fitted to measurements by the named script, on the named rows;
``measured: ...`` measured on the named host and date (`accelsim calibrate`);
``proxy: ...`` a cited figure for a neighbouring thing standing in for this one;
``unverified: ...`` a datasheet figure recalled but not re-read; ``assumed: ...`` a
placeholder with no source; ``not found: ...`` explains why an optional field is absent.
`flagged_fields` lists the proxy, unverified and assumed ones so reports can show which results
rest on them.

Example::

    FIELDS = (Field("latency_us", float, scale=1e-6, low=0.0, attr="latency_s"),)
    values, sources = parse_profile(read_toml(path), FIELDS, str(path))  # accelsim.tomlfiles
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelsim.errors import ConfigError
from accelsim.physical import FRACTION, MAX_COUNT, Span

SOURCE_PREFIXES = ("[", "datasheet:", "derived:", "defined:", "fitted:", "measured:", "proxy:",
                   "unverified:", "assumed:", "not found:")
FLAGGED_PREFIXES = ("proxy:", "unverified:", "assumed:")
NOT_FOUND = "not found:"

GB = 1e9  # the reference's GB, MB and KB are powers of ten
MB = 1e6
KB = 1e3


@dataclass(frozen=True)
class Field:
    """One key of a profile. `kind` is the TOML type (a tuple accepts several, e.g.
    ``(str, dict)``); a number is multiplied by `scale` (or by its unit's factor, for a key with
    `units`: ``(("mhz", 1e6), ("ghz", 1e9))``) into SI and stored as `si_type` under `attr`.
    Bounds: value > `low` (`low_open`) or >= `low`; value <= `high`; the SI value in `span`
    (0 too where `low` allows it). `choices` constrains a string or the items of a list. A
    `rejected` key is recognised but refused, with that reason."""

    key: str
    kind: type | tuple[type, ...]
    scale: float = 1.0
    required: bool = True
    low: float | None = None
    low_open: bool = False
    high: float | None = None
    choices: tuple[str, ...] = ()
    sourced: bool | None = None  # default: numbers are sourced, other fields are not
    sub: tuple[Field, ...] = ()  # the fields of a sub-table
    attr: str | None = None
    si_type: type = float
    units: tuple[tuple[str, float], ...] = ()
    rejected: str | None = None
    span: Span | None = None

    @property
    def name(self) -> str:
        return self.attr or self.key

    @property
    def kinds(self) -> tuple[type, ...]:
        return self.kind if isinstance(self.kind, tuple) else (self.kind,)

    @property
    def needs_source(self) -> bool:
        if self.sourced is not None:
            return self.sourced
        return any(k in (int, float) for k in self.kinds)

    @property
    def spellings(self) -> dict[str, float]:
        """{key as written in TOML: factor to SI}."""
        if not self.units:
            return {self.key: self.scale}
        return {f"{self.key}_{unit}": factor for unit, factor in self.units}

    @property
    def spelling(self) -> str:
        """The key for messages: 'clock_<mhz|ghz>' for a key with units."""
        if not self.units:
            return self.key
        return f"{self.key}_<{'|'.join(unit for unit, _ in self.units)}>"


def positive(key: str, scale: float = 1.0, attr: str | None = None, **kw: Any) -> Field:
    """A number that must be > 0 (bandwidths, sizes, rates)."""
    return Field(key, float, scale=scale, low=0.0, low_open=True, attr=attr, **kw)


def non_negative(key: str, scale: float = 1.0, attr: str | None = None, **kw: Any) -> Field:
    """A number that must be >= 0 (latencies, energies, costs)."""
    return Field(key, float, scale=scale, low=0.0, attr=attr, **kw)


def count(key: str, high: float = MAX_COUNT, **kw: Any) -> Field:
    """An integer in [1, `high`] (counts, lanes, queue depths)."""
    return Field(key, int, low=1.0, high=high, si_type=int, **kw)


def fraction(key: str, **kw: Any) -> Field:
    """A number in (0, 1] (efficiencies), at least `physical.FRACTION.low`."""
    return Field(key, float, low=0.0, low_open=True, high=1.0, span=FRACTION, **kw)


def text(key: str, choices: tuple[str, ...] = (), **kw: Any) -> Field:
    """A non-empty string, optionally one of `choices`."""
    return Field(key, str, choices=choices, si_type=str, **kw)


def texts(key: str, choices: tuple[str, ...], **kw: Any) -> Field:
    """A non-empty list of distinct strings, each one of `choices`; stored as a tuple."""
    return Field(key, list, choices=choices, si_type=tuple, **kw)


def flag(key: str, **kw: Any) -> Field:
    """A boolean hardware fact; sourced by default."""
    return Field(key, bool, si_type=bool, sourced=kw.pop("sourced", True), **kw)




_TYPE_NAMES = {float: "number", int: "integer", str: "string", bool: "boolean", dict: "table",
               list: "list"}


def _check_list(f: Field, value: list[Any], source: str, path: str) -> tuple[str, ...]:
    if not value:
        raise ConfigError(source, path, value, "must not be empty")
    for item in value:
        if item not in f.choices:
            raise ConfigError(source, path, item, f"must be one of {', '.join(f.choices)}")
    if len(set(value)) != len(value):
        raise ConfigError(source, path, value, "lists a value twice")
    return tuple(value)


def _check_value(f: Field, value: Any, scale: float, source: str, path: str) -> Any:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    kinds = f.kinds
    ok = (
        (bool in kinds and isinstance(value, bool))
        or (str in kinds and isinstance(value, str))
        or (list in kinds and isinstance(value, list))
        or (int in kinds and is_number and isinstance(value, int))
        or (float in kinds and is_number)
    )
    if not ok:
        names = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
        raise ConfigError(source, path, value, f"expected {names}, got {type(value).__name__}")
    if isinstance(value, list):
        return _check_list(f, value, source, path)
    if isinstance(value, str):
        if not value.strip():
            raise ConfigError(source, path, value, "must not be empty")
        if f.choices and value not in f.choices:
            raise ConfigError(source, path, value, f"must be one of {', '.join(f.choices)}")
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) > _INT64_MAX:
        raise ConfigError(source, path, value, "is larger than any accepted number (2^63 - 1)")
    if not math.isfinite(value):
        raise ConfigError(source, path, value, "must be a finite number")
    if f.low is not None and (value <= f.low if f.low_open else value < f.low):
        rel = ">" if f.low_open else ">="
        raise ConfigError(source, path, value, f"must be {rel} {f.low:g}")
    if f.high is not None and value > f.high:
        raise ConfigError(source, path, value, f"must be <= {f.high:g}")
    # dividing by an exact power of ten keeps 50 us == 5e-05 s exactly
    si = value * scale if scale >= 1 else value / round(1 / scale)
    zero_ok = si == 0 and f.low == 0 and not f.low_open
    if f.span is not None and not zero_ok and not f.span.contains(si):
        unit = path.rsplit(".", 1)[-1][len(f.key) + 1:] if f.units else ""
        raise ConfigError(source, path, value,
                          f"outside the physical range {f.span.describe(scale, unit)}")
    return int(round(si)) if f.si_type is int else float(si)


_INT64_MAX = 2**63 - 1


def _spelled(fields: Sequence[Field]) -> dict[str, Field]:
    """{key as written: field}, over every unit spelling."""
    return {key: f for f in fields for key in f.spellings}


def parse_fields(raw: Mapping[str, Any], fields: Sequence[Field], source: str,
                 prefix: str = "") -> dict[str, Any]:
    """Check `raw` against `fields`; return {attr: SI value}, None for absent optionals.
    A sub-table comes back as a nested dict; `prefix` dots the paths in error messages."""
    known = {key: f for f in fields for key in f.spellings}
    written: dict[str, str] = {}  # attr -> the key it is written as
    for key, value in raw.items():
        f = known.get(key)
        if f is None:
            expected = ", ".join(sorted(g.spelling for g in fields if not g.rejected))
            raise ConfigError(source, prefix + key, value,
                              f"unknown key; expected one of {expected}")
        if f.rejected:
            raise ConfigError(source, prefix + key, value, f.rejected)
        if f.name in written:
            raise ConfigError(source, prefix + key, value,
                              f"'{f.key}' is given twice (in two units)")
        written[f.name] = key
    out: dict[str, Any] = {}
    for f in fields:
        key = written.get(f.name)
        if key is None:
            if f.required and not f.rejected:
                hint = (f"; write it as {f.spelling}" if f.units
                        else f"; one of {', '.join(f.choices)}" if f.choices else "")
                raise ConfigError(source, prefix + f.key, None, "missing required key" + hint)
            out[f.name] = None
        elif isinstance(raw[key], dict) and dict in f.kinds:
            out[f.name] = parse_fields(raw[key], f.sub, source, f"{prefix}{key}.")
        else:
            out[f.name] = _check_value(f, raw[key], f.spellings[key], source, prefix + key)
    return out


def parse_field(raw: Mapping[str, Any], f: Field, source: str) -> Any:
    """Check the one top-level field `f` of `raw` (a device's class, a medium's kind) before the
    rest, so that a loader can choose the fields of that variant of its schema."""
    return parse_fields({k: v for k, v in raw.items() if k in f.spellings}, (f,), source)[f.name]


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def _field_paths(raw: Mapping[str, Any], fields: Sequence[Field],
                 prefix: str = "") -> tuple[set[str], dict[str, Any], set[str]]:
    """(every declared path in every spelling, {present path: value}, the present paths that
    need a source), for a `raw` that `parse_fields` has accepted."""
    declared: set[str] = set()
    present: dict[str, Any] = {}
    needed: set[str] = set()
    for f in fields:
        if f.rejected:
            continue
        for key in f.spellings:
            path, value = prefix + key, raw.get(key)
            declared.add(path)
            if key in raw:
                present[path] = value
                if f.needs_source and not isinstance(value, dict):
                    needed.add(path)
            if f.sub:
                d, p, n = _field_paths(value if isinstance(value, dict) else {}, f.sub, path + ".")
                declared |= d
                present.update(p)
                needed |= n
    return declared, present, needed


def _check_source(path: str, text_: Any, declared: set[str], present: Mapping[str, Any],
                  source: str) -> str:
    where = f"sources.{path}"
    if not isinstance(text_, str) or not text_.strip().startswith(SOURCE_PREFIXES):
        raise ConfigError(source, where, text_,
                          f"must be text starting with one of {' '.join(SOURCE_PREFIXES)}")
    if text_.strip().startswith(NOT_FOUND):
        if path in present:
            raise ConfigError(source, where, text_, "says 'not found' but the field has a value")
        if path not in declared:
            raise ConfigError(source, where, text_, "names no field of this profile")
    elif path not in present:
        raise ConfigError(source, where, text_, "names no field present in this file")
    return text_.strip()


def parse_profile(raw: Mapping[str, Any], fields: Sequence[Field],
                  source: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Validate a whole profile: its fields and its `[sources]` table.
    Returns (values as from `parse_fields`, {dotted field path as written: source text})."""
    body = {k: v for k, v in raw.items() if k != "sources"}
    sources_raw = raw.get("sources")
    if not isinstance(sources_raw, dict):
        raise ConfigError(source, "sources", sources_raw,
                          "missing [sources] table (field name -> where the figure came from)")
    values = parse_fields(body, fields, source)
    declared, present, needed = _field_paths(body, fields)
    sources = {path: _check_source(path, text_, declared, present, source)
               for path, text_ in _flatten(sources_raw).items()}
    for path in sorted(needed - set(sources)):
        raise ConfigError(source, path, present[path], "has no entry in [sources]")
    return values, sources


def flagged_fields(sources: Mapping[str, str]) -> tuple[str, ...]:
    """Fields resting on a proxy, an unverified recollection or an assumption."""
    return tuple(sorted(k for k, v in sources.items() if v.strip().startswith(FLAGGED_PREFIXES)))
