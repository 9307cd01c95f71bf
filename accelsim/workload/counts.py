"""The op -> cost table: FLOPs, elements moved, memory kept and GEMM shapes, per sample.

One formula per op kind, registered with `@formula(kind)` beside it (fvcore style). Shapes in,
counts out. Counts are *per sample* except `weight_elems` (read once per batch), so a batch of
N costs N x the per-sample figures plus the weights: see `accelsim.workload.tables`.
A multiply-add counts as 2 FLOPs. An op kind without a formula is reported by
`count_graph` as unsupported; it is never costed at zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from accelsim.workload.ops import Op, OpKind


@dataclass(frozen=True)
class Gemm:
    """`count` independent (m x k) @ (k x n) products for one sample. With `batch_in_m` a batch
    of N stacks into M (N*m rows: convolutions, linear layers); otherwise it multiplies `count`
    (batched matmuls, attention heads). `conv3x3_h`, `conv3x3_w`: the output height and width
    of a 2-D 3x3 convolution at stride 1, dilation 1 and one group (the shape a Winograd
    F(m x m, 3 x 3) algorithm applies to), 0 for any other GEMM. `im2col`: of a 2-D
    convolution at dilation 1, (ifmap h, ifmap w, channels per group, filter h, filter w,
    stride h, stride w, ofmap h, ofmap w), the shape its im2col rows are read from
    (`devices.systolic.im2col`); () for any other GEMM."""

    m: int
    n: int
    k: int
    count: int = 1
    batch_in_m: bool = True
    conv3x3_h: int = 0
    conv3x3_w: int = 0
    im2col: tuple[int, ...] = ()

    @property
    def macs(self) -> int:
        return self.m * self.n * self.k * self.count


@dataclass(frozen=True)
class OpCounts:
    """Abstract cost of one op for one sample (weights: per batch). Units: FLOPs, elements."""

    fwd_flops: float
    bwd_input_flops: float  # gradient w.r.t. the op's inputs
    bwd_weight_flops: float  # gradient w.r.t. its parameters
    read_elems: float  # activation elements read in the forward pass
    write_elems: float  # activation elements written in the forward pass
    weight_elems: float  # parameter elements read, once per batch
    saved_elems: float  # activation elements kept for the backward pass
    gemms: tuple[Gemm, ...] = ()


Formula = Callable[[Op], OpCounts]
FORMULAS: dict[OpKind, Formula] = {}


def formula(*kinds: OpKind) -> Callable[[Formula], Formula]:
    def register(fn: Formula) -> Formula:
        for k in kinds:
            FORMULAS[k] = fn
        return fn

    return register


def count_op(op: Op) -> OpCounts | None:
    """Counts of `op`, or None when its kind has no formula (report it as unsupported)."""
    fn = FORMULAS.get(op.kind)
    return fn(op) if fn else None


def _n(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def _in_elems(op: Op) -> int:
    return sum(_n(s) for s in op.input_shapes)


# ---- matmul-like -------------------------------------------------------------------------


def _gemm_op(op: Op, gemms: tuple[Gemm, ...], saved: float) -> OpCounts:
    """Shared shape of a weighted GEMM op: dX and dW each cost one forward's MACs."""
    fwd = 2.0 * sum(g.macs for g in gemms)
    return OpCounts(fwd, fwd, fwd if op.weight_elems else 0.0, _in_elems(op),
                    _n(op.output_shape), op.weight_elems, saved, gemms)


@formula(OpKind.CONV2D, OpKind.CONV3D)
def _conv(op: Op) -> OpCounts:
    # NB: the bias add (one FLOP per output) is left out, as published MAC counts do.
    c, g = op.input_shapes[0][0], op.attrs["groups"]
    o, *spatial = op.output_shape
    kvol = _n(op.param_shapes["weight"][2:])
    unit = [v for name in ("stride", "dilation")
            for v in (op.attrs[name] if isinstance(op.attrs[name], tuple | list)
                      else (op.attrs[name],))]
    unit_3x3 = (len(spatial) == 2 and tuple(op.param_shapes["weight"][2:]) == (3, 3)
                and g == 1 and all(v == 1 for v in unit))
    h, w = spatial if unit_3x3 else (0, 0)
    im2col: tuple[int, ...] = ()
    pair = {n: op.attrs[n] if isinstance(op.attrs[n], tuple | list) else (op.attrs[n],) * 2
            for n in ("stride", "dilation")}
    if len(spatial) == 2 and tuple(pair["dilation"]) == (1, 1):
        im2col = (*op.input_shapes[0][1:], c // g, *op.param_shapes["weight"][2:],
                  *pair["stride"], *spatial)
    gemm = Gemm(m=_n(tuple(spatial)), n=o // g, k=(c // g) * kvol, count=g,
                conv3x3_h=h, conv3x3_w=w, im2col=im2col)
    return _gemm_op(op, (gemm,), saved=_in_elems(op))


@formula(OpKind.CONV_TRANSPOSE3D)
def _conv_transpose(op: Op) -> OpCounts:
    c, *spatial = op.input_shapes[0]
    kvol = _n(op.param_shapes["weight"][2:])
    gemm = Gemm(m=_n(tuple(spatial)), n=op.output_shape[0] * kvol, k=c)  # then col2im
    return _gemm_op(op, (gemm,), saved=_in_elems(op))


@formula(OpKind.LINEAR)
def _linear(op: Op) -> OpCounts:
    x = op.input_shapes[0]
    gemm = Gemm(m=_n(x[:-1]), n=op.output_shape[-1], k=x[-1])
    return _gemm_op(op, (gemm,), saved=_in_elems(op))


@formula(OpKind.MATMUL, OpKind.BMM)
def _matmul(op: Op) -> OpCounts:
    a, b = op.input_shapes
    lead = _n(a[:-2])
    gemm = Gemm(m=a[-2], n=b[-1], k=a[-1], count=lead, batch_in_m=op.kind == OpKind.MATMUL)
    fwd = 2.0 * gemm.macs
    # Both operands are activations: their two gradients cost one forward each.
    return OpCounts(fwd, 2 * fwd, 0.0, _in_elems(op), _n(op.output_shape), 0, _in_elems(op),
                    (gemm,))


# NB: elementwise FLOPs per element are conventions (a transcendental counted as a few ops).
_SOFTMAX_FLOPS = 5  # max, subtract, exp, sum, divide
_SOFTMAX_BWD_FLOPS = 4


@formula(OpKind.ATTENTION)
def _attention(op: Op) -> OpCounts:
    (h, s, d), (_, s_kv, _), _ = op.input_shapes
    scores = h * s * s_kv
    gemms = (Gemm(s, s_kv, d, count=h, batch_in_m=False),  # Q K^T
             Gemm(s, d, s_kv, count=h, batch_in_m=False))  # P V
    fwd = 2.0 * sum(g.macs for g in gemms) + _SOFTMAX_FLOPS * scores
    bwd = 2 * 2.0 * sum(g.macs for g in gemms) + _SOFTMAX_BWD_FLOPS * scores
    # NB: the S x S_kv scores are written and read back once (eager, unfused attention); the
    # causal mask is not exploited (a dense kernel computes the masked half too).
    return OpCounts(fwd, bwd, 0.0, _in_elems(op) + scores, _n(op.output_shape) + scores, 0,
                    _in_elems(op) + _n(op.output_shape) + scores, gemms)


# Per hidden unit and time step, besides the two GEMMs: 2 bias adds + 1 sum on 4h gate
# pre-activations, 3 sigmoids + 2 tanh, c' = f*c + i*g (3), h' = o*tanh(c') (1).
_LSTM_CELL_FLOPS_PER_UNIT = 3 * 4 + 3 * 4 + 2 * 5 + 3 + 1


@formula(OpKind.LSTM)
def _lstm(op: Op) -> OpCounts:
    s, n_in = op.input_shapes[0]
    h = op.attrs["hidden_size"]
    gemms = (Gemm(s, 4 * h, n_in),  # input projection for all steps at once
             Gemm(1, 4 * h, h, count=s))  # NB: the recurrent GEMM runs step by step
    fwd = 2.0 * sum(g.macs for g in gemms) + s * h * _LSTM_CELL_FLOPS_PER_UNIT
    gate_elems = s * 4 * h
    return OpCounts(fwd, fwd, 2.0 * sum(g.macs for g in gemms), _in_elems(op),
                    _n(op.output_shape), op.weight_elems, _in_elems(op) + 2 * gate_elems, gemms)


# ---- pooling, normalisation, elementwise -------------------------------------------------


@formula(OpKind.MAXPOOL2D, OpKind.AVGPOOL2D)
def _pool(op: Op) -> OpCounts:
    k = op.attrs["kernel"]
    window = k * k if isinstance(k, int) else _n(tuple(k))
    out = _n(op.output_shape)
    return OpCounts(out * window, _in_elems(op), 0.0, _in_elems(op), out, 0, _in_elems(op))


@formula(OpKind.GLOBAL_AVGPOOL)
def _global_avgpool(op: Op) -> OpCounts:
    n = _in_elems(op)
    return OpCounts(n, n, 0.0, n, _n(op.output_shape), 0, 0)


# (forward, backward) FLOPs per element. NB: conventions, see above.
_PER_ELEMENT_FLOPS: dict[OpKind, tuple[int, int]] = {
    OpKind.BATCHNORM: (5, 8),  # statistics, normalise, scale, shift
    OpKind.INSTANCENORM: (5, 8),
    OpKind.LAYERNORM: (5, 8),
    OpKind.RMSNORM: (4, 6),
    OpKind.SOFTMAX: (_SOFTMAX_FLOPS, _SOFTMAX_BWD_FLOPS),
    OpKind.RELU: (1, 1),
    OpKind.RELU6: (2, 2),
    OpKind.GELU: (8, 10),  # tanh approximation
    OpKind.SIGMOID: (4, 2),
    OpKind.TANH: (5, 2),
    OpKind.SILU: (5, 6),
    OpKind.HARDSIGMOID: (4, 2),  # add 3, clamp to [0, 6] (2), scale by 1/6; dy masked, scaled
    OpKind.HARDSWISH: (5, 4),  # x times the hardsigmoid; dy (2x + 3) / 6 inside the ramp
    OpKind.LEAKY_RELU: (2, 2),  # slope x, max; dy scaled where x < 0
    OpKind.ADD: (1, 0),
    OpKind.MUL: (1, 2),
    OpKind.ROPE: (3, 3),  # x*cos + rotate(x)*sin
}


def elementwise_flops(kind: OpKind) -> tuple[int, int]:
    """(forward, backward) FLOPs per output element of an elementwise or normalisation op kind:
    the one convention every path costs it by (the graph's ops, the decoder's token rows)."""
    return _PER_ELEMENT_FLOPS[kind]


def softmax_flops() -> int:
    """Forward FLOPs per score of a softmax, as attention counts it."""
    return _SOFTMAX_FLOPS


@formula(*_PER_ELEMENT_FLOPS)
def _per_element(op: Op) -> OpCounts:
    fwd_per, bwd_per = _PER_ELEMENT_FLOPS[op.kind]
    out = _n(op.output_shape)
    weight_grad = 2.0 * out if op.weight_elems else 0.0  # d gamma, d beta: a multiply-add each
    # NB: an add or sub keeps nothing for backward; every other op keeps its input(s).
    saved = 0 if op.kind in (OpKind.ADD, OpKind.SUB) else _in_elems(op)
    return OpCounts(fwd_per * out, bwd_per * out, weight_grad, _in_elems(op), out,
                    op.weight_elems, saved)


# ---- data movement and lookup ------------------------------------------------------------


@formula(OpKind.EMBEDDING)
def _embedding(op: Op) -> OpCounts:
    # A gather: no arithmetic, but each token reads one row of the table. The rows read scale
    # with the batch, so they count as activation reads, not as once-per-batch weights.
    ids, out = _in_elems(op), _n(op.output_shape)
    return OpCounts(0.0, 0.0, float(out), ids + out, out, 0, ids)


@formula(OpKind.RESHAPE)
def _reshape(op: Op) -> OpCounts:
    # NB: a reshape of a contiguous tensor is a view: no data moves.
    return OpCounts(0.0, 0.0, 0.0, 0, 0, 0, 0)


@formula(OpKind.TRANSPOSE, OpKind.CONCAT)
def _copy(op: Op) -> OpCounts:
    # NB: materialised as one copy (read everything, write everything), as eager frameworks do.
    n = _in_elems(op)
    return OpCounts(0.0, 0.0, 0.0, n, n, 0, 0)


@formula(OpKind.UPSAMPLE)
def _upsample(op: Op) -> OpCounts:
    # Nearest neighbour: a copy, each input element written scale^d times; no arithmetic. The
    # backward pass sums each input's block of output gradients (one add per output element).
    n, out = _in_elems(op), _n(op.output_shape)
    return OpCounts(0.0, float(out), 0.0, n, out, 0, 0)


# ---- ops that imported models need (sub, div, const_binary, slice) -----------------------
# `unmapped` has no formula on purpose: it is reported by `unsupported_ops`.

_PER_ELEMENT_FLOPS.update({
    OpKind.SUB: (1, 1),  # d/db = -dy
    OpKind.DIV: (1, 4),  # da = dy / b; db = -dy a / b^2
    OpKind.CONST_BINARY: (1, 1),  # NB: pow counted as one FLOP, like the others
})
formula(OpKind.SUB, OpKind.DIV, OpKind.CONST_BINARY)(_per_element)


@formula(OpKind.SLICE)
def _slice(op: Op) -> OpCounts:
    # NB: materialised as one strided copy of the elements kept, as eager frameworks do.
    n = _n(op.output_shape)
    return OpCounts(0.0, 0.0, 0.0, n, n, 0, 0)
