"""ONNX layers -> op vocabulary: Conv, ConvTranspose, Gemm, MatMul, pooling (see `onnx_nodes`).

Weights must be constants (initialisers, or computed from them); a layer whose weights are
activations is unmapped, except MatMul of two activations (a matmul or bmm).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from onnx import NodeProto

from accelsim.workload.importers.onnx_nodes import Unmapped, attrs, maps, opt_input, shape_error
from accelsim.workload.ops import OpKind, Shape

if TYPE_CHECKING:
    from accelsim.workload.importers.onnx import Importer


def _symmetric(size: int, begin: int, end: int, k: int, s: int, d: int) -> int:
    """One padding for both sides of an axis that gives ONNX's output size."""
    if begin == end:
        return begin
    # NB: asymmetric padding (TF "SAME" with an odd total) is costed as the symmetric padding
    # of the same output size; executed, the windows sit half a pixel off.
    want = (size + begin + end - d * (k - 1) - 1) // s
    for p in ((begin + end) // 2, (begin + end + 1) // 2):
        if (size + 2 * p - d * (k - 1) - 1) // s == want:
            return p
    raise Unmapped(f"asymmetric padding ({begin}, {end})")


def _pads(node: NodeProto, spatial: Shape, kernel: Shape, strides: Shape,
          dilations: Shape) -> tuple[int, ...]:
    """Symmetric per-axis padding of a conv or pool node (auto_pad resolved)."""
    a = attrs(node)
    nd = len(spatial)
    mode = a.get("auto_pad", "NOTSET")
    if mode == "VALID":
        return (0,) * nd
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        total = [max((-(-spatial[i] // strides[i]) - 1) * strides[i]
                     + (kernel[i] - 1) * dilations[i] + 1 - spatial[i], 0) for i in range(nd)]
        begin = [t // 2 if mode == "SAME_UPPER" else t - t // 2 for t in total]
        pads = [*begin, *(t - b for t, b in zip(total, begin, strict=True))]
    else:
        pads = list(a.get("pads", [0] * 2 * nd))
    return tuple(_symmetric(spatial[i], pads[i], pads[i + nd], kernel[i], strides[i],
                            dilations[i]) for i in range(nd))


def _geometry(node: NodeProto, spatial: Shape, kernel: Shape
              ) -> tuple[Shape, Shape, Shape]:
    a = attrs(node)
    nd = len(spatial)
    strides = tuple(a.get("strides", (1,) * nd))
    dilations = tuple(a.get("dilations", (1,) * nd))
    return strides, _pads(node, spatial, kernel, strides, dilations), dilations


@maps("Conv")
def _conv(im: Importer, node: NodeProto) -> None:
    x = node.input[0]
    w = im.const(node.input[1], "weight")
    b = im.const(node.input[2], "bias") if opt_input(node, 2) else None
    shape = im.ps(x)
    nd = len(shape) - 1
    if nd not in (1, 2, 3):
        raise Unmapped(f"{nd}-D convolution")
    kernel = tuple(w.shape[2:])
    groups = int(attrs(node).get("group", 1))
    if w.ndim != nd + 2 or w.shape[1] * groups != shape[0] or w.shape[0] % groups:
        raise shape_error(im, node, f"has a weight {w.shape} (group {groups}) that does not "
                          f"fit its input of {shape[0]} channels")
    strides, pads, dil = _geometry(node, shape[1:], kernel)
    name = node.name or node.output[0]
    t = im.act(x)
    if nd == 1:  # NB: a 1-D conv runs as a 2-D one over (C, 1, L): the same work
        t = im.emit(OpKind.RESHAPE, [t], f"{name}.lift", shape=(shape[0], 1, shape[1]))
        kernel, strides, pads, dil = ((1, *kernel), (1, *strides), (0, *pads), (1, *dil))
        w = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])
    kind = OpKind.CONV3D if nd == 3 else OpKind.CONV2D
    y = im.emit(kind, [t], name, out_channels=w.shape[0], kernel=kernel, stride=strides,
                padding=pads, dilation=dil, groups=int(attrs(node).get("group", 1)),
                bias=b is not None)
    im.claim_all(y, list(node.input[1:3]))
    im.set_weights(y, {"weight": w, "bias": b})
    if nd == 1:
        o = im.g.shape(y)
        y = im.emit(OpKind.RESHAPE, [y], f"{name}.unlift", shape=(o[0], o[2]))
    im.bind(node.output[0], y)


@maps("ConvTranspose")
def _conv_transpose(im: Importer, node: NodeProto) -> None:
    x = node.input[0]
    w = im.const(node.input[1], "weight")
    b = im.const(node.input[2], "bias") if opt_input(node, 2) else None
    a = attrs(node)
    shape = im.ps(x)
    nd = len(shape) - 1
    plain = (a.get("group", 1) == 1 and not any(a.get("pads", ())) and
             not any(a.get("output_padding", ())) and set(a.get("dilations", (1,))) == {1}
             and a.get("auto_pad", "NOTSET") in ("NOTSET", "VALID") and "output_shape" not in a)
    if nd not in (2, 3) or not plain:
        raise Unmapped("only 2-D/3-D transposed convolutions without padding, groups or "
                       "dilation are mapped")
    kernel, strides = tuple(w.shape[2:]), tuple(a.get("strides", (1,) * nd))
    name = node.name or node.output[0]
    t = im.act(x)
    if nd == 2:  # NB: a 2-D one runs as a 3-D one over (C, 1, H, W): the same work
        t = im.emit(OpKind.RESHAPE, [t], f"{name}.lift", shape=(shape[0], 1, *shape[1:]))
        kernel, strides = (1, *kernel), (1, *strides)
        w = w.reshape(w.shape[0], w.shape[1], 1, *w.shape[2:])
    y = im.emit(OpKind.CONV_TRANSPOSE3D, [t], name, out_channels=w.shape[1], kernel=kernel,
                stride=strides, bias=b is not None)
    im.claim_all(y, list(node.input[1:3]))
    im.set_weights(y, {"weight": w, "bias": b})
    if nd == 2:
        o = im.g.shape(y)
        y = im.emit(OpKind.RESHAPE, [y], f"{name}.unlift", shape=(o[0], *o[2:]))
    im.bind(node.output[0], y)


def emit_linear(im: Importer, node: NodeProto, x: str, w_name: str, weight: np.ndarray,
                bias: np.ndarray | None, bias_name: str | None, out: str) -> str:
    """A linear layer x @ weight.T + bias, weight (out, in); tied when its weight is shared."""
    name = node.name or node.output[0]
    width = im.ps(x)[-1] if im.ps(x) else None
    if weight.ndim != 2 or weight.shape[1] != width:
        raise shape_error(im, node, f"has a weight of {weight.shape[1:2] or weight.shape} "
                          f"inputs, but its input {im.ps(x)} has {width} features")
    name = im.unique(name)
    tied = im.claim(w_name, name)
    if tied is not None:
        im.notes.append(f"{name}: its weight is {tied}'s, tied (counted once)")
    t = im.add_op(OpKind.LINEAR, [im.act(x)], name, out_features=weight.shape[0],
                  bias=bias is not None, tied_to=tied)
    im.claim_all(t, [bias_name])
    im.set_weights(t, {"weight": weight, "bias": bias})
    im.bind(out, t)
    return t


@maps("Gemm")
def _gemm(im: Importer, node: NodeProto) -> None:
    a = attrs(node)
    x, w_name = node.input[:2]
    if a.get("transA", 0) or len(im.ps(x)) != 1:
        raise Unmapped("a transposed or non-2-D left operand")
    w = im.const(w_name, "weight") * np.float32(a.get("alpha", 1.0))
    w = w if a.get("transB", 0) else w.T
    c_name = opt_input(node, 2)
    bias = None
    if c_name:
        c = im.const(c_name, "bias") * np.float32(a.get("beta", 1.0))
        if c.ndim == 2 and c.shape[0] != 1:
            raise Unmapped(f"its bias {c.shape} varies along the batch")
        bias = np.broadcast_to(c.reshape(-1) if c.ndim else c, (w.shape[0],))
    emit_linear(im, node, x, w_name, w, bias, c_name, node.output[0])


@maps("MatMul")
def _matmul(im: Importer, node: NodeProto) -> None:
    a, b = node.input[:2]
    if im.is_const(a):
        raise Unmapped("its left operand is a constant")
    if im.is_const(b):
        w = im.const(b)
        if w.ndim >= 1 and im.ps(a) and w.shape[0] != im.ps(a)[-1]:
            raise shape_error(im, node, f"has a weight {w.shape} that cannot multiply its "
                              f"input {im.ps(a)} (inner dimensions {im.ps(a)[-1]} and "
                              f"{w.shape[0]})")
        if w.ndim != 2:
            raise Unmapped(f"a constant right operand of rank {w.ndim}")
        emit_linear(im, node, a, b, w.T, None, None, node.output[0])
        return
    sa, sb = im.ps(a), im.ps(b)
    if len(sa) != len(sb) or len(sa) < 2 or sa[:-2] != sb[:-2]:
        raise Unmapped(f"per-sample operands {sa} @ {sb} broadcast (not a matmul or bmm)")
    kind = OpKind.MATMUL if len(sa) == 2 else OpKind.BMM
    t = im.emit(kind, [im.act(a), im.act(b)], node.name or node.output[0])
    im.bind(node.output[0], t)


# ---- pooling -----------------------------------------------------------------------------


@maps("MaxPool", "AveragePool")
def _pool(im: Importer, node: NodeProto) -> None:
    a = attrs(node)
    shape = im.ps(node.input[0])
    if len(shape) != 3:
        raise Unmapped("only 2-D pooling is mapped")
    if any(o and o in im.consumers for o in node.output[1:]):
        raise Unmapped("its indices output is used")
    kernel = tuple(a["kernel_shape"])
    strides, pads, dil = _geometry(node, shape[1:], kernel)
    if set(dil) != {1}:
        raise Unmapped("dilated pooling")
    if node.op_type == "AveragePool" and any(pads) and not a.get("count_include_pad", 0):
        # NB: the kernel divides by the whole window (count_include_pad=1); costs are equal.
        im.notes.append(f"{node.name}: average pool excluding padding executed including it")
    kind = OpKind.MAXPOOL2D if node.op_type == "MaxPool" else OpKind.AVGPOOL2D
    t = im.emit(kind, [im.act(node.input[0])], node.name or node.output[0], kernel=kernel,
                stride=strides, padding=pads, ceil_mode=bool(a.get("ceil_mode", 0)))
    im.bind(node.output[0], t)


def _global_pool(im: Importer, node: NodeProto, keep: bool) -> None:
    shape = im.ps(node.input[0])
    name = node.name or node.output[0]
    t = im.emit(OpKind.GLOBAL_AVGPOOL, [im.act(node.input[0])], name)
    if keep:
        t = im.emit(OpKind.RESHAPE, [t], f"{name}.keepdims",
                    shape=(shape[0], *(1,) * (len(shape) - 1)))
    im.bind(node.output[0], t)


@maps("GlobalAveragePool")
def _global_avgpool(im: Importer, node: NodeProto) -> None:
    _global_pool(im, node, keep=True)


@maps("ReduceMean")
def _reduce_mean(im: Importer, node: NodeProto) -> None:
    a = attrs(node)
    rank = len(im.ps(node.input[0])) + 1
    k = opt_input(node, 1)
    axes = a.get("axes") or ([int(v) for v in im.const(k, "axes").ravel()] if k else [])
    if rank < 3 or sorted(x % rank for x in axes) != list(range(2, rank)):
        raise Unmapped("only a mean over all spatial axes (a global average pool) is mapped")
    _global_pool(im, node, keep=bool(a.get("keepdims", 1)))
