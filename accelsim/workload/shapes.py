"""Shape rules of every op kind: attributes, output shape and parameter shapes.

Each rule is registered with `@op_spec(kind, **attribute defaults)` beside its formula and
receives per-sample input shapes (see `accelsim.workload.ops`). Inconsistent inputs raise
`ShapeError`; `make_op` adds the op's name and shapes to the message.
"""

from __future__ import annotations

import math
from typing import Any

from accelsim.errors import ShapeError
from accelsim.workload.ops import REQUIRED, OpKind, Shape, op_spec


def _tuple(v: int | tuple[int, ...], n: int) -> tuple[int, ...]:
    t = (v,) * n if isinstance(v, int) else tuple(v)
    if len(t) != n:
        raise ShapeError(f"expected {n} values, got {v}")
    return t


def _conv_out(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _check_downsampling(spatial: Shape, stride: Shape, out: Shape) -> None:
    """A strided conv or pool advances its window over at least one stride of input: on a map
    smaller than its stride it would not downsample, only read padding around one position
    (the input is smaller than the network's downsampling; PyTorch would run it). An empty
    output (< 1) is left to `make_op`'s check, which names it."""
    for axis, (size, s, o) in enumerate(zip(spatial, stride, out, strict=True)):
        if s > 1 and size < s and o >= 1:
            raise ShapeError(f"stride {s} along spatial axis {axis} on an input of {size}: a "
                             "strided window needs at least one stride of input (the input is "
                             "smaller than the network's downsampling; use a larger input)")


# ---- matmul-like -------------------------------------------------------------------------


def _conv_nd(shapes: tuple[Shape, ...], a: dict[str, Any], nd: int) -> tuple[Shape, dict]:
    (x,) = shapes
    if len(x) != nd + 1:
        raise ShapeError(f"expects a (C, {'D, ' if nd == 3 else ''}H, W) input")
    c, g, o = x[0], a["groups"], a["out_channels"]
    if c % g or o % g:
        raise ShapeError(f"channels in {c} and out {o} must divide by groups {g}")
    k, s, p, d = (_tuple(a[n], nd) for n in ("kernel", "stride", "padding", "dilation"))
    out = tuple(_conv_out(x[i + 1], k[i], s[i], p[i], d[i]) for i in range(nd))
    _check_downsampling(x[1:], s, out)
    params = {"weight": (o, c // g, *k)}
    if a["bias"]:
        params["bias"] = (o,)
    return (o, *out), params


_CONV_ATTRS = dict(out_channels=REQUIRED, kernel=REQUIRED, stride=1, padding=0, dilation=1,
                   groups=1, bias=True)


@op_spec(OpKind.CONV2D, **_CONV_ATTRS)
def _conv2d(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    return _conv_nd(shapes, a, 2)


@op_spec(OpKind.CONV3D, **_CONV_ATTRS)
def _conv3d(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    return _conv_nd(shapes, a, 3)


@op_spec(OpKind.CONV_TRANSPOSE3D, out_channels=REQUIRED, kernel=REQUIRED, stride=1, bias=True)
def _conv_transpose3d(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    (x,) = shapes
    if len(x) != 4:
        raise ShapeError("expects a (C, D, H, W) input")
    k, s = _tuple(a["kernel"], 3), _tuple(a["stride"], 3)
    out = tuple((x[i + 1] - 1) * s[i] + k[i] for i in range(3))
    params = {"weight": (x[0], a["out_channels"], *k)}
    if a["bias"]:
        params["bias"] = (a["out_channels"],)
    return (a["out_channels"], *out), params


@op_spec(OpKind.LINEAR, out_features=REQUIRED, bias=True, tied_to=None)
def _linear(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    """`tied_to` names the op whose weight this one shares (a tied LM head): its (out, in)
    weight is read and gets a gradient here but is counted as a parameter there."""
    (x,) = shapes
    if not x:
        raise ShapeError("expects an input of rank >= 1 (..., in_features)")
    params = {"weight": (a["out_features"], x[-1])}
    if a["bias"]:
        params["bias"] = (a["out_features"],)
    return (*x[:-1], a["out_features"]), params


@op_spec(OpKind.MATMUL, n_inputs=2)
def _matmul(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    x, y = shapes
    if len(x) != 2 or len(y) != 2 or x[1] != y[0]:
        raise ShapeError("expects (M, K) @ (K, N)")
    return (x[0], y[1]), {}


@op_spec(OpKind.BMM, n_inputs=2)
def _bmm(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    x, y = shapes
    if len(x) < 3 or x[:-2] != y[:-2] or len(x) != len(y) or x[-1] != y[-2]:
        raise ShapeError("expects (..., M, K) @ (..., K, N) with equal leading dims")
    return (*x[:-1], y[-1]), {}


@op_spec(OpKind.ATTENTION, n_inputs=3, causal=False)
def _attention(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    """q (H, S, d), k and v (H_kv, S_kv, d); H divisible by H_kv (grouped-query attention)."""
    q, k, v = shapes
    if len(q) != 3 or k != v or len(k) != 3 or q[2] != k[2] or q[0] % k[0]:
        raise ShapeError("expects q (H, S, d), k = v (H_kv, S_kv, d), H divisible by H_kv")
    return q, {}


@op_spec(OpKind.LSTM, hidden_size=REQUIRED)
def _lstm(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    """One LSTM layer (a cell unrolled over the sequence): (S, in) -> (S, hidden)."""
    (x,) = shapes
    if len(x) != 2:
        raise ShapeError("expects a (S, input_size) input")
    h = a["hidden_size"]
    # PyTorch layout: W_ih (4h, in), W_hh (4h, h) and two bias vectors.
    params = {"w_ih": (4 * h, x[1]), "w_hh": (4 * h, h), "b_ih": (4 * h,), "b_hh": (4 * h,)}
    return (x[0], h), params


# ---- pooling -----------------------------------------------------------------------------


def _pool(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    (x,) = shapes
    if len(x) != 3:
        raise ShapeError("expects a (C, H, W) input")
    k, p = _tuple(a["kernel"], 2), _tuple(a["padding"], 2)
    s = _tuple(a["stride"] if a["stride"] is not None else a["kernel"], 2)
    if any(2 * p[i] > k[i] for i in range(2)):
        raise ShapeError(f"padding {p} may be at most half the kernel {k}")
    if a["ceil_mode"]:
        out = tuple(-(-(x[i + 1] + 2 * p[i] - k[i]) // s[i]) + 1 for i in range(2))
        # As PyTorch: the last window must start inside the input or its left padding.
        out = tuple(o - 1 if (o - 1) * s[i] >= x[i + 1] + p[i] else o for i, o in enumerate(out))
    else:
        out = tuple(_conv_out(x[i + 1], k[i], s[i], p[i], 1) for i in range(2))
    _check_downsampling(x[1:], s, out)
    return (x[0], *out), {}


_POOL_ATTRS = dict(kernel=REQUIRED, stride=None, padding=0, ceil_mode=False)
op_spec(OpKind.MAXPOOL2D, **_POOL_ATTRS)(_pool)
op_spec(OpKind.AVGPOOL2D, **_POOL_ATTRS)(_pool)


@op_spec(OpKind.GLOBAL_AVGPOOL)
def _global_avgpool(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    (x,) = shapes
    if len(x) < 2:
        raise ShapeError("expects a (C, *spatial) input")
    return (x[0],), {}


# ---- normalisation -----------------------------------------------------------------------


@op_spec(OpKind.BATCHNORM, eps=1e-5)
def _batchnorm(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    (x,) = shapes
    if len(x) < 2:
        raise ShapeError("expects a (C, *spatial) input")
    return x, {"gamma": (x[0],), "beta": (x[0],)}


@op_spec(OpKind.INSTANCENORM, eps=1e-5, affine=True)
def _instancenorm(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    (x,) = shapes
    if len(x) < 2:
        raise ShapeError("expects a (C, *spatial) input")
    return x, ({"gamma": (x[0],), "beta": (x[0],)} if a["affine"] else {})


@op_spec(OpKind.LAYERNORM, eps=1e-5)
def _layernorm(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    (x,) = shapes
    return x, {"gamma": (x[-1],), "beta": (x[-1],)}


@op_spec(OpKind.RMSNORM, eps=1e-6)
def _rmsnorm(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    (x,) = shapes
    return x, {"gamma": (x[-1],)}


@op_spec(OpKind.SOFTMAX)
def _softmax(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    return shapes[0], {}


# ---- elementwise -------------------------------------------------------------------------


def _same_shape(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    return shapes[0], {}


for _kind in (OpKind.RELU, OpKind.RELU6, OpKind.GELU, OpKind.SIGMOID, OpKind.TANH, OpKind.SILU,
              OpKind.HARDSIGMOID, OpKind.HARDSWISH):
    op_spec(_kind)(_same_shape)


@op_spec(OpKind.LEAKY_RELU, negative_slope=0.01)
def _leaky_relu(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    """max(x, slope x) for slope in [0, 1) (PyTorch's default 0.01; Darknet's "leaky" 0.1)."""
    if not 0.0 <= a["negative_slope"] < 1.0:
        raise ShapeError(f"negative_slope {a['negative_slope']} must lie in [0, 1)")
    return shapes[0], {}


def _broadcast(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    x, y = shapes
    out = []
    for i in range(1, max(len(x), len(y)) + 1):
        dx = x[-i] if i <= len(x) else 1
        dy = y[-i] if i <= len(y) else 1
        if dx != dy and 1 not in (dx, dy):
            raise ShapeError("shapes do not broadcast")
        out.append(max(dx, dy))
    return tuple(reversed(out)), {}


op_spec(OpKind.ADD, n_inputs=2)(_broadcast)
op_spec(OpKind.MUL, n_inputs=2)(_broadcast)


@op_spec(OpKind.ROPE, base=10000.0)
def _rope(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    """Rotary position embedding on (H, S, d) with even d."""
    (x,) = shapes
    if len(x) != 3 or x[2] % 2:
        raise ShapeError("expects (H, S, d) with even d")
    return x, {}


# ---- data movement and lookup ------------------------------------------------------------


@op_spec(OpKind.EMBEDDING, num_embeddings=REQUIRED, embedding_dim=REQUIRED)
def _embedding(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    """Token ids (S,) -> vectors (S, D)."""
    (x,) = shapes
    return (*x, a["embedding_dim"]), {"weight": (a["num_embeddings"], a["embedding_dim"])}


@op_spec(OpKind.RESHAPE, shape=REQUIRED)
def _reshape(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    (x,) = shapes
    target = list(a["shape"])
    if target.count(-1) == 1:
        known = math.prod(d for d in target if d != -1)
        if known <= 0 or math.prod(x) % known:
            raise ShapeError(f"cannot reshape to {tuple(target)}")
        target[target.index(-1)] = math.prod(x) // known
    if math.prod(target) != math.prod(x):
        raise ShapeError(f"cannot reshape to {tuple(a['shape'])}: element counts differ")
    return tuple(target), {}


@op_spec(OpKind.TRANSPOSE, perm=REQUIRED)
def _transpose(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    (x,) = shapes
    perm = tuple(a["perm"])
    if sorted(perm) != list(range(len(x))):
        raise ShapeError(f"perm {perm} is not a permutation of {len(x)} axes")
    return tuple(x[p] for p in perm), {}


@op_spec(OpKind.CONCAT, n_inputs=None, axis=0)
def _concat(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    ax = a["axis"] % len(shapes[0])
    rest = {s[:ax] + s[ax + 1:] for s in shapes}
    if len(rest) != 1 or len({len(s) for s in shapes}) != 1:
        raise ShapeError(f"inputs differ outside axis {a['axis']}")
    out = list(shapes[0])
    out[ax] = sum(s[ax] for s in shapes)
    return tuple(out), {}


@op_spec(OpKind.UPSAMPLE, scale_factor=2)
def _upsample(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    """Nearest-neighbour upsampling of (C, *spatial) by an integer `scale_factor` along every
    spatial axis (PyTorch `nn.Upsample(scale_factor=s, mode="nearest")`, Darknet's upsample)."""
    (x,) = shapes
    s = a["scale_factor"]
    if len(x) < 2:
        raise ShapeError("expects a (C, *spatial) input")
    if not isinstance(s, int) or isinstance(s, bool) or s < 1:
        raise ShapeError(f"scale_factor {s!r} must be an integer >= 1")
    return (x[0], *(d * s for d in x[1:])), {}


# ---- ops that imported models need (sub, div, const_binary, slice, unmapped) -------------

op_spec(OpKind.SUB, n_inputs=2)(_broadcast)
op_spec(OpKind.DIV, n_inputs=2)(_broadcast)
CONST_FNS = ("add", "sub", "mul", "div", "pow")


@op_spec(OpKind.CONST_BINARY, fn=REQUIRED, reverse=False, scalar=None, const_shape=())
def _const_binary(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    """x `fn` c (or c `fn` x with `reverse`), c a constant: the float attribute `scalar`, or
    else the parameter "const" of per-sample shape `const_shape`, broadcast against x.
    NB: a tensor constant counts as parameters (a learned bias or position table in the
    models this comes from; a constant buffer such as a mask is counted too)."""
    if a["fn"] not in CONST_FNS:
        raise ShapeError(f"fn {a['fn']!r} not in {CONST_FNS}")
    if a["scalar"] is not None:
        return shapes[0], {}
    c = tuple(a["const_shape"])
    out, _ = _broadcast((shapes[0], c), a)
    return out, {"const": c}


def slice_range(size: int, start: int, end: int, step: int) -> range:
    """Indices an ONNX/numpy slice start:end:step (step >= 1) takes along an axis of `size`:
    negative bounds count from the end, then both are clamped to [0, size]."""
    if step < 1:
        raise ShapeError(f"slice step {step} must be >= 1")
    return range(*slice(start, end, step).indices(size))


@op_spec(OpKind.SLICE, axes=REQUIRED, starts=REQUIRED, ends=REQUIRED, steps=None)
def _slice(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    """x[start:end:step] along each of `axes` (per-sample axes, negative from the end)."""
    (x,) = shapes
    axes, starts, ends = tuple(a["axes"]), tuple(a["starts"]), tuple(a["ends"])
    steps = tuple(a["steps"]) if a["steps"] is not None else (1,) * len(axes)
    if not len(axes) == len(starts) == len(ends) == len(steps):
        raise ShapeError("axes, starts, ends and steps differ in length")
    out = list(x)
    for ax, st, en, sp in zip(axes, starts, ends, steps, strict=True):
        if not -len(x) <= ax < len(x):
            raise ShapeError(f"axis {ax} out of range for rank {len(x)}")
        out[ax % len(x)] = len(slice_range(x[ax % len(x)], st, en, sp))
    return tuple(out), {}


@op_spec(OpKind.UNMAPPED, n_inputs=None, source_op=REQUIRED, shape=REQUIRED, weights=())
def _unmapped(shapes: tuple[Shape, ...], a: dict[str, Any]) -> tuple[Shape, dict]:
    """A node of an imported model that the vocabulary does not cover (`source_op`, e.g.
    "onnx:NonMaxSuppression"). Its output shape is given (`shape`) and its parameters are
    the (name, shape) pairs of `weights`. It has no cost formula, so it is always reported
    as unsupported and never costed at zero."""
    return tuple(a["shape"]), {name: tuple(s) for name, s in a["weights"]}
