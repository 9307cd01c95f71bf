"""Forward kernels against naive references written with explicit Python loops."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from accelsim.errors import AccelsimError, ShapeError
from accelsim.kernels.forward import KERNELS, run_op
from accelsim.kernels.params import init_params
from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.ops import Op, OpKind, make_op
from accelsim.workload.zoo import build_model

N = 2  # batch


def mk(kind: str, *shapes: tuple[int, ...], **attrs: object) -> Op:
    return make_op("t", kind, tuple(f"in{i}" for i in range(len(shapes))), shapes, attrs)


def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def run(op: Op, *xs: np.ndarray, seed: int = 1) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    params = init_params(op, np.random.default_rng(seed))
    for name in params:  # non-trivial biases / affine terms
        if name in ("bias", "beta", "gamma", "b_ih", "b_hh"):
            params[name] = rand(np.random.default_rng(seed + 7), *params[name].shape)
    return run_op(op, list(xs), params), params


def close(a: np.ndarray, b: np.ndarray, tol: float = 1e-4) -> None:
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_every_op_kind_has_a_kernel() -> None:
    assert set(KERNELS) == set(OpKind)


def naive_conv(x, w, b, s, p, d, g):  # x (N, C, *sp), w (O, C/g, *k); any rank
    nd = w.ndim - 2
    o, cg = w.shape[:2]
    out_sp = [(x.shape[2 + i] + 2 * p[i] - d[i] * (w.shape[2 + i] - 1) - 1) // s[i] + 1
              for i in range(nd)]
    y = np.zeros((x.shape[0], o, *out_sp))
    for n, oc in itertools.product(range(x.shape[0]), range(o)):
        grp = oc // (o // g)
        for pos in itertools.product(*map(range, out_sp)):
            acc = 0.0 if b is None else float(b[oc])
            for ci in range(cg):
                for tap in itertools.product(*map(range, w.shape[2:])):
                    idx = [pos[i] * s[i] - p[i] + tap[i] * d[i] for i in range(nd)]
                    if all(0 <= idx[i] < x.shape[2 + i] for i in range(nd)):
                        acc += x[(n, grp * cg + ci, *idx)] * w[(oc, ci, *tap)]
            y[(n, oc, *pos)] = acc
    return y


CONV_CASES = [  # kind, (C, *spatial), attrs
    ("conv2d", (3, 6, 6), dict(out_channels=4, kernel=3)),
    ("conv2d", (3, 7, 6), dict(out_channels=4, kernel=3, stride=2, padding=1)),
    ("conv2d", (2, 7, 7), dict(out_channels=3, kernel=3, padding=2, dilation=2, bias=False)),
    ("conv2d", (4, 6, 5), dict(out_channels=6, kernel=(3, 2), stride=(1, 2), padding=(1, 0),
                               groups=2)),
    ("conv2d", (4, 6, 6), dict(out_channels=4, kernel=3, stride=2, padding=1, groups=4)),  # dw
    ("conv2d", (3, 5, 5), dict(out_channels=6, kernel=3, padding=1, groups=3)),  # dw, mult. 2
    ("conv2d", (4, 5, 5), dict(out_channels=3, kernel=1, stride=2)),  # 1x1 strided
    ("conv2d", (4, 5, 5), dict(out_channels=3, kernel=1, padding=1)),
    ("conv3d", (2, 4, 5, 5), dict(out_channels=3, kernel=3, padding=1)),
    ("conv3d", (2, 4, 5, 5), dict(out_channels=4, kernel=(2, 3, 3), stride=2, groups=2)),
    ("conv3d", (2, 5, 5, 5), dict(out_channels=2, kernel=2, padding=1, dilation=2)),
]


@pytest.mark.parametrize(("kind", "shape", "attrs"), CONV_CASES)
def test_conv(kind, shape, attrs) -> None:
    op = mk(kind, shape, **attrs)
    x = rand(np.random.default_rng(0), N, *shape)
    y, p = run(op, x)
    a, nd = op.attrs, len(shape) - 1
    t = [(v,) * nd if isinstance(v, int) else v for v in (a["stride"], a["padding"], a["dilation"])]
    close(y, naive_conv(x, p["weight"], p.get("bias"), *t, a["groups"]))


@pytest.mark.parametrize(("k", "s"), [(2, 2), (3, 2), (3, 1), (2, 3)])
def test_conv_transpose3d(k: int, s: int) -> None:
    op = mk("conv_transpose3d", (2, 3, 2, 3), out_channels=3, kernel=k, stride=s)
    x = rand(np.random.default_rng(0), N, 2, 3, 2, 3)
    y, p = run(op, x)
    w, ref = p["weight"], np.zeros(y.shape)
    for n, c, d, h, ww in np.ndindex(x.shape):
        for o, kd, kh, kw in np.ndindex(w.shape[1:]):
            z = x[n, c, d, h, ww] * w[c, o, kd, kh, kw]
            ref[n, o, d * s + kd, h * s + kh, ww * s + kw] += z
    close(y, ref + p["bias"].reshape(-1, 1, 1, 1))


@pytest.mark.parametrize("shape", [(5,), (3, 5)])
def test_linear(shape) -> None:
    op = mk("linear", shape, out_features=4)
    x = rand(np.random.default_rng(0), N, *shape)
    y, p = run(op, x)
    ref = np.zeros(y.shape)
    for idx in np.ndindex(y.shape):
        ref[idx] = p["bias"][idx[-1]] + sum(x[(*idx[:-1], i)] * p["weight"][idx[-1], i]
                                            for i in range(shape[-1]))
    close(y, ref)


@pytest.mark.parametrize(("kind", "sa", "sb"), [("matmul", (3, 4), (4, 5)),
                                                ("bmm", (2, 3, 4), (2, 4, 2)),
                                                ("bmm", (2, 2, 3, 4), (2, 2, 4, 1))])
def test_matmul_bmm(kind, sa, sb) -> None:
    rng = np.random.default_rng(0)
    a, b = rand(rng, N, *sa), rand(rng, N, *sb)
    y, _ = run(mk(kind, sa, sb), a, b)
    ref = np.zeros(y.shape)
    for idx in np.ndindex(y.shape):
        ref[idx] = sum(a[(*idx[:-1], k)] * b[(*idx[:-2], k, idx[-1])] for k in range(sa[-1]))
    close(y, ref)


def naive_attention(q, k, v, causal):
    n_, h, s, d = q.shape
    group = h // k.shape[1]
    out = np.zeros(q.shape)
    for n, hh, i in itertools.product(range(n_), range(h), range(s)):
        kv = hh // group
        js = [j for j in range(k.shape[2]) if not causal or j <= i]
        sc = [sum(q[n, hh, i, t] * k[n, kv, j, t] for t in range(d)) / math.sqrt(d) for j in js]
        m = max(sc)
        e = [math.exp(v_ - m) for v_ in sc]
        for t in range(d):
            num = sum(e_ * v[n, kv, j, t] for e_, j in zip(e, js, strict=True))
            out[n, hh, i, t] = num / sum(e)
    return out


@pytest.mark.parametrize(("h", "h_kv", "s", "s_kv", "causal"), [
    (2, 2, 4, 4, False), (2, 2, 5, 5, True), (4, 2, 4, 4, True), (4, 1, 3, 6, False),
    (6, 2, 3, 5, True)])
def test_attention(h, h_kv, s, s_kv, causal) -> None:
    rng = np.random.default_rng(0)
    q, k, v = rand(rng, N, h, s, 4), rand(rng, N, h_kv, s_kv, 4), rand(rng, N, h_kv, s_kv, 4)
    y, _ = run(mk("attention", (h, s, 4), (h_kv, s_kv, 4), (h_kv, s_kv, 4), causal=causal),
               q, k, v)
    close(y, naive_attention(q, k, v, causal))


def test_lstm_against_the_cell_equations() -> None:
    op = mk("lstm", (5, 3), hidden_size=4)
    x = rand(np.random.default_rng(0), N, 5, 3)
    y, p = run(op, x)
    sig = np.vectorize(lambda z: 1.0 / (1.0 + math.exp(-z)))
    wi, wh, bi, bh = (p[k].astype(np.float64) for k in ("w_ih", "w_hh", "b_ih", "b_hh"))
    for n in range(N):
        h, c = np.zeros(4), np.zeros(4)
        for t in range(5):
            gates = [wi[j * 4:(j + 1) * 4] @ x[n, t] + bi[j * 4:(j + 1) * 4]
                     + wh[j * 4:(j + 1) * 4] @ h + bh[j * 4:(j + 1) * 4] for j in range(4)]
            i_t, f_t, g_t, o_t = sig(gates[0]), sig(gates[1]), np.tanh(gates[2]), sig(gates[3])
            c = f_t * c + i_t * g_t
            h = o_t * np.tanh(c)
            close(y[n, t], h)


def naive_pool(x, k, s, p, out, mode):  # PyTorch semantics, count_include_pad=True
    n_, c_, h, w = x.shape
    y = np.zeros((n_, c_, *out))
    for n, c, i, j in itertools.product(range(n_), range(c_), range(out[0]), range(out[1])):
        h0, w0 = i * s - p, j * s - p
        vals = [x[n, c, a, b] for a in range(max(h0, 0), min(h0 + k, h))
                for b in range(max(w0, 0), min(w0 + k, w))]
        div = (min(h0 + k, h + p) - h0) * (min(w0 + k, w + p) - w0)
        y[n, c, i, j] = max(vals) if mode == "max" else sum(vals) / div
    return y


POOL_CASES = [((2, 6, 6), 2, None, 0, False), ((2, 7, 7), 3, 2, 1, False),
              ((1, 6, 6), 3, 2, 0, True), ((1, 6, 7), 3, 2, 1, True), ((2, 5, 5), 3, 1, 1, False),
              ((1, 5, 5), 2, 2, 1, True)]


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize(("shape", "k", "s", "p", "ceil"), POOL_CASES)
def test_pools(mode, shape, k, s, p, ceil) -> None:
    op = mk(f"{mode}pool2d", shape, kernel=k, stride=s, padding=p, ceil_mode=ceil)
    x = rand(np.random.default_rng(0), N, *shape)
    y, _ = run(op, x)
    close(y, naive_pool(x, k, s if s else k, p, op.output_shape[1:], mode))


def test_avgpool_counts_padding_and_global_avgpool() -> None:
    y, _ = run(mk("avgpool2d", (1, 2, 2), kernel=2, stride=1, padding=1), np.ones((1, 1, 2, 2)))
    close(y[0, 0], np.array([[0.25, 0.5, 0.25], [0.5, 1.0, 0.5], [0.25, 0.5, 0.25]]))
    for shape in [(3, 4, 5), (2, 2, 3, 3)]:
        x = rand(np.random.default_rng(0), N, *shape)
        y, _ = run(mk("global_avgpool", shape), x)
        for n, c in np.ndindex(N, shape[0]):
            close(y[n, c], sum(x[n, c].flat) / x[n, c].size)


def naive_norm(vals: list[float], eps: float) -> list[float]:
    m = sum(vals) / len(vals)
    var = sum((v - m) ** 2 for v in vals) / len(vals)
    return [(v - m) / math.sqrt(var + eps) for v in vals]


@pytest.mark.parametrize("shape", [(3, 4, 4), (2, 3, 2, 2), (4, 5)])
def test_batchnorm_uses_batch_statistics(shape) -> None:
    x = rand(np.random.default_rng(0), N, *shape) * 3 + 1
    y, p = run(mk("batchnorm", shape), x)
    for c in range(shape[0]):
        ref = np.array(naive_norm(list(x[:, c].ravel()), 1e-5)).reshape(x[:, c].shape)
        close(y[:, c], ref * p["gamma"][c] + p["beta"][c])


@pytest.mark.parametrize("affine", [True, False])
def test_instancenorm(affine: bool) -> None:
    x = rand(np.random.default_rng(0), N, 3, 4, 5)
    y, p = run(mk("instancenorm", (3, 4, 5), affine=affine), x)
    for n, c in np.ndindex(N, 3):
        ref = np.array(naive_norm(list(x[n, c].ravel()), 1e-5)).reshape(4, 5)
        close(y[n, c], ref * p["gamma"][c] + p["beta"][c] if affine else ref)


@pytest.mark.parametrize("shape", [(6,), (3, 6), (2, 3, 4)])
def test_layernorm_rmsnorm(shape) -> None:
    x = rand(np.random.default_rng(0), N, *shape) + 0.5
    y, p = run(mk("layernorm", shape), x)
    z, q = run(mk("rmsnorm", shape), x)
    for idx in np.ndindex(x.shape[:-1]):
        close(y[idx], np.array(naive_norm(list(x[idx]), 1e-5)) * p["gamma"] + p["beta"])
        rms = math.sqrt(sum(v * v for v in x[idx]) / shape[-1] + 1e-6)
        close(z[idx], x[idx] / rms * q["gamma"])


@pytest.mark.parametrize("shape", [(5,), (3, 7), (2, 3, 4)])
def test_softmax(shape) -> None:
    x = rand(np.random.default_rng(0), N, *shape) * 5
    x[..., 0] += 1000.0  # stability
    y, _ = run(mk("softmax", shape), x)
    close(y.sum(axis=-1), np.ones(y.shape[:-1]), 1e-5)
    for idx in np.ndindex(x.shape[:-1]):
        m = max(x[idx])
        e = [math.exp(v - m) for v in x[idx]]
        close(y[idx], np.array(e) / sum(e), 1e-5)


UNARY_REFS = {
    "relu": lambda v: max(v, 0.0),
    "relu6": lambda v: min(max(v, 0.0), 6.0),
    "gelu": lambda v: 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))),
    "sigmoid": lambda v: 1 / (1 + math.exp(-v)) if v > -700 else 0.0,
    "tanh": math.tanh,
    "silu": lambda v: v / (1 + math.exp(-v)) if v > -700 else 0.0,
    "hardsigmoid": lambda v: 0.0 if v <= -3 else 1.0 if v >= 3 else v / 6 + 0.5,
    "hardswish": lambda v: 0.0 if v <= -3 else v if v >= 3 else v * (v + 3) / 6,
}


@pytest.mark.parametrize("kind", sorted(UNARY_REFS))
def test_unary(kind: str) -> None:
    x = rand(np.random.default_rng(0), N, 3, 5) * 4
    x[0, 0, :3] = [-1000.0, 1000.0, 7.0]  # no overflow, relu6 clip
    with np.errstate(all="raise"):
        y, _ = run(mk(kind, (3, 5)), x)
    ref = np.array([UNARY_REFS[kind](float(v)) for v in x.flat]).reshape(x.shape)
    close(y, ref, 1e-5)
    if kind == "gelu":  # the tanh form stays within 1e-3 of the exact erf form
        exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.flat])
        assert np.abs(y.ravel() - exact).max() < 1e-3


@pytest.mark.parametrize("slope", [0.01, 0.1, 0.0])
def test_leaky_relu(slope: float) -> None:
    x = rand(np.random.default_rng(0), N, 4, 3)
    y, _ = run(mk("leaky_relu", (4, 3), negative_slope=slope), x)
    ref = np.array([v if v > 0 else slope * v for v in x.flat]).reshape(x.shape)
    close(y, ref, 1e-6)


@pytest.mark.parametrize(("shape", "s"), [((2, 3, 4), 2), ((1, 2, 2), 3), ((3, 5), 2)])
def test_upsample_nearest(shape: tuple[int, ...], s: int) -> None:
    x = rand(np.random.default_rng(0), N, *shape)
    y, _ = run(mk("upsample", shape, scale_factor=s), x)
    assert y.shape == (N, shape[0], *(d * s for d in shape[1:]))
    for idx in np.ndindex(y.shape):  # output (i, j) takes input (i // s, j // s)
        assert y[idx] == x[(idx[0], idx[1], *(i // s for i in idx[2:]))]


@pytest.mark.parametrize("kind", ["add", "mul"])
@pytest.mark.parametrize(("sa", "sb"), [((3, 4), (3, 4)), ((3, 4), (4,)), ((4, 2, 2), (4, 1, 1)),
                                        ((1, 4), (3, 1)), ((5,), (2, 3, 5))])
def test_add_mul_broadcast_per_sample_shapes(kind, sa, sb) -> None:
    rng = np.random.default_rng(0)
    a, b = rand(rng, N, *sa), rand(rng, N, *sb)
    op = mk(kind, sa, sb)
    y, _ = run(op, a, b)
    r = len(op.output_shape)

    def at(t, s, idx):  # idx (n, *out index); per-sample axes right-aligned, size 1 -> 0
        tail = idx[1 + r - len(s):]
        return t[(idx[0], *(0 if d == 1 else i for d, i in zip(s, tail, strict=True)))]

    ref = np.zeros(y.shape)
    for idx in np.ndindex(y.shape):
        u, v = at(a, sa, idx), at(b, sb, idx)
        ref[idx] = u + v if kind == "add" else u * v
    close(y, ref)


@pytest.mark.parametrize(("h", "s", "d", "base"), [(2, 5, 4, 10000.0), (1, 3, 8, 500000.0)])
def test_rope_rotate_half(h, s, d, base) -> None:
    x = rand(np.random.default_rng(0), N, h, s, d)
    y, _ = run(mk("rope", (h, s, d), base=base), x)
    ref, half = np.zeros(x.shape), d // 2
    for n, hh, pos, i in itertools.product(range(N), range(h), range(s), range(half)):
        th = pos * base ** (-2 * i / d)
        a, b = x[n, hh, pos, i], x[n, hh, pos, i + half]
        ref[n, hh, pos, i] = a * math.cos(th) - b * math.sin(th)
        ref[n, hh, pos, i + half] = b * math.cos(th) + a * math.sin(th)
    close(y, ref, 1e-5)
    close(y[:, :, 0], x[:, :, 0])  # position 0 is the identity


def test_embedding() -> None:
    op = mk("embedding", (4,), num_embeddings=10, embedding_dim=3)
    ids = np.array([[0, 9, 3, 3], [1, 2, 3, 4]], dtype=np.int64)
    y, p = run(op, ids)
    for n, s in np.ndindex(ids.shape):
        close(y[n, s], p["weight"][ids[n, s]])
    with pytest.raises(AccelsimError, match=r"\[0, 10\)"):
        run_op(op, [ids + 1], p)


def test_reshape_transpose_concat() -> None:
    rng = np.random.default_rng(0)
    x = rand(rng, N, 2, 3, 4)
    y, _ = run(mk("reshape", (2, 3, 4), shape=(6, -1)), x)
    assert y.shape == (N, 6, 4) and np.array_equal(y.ravel(), x.ravel())
    y, _ = run(mk("transpose", (2, 3, 4), perm=(2, 0, 1)), x)
    for n, i, j, k in np.ndindex(x.shape):
        assert y[n, k, i, j] == x[n, i, j, k]
    z = rand(rng, N, 2, 3, 1)
    for axis in (2, -1):
        y, _ = run(mk("concat", (2, 3, 4), (2, 3, 1), axis=axis), x, z)
        for n, i, j, k in np.ndindex(y.shape):
            assert y[n, i, j, k] == (x[n, i, j, k] if k < 4 else z[n, i, j, 0])


def forward(graph: Graph, batch: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    env: dict[str, np.ndarray] = {}
    for name, (shape, dtype) in graph.inputs.items():
        env[name] = (rng.integers(0, 10, (batch, *shape)) if dtype == "index"
                     else rand(rng, batch, *shape))
    for op in graph.ops:
        env[op.name] = run_op(op, [env[t] for t in op.inputs], init_params(op, rng))
        y = env[op.name]
        assert y.shape == (batch, *op.output_shape) and y.dtype == np.float32, op.name
        assert np.isfinite(y).all(), op.name


def tiny_transformer() -> Graph:
    g = GraphBuilder("tiny")
    x = g.embedding(g.input("ids", (6,), "index"), num_embeddings=10, embedding_dim=16)
    y = g.rmsnorm(x)
    q = g.transpose(g.reshape(g.linear(y, out_features=16), shape=(6, 4, 4)), perm=(1, 0, 2))
    kv = g.transpose(g.reshape(g.linear(y, out_features=8), shape=(6, 2, 4)), perm=(1, 0, 2))
    a = g.attention(g.rope(q), g.rope(kv), kv, causal=True)
    a = g.reshape(g.transpose(a, perm=(1, 0, 2)), shape=(6, 16))
    x = g.add(x, g.linear(a, out_features=16))
    m = g.mul(g.silu(g.linear(g.layernorm(x), out_features=16)), g.gelu(g.sigmoid(g.tanh(x))))
    b = g.bmm(g.reshape(x, shape=(2, 3, 16)), g.reshape(x, shape=(2, 16, 3)))
    g.concat(g.lstm(m, hidden_size=8), g.reshape(b, shape=(6, 3)), axis=-1)
    return g.build()


def tiny_volume() -> Graph:
    g = GraphBuilder("vol")
    x = g.conv3d(g.input("v", (2, 6, 6, 6)), out_channels=4, kernel=3, padding=1)
    x = g.relu6(g.instancenorm(x))
    x = g.conv_transpose3d(x, out_channels=2, kernel=2, stride=2)
    x = g.leaky_relu(g.hardswish(g.hardsigmoid(x)), negative_slope=0.1)
    y = g.avgpool2d(g.reshape(x, shape=(24, 12, 12)), kernel=3, stride=2, ceil_mode=True)
    y = g.avgpool2d(g.upsample(y, scale_factor=2), kernel=2)
    g.softmax(g.matmul(g.reshape(y, shape=(24, 36)), g.reshape(y, shape=(36, 24))))
    return g.build()


@pytest.mark.parametrize("make", [lambda: build_model("resnet18", image_size=64),
                                  tiny_transformer, tiny_volume])
def test_graph_output_shapes(make) -> None:
    forward(make(), batch=2)


def test_init_params() -> None:
    op = mk("conv2d", (64, 8, 8), out_channels=128, kernel=3)
    p = init_params(op, np.random.default_rng(0))
    assert p["weight"].dtype == np.float32 and p["weight"].shape == (128, 64, 3, 3)
    assert abs(p["weight"].std() - math.sqrt(2 / (64 * 9))) < 0.002
    assert not p["bias"].any()
    assert np.array_equal(init_params(op, np.random.default_rng(0))["weight"], p["weight"])
    bn = init_params(mk("batchnorm", (4, 2, 2)), np.random.default_rng(0))
    assert (bn["gamma"] == 1).all() and (bn["beta"] == 0).all()


def test_run_op_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    op = mk("relu", (3,))
    with pytest.raises(ShapeError, match="input 0"):
        run_op(op, [np.zeros((2, 4), np.float32)], {})
    monkeypatch.delitem(KERNELS, OpKind.RELU)
    with pytest.raises(NotImplementedError, match="relu"):
        run_op(op, [np.zeros((2, 3), np.float32)], {})
