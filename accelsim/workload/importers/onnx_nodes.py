"""ONNX node -> op vocabulary: one mapper per node type, registered with `@maps(op_type)`.

A mapper reads the node's inputs through the `Importer` (activations as per-sample graph
tensors, constants as arrays), emits ops and binds the node's outputs. It raises `Unmapped`
with a reason, before emitting anything, for a variant it cannot express (the node then
becomes an `unmapped` op), and `AccelsimError` for a node that would break the per-sample
graph (a reshape across the batch axis). ONNX axes count the batch; per-sample axes do not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from onnx import NodeProto, helper

from accelsim.errors import AccelsimError
from accelsim.workload.ops import OpKind

if TYPE_CHECKING:
    from accelsim.workload.importers.onnx import Importer

Mapper = Callable[["Importer", NodeProto], None]
MAPPERS: dict[str, Mapper] = {}


class Unmapped(Exception):  # noqa: N818 - a signal, caught by the importer
    """This node (variant) has no mapping; the message says why."""


def maps(*op_types: str) -> Callable[[Mapper], Mapper]:
    def register(fn: Mapper) -> Mapper:
        for t in op_types:
            MAPPERS[t] = fn
        return fn

    return register


def attrs(node: NodeProto) -> dict[str, Any]:
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def opt_input(node: NodeProto, k: int) -> str | None:
    return node.input[k] if len(node.input) > k and node.input[k] else None


def scalar(im: Importer, name: str, what: str = "operand") -> float:
    """A one-element constant as a float."""
    v = im.const(name, what)
    if v.size != 1:
        raise Unmapped(f"its {what} {v.shape} is not a scalar")
    return float(v.ravel()[0])


def sample_axis(im: Importer, node: NodeProto, axis: int, rank: int) -> int:
    """The per-sample axis of ONNX `axis` on a tensor of full rank `rank`."""
    a = axis % rank
    if a == 0:
        raise Unmapped("it acts along the batch axis")
    return a - 1


def batch_error(im: Importer, node: NodeProto, what: str) -> AccelsimError:
    return AccelsimError(f"{im.path}: {im.where(node)} {what}: accelsim reads per-sample graphs "
                         "with the batch first; export the model keeping dimension 0 the batch")


def shape_error(im: Importer, node: NodeProto, what: str) -> AccelsimError:
    """A node whose constants contradict its inputs (a weight that cannot multiply them)."""
    return AccelsimError(f"{im.path}: {im.where(node)} {what}")


def unary(im: Importer, node: NodeProto, kind: OpKind, **a: Any) -> str:
    t = im.emit(kind, [im.act(node.input[0])], node.name or node.output[0], **a)
    im.bind(node.output[0], t)
    return t


def reshape_to(im: Importer, node: NodeProto, x: str, shape: tuple[int, ...],
               suffix: str = "") -> str:
    """Bind node.output[0] to x reshaped to per-sample `shape` (an alias if it already is)."""
    t = im.act(x)
    if im.g.shape(t) != tuple(shape):
        t = im.emit(OpKind.RESHAPE, [t], (node.name or node.output[0]) + suffix, shape=shape)
    im.bind(node.output[0], t)
    return t


# ---- elementwise -------------------------------------------------------------------------

_UNARY = {"Relu": OpKind.RELU, "Sigmoid": OpKind.SIGMOID, "Tanh": OpKind.TANH}


@maps(*_UNARY)
def _activation(im: Importer, node: NodeProto) -> None:
    unary(im, node, _UNARY[node.op_type])


@maps("Gelu")
def _gelu(im: Importer, node: NodeProto) -> None:
    unary(im, node, OpKind.GELU)  # NB: erf and tanh forms costed alike (see counts)


@maps("Clip")
def _clip(im: Importer, node: NodeProto) -> None:
    a = attrs(node)
    lo, hi = a.get("min", -math.inf), a.get("max", math.inf)
    if im.opset >= 11:
        lo = scalar(im, node.input[1], "min") if opt_input(node, 1) else -math.inf
        hi = scalar(im, node.input[2], "max") if opt_input(node, 2) else math.inf
    if lo == 0.0 and hi == 6.0:
        unary(im, node, OpKind.RELU6)
    elif lo == 0.0 and hi == math.inf:
        unary(im, node, OpKind.RELU)
    else:
        raise Unmapped(f"clip to [{lo}, {hi}] is neither relu nor relu6")


@maps("Identity", "Dropout", "Cast")
def _alias(im: Importer, node: NodeProto) -> None:
    if any(o and o in im.consumers for o in node.output[1:]):
        raise Unmapped("its mask output is used")
    # NB: a dtype cast moves no data in this model (every tensor is stored at one width).
    im.bind(node.output[0], im.act(node.input[0]))


_BINARY = {"Add": OpKind.ADD, "Sub": OpKind.SUB, "Mul": OpKind.MUL, "Div": OpKind.DIV}


@maps("Add", "Sub", "Mul", "Div", "Pow")
def _binary(im: Importer, node: NodeProto) -> None:
    a, b = node.input[:2]
    if not im.is_const(a) and not im.is_const(b):
        if node.op_type == "Pow":
            raise Unmapped("both operands are activations")
        if len(im.ps(a)) != len(im.ps(b)):
            raise Unmapped("its operands differ in rank, so their batch axes do not align")
        t = im.emit(_BINARY[node.op_type], [im.act(a), im.act(b)], node.name or node.output[0])
        im.bind(node.output[0], t)
        return
    reverse = im.is_const(a)
    x, c = (b, a) if reverse else (a, b)
    const_binary(im, node, x, c, node.op_type.lower(), reverse)


def const_binary(im: Importer, node: NodeProto, x: str, c: str, fn: str,
                 reverse: bool = False) -> str:
    """x fn c (c fn x with `reverse`) for a constant c; binds node.output[0]."""
    value = im.const(c)
    rank = len(im.ps(x)) + 1
    if value.ndim > rank or (value.ndim == rank and value.shape[0] != 1):
        raise Unmapped(f"its constant {value.shape} varies along the batch axis")
    if value.ndim == rank:
        value = value[0]
    name = node.name or node.output[0]
    reverse = reverse and fn not in ("add", "mul")
    if value.size == 1 and value.ndim < rank:
        t = im.emit(OpKind.CONST_BINARY, [im.act(x)], name, fn=fn, reverse=reverse,
                    scalar=float(value.ravel()[0]))
    else:
        t = im.emit(OpKind.CONST_BINARY, [im.act(x)], name, fn=fn, reverse=reverse,
                    const_shape=tuple(value.shape))
        im.claim_all(t, [c])
        im.set_weights(t, {"const": value})
    im.bind(node.output[0], t)
    return t


@maps("Softmax")
def _softmax(im: Importer, node: NodeProto) -> None:
    rank = len(im.ps(node.input[0])) + 1
    axis = attrs(node).get("axis", -1 if im.opset >= 13 else 1) % rank
    if axis != rank - 1:
        raise Unmapped(f"softmax along axis {axis}, not the last")
    unary(im, node, OpKind.SOFTMAX)


# ---- normalisation -----------------------------------------------------------------------


@maps("BatchNormalization")
def _batchnorm(im: Importer, node: NodeProto) -> None:
    if any(o and o in im.consumers for o in node.output[1:]):
        raise Unmapped("its running-statistics outputs are used (training mode)")
    x = node.input[0]
    scale, bias, mean, var = (im.const(i, "statistics") for i in node.input[1:5])
    shape = im.ps(x)
    t = im.act(x)
    name = node.name or node.output[0]
    if len(shape) == 1:  # (N, C): lift to (C, 1) for the op, then back
        t = im.emit(OpKind.RESHAPE, [t], f"{name}.lift", shape=(shape[0], 1))
    y = im.emit(OpKind.BATCHNORM, [t], name, eps=float(attrs(node).get("epsilon", 1e-5)))
    im.claim_all(y, list(node.input[1:3]))
    im.set_weights(y, {"gamma": scale, "beta": bias, "running_mean": mean, "running_var": var})
    if len(shape) == 1:
        y = im.emit(OpKind.RESHAPE, [y], f"{name}.unlift", shape=shape)
    im.bind(node.output[0], y)


@maps("LayerNormalization")
def _layernorm(im: Importer, node: NodeProto) -> None:
    rank = len(im.ps(node.input[0])) + 1
    if attrs(node).get("axis", -1) % rank != rank - 1:
        raise Unmapped("it normalises over more than the last axis")
    if any(o and o in im.consumers for o in node.output[1:]):
        raise Unmapped("its mean or inverse-deviation output is used")
    scale = im.const(node.input[1], "scale")
    b = opt_input(node, 2)
    # NB: without a bias input the op still has a (zero) beta, counted as parameters.
    bias = im.const(b, "bias") if b else np.zeros_like(scale)
    t = unary(im, node, OpKind.LAYERNORM, eps=float(attrs(node).get("epsilon", 1e-5)))
    im.claim_all(t, [node.input[1], b])
    im.set_weights(t, {"gamma": scale.reshape(-1), "beta": bias.reshape(-1)})


@maps("InstanceNormalization")
def _instancenorm(im: Importer, node: NodeProto) -> None:
    scale, bias = im.const(node.input[1], "scale"), im.const(node.input[2], "bias")
    t = unary(im, node, OpKind.INSTANCENORM, eps=float(attrs(node).get("epsilon", 1e-5)))
    im.claim_all(t, list(node.input[1:3]))
    im.set_weights(t, {"gamma": scale, "beta": bias})


# Data movement, layers (matmul-like ops, convolutions, pooling): imported for their
# registrations.
from accelsim.workload.importers import onnx_data as _data  # noqa: E402, F401
from accelsim.workload.importers import onnx_layers as _layers  # noqa: E402, F401
