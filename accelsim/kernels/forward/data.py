"""Data movement and lookup: embedding, reshape, transpose, concat."""

from __future__ import annotations

import numpy as np

from accelsim.errors import AccelsimError
from accelsim.kernels.forward.common import f32
from accelsim.kernels.registry import kernel
from accelsim.workload.ops import Op, OpKind


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
