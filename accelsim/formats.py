"""Numeric formats: the closed set of formats a tensor is stored or computed in, and their
metadata (bytes per element, mantissa and exponent bits, largest finite value).

A foundation module (numpy only): the workload, the device models and the kernels read byte
widths here; the rounding into each format lives in `accelsim.kernels.formats`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.errors import UnknownNameError


@dataclass(frozen=True)
class NumericFormat:
    """One numeric format.

    mantissa_bits counts the explicit (stored) fraction bits; mantissa_bits and
    exponent_bits are None for int8. max_finite is the largest finite magnitude
    (127 for int8, the symmetric range used here).
    """

    name: str
    bytes_per_element: int
    is_integer: bool
    mantissa_bits: int | None
    exponent_bits: int | None
    max_finite: float


FORMATS: dict[str, NumericFormat] = {
    f.name: f
    for f in (
        NumericFormat("fp32", 4, False, 23, 8, float(np.finfo(np.float32).max)),
        # tf32 has fp32's range and fp16's precision; it is stored in 4 bytes (an fp32 word).
        NumericFormat("tf32", 4, False, 10, 8, float((2 - 2.0**-10) * 2.0**127)),
        NumericFormat("fp16", 2, False, 10, 5, 65504.0),
        NumericFormat("bf16", 2, False, 7, 8, float((2 - 2.0**-7) * 2.0**127)),
        NumericFormat("fp8_e4m3", 1, False, 3, 4, 448.0),
        NumericFormat("fp8_e5m2", 1, False, 2, 5, 57344.0),
        NumericFormat("int8", 1, True, None, None, 127.0),
    )
}

ALIASES: dict[str, str] = {"fp8": "fp8_e4m3"}


def get_format(name: str | NumericFormat) -> NumericFormat:
    """Return the format called `name` (case-insensitive; alias "fp8" -> "fp8_e4m3").

    A NumericFormat is returned unchanged. Raises UnknownNameError for any other name.
    """
    if isinstance(name, NumericFormat):
        return name
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in FORMATS:
        raise UnknownNameError("precision", str(name), [*FORMATS, *ALIASES])
    return FORMATS[key]

