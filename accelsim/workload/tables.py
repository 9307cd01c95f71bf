"""Vectorised counts of a whole graph, as pandas DataFrames.

`counts_table(graph)` runs every formula once and caches the per-sample result; everything
that depends on batch size or precision is then one array operation over it.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd

from accelsim.formats import get_format
from accelsim.workload.counts import count_op
from accelsim.workload.graph import Graph

COUNT_COLUMNS = ("fwd_flops", "bwd_input_flops", "bwd_weight_flops", "read_elems",
                 "write_elems", "weight_elems", "saved_elems")


@lru_cache(maxsize=128)
def _tables(graph: Graph) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, ...]]:
    rows, gemm_rows, unsupported = [], [], []
    for i, op in enumerate(graph.ops):
        c = count_op(op)
        if c is None:
            unsupported.append(op.name)
            continue
        rows.append((i, op.name, op.kind.value, op.output_shape, op.params,
                     *(getattr(c, col) for col in COUNT_COLUMNS)))
        gemm_rows += [(i, g.m, g.n, g.k, g.count, g.batch_in_m, g.conv3x3_h, g.conv3x3_w,
                       g.im2col) for g in c.gemms]
    counts = pd.DataFrame(rows, columns=["op_index", "name", "op", "output_shape", "params",
                                         *COUNT_COLUMNS])
    gemms = pd.DataFrame(gemm_rows, columns=["op_index", "m", "n", "k", "count", "batch_in_m",
                                             "conv3x3_h", "conv3x3_w", "im2col"])
    return counts, gemms, tuple(unsupported)


def counts_table(graph: Graph) -> pd.DataFrame:
    """One row per supported op: name, op, output_shape, params and the per-sample counts of
    `accelsim.workload.counts.OpCounts` (weight_elems per batch). Do not mutate: cached."""
    return _tables(graph)[0]


def gemm_table(graph: Graph) -> pd.DataFrame:
    """One row per GEMM of a matmul-like op: op_index, m, n, k, count, batch_in_m, conv3x3_h,
    conv3x3_w, im2col (`counts.Gemm`)."""
    return _tables(graph)[1]


def unsupported_ops(graph: Graph) -> list[str]:
    """Names of ops whose kind has no cost formula."""
    return list(_tables(graph)[2])


def layer_table(graph: Graph, batch: int, precision: str) -> pd.DataFrame:
    """Per-layer forward cost at a batch size: name, op, output_shape, params, flops, bytes.

    bytes = activations read + written (x batch) + weights read once, at the precision's width.
    """
    c = counts_table(graph)
    width = get_format(precision).bytes_per_element
    # NB: every tensor (token ids included) is stored at the precision's width.
    act = (c["read_elems"].to_numpy() + c["write_elems"].to_numpy()) * batch
    return pd.DataFrame({
        "name": c["name"], "op": c["op"], "output_shape": c["output_shape"],
        "params": c["params"],
        "flops": c["fwd_flops"].to_numpy() * batch,
        "bytes": (act + c["weight_elems"].to_numpy()) * width,
    })


def totals(graph: Graph) -> dict[str, float]:
    """Whole-graph per-sample totals: params, flops_per_sample (forward), train flops
    per sample (forward + backward), activation elements kept for backward per sample."""
    return dict(_totals(graph))  # the caller's own dict


@lru_cache(maxsize=128)
def _totals(graph: Graph) -> dict[str, float]:
    c = counts_table(graph)
    fwd = float(np.sum(c["fwd_flops"]))
    bwd = float(np.sum(c["bwd_input_flops"]) + np.sum(c["bwd_weight_flops"]))
    return {"params": int(graph.params), "flops_per_sample": fwd,
            "train_flops_per_sample": fwd + bwd,
            "saved_elems_per_sample": float(np.sum(c["saved_elems"]))}
