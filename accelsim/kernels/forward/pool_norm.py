"""Pooling, normalisation and softmax on batch-first arrays (N, C, *spatial) or (N, ..., D)."""

from __future__ import annotations

import numpy as np

from accelsim.kernels.forward.common import as_tuple, f32
from accelsim.kernels.registry import kernel
from accelsim.workload.ops import Op, OpKind


def pool2d(x: np.ndarray, k: tuple[int, ...], s: tuple[int, ...], p: tuple[int, ...],
           out: tuple[int, ...], mode: str) -> np.ndarray:
    """Max or average pool of x (N, C, H, W) -> (N, C, *out), like PyTorch.

    `out` comes from shape inference (so ceil_mode is already in it). "max" pads with -inf;
    "avg" counts the zero padding (count_include_pad=True) but not the extra cells a ceil_mode
    window hangs past the padded input, exactly like PyTorch's divisor."""
    h, w = x.shape[2:]
    oh, ow = out
    # pad left by p; right by p, or by more when a ceil_mode window overhangs the padding
    extra = [max((o - 1) * st + kk - size - pp, 0)
             for o, st, kk, size, pp in ((oh, s[0], k[0], h, p[0]), (ow, s[1], k[1], w, p[1]))]
    fill = -np.inf if mode == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], extra[0]), (p[1], extra[1])), constant_values=fill)
    acc: np.ndarray | None = None
    for i in range(k[0]):  # loop over the window taps; each tap is a strided view
        for j in range(k[1]):
            tap = xp[:, :, i:i + (oh - 1) * s[0] + 1:s[0], j:j + (ow - 1) * s[1] + 1:s[1]]
            if acc is None:
                acc = tap.copy()
            elif mode == "max":
                np.maximum(acc, tap, out=acc)
            else:
                acc += tap
    assert acc is not None
    if mode == "max":  # every window holds an input element: shape inference drops a
        return acc      # ceil_mode window that would start in the right padding, as PyTorch
    hs, ws = np.arange(oh) * s[0] - p[0], np.arange(ow) * s[1] - p[1]
    dh = np.minimum(hs + k[0], h + p[0]) - hs
    dw = np.minimum(ws + k[1], w + p[1]) - ws
    div = np.maximum(np.outer(dh, dw), 1).astype(np.float32)
    return acc / div


def _pool_kernel(op: Op, xs: list[np.ndarray], mode: str) -> np.ndarray:
    a = op.attrs
    k = as_tuple(a["kernel"], 2)
    s = as_tuple(a["stride"] if a["stride"] is not None else a["kernel"], 2)
    return pool2d(f32(xs[0]), k, s, as_tuple(a["padding"], 2), op.output_shape[1:], mode)


@kernel(OpKind.MAXPOOL2D)
def maxpool2d_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, C, H, W) -> (N, C, OH, OW), padding with -inf."""
    return _pool_kernel(op, xs, "max")


@kernel(OpKind.AVGPOOL2D)
def avgpool2d_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, C, H, W) -> (N, C, OH, OW), count_include_pad=True."""
    return _pool_kernel(op, xs, "avg")


@kernel(OpKind.GLOBAL_AVGPOOL)
def global_avgpool_kernel(op: Op, xs: list[np.ndarray],
                          params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, C, *spatial) -> (N, C)."""
    x = f32(xs[0])
    return x.mean(axis=tuple(range(2, x.ndim)), dtype=np.float32)


def normalize(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) over `axes`, biased variance (as PyTorch normalises)."""
    mean = x.mean(axis=axes, keepdims=True, dtype=np.float32)
    xc = x - mean
    var = np.mean(xc * xc, axis=axes, keepdims=True, dtype=np.float32)
    return xc / np.sqrt(var + np.float32(eps))


def _channel(v: np.ndarray, ndim: int) -> np.ndarray:
    """A per-channel vector (C,) shaped to broadcast over (N, C, *spatial)."""
    return f32(v).reshape(-1, *(1,) * (ndim - 2))


@kernel(OpKind.BATCHNORM)
def batchnorm_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, C, *spatial) -> same. With `running_mean` and `running_var` (C,) in params:
    inference mode, normalising with those; otherwise training mode, with the statistics of
    this batch per channel over (N, *spatial) (a sample's output then depends on its batch)."""
    x = f32(xs[0])
    if "running_mean" in params:
        inv = 1.0 / np.sqrt(_channel(params["running_var"], x.ndim) + np.float32(op.attrs["eps"]))
        y = (x - _channel(params["running_mean"], x.ndim)) * inv
    else:
        y = normalize(x, (0, *range(2, x.ndim)), op.attrs["eps"])
    return y * _channel(params["gamma"], x.ndim) + _channel(params["beta"], x.ndim)


@kernel(OpKind.INSTANCENORM)
def instancenorm_kernel(op: Op, xs: list[np.ndarray],
                        params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, C, *spatial) -> same; statistics per sample and channel over spatial."""
    x = f32(xs[0])
    y = normalize(x, tuple(range(2, x.ndim)), op.attrs["eps"])
    if "gamma" in params:
        y = y * _channel(params["gamma"], x.ndim) + _channel(params["beta"], x.ndim)
    return y


@kernel(OpKind.LAYERNORM)
def layernorm_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, ..., D) -> same; statistics over the last axis."""
    y = normalize(f32(xs[0]), (-1,), op.attrs["eps"])
    return y * f32(params["gamma"]) + f32(params["beta"])


@kernel(OpKind.RMSNORM)
def rmsnorm_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, ..., D) -> x / sqrt(mean(x^2) + eps) * gamma over the last axis."""
    x = f32(xs[0])
    ms = np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32)
    return x / np.sqrt(ms + np.float32(op.attrs["eps"])) * f32(params["gamma"])


def softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, max-subtracted; a row of all -inf gives NaN."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@kernel(OpKind.SOFTMAX)
def softmax_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, ..., D) -> same, rows over the last axis sum to 1."""
    return softmax(f32(xs[0]))
