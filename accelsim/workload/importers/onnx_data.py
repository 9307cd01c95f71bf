"""ONNX data movement -> op vocabulary: Reshape, Flatten, Squeeze/Unsqueeze, Transpose, Concat,
Slice, Split, Gather (an embedding lookup, or a slice of an activation), Shape and Size (which
become constants: the per-sample shapes are known). See `onnx_nodes`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from onnx import NodeProto

from accelsim.workload.importers.onnx_nodes import (
    Unmapped,
    attrs,
    batch_error,
    maps,
    opt_input,
    reshape_to,
    sample_axis,
    shape_error,
    unary,
)
from accelsim.workload.ops import OpKind
from accelsim.workload.shapes import slice_range

if TYPE_CHECKING:
    from accelsim.workload.importers.onnx import Importer


@maps("Reshape")
def _reshape(im: Importer, node: NodeProto) -> None:
    x = node.input[0]
    full_in = (im.batch, *im.ps(x))
    if im.is_const(node.input[1]):
        target = [int(v) for v in im.const(node.input[1]).ravel()]
        if not attrs(node).get("allowzero", 0):
            target = [full_in[i] if v == 0 and i < len(full_in) else v
                      for i, v in enumerate(target)]
        if target.count(-1) == 1:
            known = math.prod(v for v in target if v != -1)
            target[target.index(-1)] = math.prod(full_in) // known if known else -1
    else:
        inferred = im.full_shapes.get(node.output[0])
        if not inferred or any(d is None for d in inferred):
            raise Unmapped("its target shape is computed and ONNX could not infer it")
        target = list(inferred)
    if math.prod(target) != math.prod(full_in) or not target or target[0] != im.batch:
        raise batch_error(im, node, f"reshapes {full_in} to {tuple(target)} across the batch")
    reshape_to(im, node, x, tuple(target[1:]))


@maps("Flatten")
def _flatten(im: Importer, node: NodeProto) -> None:
    shape = im.ps(node.input[0])
    if attrs(node).get("axis", 1) % (len(shape) + 1) != 1:
        raise batch_error(im, node, "flattens the batch axis with others (axis != 1)")
    reshape_to(im, node, node.input[0], (math.prod(shape),))


def _axes(im: Importer, node: NodeProto) -> list[int]:
    if "axes" in attrs(node):
        return list(attrs(node)["axes"])
    k = opt_input(node, 1)
    return [int(v) for v in im.const(k, "axes").ravel()] if k else []


@maps("Squeeze", "Unsqueeze")
def _squeeze(im: Importer, node: NodeProto) -> None:
    shape = list(im.ps(node.input[0]))
    axes = _axes(im, node)
    if node.op_type == "Squeeze":
        rank = len(shape) + 1
        drop = {a % rank for a in axes} if axes else {i + 1 for i, d in enumerate(shape) if d == 1}
        if 0 in drop:
            raise batch_error(im, node, "squeezes the batch axis")
        out = [d for i, d in enumerate(shape) if i + 1 not in drop]
    else:
        rank = len(shape) + 1 + len(axes)
        add = sorted(a % rank for a in axes)
        if 0 in add:
            raise batch_error(im, node, "inserts an axis before the batch")
        out = shape
        for a in add:
            out.insert(a - 1, 1)
    reshape_to(im, node, node.input[0], tuple(out))


@maps("Transpose")
def _transpose(im: Importer, node: NodeProto) -> None:
    rank = len(im.ps(node.input[0])) + 1
    perm = list(attrs(node).get("perm", range(rank - 1, -1, -1)))
    if perm[0] != 0:
        raise batch_error(im, node, f"moves the batch axis (perm {perm})")
    per = tuple(p - 1 for p in perm[1:])
    if per == tuple(range(rank - 1)):
        im.bind(node.output[0], im.act(node.input[0]))
    elif node.output[0] in im.deferrable:
        im.deferred[node.output[0]] = (im.act(node.input[0]), per, node.name or node.output[0])
    else:
        unary(im, node, OpKind.TRANSPOSE, perm=per)


@maps("Concat")
def _concat(im: Importer, node: NodeProto) -> None:
    ins = [i for i in node.input if i]
    rank = len(im.ps(ins[0])) + 1
    axis = sample_axis(im, node, attrs(node)["axis"], rank)
    t = im.emit(OpKind.CONCAT, [im.act(i) for i in ins], node.name or node.output[0], axis=axis)
    im.bind(node.output[0], t)


def emit_slice(im: Importer, node: NodeProto, x: str, out: str,
               spec: list[tuple[int, int, int, int]], name: str) -> str:
    """Bind `out` to x sliced by (full axis, start, end, step) entries; an alias if whole."""
    shape = im.ps(x)
    axes, starts, ends, steps = [], [], [], []
    for axis, start, end, step in spec:
        a = axis % (len(shape) + 1)
        if step < 1:
            raise Unmapped(f"step {step} (reversing slices are not mapped)")
        if a == 0:
            if start in (0, -(2**63)) and end >= 2**31 - 1 and step == 1:
                continue  # the whole batch
            raise batch_error(im, node, "slices the batch axis")
        r = slice_range(shape[a - 1], start, end, step)
        if len(r) == 0:
            raise Unmapped("it selects nothing")
        if len(r) != shape[a - 1]:
            axes.append(a - 1)
            starts.append(r.start)
            ends.append(r.stop)
            steps.append(step)
    t = im.act(x)
    if axes:
        t = im.emit(OpKind.SLICE, [t], name, axes=tuple(axes), starts=tuple(starts),
                    ends=tuple(ends), steps=tuple(steps))
    im.bind(out, t)
    return t


@maps("Slice")
def _slice(im: Importer, node: NodeProto) -> None:
    if im.opset < 10:
        a = attrs(node)
        starts, ends = list(a["starts"]), list(a["ends"])
        axes = list(a.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = ([int(v) for v in im.const(node.input[k], "bounds").ravel()]
                        for k in (1, 2))
        ax, st = opt_input(node, 3), opt_input(node, 4)
        axes = [int(v) for v in im.const(ax).ravel()] if ax else list(range(len(starts)))
        steps = [int(v) for v in im.const(st).ravel()] if st else [1] * len(starts)
    spec = list(zip(axes, starts, ends, steps, strict=True))
    emit_slice(im, node, node.input[0], node.output[0], spec, node.name or node.output[0])


@maps("Split")
def _split(im: Importer, node: NodeProto) -> None:
    x = node.input[0]
    rank = len(im.ps(x)) + 1
    a = attrs(node)
    axis = a.get("axis", 0)
    size = im.ps(x)[sample_axis(im, node, axis, rank)]
    outs = list(node.output)
    if opt_input(node, 1):
        sizes = [int(v) for v in im.const(node.input[1], "split").ravel()]
    elif "split" in a:
        sizes = list(a["split"])
    else:
        n = a.get("num_outputs", len(outs))
        each = -(-size // n)
        sizes = [min(each, size - k * each) for k in range(n)]
    if len(sizes) != len(outs) or min(sizes, default=0) < 0 or sum(sizes) != size:
        raise shape_error(im, node, f"splits an axis of {size} into {sizes[:16]}, which do "
                          f"not cover it in {len(outs)} parts")
    start = 0
    for k, (out, n) in enumerate(zip(outs, sizes, strict=True)):
        emit_slice(im, node, x, out, [(axis, start, start + n, 1)],
                   f"{node.name or outs[0]}:{k}")
        start += n


@maps("Gather")
def _gather(im: Importer, node: NodeProto) -> None:
    data, idx = node.input[:2]
    axis = attrs(node).get("axis", 0)
    name = node.name or node.output[0]
    if im.is_const(data):
        table = im.const(data)
        if table.ndim != 2 or axis != 0:
            raise Unmapped("only a lookup in a 2-D table along axis 0 is an embedding")
        t = im.emit(OpKind.EMBEDDING, [im.act(idx)], name, num_embeddings=table.shape[0],
                    embedding_dim=table.shape[1])
        im.claim_all(t, [data])  # NB: an embedding cannot be tied (a linear can, to it)
        im.set_weights(t, {"weight": table})
        im.bind(node.output[0], t)
        return
    ids = im.const(idx, "indices").astype(np.int64)
    rank = len(im.ps(data)) + 1
    size = im.ps(data)[sample_axis(im, node, axis, rank)]
    flat = np.where(ids < 0, ids + size, ids).ravel()
    step = int(flat[1] - flat[0]) if flat.size > 1 else 1
    in_range = flat.size and np.array_equal(flat, flat[0] + step * np.arange(flat.size))
    if not in_range or step < 1:
        raise Unmapped("its indices are not an increasing arithmetic range")
    start = int(flat[0])
    if ids.ndim == 0:  # x[..., i, ...]: a slice, then the axis dropped
        out = tuple(d for i, d in enumerate(im.ps(data)) if i != axis % rank - 1)
        emit_slice(im, node, data, node.output[0], [(axis, start, start + 1, 1)], f"{name}.slice")
        reshape_to(im, node, node.output[0], out)
    else:
        emit_slice(im, node, data, node.output[0],
                   [(axis, start, start + step * (flat.size - 1) + 1, step)], name)


@maps("Shape")
def _shape(im: Importer, node: NodeProto) -> None:
    full = np.array((im.batch, *im.ps(node.input[0])), dtype=np.int64)
    a = attrs(node)
    im.consts[node.output[0]] = full[a.get("start", 0):a.get("end", len(full))]


@maps("Size")
def _size(im: Importer, node: NodeProto) -> None:
    im.consts[node.output[0]] = np.array(im.batch * math.prod(im.ps(node.input[0])),
                                         dtype=np.int64)
