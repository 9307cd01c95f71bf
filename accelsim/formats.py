"""Numeric formats: the closed set of formats a tensor is stored or computed in, and their
metadata (bytes per element, mantissa and exponent bits, largest finite value).

A foundation module (the standard library only): the workload, the device models and the
kernels read byte widths here; the rounding into each format lives in `accelsim.kernels.formats`.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.errors import UnknownNameError


@dataclass(frozen=True)
class NumericFormat:
    """One numeric format.

    mantissa_bits counts the explicit (stored) fraction bits; mantissa_bits and
    exponent_bits are None for int8. max_finite is the largest finite magnitude of one
    element (127 for int8, the symmetric range used here; 6 for fp4's e2m1 code before
    its block scale). A block-scaled format (`block_elements` set: NVFP4, MXFP4) stores
    one `block_scale` per `block_elements` consecutive elements; its bytes_per_element
    counts that share of the scale.
    """

    name: str
    bytes_per_element: float
    is_integer: bool
    mantissa_bits: int | None
    exponent_bits: int | None
    max_finite: float
    block_elements: int | None = None
    block_scale: str | None = None  # the scale's own format: "fp8_e4m3" or "e8m0"

    @property
    def element_bits(self) -> float:
        """Bits of one element's code, scales excluded."""
        if self.block_elements is None:
            return self.bytes_per_element * 8
        return self.bytes_per_element * 8 - SCALE_BITS / self.block_elements


FORMATS: dict[str, NumericFormat] = {
    f.name: f
    for f in (
        NumericFormat("fp32", 4, False, 23, 8, float((2 - 2.0**-23) * 2.0**127)),  # finfo.max
        # tf32 has fp32's range and fp16's precision; it is stored in 4 bytes (an fp32 word).
        NumericFormat("tf32", 4, False, 10, 8, float((2 - 2.0**-10) * 2.0**127)),
        NumericFormat("fp16", 2, False, 10, 5, 65504.0),
        NumericFormat("bf16", 2, False, 7, 8, float((2 - 2.0**-7) * 2.0**127)),
        NumericFormat("fp8_e4m3", 1, False, 3, 4, 448.0),
        NumericFormat("fp8_e5m2", 1, False, 2, 5, 57344.0),
        NumericFormat("int8", 1, True, None, None, 127.0),
        # e2m1 codes (0, 0.5, 1, 1.5, 2, 3, 4, 6) under a scale per block along the last axis.
        # NVFP4: an e4m3 scale per 16 elements and a per-tensor fp32 scale; MXFP4 (OCP
        # Microscaling v1.0): a power-of-two e8m0 scale per 32 elements [NVFP4_BLOG].
        NumericFormat("nvfp4", 0.5 + 1 / 16, False, 1, 2, 6.0, 16, "fp8_e4m3"),
        NumericFormat("mxfp4", 0.5 + 1 / 32, False, 1, 2, 6.0, 32, "e8m0"),
    )
}
SCALE_BITS = 8  # both block scales are one byte
# [NVFP4_BLOG] https://developer.nvidia.com/blog/introducing-nvfp4-for-efficient-and-accurate-low-precision-inference/

ALIASES: dict[str, str] = {"fp8": "fp8_e4m3", "fp4": "nvfp4"}


def get_format(name: str | NumericFormat) -> NumericFormat:
    """Return the format called `name` (case-insensitive; aliases "fp8" -> "fp8_e4m3",
    "fp4" -> "nvfp4").

    A NumericFormat is returned unchanged. Raises UnknownNameError for any other name.
    """
    if isinstance(name, NumericFormat):
        return name
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in FORMATS:
        raise UnknownNameError("precision", str(name), [*FORMATS, *ALIASES])
    return FORMATS[key]

