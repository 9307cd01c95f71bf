"""Elementwise kernels: activations, broadcasting add/mul and rotary position embedding."""

from __future__ import annotations

import math

import numpy as np

from accelsim.kernels.forward.common import f32
from accelsim.kernels.registry import kernel
from accelsim.workload.ops import Op, OpKind, Shape


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)), computed as 0.5 (1 + tanh(x / 2)) so it never overflows."""
    return np.float32(0.5) * (np.float32(1.0) + np.tanh(np.float32(0.5) * x))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    # NB: the tanh approximation (PyTorch approximate="tanh", GPT-2/BERT), not the exact erf
    # form; they differ by under 1e-3 in absolute value.
    c = np.float32(math.sqrt(2.0 / math.pi))
    return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(c * (x + np.float32(0.044715) * x**3)))


def hardsigmoid(x: np.ndarray) -> np.ndarray:
    """relu6(x + 3) / 6 (PyTorch `F.hardsigmoid`, MobileNetV3's piecewise-linear sigmoid)."""
    return np.clip(x + np.float32(3.0), np.float32(0.0), np.float32(6.0)) / np.float32(6.0)


_UNARY = {
    OpKind.RELU: lambda x: np.maximum(x, np.float32(0.0)),
    OpKind.RELU6: lambda x: np.clip(x, np.float32(0.0), np.float32(6.0)),
    OpKind.GELU: gelu_tanh,
    OpKind.SIGMOID: sigmoid,
    OpKind.TANH: np.tanh,
    OpKind.SILU: lambda x: x * sigmoid(x),
    OpKind.HARDSIGMOID: hardsigmoid,
    OpKind.HARDSWISH: lambda x: x * hardsigmoid(x),
}


@kernel(*_UNARY)
def unary_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """Activation of x (N, ...) -> same shape."""
    return _UNARY[op.kind](f32(xs[0]))


@kernel(OpKind.LEAKY_RELU)
def leaky_relu_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """max(x, slope x) (slope in [0, 1)) of x (N, ...) -> same shape."""
    x = f32(xs[0])
    return np.maximum(x, np.float32(op.attrs["negative_slope"]) * x)


def align(x: np.ndarray, shape: Shape, rank: int) -> np.ndarray:
    """x (N, *shape) viewed as (N, 1, ..., 1, *shape) with `rank` per-sample axes, so that
    numpy's right-aligned broadcasting of per-sample shapes skips the batch axis."""
    return x.reshape(x.shape[0], *(1,) * (rank - len(shape)), *shape)


_BINARY = {OpKind.ADD: np.add, OpKind.MUL: np.multiply, OpKind.SUB: np.subtract,
           OpKind.DIV: np.divide}


@kernel(*_BINARY)
def binary_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """a (N, *sa) op b (N, *sb) -> (N, *broadcast(sa, sb))."""
    rank = len(op.output_shape)
    a, b = (align(f32(x), s, rank) for x, s in zip(xs, op.input_shapes, strict=True))
    return _BINARY[op.kind](a, b)


_CONST_FNS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
              "pow": np.power}


@kernel(OpKind.CONST_BINARY)
def const_binary_kernel(op: Op, xs: list[np.ndarray],
                        params: dict[str, np.ndarray]) -> np.ndarray:
    """x (N, *s) fn c, or c fn x when `reverse`; c the `scalar` attribute or the parameter
    "const" (per-sample shape, broadcast) -> (N, *broadcast(s, const_shape))."""
    a = op.attrs
    rank = len(op.output_shape)
    x = align(f32(xs[0]), op.input_shapes[0], rank)
    if a["scalar"] is not None:
        c = np.float32(a["scalar"])
    else:
        c = f32(params["const"])
        c = c.reshape(1, *(1,) * (rank - c.ndim), *c.shape)
    fn = _CONST_FNS[a["fn"]]
    return (fn(c, x) if a["reverse"] else fn(x, c)).astype(np.float32, copy=False)


def rope_tables(s: int, d: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin tables (S, d) for positions 0..S-1, frequencies base^(-2i/d) repeated
    over both halves (HF `LlamaRotaryEmbedding`)."""
    inv_freq = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = np.outer(np.arange(s, dtype=np.float64), inv_freq)
    ang = np.concatenate([ang, ang], axis=-1)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def rope(x: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """Rotary embedding, rotate-half convention: x (..., S, d) -> x cos + rotate_half(x) sin,
    where rotate_half([x1, x2]) = [-x2, x1] over the two halves of d."""
    s, d = x.shape[-2:]
    cos, sin = rope_tables(s, d, base)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + np.concatenate([-x2, x1], axis=-1) * sin


@kernel(OpKind.ROPE)
def rope_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, H, S, d) -> same, positions 0..S-1."""
    return rope(f32(xs[0]), float(op.attrs["base"]))
