"""Backward kernels of the weighted ops: linear and conv2d (stride, padding, dilation, groups).

    dx, dw, db = backward(op, xs, params, dy)

`xs` and `dy` carry the batch axis in front (see `accelsim.kernels.registry`); `params` holds
arrays of `op.param_shapes`. `db` is None for an op without bias. The kernels compute in the
dtype of their inputs (float64 in, float64 out), so they can be checked against finite
differences. The im2col / col2im helpers here (any number of spatial dims) are also used by
`accelsim.kernels.execute` to run convolutions as int8 matmuls.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from accelsim.errors import ShapeError
from accelsim.workload.ops import Op, OpKind

Grads = tuple[np.ndarray, np.ndarray, np.ndarray | None]


def _tuple(v: int | Sequence[int], n: int) -> tuple[int, ...]:
    return (int(v),) * n if isinstance(v, int | np.integer) else tuple(int(i) for i in v)


def conv_geometry(op: Op) -> tuple[tuple[int, ...], ...]:
    """(kernel, stride, padding, dilation) of a conv op, each a tuple with one entry per dim."""
    nd = len(op.input_shapes[0]) - 1
    return tuple(_tuple(op.attrs[a], nd) for a in ("kernel", "stride", "padding", "dilation"))


def _windows(k: tuple[int, ...], s: tuple[int, ...], d: tuple[int, ...],
             out: tuple[int, ...]) -> list[tuple[tuple[int, ...], tuple[slice, ...]]]:
    """For each kernel offset, the strided slice of the padded input that it reads."""
    res = []
    for idx in itertools.product(*(range(n) for n in k)):
        sl = tuple(slice(i * d[a], i * d[a] + s[a] * (out[a] - 1) + 1, s[a])
                   for a, i in enumerate(idx))
        res.append((idx, sl))
    return res


def im2col(x: np.ndarray, k: Sequence[int], s: Sequence[int], p: Sequence[int],
           d: Sequence[int]) -> np.ndarray:
    """x (B, C, *S) -> columns (B, C, *K, *O): element [b, c, *i, *o] is the padded input at
    o * stride + i * dilation. Works for any number of spatial dims."""
    nd = x.ndim - 2
    k, s, p, d = (_tuple(v, nd) for v in (k, s, p, d))
    out = tuple((x.shape[2 + a] + 2 * p[a] - d[a] * (k[a] - 1) - 1) // s[a] + 1
                for a in range(nd))
    if any(o <= 0 for o in out):
        raise ShapeError(f"im2col: input {x.shape} too small for kernel {k}")
    xp = np.pad(x, ((0, 0), (0, 0), *((q, q) for q in p))) if any(p) else x
    cols = np.empty((*x.shape[:2], *k, *out), dtype=x.dtype)
    for idx, sl in _windows(k, s, d, out):
        cols[(slice(None), slice(None), *idx)] = xp[(slice(None), slice(None), *sl)]
    return cols


def col2im(cols: np.ndarray, shape: Sequence[int], s: Sequence[int], p: Sequence[int],
           d: Sequence[int]) -> np.ndarray:
    """Adjoint of `im2col`: columns (B, C, *K, *O) summed back into an array of `shape`
    (B, C, *S). Also the scatter of a transposed convolution (padding 0, dilation 1)."""
    nd = len(shape) - 2
    s, p, d = (_tuple(v, nd) for v in (s, p, d))
    k, out = cols.shape[2:2 + nd], cols.shape[2 + nd:]
    padded = (*shape[:2], *(shape[2 + a] + 2 * p[a] for a in range(nd)))
    xp = np.zeros(padded, dtype=cols.dtype)
    for idx, sl in _windows(k, s, d, out):
        xp[(slice(None), slice(None), *sl)] += cols[(slice(None), slice(None), *idx)]
    return xp[(slice(None), slice(None), *(slice(q, q + shape[2 + a]) for a, q in enumerate(p)))]


def linear_backward(op: Op, x: np.ndarray, params: dict[str, np.ndarray],
                    dy: np.ndarray) -> Grads:
    """x (B, ..., in), weight (out, in), dy (B, ..., out) -> dx like x, dw (out, in), db (out,)."""
    w = params["weight"]
    dx = dy @ w
    dy2 = dy.reshape(-1, dy.shape[-1])
    dw = dy2.T @ x.reshape(-1, x.shape[-1])
    db = dy2.sum(axis=0) if "bias" in params else None
    return dx, dw, db


def conv2d_backward(op: Op, x: np.ndarray, params: dict[str, np.ndarray],
                    dy: np.ndarray) -> Grads:
    """x (B, C, H, W), weight (O, C/g, KH, KW), dy (B, O, OH, OW) -> dx, dw, db (O,)."""
    w = params["weight"]
    k, s, p, d = conv_geometry(op)
    g = int(op.attrs["groups"])
    b, c = x.shape[:2]
    o = w.shape[0]
    cg, og, kk = c // g, o // g, math.prod(k)
    cols = im2col(x, k, s, p, d)  # (B, C, KH, KW, OH, OW)
    out = cols.shape[4:]
    if dy.shape != (b, o, *out):
        raise ShapeError(f"conv2d_backward '{op.name}': dy {dy.shape} != {(b, o, *out)}")
    cols_g = cols.reshape(b, g, cg * kk, -1)  # (B, g, Cg*K, L)
    dy_g = dy.reshape(b, g, og, -1)  # (B, g, Og, L)
    w_g = w.reshape(g, og, cg * kk)  # (g, Og, Cg*K)
    # dw[g] = sum over batch and positions of dy (Og, L) @ cols^T (L, Cg*K)
    dy_t = dy_g.transpose(1, 2, 0, 3).reshape(g, og, -1)
    cols_t = cols_g.transpose(1, 0, 3, 2).reshape(g, -1, cg * kk)
    dw = (dy_t @ cols_t).reshape(w.shape)
    dcols = w_g.transpose(0, 2, 1)[None] @ dy_g  # (B, g, Cg*K, L)
    dx = col2im(dcols.reshape(b, c, *k, *out), x.shape, s, p, d)
    db = dy.sum(axis=(0, 2, 3)) if "bias" in params else None
    return dx, dw, db


def backward(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray],
             dy: np.ndarray) -> Grads:
    """(dx, dw, db) of a linear or conv2d op; other kinds raise ShapeError."""
    if op.kind == OpKind.LINEAR:
        return linear_backward(op, xs[0], params, dy)
    if op.kind == OpKind.CONV2D:
        return conv2d_backward(op, xs[0], params, dy)
    raise ShapeError(f"op '{op.name}': no backward kernel for {op.kind.value}")
