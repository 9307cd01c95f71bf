"""Typed field specs shared by every hardware-data loader (links, storage, datasets, systems).

A profile is a TOML file: one table of fields whose keys carry their unit
(`bandwidth_gb_s_per_direction`, `latency_us`), plus a `[sources]` table that maps each
field name (dotted for sub-tables: ``"host.dram_gb"``) to where the figure came from.
A loader declares its fields once as a tuple of `Field`s and calls `parse_profile`, which
rejects, with `ConfigError(file, field, value, problem)`:

- keys that are not declared (typos), declared required keys that are missing;
- wrong types (a bool where a number is due, 1.5 where an integer is due, NaN or inf);
- impossible values (bandwidth <= 0, negative sizes, a count of 0, a kind not in the list);
- a sourced field (every number, and any field declared ``sourced=True``) without a
  `[sources]` entry, and `[sources]` entries naming no field or not starting with one of
  `SOURCE_PREFIXES`.

Source vocabulary (the first word tells how far to trust the figure):
``[TAG] ...`` a tag of `shared/reference/hardware_specs.csv`; ``datasheet: ...`` a primary
document read for this file; ``derived: ...`` computed from cited inputs, formula shown;
``defined: ...`` a choice made by this profile (a synthetic dataset, a system's make-up);
``proxy: ...`` a cited figure for a neighbouring thing standing in for this one;
``unverified: ...`` a datasheet figure recalled but not re-read; ``assumed: ...`` a
placeholder with no source; ``not found: ...`` explains why an optional field is absent
(it may not stand beside a value). `flagged_fields` lists the last three kinds so reports can
show which results rest on them.

Example::

    FIELDS = (Field("latency_us", float, scale=1e-6, low=0.0, attr="latency_s"),)
    values, sources = parse_profile(read_toml(path), FIELDS, str(path))
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelsim.datafiles import builtin_files
from accelsim.errors import ConfigError, UnknownNameError

SOURCE_PREFIXES = ("[", "datasheet:", "derived:", "defined:", "proxy:", "unverified:",
                   "assumed:", "not found:")
FLAGGED_PREFIXES = ("proxy:", "unverified:", "assumed:")

GB = 1e9  # the reference's GB, MB and KB are powers of ten
MB = 1e6
KB = 1e3


@dataclass(frozen=True)
class Field:
    """One key of a profile. `kind` is the TOML type (a tuple accepts several, e.g.
    ``(str, dict)``); a number is multiplied by `scale` into SI and stored as `si_type`
    under `attr`. Bounds: value > `low` (`low_open`) or >= `low`; value <= `high`."""

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


def positive(key: str, scale: float = 1.0, attr: str | None = None, **kw: Any) -> Field:
    """A number that must be > 0 (bandwidths, sizes, rates)."""
    return Field(key, float, scale=scale, low=0.0, low_open=True, attr=attr, **kw)


def non_negative(key: str, scale: float = 1.0, attr: str | None = None, **kw: Any) -> Field:
    """A number that must be >= 0 (latencies, energies, costs)."""
    return Field(key, float, scale=scale, low=0.0, attr=attr, **kw)


def count(key: str, **kw: Any) -> Field:
    """An integer that must be >= 1 (counts, lanes, queue depths)."""
    return Field(key, int, low=1.0, si_type=int, **kw)


def fraction(key: str, **kw: Any) -> Field:
    """A number in (0, 1] (efficiencies)."""
    return Field(key, float, low=0.0, low_open=True, high=1.0, **kw)


def text(key: str, choices: tuple[str, ...] = (), **kw: Any) -> Field:
    """A non-empty string, optionally one of `choices`."""
    return Field(key, str, choices=choices, si_type=str, **kw)


def flag(key: str, **kw: Any) -> Field:
    """A boolean hardware fact; sourced by default."""
    return Field(key, bool, si_type=bool, sourced=kw.pop("sourced", True), **kw)


def read_toml(path: Path) -> dict[str, Any]:
    """Parse `path`; a missing or malformed file is a ConfigError naming it."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(str(path), "<file>", str(path), "no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "<file>", str(path), f"not valid TOML: {exc}") from None


def find_profile(name_or_path: str | Path, pattern: str, what: str) -> Path:
    """A built-in profile by name (file stem under hw_profiles/ matching `pattern`) or a
    user file by path (a Path, or a string ending in .toml)."""
    if isinstance(name_or_path, Path) or str(name_or_path).endswith(".toml"):
        return Path(name_or_path)
    files = builtin_files("hw_profiles", pattern)
    if name_or_path not in files:
        raise UnknownNameError(what, str(name_or_path), list(files))
    return files[name_or_path]


_TYPE_NAMES = {float: "number", int: "integer", str: "string", bool: "boolean", dict: "table"}


def _check_value(f: Field, value: Any, source: str, path: str) -> Any:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    kinds = f.kinds
    ok = (
        (bool in kinds and isinstance(value, bool))
        or (str in kinds and isinstance(value, str))
        or (int in kinds and is_number and isinstance(value, int))
        or (float in kinds and is_number)
    )
    if not ok:
        names = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
        raise ConfigError(source, path, value, f"expected {names}, got {type(value).__name__}")
    if isinstance(value, str):
        if not value.strip():
            raise ConfigError(source, path, value, "must not be empty")
        if f.choices and value not in f.choices:
            raise ConfigError(source, path, value, f"must be one of {', '.join(f.choices)}")
        return value
    if isinstance(value, bool):
        return value
    if not math.isfinite(value):
        raise ConfigError(source, path, value, "must be a finite number")
    if f.low is not None and (value <= f.low if f.low_open else value < f.low):
        rel = ">" if f.low_open else ">="
        raise ConfigError(source, path, value, f"must be {rel} {f.low:g}")
    if f.high is not None and value > f.high:
        raise ConfigError(source, path, value, f"must be <= {f.high:g}")
    # dividing by an exact power of ten keeps 50 us == 5e-05 s exactly
    si = value * f.scale if f.scale >= 1 else value / round(1 / f.scale)
    return int(round(si)) if f.si_type is int else float(si)


def parse_fields(raw: Mapping[str, Any], fields: Sequence[Field], source: str,
                 prefix: str = "") -> dict[str, Any]:
    """Check `raw` against `fields`; return {attr: SI value}, None for absent optionals.
    A sub-table comes back as a nested dict; `prefix` dots the paths in error messages."""
    known = {f.key: f for f in fields}
    for key, value in raw.items():
        if key not in known:
            raise ConfigError(source, prefix + key, value,
                              f"unknown key; expected one of {', '.join(sorted(known))}")
    out: dict[str, Any] = {}
    for f in fields:
        path = prefix + f.key
        if f.key not in raw:
            if f.required:
                raise ConfigError(source, path, None, "missing required key")
            out[f.name] = None
            continue
        value = raw[f.key]
        if isinstance(value, dict) and dict in f.kinds:
            out[f.name] = parse_fields(value, f.sub, source, path + ".")
        else:
            out[f.name] = _check_value(f, value, source, path)
    return out


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def _sourced_paths(raw: Mapping[str, Any], fields: Sequence[Field],
                   prefix: str = "") -> tuple[set[str], set[str]]:
    """(every declared path, the paths present in `raw` that need a source)."""
    declared: set[str] = set()
    needed: set[str] = set()
    for f in fields:
        path = prefix + f.key
        declared.add(path)
        value = raw.get(f.key)
        if f.sub:
            sub_raw = value if isinstance(value, dict) else {}
            d, n = _sourced_paths(sub_raw, f.sub, path + ".")
            declared |= d
            needed |= n
        if f.key in raw and f.needs_source and not isinstance(value, dict):
            needed.add(path)
    return declared, needed


def parse_profile(raw: Mapping[str, Any], fields: Sequence[Field],
                  source: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Validate a whole profile: its fields and its `[sources]` table.
    Returns (values as from `parse_fields`, {dotted field path: source text})."""
    body = {k: v for k, v in raw.items() if k != "sources"}
    sources_raw = raw.get("sources")
    if not isinstance(sources_raw, dict):
        raise ConfigError(source, "sources", sources_raw,
                          "missing [sources] table (field name -> where the figure came from)")
    values = parse_fields(body, fields, source)
    sources = _flatten(sources_raw)
    declared, needed = _sourced_paths(body, fields)
    for path, text_ in sources.items():
        where = f"sources.{path}"
        if path not in declared:
            raise ConfigError(source, where, text_, "names no field of this profile")
        if not isinstance(text_, str) or not text_.strip().startswith(SOURCE_PREFIXES):
            raise ConfigError(source, where, text_,
                              f"must be text starting with one of {' '.join(SOURCE_PREFIXES)}")
        if text_.strip().startswith("not found:") and path in needed:
            raise ConfigError(source, where, text_, "says 'not found' but the field has a value")
    for path in sorted(needed - set(sources)):
        value: Any = body
        for part in path.split("."):
            value = value[part]
        raise ConfigError(source, path, value, "has no entry in [sources]")
    return values, sources


def flagged_fields(sources: Mapping[str, str]) -> tuple[str, ...]:
    """Fields resting on a proxy, an unverified recollection or an assumption."""
    return tuple(sorted(k for k, v in sources.items() if v.strip().startswith(FLAGGED_PREFIXES)))
