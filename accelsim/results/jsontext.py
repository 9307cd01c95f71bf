"""JSON text that is JSON: every `--json` writer and JSON file goes through `json_text`.

    json_text({"energy_j_per_token": float("inf")})   # '{..."energy_j_per_token": null,
                                                      #   "not_finite": [...]}'

Python's `json` writes NaN and Infinity, which no JSON parser takes. Here a non-finite float
(or numpy float) becomes null, and a top-level object gains `not_finite`: the paths of the
figures written as null, so a reader can tell "not finite" from "not applicable". numpy
scalars become plain numbers and tuples lists, as `json` would write them.
"""

from __future__ import annotations

import json
import math
from typing import Any

NOT_FINITE_KEY = "not_finite"


def finite(obj: Any, path: str = "", replaced: list[str] | None = None) -> Any:
    """`obj` with non-finite floats as None (their paths appended to `replaced`)."""
    if isinstance(obj, dict):
        return {k: finite(v, f"{path}.{k}" if path else str(k), replaced)
                for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v, f"{path}[{i}]", replaced) for i, v in enumerate(obj)]
    if hasattr(obj, "item") and not isinstance(obj, int | float | str):  # numpy scalars
        try:
            obj = obj.item()
        except (ValueError, TypeError):  # an array of several: left to `json`'s error
            return obj
    if isinstance(obj, float) and not math.isfinite(obj):
        if replaced is not None:
            replaced.append(path or "(value)")
        return None
    return obj


def json_text(obj: Any, indent: int | None = 2, **kw: Any) -> str:
    """`obj` as JSON text without NaN or Infinity (see the module docstring)."""
    replaced: list[str] = []
    clean = finite(obj, "", replaced)
    if replaced and isinstance(clean, dict) and NOT_FINITE_KEY not in clean:
        clean[NOT_FINITE_KEY] = replaced[:100]
    return json.dumps(clean, indent=indent, allow_nan=False, default=_default, **kw)


def _default(o: Any) -> Any:
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
