"""Data movement and lookup: embedding, reshape, transpose, concat, slice, nearest upsampling;
and `unmapped`, whose kernel refuses to run."""

from __future__ import annotations

import numpy as np

from accelsim.errors import AccelsimError
from accelsim.kernels.forward.common import f32
from accelsim.kernels.registry import kernel
from accelsim.workload.ops import Op, OpKind
from accelsim.workload.shapes import slice_range


@kernel(OpKind.EMBEDDING)
def embedding_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """Token ids (N, *S) int -> rows of weight (V, D): (N, *S, D)."""
    ids = np.asarray(xs[0])
    if not np.issubdtype(ids.dtype, np.integer):
        raise AccelsimError(f"op '{op.name}' (embedding): token ids must be integers, "
                            f"got dtype {ids.dtype}")
    v = op.attrs["num_embeddings"]
    if ids.size and (ids.min() < 0 or ids.max() >= v):
        raise AccelsimError(f"op '{op.name}' (embedding): token ids must lie in [0, {v}), "
                            f"got [{ids.min()}, {ids.max()}]")
    return f32(params["weight"])[ids]


@kernel(OpKind.RESHAPE)
def reshape_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, *in) -> (N, *output_shape), row-major like numpy/PyTorch."""
    x = xs[0]
    return x.reshape(x.shape[0], *op.output_shape)


@kernel(OpKind.TRANSPOSE)
def transpose_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, *in) -> (N, *in[perm]); the per-sample perm is shifted by one past the batch axis.
    Returns a contiguous copy (the data really moves)."""
    return np.ascontiguousarray(xs[0].transpose(0, *(p + 1 for p in op.attrs["perm"])))


@kernel(OpKind.CONCAT)
def concat_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """Inputs (N, *s_i) joined along per-sample `axis` (negative counts from the end)."""
    axis = op.attrs["axis"] % len(op.input_shapes[0]) + 1
    return np.concatenate(xs, axis=axis)


@kernel(OpKind.SLICE)
def slice_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, *in) -> x[..., start:end:step, ...] along each per-sample axis (a copy)."""
    x = xs[0]
    index = [slice(None)] * x.ndim
    a = op.attrs
    steps = a["steps"] if a["steps"] is not None else (1,) * len(a["axes"])
    for ax, st, en, sp in zip(a["axes"], a["starts"], a["ends"], steps, strict=True):
        r = slice_range(x.shape[ax % (x.ndim - 1) + 1], st, en, sp)
        index[ax % (x.ndim - 1) + 1] = slice(r.start, r.stop, r.step)
    return np.ascontiguousarray(x[tuple(index)])


@kernel(OpKind.UPSAMPLE)
def upsample_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """(N, C, *S) -> (N, C, *(S * scale)): each element repeated `scale_factor` times along
    every spatial axis (nearest neighbour)."""
    y = xs[0]
    for axis in range(2, y.ndim):
        y = np.repeat(y, op.attrs["scale_factor"], axis=axis)
    return y


@kernel(OpKind.UNMAPPED)
def unmapped_kernel(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """Refuses: the op stands for a node accelsim does not model."""
    raise AccelsimError(f"op '{op.name}' is a {op.attrs['source_op']} node, which accelsim "
                        "does not model: the graph cannot be executed (it is listed in "
                        "unsupported_ops)")
