"""Real numpy forward kernels, one per `OpKind`, registered in `accelsim.kernels.registry`.

    from accelsim.kernels.forward import run_op
    y = run_op(op, [x], params)      # x (batch, *op.input_shapes[0]) -> (batch, *op.output_shape)

Importing this package fills `KERNELS`. Modules by concept: `conv` (conv2d, conv3d,
conv_transpose3d), `dense` (linear, matmul, bmm, attention, lstm), `pool_norm` (pools,
norms, softmax), `elementwise` (activations, add, mul, rope), `data` (embedding, reshape,
transpose, concat).
"""

from __future__ import annotations

import numpy as np

from accelsim.errors import ShapeError
from accelsim.kernels.forward import conv, data, dense, elementwise, pool_norm  # noqa: F401
from accelsim.kernels.registry import KERNELS
from accelsim.workload.ops import Op

__all__ = ["KERNELS", "run_op"]


def run_op(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray:
    """Run the forward kernel of `op`: xs[i] (batch, *op.input_shapes[i]), params of
    `op.param_shapes` -> (batch, *op.output_shape). Shapes are checked on both sides."""
    fn = KERNELS.get(op.kind)
    if fn is None:
        raise NotImplementedError(f"no forward kernel registered for op kind "
                                  f"'{op.kind.value}' (op '{op.name}')")
    if len(xs) != len(op.input_shapes):
        raise ShapeError(f"op '{op.name}' ({op.kind.value}): takes {len(op.input_shapes)} "
                         f"input(s), got {len(xs)}")
    batch = xs[0].shape[0] if xs[0].ndim else None
    for i, (x, shape) in enumerate(zip(xs, op.input_shapes, strict=True)):
        if x.shape != (batch, *shape):
            raise ShapeError(f"op '{op.name}' ({op.kind.value}): input {i} has shape "
                             f"{x.shape}, expected (batch, *{shape})")
    for name, shape in op.param_shapes.items():
        if name not in params or params[name].shape != shape:
            got = params[name].shape if name in params else "missing"
            raise ShapeError(f"op '{op.name}' ({op.kind.value}): param '{name}' is {got}, "
                             f"expected {shape}")
    y = fn(op, xs, params)
    if y.shape != (batch, *op.output_shape):
        raise ShapeError(f"op '{op.name}' ({op.kind.value}): kernel returned {y.shape}, "
                         f"expected {(batch, *op.output_shape)}")
    return y
