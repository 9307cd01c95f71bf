"""Convolutions on the batch-first layout (N, C, *spatial): im2col as a strided view + matmul.

conv2d and conv3d share `conv_nd` (stride, zero padding, dilation, groups incl. depthwise);
conv_transpose3d is `conv_transpose_nd` (a matmul, then a scatter-add per kernel tap).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from accelsim.kernels.forward.common import as_tuple, bias_of, f32
from accelsim.kernels.registry import kernel
from accelsim.workload.ops import Op, OpKind


def windows(x: np.ndarray, k: tuple[int, ...], stride: tuple[int, ...],
            dilation: tuple[int, ...]) -> np.ndarray:
    """Read-only view (N, C, *out, *k) of the sliding windows of x (N, C, *spatial); no copy."""
    nd = len(k)
    sp = x.shape[2:]
    out = tuple((sp[i] - dilation[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(nd))
    st = x.strides
    strides = (*st[:2], *(st[2 + i] * stride[i] for i in range(nd)),
               *(st[2 + i] * dilation[i] for i in range(nd)))
    return as_strided(x, (*x.shape[:2], *out, *k), strides, writeable=False)


def conv_nd(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple[int, ...],
            padding: tuple[int, ...], dilation: tuple[int, ...], groups: int = 1) -> np.ndarray:
    """Cross-correlation as in PyTorch: x (N, C, *sp), w (O, C/groups, *k), b (O,) or None
    -> (N, O, *out). Per group, (O/g, C/g*K) @ (C/g*K, P) over the im2col columns."""
    nd = w.ndim - 2
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    k = w.shape[2:]
    if any(padding):
        x = np.pad(x, ((0, 0), (0, 0), *((p, p) for p in padding)))
    if all(kk == 1 for kk in k):  # 1x1(x1): no im2col, just subsample for a stride
        cols = x[(slice(None), slice(None), *(slice(None, None, s) for s in stride))]
        out_sp = cols.shape[2:]
    else:
        win = windows(x, k, stride, dilation)  # (N, C, *out, *k)
        out_sp = win.shape[2:2 + nd]
        cols = win.transpose(0, 1, *range(2 + nd, 2 + 2 * nd), *range(2, 2 + nd))
    p = math.prod(out_sp)
    cols = cols.reshape(n, groups, cg * math.prod(k), p)  # copies unless 1x1 stride 1
    wm = w.reshape(1, groups, o // groups, cg * math.prod(k))
    y = np.matmul(wm, cols).reshape(n, o, *out_sp)  # (N, g, O/g, P) -> (N, O, *out)
    if b is not None:
        y += b.reshape(o, *(1,) * nd)
    return y


def conv_transpose_nd(x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
                      stride: tuple[int, ...]) -> np.ndarray:
    """Transposed conv, no padding, as in PyTorch: x (N, C, *sp), w (C, O, *k)
    -> (N, O, *((sp - 1) * stride + k)). Each input voxel scatters w[c, :, taps] * x."""
    nd = w.ndim - 2
    n, c = x.shape[:2]
    o, k = w.shape[1], w.shape[2:]
    sp = x.shape[2:]
    out_sp = tuple((sp[i] - 1) * stride[i] + k[i] for i in range(nd))
    wm = w.reshape(c, o * math.prod(k)).T  # (O*K, C)
    cols = np.matmul(wm, x.reshape(n, c, math.prod(sp))).reshape(n, o, *k, *sp)
    y = np.zeros((n, o, *out_sp), dtype=np.float32)
    for tap in np.ndindex(*k):  # loop over kernel taps only (e.g. 8 or 27)
        dst = tuple(slice(t, t + (sp[i] - 1) * stride[i] + 1, stride[i])
                    for i, t in enumerate(tap))
        y[(slice(None), slice(None), *dst)] += cols[(slice(None), slice(None), *tap)]
    if b is not None:
        y += b.reshape(o, *(1,) * nd)
    return y


@kernel(OpKind.CONV2D, OpKind.CONV3D)
def conv_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """conv2d (N, C, H, W) / conv3d (N, C, D, H, W) -> (N, O, *out)."""
    nd = len(op.input_shapes[0]) - 1
    a = op.attrs
    return conv_nd(f32(xs[0]), f32(params["weight"]), bias_of(params),
                   as_tuple(a["stride"], nd), as_tuple(a["padding"], nd),
                   as_tuple(a["dilation"], nd), int(a["groups"]))


@kernel(OpKind.CONV_TRANSPOSE3D)
def conv_transpose3d_kernel(op: Op, xs: list[np.ndarray],
                            params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, C, D, H, W) -> (N, O, (D-1)*s+k, (H-1)*s+k, (W-1)*s+k)."""
    return conv_transpose_nd(f32(xs[0]), f32(params["weight"]), bias_of(params),
                             as_tuple(op.attrs["stride"], 3))
