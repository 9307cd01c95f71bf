"""Efficiency factors of the class models: `hw_profiles/efficiency/<class>.toml`.

Each file has a `[fitted]` table (factors fitted to measurements; the `[sources]` entry of each
starts with "fitted:" and names the rows of calibration_measurements.csv by id), an `[assumed]`
table (software choices not on any datasheet: tile shapes, launch latency; "assumed:" sources)
and `[sources]`. Every number must have a source. Loaded once per class (cached).

    >>> load_efficiency("gpu")["fitted.tensor_core_efficiency"]  # doctest: +SKIP
    0.7
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from typing import Any

from accelsim.datafiles import builtin_files
from accelsim.errors import ConfigError, UnknownNameError

SECTIONS = ("fitted", "assumed")
PREFIXES = {"fitted": ("fitted:",), "assumed": ("assumed:", "derived:", "[")}


def _flatten(prefix: str, table: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        path = f"{prefix}.{key}"
        if isinstance(value, dict):
            out.update(_flatten(path, value))
        else:
            out[path] = value
    return out


def _check_value(source: str, path: str, value: Any) -> None:
    items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int | float) or item <= 0:
            raise ConfigError(source, path, value, "must be a positive number (or a list of them)")


@lru_cache(maxsize=8)
def load_efficiency(device_class: str) -> dict[str, Any]:
    """Flat {"fitted.name": value, "assumed.table.name": value} of one class, validated."""
    files = builtin_files("hw_profiles", "efficiency/*.toml")
    if device_class not in files:
        raise UnknownNameError("efficiency file", device_class, list(files))
    source = str(files[device_class])
    raw = tomllib.loads(files[device_class].read_text(encoding="utf-8"))
    unknown = set(raw) - {*SECTIONS, "sources"}
    if unknown:
        raise ConfigError(source, sorted(unknown)[0], raw[sorted(unknown)[0]],
                          f"unknown table; allowed: {', '.join((*SECTIONS, 'sources'))}")
    sources = raw.get("sources", {})
    values: dict[str, Any] = {}
    for section in SECTIONS:
        for path, value in _flatten(section, raw.get(section, {})).items():
            _check_value(source, path, value)
            cited = sources.get(path)
            if not isinstance(cited, str) or not cited.startswith(PREFIXES[section]):
                raise ConfigError(source, f"sources.{path}", cited,
                                  f"needs a source starting with {' or '.join(PREFIXES[section])}")
            values[path] = value
    stale = set(sources) - set(values)
    if stale:
        raise ConfigError(source, f"sources.{sorted(stale)[0]}", None, "names no field")
    return values
