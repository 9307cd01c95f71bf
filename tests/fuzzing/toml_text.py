"""A small TOML writer for fuzzed documents: whatever values a mutation put in (NaN, inf,
huge integers, empty tables, lists of mixed types) are written as TOML would spell them, so the
loader, not the writer, decides what is wrong."""

from __future__ import annotations

import json
import math
import re
from typing import Any

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key)


def value_text(value: Any) -> str:
    """One TOML value: floats keep nan/inf, strings are JSON-escaped basic strings, lists and
    dicts inline."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {value_text(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value))


def dumps(doc: dict[str, Any]) -> str:
    """`doc` as TOML text: scalars first, then one [table] header per nested dict."""
    lines: list[str] = []

    def table(d: dict[str, Any], path: list[str]) -> None:
        subs = {k: v for k, v in d.items() if isinstance(v, dict)}
        if path:
            lines.append("[" + ".".join(_key(p) for p in path) + "]")
        lines.extend(f"{_key(k)} = {value_text(v)}" for k, v in d.items() if k not in subs)
        for k, v in subs.items():
            table(v, [*path, k])

    table(doc, [])
    return "\n".join(lines) + "\n"
