"""Random initial parameters for an op: float32 arrays of `op.param_shapes`.

    params = init_params(op, np.random.default_rng(0))

Conv and linear weights are He/Kaiming-normal (std sqrt(2 / fan_in)); norm gammas are ones;
betas and biases zeros; embeddings N(0, 0.02^2); LSTM weights N(0, 1/(3 hidden)); the
constant of a `const_binary` is the identity of its function (0 for add/sub, else 1) and the
parameters of an `unmapped` op are zeros (it cannot run). Imported models bring their own.
"""

from __future__ import annotations

import math

import numpy as np

from accelsim.workload.ops import Op, OpKind, Shape

_ZEROS = frozenset({"bias", "beta", "b_ih", "b_hh"})


def fan_in(op: Op, shape: Shape) -> float:
    """Inputs feeding one output of a conv/linear weight of `shape`."""
    if op.kind == OpKind.CONV_TRANSPOSE3D:
        # weight (C_in, O, *k): each output voxel sums C_in * prod(k) / prod(stride) terms.
        # NB: exact only where stride divides kernel; PyTorch uses O * prod(k) here instead.
        stride = op.attrs["stride"]
        s = (stride,) * 3 if isinstance(stride, int) else tuple(stride)
        return max(shape[0] * math.prod(shape[2:]) / math.prod(s), 1.0)
    return float(math.prod(shape[1:]))  # (O, C/g, *k) or (out, in)


def _init(op: Op, name: str, shape: Shape, rng: np.random.Generator) -> np.ndarray:
    if name in _ZEROS or op.kind == OpKind.UNMAPPED:
        return np.zeros(shape, dtype=np.float32)
    if name == "const" and op.kind == OpKind.CONST_BINARY:
        identity = 0.0 if op.attrs["fn"] in ("add", "sub") else 1.0
        return np.full(shape, identity, dtype=np.float32)
    if name == "gamma":
        return np.ones(shape, dtype=np.float32)
    if name == "weight" and op.kind in (OpKind.CONV2D, OpKind.CONV3D, OpKind.CONV_TRANSPOSE3D,
                                        OpKind.LINEAR):
        std = math.sqrt(2.0 / fan_in(op, shape))
    elif name == "weight" and op.kind == OpKind.EMBEDDING:
        std = 0.02
    elif name in ("w_ih", "w_hh") and op.kind == OpKind.LSTM:
        # NB: a normal with the variance of PyTorch's U(-1/sqrt(h), 1/sqrt(h)).
        std = 1.0 / math.sqrt(3.0 * op.attrs["hidden_size"])
    else:
        raise ValueError(f"op '{op.name}' ({op.kind.value}): no initialiser for param '{name}'")
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)


def init_params(op: Op, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """float32 arrays of `op.param_shapes`, drawn from `rng` in the order of the shapes."""
    return {name: _init(op, name, shape, rng) for name, shape in op.param_shapes.items()}
