"""Rounding into the block-scaled 4-bit formats (`accelsim.formats` nvfp4, mxfp4): e2m1 codes
under one scale per block of consecutive elements along the last axis, the K axis of a GEMM's
row-major operands, as Blackwell's block-scaled tensor-core GEMMs read them.

    round_block_scaled(x, get_format("nvfp4"))  # float32, same shape, every block on its grid

NVFP4 [NVFP4_BLOG]: a block of 16 takes the scale amax / 6, rounded to e4m3, under a
per-tensor scale that puts the largest block scale at e4m3's 448. MXFP4 (OCP Microscaling
Formats v1.0, section 6.3): a block of 32 takes the power-of-two scale
2^(floor(log2 amax) - 2), 2 being e2m1's largest exponent. Elements divided by their scale
round to e2m1 to nearest even and saturate at +-6; nan stays nan.

[NVFP4_BLOG] https://developer.nvidia.com/blog/introducing-nvfp4-for-efficient-and-accurate-low-precision-inference/
[OCP_MX] https://www.opencompute.org/documents/ocp-microscaling-formats-mx-v1-0-spec-final-pdf
"""

from __future__ import annotations

import numpy as np

from accelsim.formats import NumericFormat, get_format

E2M1_MAX = 6.0
E2M1_EMAX = 2  # e2m1's largest exponent: 6 = 1.5 * 2^2
E4M3_MAX = 448.0


def _e2m1(v: np.ndarray) -> np.ndarray:
    """float64 `v` rounded to the e2m1 grid, to nearest even, saturating at +-6."""
    import ml_dtypes

    clipped = np.clip(v, -E2M1_MAX, E2M1_MAX).astype(np.float32)
    return clipped.astype(ml_dtypes.float4_e2m1fn).astype(np.float64)


def _e4m3(v: np.ndarray) -> np.ndarray:
    """Non-negative float64 `v` rounded to e4m3 (saturating at 448; below its smallest
    subnormal 2^-9 to 0)."""
    import ml_dtypes

    clipped = np.minimum(v, E4M3_MAX).astype(np.float32)
    return clipped.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)


def _blocks(x: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    """x (float64, last axis L) as (..., ceil(L / n), n) blocks, zero padded; and L."""
    length = x.shape[-1]
    pad = -length % n
    if pad:
        x = np.concatenate([x, np.zeros((*x.shape[:-1], pad))], axis=-1)
    return x.reshape(*x.shape[:-1], -1, n), length


def _nvfp4_scales(amax: np.ndarray) -> np.ndarray:
    """Decoded NVFP4 block scales (global * e4m3 block scale) of blocks with abs-max `amax`."""
    top = float(amax.max()) if amax.size else 0.0
    if top == 0.0:
        return np.zeros_like(amax)
    # NB: the per-tensor scale is rounded up to a power of two (NVIDIA's recipe keeps it an
    # exact fp32 quotient): the largest block scale then lands in (224, 448] rather than at
    # 448, under half an e4m3 binade of headroom, and the rounding stays idempotent.
    global_scale = 2.0 ** np.ceil(np.log2(top / (E2M1_MAX * E4M3_MAX)))
    return _e4m3(amax / E2M1_MAX / global_scale) * global_scale


def _mxfp4_scales(amax: np.ndarray) -> np.ndarray:
    """MXFP4 block scales: 2^(floor(log2 amax) - 2); 0 for an all-zero block."""
    safe = np.where(amax > 0.0, amax, 1.0)
    _, exp = np.frexp(safe)  # safe = m * 2^exp with m in [0.5, 1): floor(log2) = exp - 1
    return np.where(amax > 0.0, np.ldexp(1.0, exp - 1 - E2M1_EMAX), 0.0)


def round_block_scaled(x: np.ndarray, fmt: str | NumericFormat) -> np.ndarray:
    """`x` (float32, any shape; a scalar is one block) rounded to a block-scaled format;
    float32, same shape. A block whose scale rounds to 0 (tiny against the tensor's largest)
    flushes to 0; one far below the largest gets an e4m3-subnormal scale, coarser than 1/16
    (NVFP4's own behaviour under one per-tensor scale)."""
    f = get_format(fmt)
    if f.block_elements is None:
        raise ValueError(f"{f.name} is not a block-scaled format")
    x64 = np.atleast_1d(np.asarray(x, dtype=np.float64))
    nan = np.isnan(x64)
    finite = np.where(np.isfinite(x64), x64, 0.0)
    blocks, length = _blocks(finite, f.block_elements)
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    scales = _nvfp4_scales(amax) if f.block_scale == "fp8_e4m3" else _mxfp4_scales(amax)
    # +-inf saturates to the block's largest code; a zero scale flushes the block
    full, _ = _blocks(np.where(nan, 0.0, x64), f.block_elements)
    with np.errstate(divide="ignore", invalid="ignore"):
        codes = np.where(scales > 0.0, _e2m1(full / np.where(scales > 0.0, scales, 1.0)), 0.0)
    y = (codes * scales).reshape(*x64.shape[:-1], -1)[..., :length]
    y = np.where(nan, np.nan, y).astype(np.float32)
    return y.reshape(np.shape(x))
