"""The closed op vocabulary: every op kind, its attributes, shape inference and parameters.

Shapes are *per sample*: the batch dimension is never part of a shape. An image is (C, H, W),
a volume (C, D, H, W), a sequence of hidden states (S, D). Counting then scales with the batch
size in one vectorised multiplication, and kernels add the batch axis in front.

Each kind is registered once with `@op_spec(kind, attr defaults)` beside its shape function
(all in `accelsim.workload.shapes`). The shape function takes the input shapes and the
filled-in attributes and returns the output shape and the parameter shapes; inconsistent
inputs raise `ShapeError` naming op and shapes.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accelsim.errors import ShapeError

Shape = tuple[int, ...]


class OpKind(enum.StrEnum):
    """Closed enum of op kinds, grouped by how hardware executes them."""

    # matmul-like: map onto tensor cores / systolic arrays / MAC arrays
    CONV2D = "conv2d"
    CONV3D = "conv3d"
    CONV_TRANSPOSE3D = "conv_transpose3d"
    LINEAR = "linear"
    MATMUL = "matmul"
    BMM = "bmm"
    ATTENTION = "attention"
    LSTM = "lstm"
    # reductions over windows / axes
    MAXPOOL2D = "maxpool2d"
    AVGPOOL2D = "avgpool2d"
    GLOBAL_AVGPOOL = "global_avgpool"
    # normalisation
    BATCHNORM = "batchnorm"
    LAYERNORM = "layernorm"
    RMSNORM = "rmsnorm"
    INSTANCENORM = "instancenorm"
    SOFTMAX = "softmax"
    # elementwise
    RELU = "relu"
    RELU6 = "relu6"
    GELU = "gelu"
    SIGMOID = "sigmoid"
    TANH = "tanh"
    SILU = "silu"
    HARDSIGMOID = "hardsigmoid"  # relu6(x + 3) / 6 (MobileNetV3)
    HARDSWISH = "hardswish"  # x * relu6(x + 3) / 6 (MobileNetV3)
    LEAKY_RELU = "leaky_relu"  # max(x, negative_slope * x) (Darknet, YOLO)
    ADD = "add"
    MUL = "mul"
    ROPE = "rope"
    # data movement and lookup
    EMBEDDING = "embedding"
    RESHAPE = "reshape"
    TRANSPOSE = "transpose"
    CONCAT = "concat"
    UPSAMPLE = "upsample"  # nearest-neighbour, an integer scale factor (YOLOv3)
    # ops that imported models need (`accelsim.workload.importers`)
    SUB = "sub"
    DIV = "div"
    CONST_BINARY = "const_binary"  # an activation with a constant (scalar or tensor) operand
    SLICE = "slice"
    UNMAPPED = "unmapped"  # a node the vocabulary does not cover: no cost formula, reported


MATMUL_KINDS = frozenset(
    {OpKind.CONV2D, OpKind.CONV3D, OpKind.CONV_TRANSPOSE3D, OpKind.LINEAR, OpKind.MATMUL,
     OpKind.BMM, OpKind.ATTENTION, OpKind.LSTM}
)
ELEMENTWISE_KINDS = frozenset(
    {OpKind.RELU, OpKind.RELU6, OpKind.GELU, OpKind.SIGMOID, OpKind.TANH, OpKind.SILU,
     OpKind.HARDSIGMOID, OpKind.HARDSWISH, OpKind.LEAKY_RELU, OpKind.ADD, OpKind.MUL,
     OpKind.ROPE, OpKind.SUB, OpKind.DIV, OpKind.CONST_BINARY}
)
VIEW_KINDS = frozenset({OpKind.RESHAPE, OpKind.TRANSPOSE})


@dataclass(frozen=True)
class Op:
    """One node of a workload graph (per-sample shapes; see module docstring)."""

    name: str
    kind: OpKind
    inputs: tuple[str, ...]
    input_shapes: tuple[Shape, ...]
    output_shape: Shape
    attrs: dict[str, Any] = field(default_factory=dict)
    param_shapes: dict[str, Shape] = field(default_factory=dict)

    @property
    def params(self) -> int:
        """Trainable parameter count; a weight tied to another op's (`tied_to`) is counted
        there, not here."""
        tied = "weight" if self.attrs.get("tied_to") else None
        return sum(math.prod(s) for k, s in self.param_shapes.items() if k != tied)

    @property
    def weight_elems(self) -> int:
        """Parameter elements the op reads, tied or not."""
        return sum(math.prod(s) for s in self.param_shapes.values())


ShapeFn = Callable[[tuple[Shape, ...], dict[str, Any]], tuple[Shape, dict[str, Shape]]]


@dataclass(frozen=True)
class OpSpec:
    kind: OpKind
    n_inputs: int | None  # None: any number >= 1
    defaults: dict[str, Any]  # attr -> default; REQUIRED marks a required attr
    infer: ShapeFn


REQUIRED = object()
SPECS: dict[OpKind, OpSpec] = {}


def op_spec(
    kind: OpKind, n_inputs: int | None = 1, **defaults: Any
) -> Callable[[ShapeFn], ShapeFn]:
    """Register the shape function of `kind`; `defaults` lists every attribute it accepts."""

    def register(fn: ShapeFn) -> ShapeFn:
        SPECS[kind] = OpSpec(kind, n_inputs, defaults, fn)
        return fn

    return register


def make_op(name: str, kind: OpKind | str, inputs: tuple[str, ...],
            input_shapes: tuple[Shape, ...], attrs: dict[str, Any]) -> Op:
    """Validate attributes, infer the output shape and build the `Op`."""
    kind = OpKind(kind)
    spec = SPECS[kind]
    where = f"op '{name}' ({kind.value}) with input shapes {list(input_shapes)}"
    if spec.n_inputs is not None and len(input_shapes) != spec.n_inputs:
        raise ShapeError(f"{where}: takes {spec.n_inputs} input(s), got {len(input_shapes)}")
    if spec.n_inputs is None and not input_shapes:
        raise ShapeError(f"{where}: takes at least one input")
    unknown = set(attrs) - set(spec.defaults)
    if unknown:
        raise ShapeError(f"{where}: unknown attribute(s) {sorted(unknown)}")
    filled = {**spec.defaults, **attrs}
    missing = [k for k, v in filled.items() if v is REQUIRED]
    if missing:
        raise ShapeError(f"{where}: missing attribute(s) {missing}")
    try:
        out, params = spec.infer(tuple(tuple(s) for s in input_shapes), filled)
    except ShapeError as err:
        raise ShapeError(f"{where}: {err}") from None
    if any(d <= 0 for d in out):
        raise ShapeError(f"{where}: output shape {out} has a non-positive dimension")
    return Op(name, kind, tuple(inputs), tuple(input_shapes), tuple(out), filled, params)


# The shape rules register themselves in SPECS on import (one module, one concept).
from accelsim.workload import shapes as _shapes  # noqa: E402, F401
