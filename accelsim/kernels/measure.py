"""What a workload's kernels compute, per op, in a numeric format: the output error against
fp32 and the zero share of each op's operands (what zero gating and 2:4 sparsity act on).

    m = measure_graph(graph, batch=1, precision="int8", seed=0)
    m.layers        # DataFrame, one row per op (graph order): op_index, name, output_error,
                    # input_sparsity, weight_sparsity, weights_2_4
    m.output_error  # all graph outputs together, relative L2 error vs fp32

The graph runs twice in lockstep (`execute._execute`: fp32 and `precision`, the same inputs and
parameters). Per op:
- output_error: `relative_error` of its output in `precision` against fp32 (0 for fp32).
- input_sparsity: share of zero elements of its first input (the activation), as the device's
  units see it: in int8, after the per-tensor quantization the int8 kernels apply (small values
  quantize to zero); in a float format, exact zeros of the stored values (zeros after ReLU).
  NB: the zero padding of a convolution is not counted.
- weight_sparsity: the same for its weight parameter (int8: per output channel, as the kernels
  quantize weights), or for the second operand of matmul / bmm (two activations); None for
  ops with neither.
- weights_2_4: the weight is 2:4 structured-sparse (`is_2_4_sparse`).
With `prune`, the measured stream's weights are first pruned to 2:4 (`measure_graph`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from accelsim.formats import NumericFormat, get_format
from accelsim.kernels.execute import (
    INT8_KINDS,
    _execute,
    _joint_error,
    last_uses,
    make_inputs,
)
from accelsim.kernels.formats import relative_error
from accelsim.kernels.quantize import quantize_int8
from accelsim.workload.graph import Graph
from accelsim.workload.ops import Op, OpKind

TWO_ACTIVATION_KINDS = frozenset({OpKind.MATMUL, OpKind.BMM})
PRUNABLE = frozenset({OpKind.LINEAR, OpKind.CONV2D, OpKind.CONV3D})
WEIGHTED = PRUNABLE | {OpKind.CONV_TRANSPOSE3D}
GROUP = 4  # 2:4 structured sparsity: at most 2 non-zeros in each group of 4
COLUMNS = ("op_index", "name", "output_error", "input_sparsity", "weight_sparsity",
           "weights_2_4")


def zero_share(x: np.ndarray) -> float:
    """Share of elements of `x` that are exactly zero (0.0 for an empty array)."""
    return float(np.count_nonzero(x == 0)) / x.size if x.size else 0.0


def gemm_weight(op: Op, w: np.ndarray) -> np.ndarray | None:
    """A weight as the GEMM reads it: (outputs, reduction), the reduction in the order the
    hardware groups it (linear: `in`; conv: kernel position, then input channel last, as in
    NHWC, where cuSPARSELt prunes along channels); None for other ops."""
    if op.kind == OpKind.LINEAR and w.ndim == 2:
        return w
    if op.kind in (OpKind.CONV2D, OpKind.CONV3D) and w.ndim >= 3:
        return np.moveaxis(w, 1, -1).reshape(w.shape[0], -1)
    return None


def groups_of_4(op: Op, w: np.ndarray) -> np.ndarray | None:
    """The weight as (outputs, groups, 4) along the reduction (`gemm_weight`), or None for ops
    that are not conv / linear and for reductions not a multiple of 4 (conv: channels)."""
    g = gemm_weight(op, w)
    if g is None or g.shape[1] % GROUP or (w.ndim >= 3 and w.shape[1] % GROUP):
        return None
    return g.reshape(g.shape[0], -1, GROUP)


def is_2_4_sparse(op: Op, w: np.ndarray) -> bool:
    """True when every group of 4 consecutive reduction elements of each output's weights
    holds at most 2 non-zeros: the pattern sparse tensor cores skip (`groups_of_4`; False
    where the weight has no such grouping)."""
    groups = groups_of_4(op, w)
    return groups is not None and bool(
        (np.count_nonzero(groups, axis=-1) <= GROUP // 2).all())


def prune_2_4(op: Op, w: np.ndarray) -> np.ndarray:
    """`w` with the 2 smallest-magnitude elements of every group of 4 reduction elements set to
    zero (magnitude pruning to 2:4, as NVIDIA's ASP does, NB without its retraining); returns
    a new array, same shape. ValueError where the weight has no grouping (`groups_of_4`)."""
    g = groups_of_4(op, w)
    if g is None:
        raise ValueError(f"op '{op.name}': weight {w.shape} has no 2:4 grouping")
    groups = g.copy()
    smallest = np.argsort(np.abs(groups), axis=-1)[..., :GROUP // 2]
    np.put_along_axis(groups, smallest, 0.0, axis=-1)
    flat = groups.reshape(g.shape[0], -1)
    if op.kind == OpKind.LINEAR:
        return flat
    moved = (w.shape[0], *w.shape[2:], w.shape[1])
    return np.moveaxis(flat.reshape(moved), -1, 1).copy()


def operand_zero_share(x: np.ndarray, fmt: NumericFormat, op: Op, axis: int | None) -> float:
    """Zero share of an operand as `op`'s units see it in `fmt` (see the module docstring)."""
    if fmt.name == "int8" and op.kind in INT8_KINDS and x.dtype.kind == "f" and x.size:
        q, _ = quantize_int8(np.asarray(x, dtype=np.float32), axis=axis)
        return zero_share(q)
    return zero_share(x)


@dataclass(frozen=True)
class Measurement:
    """Per-op measurements (`COLUMNS`) and the error of the graph outputs, for one run."""

    precision: str
    batch: int
    seed: int
    layers: pd.DataFrame
    output_error: float


def measure_graph(graph: Graph, batch: int, precision: str | NumericFormat,
                  seed: int = 0, prune: bool = False) -> Measurement:
    """Run `graph` in fp32 and `precision` side by side on seeded inputs and measure every op
    (see the module docstring). With `prune`, the `precision` stream's conv / linear weights
    that have a 2:4 grouping are magnitude-pruned to 2:4 (`prune_2_4`) while the fp32
    reference keeps them dense, so output_error is the cost of pruning and format together.
    Raises AccelsimError for models too large to execute."""
    fmt = get_format(precision)
    index = {op.name: i for i, op in enumerate(graph.ops)}
    seen: dict[str, np.ndarray] = dict(make_inputs(graph, batch, seed))  # the format stream
    rows: dict[str, dict] = {}

    def on_params(op: Op, params: dict[str, np.ndarray]) -> list[dict] | None:
        streams = None
        w = params.get("weight")
        if prune and w is not None and op.kind in PRUNABLE and groups_of_4(op, w) is not None:
            streams = [params, {**params, "weight": prune_2_4(op, w)}]
            params = streams[1]
        xs = [seen[t] for t in op.inputs if t in seen]
        row = {"op_index": index[op.name], "name": op.name, "input_sparsity": None,
               "weight_sparsity": None, "weights_2_4": False}
        if xs and xs[0].dtype.kind == "f":
            row["input_sparsity"] = operand_zero_share(xs[0], fmt, op, None)
        w = params.get("weight")
        if w is not None and op.kind in WEIGHTED:
            axis = 1 if op.kind == OpKind.CONV_TRANSPOSE3D else 0
            row["weight_sparsity"] = operand_zero_share(w, fmt, op, axis)
            row["weights_2_4"] = is_2_4_sparse(op, w)
        elif op.kind in TWO_ACTIVATION_KINDS and len(xs) > 1:
            row["weight_sparsity"] = operand_zero_share(xs[1], fmt, op, None)
        rows[op.name] = row
        return streams

    def on_op(op: Op, outs: list[np.ndarray]) -> None:
        rows[op.name]["output_error"] = relative_error(outs[1], outs[0])
        seen[op.name] = outs[1]
        for t in {*op.inputs, op.name}:  # free what no later op reads, as the executor does
            if last[t] == index[op.name]:
                seen.pop(t, None)

    last = last_uses(graph)
    ref, got = _execute(graph, batch, [get_format("fp32"), fmt], seed, on_op, on_params)
    layers = pd.DataFrame([rows[op.name] for op in graph.ops], columns=list(COLUMNS))
    return Measurement(fmt.name, batch, seed, layers, _joint_error(got, ref))
