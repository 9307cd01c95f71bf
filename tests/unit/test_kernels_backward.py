"""Backward kernels of linear and conv2d against central finite differences in float64."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from accelsim.errors import ShapeError
from accelsim.kernels.backward import backward, col2im, im2col
from accelsim.workload.ops import Op, make_op

EPS = 1e-6
TOL = 1e-5


def _conv_ref(op: Op, x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    """Naive float64 conv2d: loops over output positions and groups."""
    a = op.attrs
    k = (a["kernel"],) * 2 if isinstance(a["kernel"], int) else a["kernel"]
    s = (a["stride"],) * 2 if isinstance(a["stride"], int) else a["stride"]
    pad = (a["padding"],) * 2 if isinstance(a["padding"], int) else a["padding"]
    d = (a["dilation"],) * 2 if isinstance(a["dilation"], int) else a["dilation"]
    w, g = p["weight"], a["groups"]
    o, cg = w.shape[:2]
    og = o // g
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh, ow = op.output_shape[1:]
    y = np.zeros((x.shape[0], *op.output_shape))
    for i, j, gi in itertools.product(range(oh), range(ow), range(g)):
        patch = xp[:, gi * cg:(gi + 1) * cg,
                   i * s[0]:i * s[0] + d[0] * (k[0] - 1) + 1:d[0],
                   j * s[1]:j * s[1] + d[1] * (k[1] - 1) + 1:d[1]]
        y[:, gi * og:(gi + 1) * og, i, j] = np.einsum(
            "bckl,ockl->bo", patch, w[gi * og:(gi + 1) * og])
    if "bias" in p:
        y += p["bias"][None, :, None, None]
    return y


def _linear_ref(op: Op, x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    y = x @ p["weight"].T
    return y + p["bias"] if "bias" in p else y


def _numeric_grad(f, a: np.ndarray) -> np.ndarray:
    """Central differences of scalar f() w.r.t. every element of `a` (modified in place)."""
    grad = np.zeros_like(a)
    flat, gflat = a.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + EPS
        fp = f()
        flat[i] = old - EPS
        fm = f()
        flat[i] = old
        gflat[i] = (fp - fm) / (2 * EPS)
    return grad


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _check(op: Op, ref, batch: int = 2, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, *op.input_shapes[0]))
    params = {k: rng.standard_normal(s) for k, s in op.param_shapes.items()}
    dy = rng.standard_normal((batch, *op.output_shape))

    def loss() -> float:
        return float(np.sum(ref(op, x, params) * dy))

    assert ref(op, x, params).shape == dy.shape
    dx, dw, db = backward(op, [x], params, dy)
    assert dx.dtype == np.float64 and dx.shape == x.shape
    assert _rel(dx, _numeric_grad(loss, x)) < TOL
    assert _rel(dw, _numeric_grad(loss, params["weight"])) < TOL
    if "bias" in params:
        assert _rel(db, _numeric_grad(loss, params["bias"])) < TOL
    else:
        assert db is None


@pytest.mark.parametrize(
    "attrs",
    [
        dict(out_channels=4, kernel=3),
        dict(out_channels=4, kernel=3, stride=2, padding=1),
        dict(out_channels=6, kernel=(3, 2), stride=(2, 1), padding=(1, 0), bias=False),
        dict(out_channels=4, kernel=3, padding=2, dilation=2),
        dict(out_channels=6, kernel=3, stride=2, padding=1, groups=2),
        dict(out_channels=4, kernel=3, padding=1, groups=4),  # depthwise
        dict(out_channels=8, kernel=1, stride=2, groups=2, bias=False),
    ],
)
def test_conv2d_backward_matches_finite_differences(attrs: dict) -> None:
    op = make_op("c", "conv2d", ("x",), ((4, 7, 6),), attrs)
    _check(op, _conv_ref)


@pytest.mark.parametrize("shape,bias", [((5,), True), ((3, 5), False), ((2, 3, 5), True)])
def test_linear_backward_matches_finite_differences(shape: tuple, bias: bool) -> None:
    op = make_op("fc", "linear", ("x",), (shape,), dict(out_features=4, bias=bias))
    _check(op, _linear_ref)


def test_col2im_is_the_adjoint_of_im2col() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 6, 5, 4))  # 3 spatial dims
    k, s, p, d = (2, 3, 1), (2, 1, 1), (1, 0, 1), (1, 1, 2)
    cols = im2col(x, k, s, p, d)
    c = rng.standard_normal(cols.shape)
    # <im2col(x), c> == <x, col2im(c)>
    assert np.isclose(np.sum(cols * c), np.sum(x * col2im(c, x.shape, s, p, d)))


def test_backward_of_unsupported_kind_raises() -> None:
    op = make_op("r", "relu", ("x",), ((4,),), {})
    with pytest.raises(ShapeError, match="no backward kernel"):
        backward(op, [np.zeros((1, 4))], {}, np.zeros((1, 4)))
