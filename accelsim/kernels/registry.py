"""The op -> numpy kernel table (forward), registered with `@kernel(kind)` beside each kernel.

Contract of a forward kernel:

    fn(op: Op, xs: list[np.ndarray], params: dict[str, np.ndarray]) -> np.ndarray

`xs` are the op's inputs in order, each with the batch axis in front of the op's per-sample
shape (`op.input_shapes`); `params` holds arrays of `op.param_shapes`. It returns the output,
shape (batch, *op.output_shape). Kernels compute in float32 (int64 for token ids); numeric
formats are applied around them by `accelsim.kernels.execute`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from accelsim.workload.ops import Op, OpKind

Kernel = Callable[[Op, list[np.ndarray], dict[str, np.ndarray]], np.ndarray]
KERNELS: dict[OpKind, Kernel] = {}


def kernel(*kinds: OpKind) -> Callable[[Kernel], Kernel]:
    """Register `fn` as the forward kernel of each of `kinds`."""

    def register(fn: Kernel) -> Kernel:
        for k in kinds:
            KERNELS[k] = fn
        return fn

    return register
