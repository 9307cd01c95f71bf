"""Rounding of float32 values into the numeric formats of `accelsim.formats`, in which the
numpy kernels run.

Float formats are simulated by rounding float32 values to the nearest representable value (the
result is still a float32 array, but every element is exactly representable in the format);
int8 is symmetric linear quantization (see `accelsim.kernels.quantize`); the block-scaled
4-bit formats round in `accelsim.kernels.block_formats`.
"""

from __future__ import annotations

import numpy as np

from accelsim.errors import ShapeError
from accelsim.formats import NumericFormat, get_format
from accelsim.kernels.block_formats import round_block_scaled
from accelsim.kernels.quantize import dequantize, quantize_int8


def _round_tf32(x: np.ndarray) -> np.ndarray:
    """Round float32 `x` to 10 explicit mantissa bits, round-to-nearest-even, with bit ops."""
    # NB: RNE as asked for; NVIDIA's cvt.rna.tf32.f32 rounds ties away from zero, and some
    # tensor-core paths simply truncate. The difference is at most one tf32 ulp on ties.
    u = x.view(np.uint32)
    finite = (u & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
    lsb = (u >> np.uint32(13)) & np.uint32(1)
    # Cannot wrap: the largest finite pattern 0xFF7FFFFF + 0x1000 < 2**32. A carry out of
    # the largest finite value gives the inf pattern, which is correct RNE overflow.
    rounded = (u + np.uint32(0xFFF) + lsb) & np.uint32(0xFFFFE000)
    return np.where(finite, rounded, u).view(np.float32)


def round_to_format(x: np.ndarray, fmt: str | NumericFormat) -> np.ndarray:
    """Round `x` (any shape) to the values representable in `fmt`; returns float32, same shape.

    Round-to-nearest-even throughout. fp16, bf16 and tf32 overflow to +-inf as IEEE
    casts do; fp8 casts saturate to the largest finite value. int8 is a per-tensor
    quantize-dequantize (values k * max|x| / 127, k integer in [-127, 127]). nvfp4 and
    mxfp4 round each block of the last axis under its own scale (`round_block_scaled`).
    """
    f = get_format(fmt)
    if f.name in ("bf16", "fp8_e4m3", "fp8_e5m2"):
        import ml_dtypes  # about 0.8 s of CPU to import: only when a kernel rounds to it

    # NB: inputs are converted to float32 first; a float64 input is thus rounded twice.
    x32 = np.ascontiguousarray(x, dtype=np.float32)
    if f.name == "fp32":
        return x32.copy()
    if f.name == "tf32":
        return _round_tf32(x32)
    if f.name == "fp16":
        with np.errstate(over="ignore"):  # overflow to +-inf is the IEEE result we want
            return x32.astype(np.float16).astype(np.float32)
    if f.name == "bf16":
        return x32.astype(ml_dtypes.bfloat16).astype(np.float32)
    if f.name == "fp8_e4m3":
        # NB: saturating cast (clip to +-448, inf -> +-448), as frameworks do for fp8;
        # e4m3fn has no inf, and a plain cast would turn overflow into nan. nan stays nan.
        clipped = np.clip(x32, -f.max_finite, f.max_finite)
        return clipped.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    if f.name == "fp8_e5m2":
        # NB: saturating cast (clip to +-57344, inf -> +-57344) like the "satfinite" casts
        # frameworks use, rather than IEEE overflow to inf. nan stays nan.
        clipped = np.clip(x32, -f.max_finite, f.max_finite)
        return clipped.astype(ml_dtypes.float8_e5m2).astype(np.float32)
    if f.block_elements is not None:
        return round_block_scaled(x32, f)
    if f.name == "int8":
        # NB: per-tensor symmetric fake quantization; kernels that want per-channel scales
        # or int32 accumulation call accelsim.kernels.quantize directly.
        q, scale = quantize_int8(x32)
        return dequantize(q, scale)
    raise AssertionError(f"unhandled format {f.name}")  # unreachable: FORMATS is closed


def relative_error(y: np.ndarray, y_ref: np.ndarray) -> float:
    """||y - y_ref||_2 / ||y_ref||_2 over all elements, computed in float64.

    Same shapes required (ShapeError otherwise). If y_ref is all zero the result is 0.0
    when y is all zero too, else inf.
    """
    a = np.asarray(y, dtype=np.float64)
    b = np.asarray(y_ref, dtype=np.float64)
    if a.shape != b.shape:
        raise ShapeError(f"relative_error: shapes {a.shape} and {b.shape} differ")
    num = float(np.linalg.norm((a - b).ravel()))
    den = float(np.linalg.norm(b.ravel()))
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den
