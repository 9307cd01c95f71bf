"""Symmetric int8 quantization with int32 accumulation (a TPU-v1-like MAC array).

Conventions, shared by every function here:
- q arrays are int8 in [-127, 127] (-128 is never produced, so the range is symmetric);
- a scale is float32, either a 0-d array (per tensor) or a 1-d array with one entry
  per index along the quantized `axis` (per channel); real value = q * scale;
- products accumulate exactly in int32.

A conv is im2col + matmul: quantize activations per tensor, weights (OC, C, KH, KW) per
output channel with axis=0, reshape weights to (C*KH*KW, OC) so their scale is per
column, then call `int8_matmul` (float32 out) or `int8_matmul_acc` + `requantize`
(int8 out).
"""

from __future__ import annotations

import numpy as np

from accelsim.errors import ShapeError

QMAX = 127
# Largest inner dimension for which an int32 accumulator cannot overflow, even with -128s.
MAX_K_INT32 = (2**31 - 1) // (128 * 128)


def _axis_shape(ndim: int, axis: int, n: int) -> tuple[int, ...]:
    """Shape that broadcasts a length-n per-channel vector along `axis` of an ndim array."""
    shape = [1] * ndim
    shape[axis] = n
    return tuple(shape)


def _broadcast_scale(scale: np.ndarray, ndim: int, axis: int | None) -> np.ndarray:
    s = np.asarray(scale, dtype=np.float32)
    if axis is None:
        if s.size != 1:
            raise ShapeError(f"per-tensor scale must have one element, got shape {s.shape}")
        return s.reshape(())
    axis = axis % ndim
    return s.reshape(_axis_shape(ndim, axis, s.size))


def quantize_int8(
    x: np.ndarray, axis: int | None = None, scale: np.ndarray | float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 quantization of a float array `x` (any shape).

    axis=None: one scale for the tensor, returned as a 0-d float32 array.
    axis=k: one scale per index along axis k, returned with shape (x.shape[k],).
    scale: use these (calibrated) scales instead of max|x| / 127; values outside
    the range are clipped to [-127, 127].
    Returns (q: int8, same shape as x; scale: float32). All-zero channels get scale 1.
    """
    x = np.asarray(x)
    if not np.all(np.isfinite(x)):
        raise ValueError("quantize_int8: input has non-finite values")
    if axis is not None:
        if x.ndim == 0:
            raise ShapeError("quantize_int8: per-channel quantization needs an array, got a scalar")
        axis = axis % x.ndim
    if scale is None:
        reduce_axes = None if axis is None else tuple(i for i in range(x.ndim) if i != axis)
        amax = np.max(np.abs(x), axis=reduce_axes) if x.size else np.zeros(())
        s = (np.asarray(amax, dtype=np.float64) / QMAX).astype(np.float32)
        s = np.where(s > 0, s, np.float32(1.0)).astype(np.float32)  # guard all-zero
    else:
        s = np.asarray(scale, dtype=np.float32)
        if axis is not None and s.size != x.shape[axis]:
            raise ShapeError(f"quantize_int8: {s.size} scales for an axis of {x.shape[axis]}")
        if np.any(s <= 0) or not np.all(np.isfinite(s)):
            raise ValueError("quantize_int8: scales must be positive and finite")
    sb = _broadcast_scale(s, x.ndim, axis).astype(np.float64)
    # Divide in float64 so the rounding is of the exact quotient (error <= scale / 2).
    q = np.clip(np.rint(x.astype(np.float64) / sb), -QMAX, QMAX).astype(np.int8)
    return q, s


def dequantize(q: np.ndarray, scale: np.ndarray, axis: int | None = None) -> np.ndarray:
    """q (int8 or int32, any shape) * scale (0-d, or per index along `axis`) -> float32."""
    q = np.asarray(q)
    sb = _broadcast_scale(scale, q.ndim, axis)
    return (q.astype(np.float32) * sb).astype(np.float32)


def _check_int8(name: str, a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype != np.int8:
        raise TypeError(f"int8 matmul: {name} must be int8, got {a.dtype}")
    return a


def int8_matmul_acc(a_q: np.ndarray, b_q: np.ndarray) -> np.ndarray:
    """Exact integer product: a_q (M, K) int8 @ b_q (K, N) int8 -> (M, N) int32.

    Leading batch dims on a_q broadcast as in np.matmul. K above MAX_K_INT32 raises
    ShapeError: an int32 accumulator could overflow there.
    """
    a = _check_int8("a_q", a_q)
    b = _check_int8("b_q", b_q)
    if a.ndim < 2 or b.ndim != 2 or a.shape[-1] != b.shape[0]:
        raise ShapeError(f"int8 matmul: cannot multiply shapes {a.shape} and {b.shape}")
    if b.shape[0] > MAX_K_INT32:
        raise ShapeError(
            f"int8 matmul: inner dimension {b.shape[0]} > {MAX_K_INT32} may overflow int32"
        )
    # Exact: with K <= MAX_K_INT32 no partial sum leaves the int32 range.
    return np.matmul(a.astype(np.int32), b.astype(np.int32)).astype(np.int32)


def _row_col_scales(
    acc: np.ndarray, a_scale: np.ndarray | float, b_scale: np.ndarray | float
) -> np.ndarray:
    """a_scale: scalar or (M,) per row; b_scale: scalar or (N,) per column -> float64 (M, N)."""
    sa = np.asarray(a_scale, dtype=np.float64)
    sb = np.asarray(b_scale, dtype=np.float64)
    m, n = acc.shape[-2], acc.shape[-1]
    if sa.size not in (1, m) or sb.size not in (1, n):
        raise ShapeError(
            f"int8 matmul: scales {sa.shape}, {sb.shape} do not fit output {acc.shape}"
        )
    sa = sa.reshape(()) if sa.size == 1 else sa.reshape(m, 1)
    sb = sb.reshape(()) if sb.size == 1 else sb.reshape(1, n)
    return sa * sb


def int8_matmul(
    a_q: np.ndarray,
    a_scale: np.ndarray | float,
    b_q: np.ndarray,
    b_scale: np.ndarray | float,
) -> np.ndarray:
    """Quantized matmul: (a_q * a_scale) @ (b_q * b_scale) with int32 accumulation.

    a_q: (M, K) int8 (batch dims allowed), a_scale: scalar / 0-d or (M,) per row;
    b_q: (K, N) int8, b_scale: scalar / 0-d or (N,) per column. Returns (M, N) float32.
    """
    acc = int8_matmul_acc(a_q, b_q)
    # NB: the rescale is done in float64 then rounded to float32; hardware uses a
    # fixed-point multiplier, which differs by at most about one float32 ulp here.
    return (acc.astype(np.float64) * _row_col_scales(acc, a_scale, b_scale)).astype(np.float32)


def requantize(
    acc_int32: np.ndarray,
    in_scale: np.ndarray | float,
    w_scale: np.ndarray | float,
    out_scale: np.ndarray | float,
) -> np.ndarray:
    """int32 accumulators (M, N) -> int8 outputs (M, N) with scale out_scale.

    in_scale: scalar or (M,) per row; w_scale: scalar or (N,) per column; out_scale:
    scalar (per tensor) or (N,) per column. Round to nearest even, clip to [-127, 127].
    """
    acc = np.asarray(acc_int32)
    if acc.dtype != np.int32:
        raise TypeError(f"requantize: accumulators must be int32, got {acc.dtype}")
    so = np.asarray(out_scale, dtype=np.float64)
    if so.size not in (1, acc.shape[-1]):
        raise ShapeError(f"requantize: out_scale {so.shape} does not fit output {acc.shape}")
    # NB: float64 multiplier instead of the fixed-point multiply-and-shift of real int8
    # hardware; results can differ by one step on exact ties.
    real = acc.astype(np.float64) * _row_col_scales(acc, in_scale, w_scale)
    so = so.reshape(()) if so.size == 1 else so.reshape(acc.shape[-1])
    return np.clip(np.rint(real / so), -QMAX, QMAX).astype(np.int8)
