"""Dense matmul-like kernels: linear, matmul, bmm, attention (causal, GQA) and LSTM."""

from __future__ import annotations

import math

import numpy as np

from accelsim.kernels.forward.common import bias_of, f32
from accelsim.kernels.forward.elementwise import sigmoid
from accelsim.kernels.forward.pool_norm import softmax
from accelsim.kernels.registry import kernel
from accelsim.workload.ops import Op, OpKind


@kernel(OpKind.LINEAR)
def linear_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """x (N, ..., in) @ weight (out, in).T + bias (out,) -> (N, ..., out)."""
    y = f32(xs[0]) @ f32(params["weight"]).T
    b = bias_of(params)
    if b is not None:
        y += b
    return y


@kernel(OpKind.MATMUL, OpKind.BMM)
def matmul_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, ..., M, K) @ (N, ..., K, P) -> (N, ..., M, P)."""
    return np.matmul(f32(xs[0]), f32(xs[1]))


def causal_mask(s: int, s_kv: int) -> np.ndarray:
    """(S, S_kv) bool, True where query i may NOT see key j (j > i)."""
    # NB: top-left aligned like PyTorch's scaled_dot_product_attention(is_causal=True); with
    # S < S_kv (a KV cache) HF aligns bottom-right instead. Identical when S == S_kv.
    return np.triu(np.ones((s, s_kv), dtype=bool), k=1)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False) -> np.ndarray:
    """softmax(q k^T / sqrt(d)) v: q (N, H, S, d), k and v (N, H_kv, S_kv, d) -> (N, H, S, d).

    Grouped-query: query head h reads kv head h // (H / H_kv) (HF `repeat_kv` order)."""
    n, h, s, d = q.shape
    h_kv, s_kv = k.shape[1], k.shape[2]
    qg = q.reshape(n, h_kv, h // h_kv, s, d) * np.float32(1.0 / math.sqrt(d))
    scores = np.matmul(qg, k[:, :, None].swapaxes(-1, -2))  # (N, H_kv, G, S, S_kv)
    if causal:
        scores = np.where(causal_mask(s, s_kv), np.float32(-np.inf), scores)
    return np.matmul(softmax(scores), v[:, :, None]).reshape(n, h, s, d)


@kernel(OpKind.ATTENTION)
def attention_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """q (N, H, S, d), k = v (N, H_kv, S_kv, d) -> (N, H, S, d)."""
    q, k, v = (f32(x) for x in xs)
    return attention(q, k, v, bool(op.attrs["causal"]))


def lstm_cell(x_t: np.ndarray, h: np.ndarray, c: np.ndarray, w_ih: np.ndarray,
              w_hh: np.ndarray, b_ih: np.ndarray, b_hh: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """One LSTM step, PyTorch gate order (i, f, g, o): x_t (N, in), h and c (N, hid),
    w_ih (4 hid, in), w_hh (4 hid, hid) -> new (h, c)."""
    z = x_t @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    i, f, g, o = np.split(z, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def lstm(x: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray, b_ih: np.ndarray,
         b_hh: np.ndarray) -> np.ndarray:
    """One LSTM layer from zero state: x (N, S, in) -> hidden states (N, S, hid)."""
    n, s = x.shape[:2]
    hid = w_hh.shape[1]
    h = np.zeros((n, hid), dtype=np.float32)
    c = np.zeros((n, hid), dtype=np.float32)
    out = np.empty((n, s, hid), dtype=np.float32)
    for t in range(s):  # the recurrence is inherently sequential
        h, c = lstm_cell(x[:, t], h, c, w_ih, w_hh, b_ih, b_hh)
        out[:, t] = h
    return out


@kernel(OpKind.LSTM)
def lstm_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """x (N, S, in) -> (N, S, hidden_size); initial h and c are zero."""
    p = {k: f32(v) for k, v in params.items()}
    return lstm(f32(xs[0]), p["w_ih"], p["w_hh"], p["b_ih"], p["b_hh"])
