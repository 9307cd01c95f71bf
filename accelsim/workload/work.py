"""What one step asks of a device, before any device is chosen: the work table.

One row per (op, phase) for a batch at a precision. Phases: `forward`; when training also
`backward` (input and weight gradients) and one `optimizer` row (the parameter update).
Columns: name, op, phase, matmul (runs on matrix units), flops, read_bytes, write_bytes,
weight_bytes (parameters read once per batch, included in read_bytes), op_index (row of
`counts_table`, -1 for the optimizer). Device cost models map each row to time and energy;
`gemm_table` gives the GEMM shapes of the matmul rows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import pandas as pd

from accelsim.formats import get_format
from accelsim.workload.columns import Columns, as_column, is_in
from accelsim.workload.freeze import FROZEN, is_frozen, train_mask
from accelsim.workload.graph import Graph
from accelsim.workload.ops import MATMUL_KINDS
from accelsim.workload.tables import counts_table, gemm_table

# FLOPs per parameter of one update (Kingma & Ba 2015 for Adam: moments, bias correction,
# step). NB: conventions; the update is memory-bound on every device anyway.
OPTIMIZER_FLOPS_PER_PARAM = {"sgd": 2, "momentum": 4, "adam": 12}
OPTIMIZER_STATE_TENSORS = {"sgd": 0, "momentum": 1, "adam": 2}
MASTER_WEIGHT_BYTES = 4  # NB: mixed precision keeps fp32 master weights and fp32 state
_MATMUL_NAMES = frozenset(k.value for k in MATMUL_KINDS)


# NB: tables kept per process, by graph (hashed by identity) and knobs, the least recently used
# dropped past this many rows in all (about 300 B a row: some 60 MB): a sweep over devices and
# formats builds each once; a caller of `work_table` gets its own copy of the frame (about
# 20 us), one of `work_columns` the kept read-only columns themselves (no copy).
KEPT_ROWS = 200_000


class _KeptTables:
    """Tables (frames or `Columns`) by key, least recently used first, at most `max_rows` rows
    in all (the newest always kept); safe across threads (a Dask worker runs points in
    threads)."""

    def __init__(self, max_rows: int) -> None:
        self.max_rows = max_rows
        self._tables: OrderedDict[Hashable, Any] = OrderedDict()
        self._rows = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], pd.DataFrame]) -> pd.DataFrame:
        """A copy of the frame kept under `key`, built (and kept) if there is none."""
        return self.kept(key, build).copy()

    def kept(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The table kept under `key` itself (the caller must not change it: a `Columns` is
        read-only), built (and kept) if there is none."""
        with self._lock:
            table = self._tables.get(key)
            if table is not None:
                self._tables.move_to_end(key)
                return table
        table = build()
        with self._lock:
            if key not in self._tables:
                self._tables[key] = table
                self._rows += len(table)
            while self._rows > self.max_rows and len(self._tables) > 1:
                self._rows -= len(self._tables.popitem(last=False)[1])
        return table


_KEPT = _KeptTables(KEPT_ROWS)


def work_table(graph: Graph, batch: int, precision: str, mode: str = "infer",
               optimizer: str = "sgd") -> pd.DataFrame:
    """The work of one inference batch (`mode="infer"`) or one training step (`"train"`)."""
    return _KEPT.get(("work", graph, batch, precision, mode, optimizer),
                     lambda: work_columns(graph, batch, precision, mode, optimizer).to_frame())


def work_columns(graph: Graph, batch: int, precision: str, mode: str = "infer",
                 optimizer: str = "sgd") -> Columns:
    """`work_table` as read-only columns, kept per process and shared (no copy): the
    estimate's hot path (`accelsim.workload.columns`)."""
    return _KEPT.kept(("work columns", graph, batch, precision, mode, optimizer),
                      lambda: _work_columns(graph, batch, precision, mode, optimizer))


def gemm_columns(graph: Graph, batch: int) -> Columns:
    """`gemms_for` as read-only columns, kept per process and shared (no copy)."""
    return _KEPT.kept(("gemm columns", graph, batch), lambda: Columns.of(_KEPT.kept(
        ("gemms", graph, batch), lambda: _gemms_for(graph, batch))))


def _work_columns(graph: Graph, batch: int, precision: str, mode: str,
                  optimizer: str) -> Columns:
    c = _KEPT.kept(("counts columns", graph), lambda: Columns.of(counts_table(graph)))
    width = get_format(precision).bytes_per_element
    n = len(c)
    weights = c["weight_elems"] * width
    input_ops = _input_ops(graph, c["op_index"])
    fwd = {
        "name": c["name"], "op": c["op"], "phase": np.full(n, "forward", dtype=object),
        "matmul": is_in(c["op"], _MATMUL_NAMES),
        "flops": c["fwd_flops"] * batch,
        "read_bytes": c["read_elems"] * batch * width + weights,
        "write_bytes": c["write_elems"] * batch * width,
        "weight_bytes": weights, "op_index": c["op_index"],
        # every parameter of the op (an embedding's whole table, which `weight_bytes`, the
        # bytes a pass reads, leaves out: a lookup reads only its rows)
        "param_elems": np.asarray(c["params"], dtype=float),
        # the op_index of the ops whose outputs it reads (graph inputs left out)
        "input_ops": as_column(input_ops),
    }
    if mode == "infer":
        return Columns(fwd)
    # Backward reads what forward saved, the output gradient and the weights; it writes the
    # input gradient and the weight gradient. NB: no recomputation, no fused kernels. A frozen
    # graph (`accelsim.workload.freeze`) computes only the gradients something upstream needs.
    m = train_mask(graph, c["op_index"], c["params"], input_ops)
    dx, dw, saved = m.needs_input_grad, m.trains, m.keeps_saved
    bwd = {**fwd, "phase": np.full(n, "backward", dtype=object),
           "flops": (c["bwd_input_flops"] * dx + c["bwd_weight_flops"] * dw) * batch,
           "read_bytes": (c["saved_elems"] * saved + c["write_elems"]) * batch * width
           + weights * dx,
           "write_bytes": c["read_elems"] * batch * width * dx + weights * dw}
    params = trained_params(graph)
    state = OPTIMIZER_STATE_TENSORS[optimizer]
    # Update: read master weight, gradient and state; write master weight, state and the
    # low-precision copy.
    update_bytes = params * (MASTER_WEIGHT_BYTES * (1 + state) + width)
    opt = {"name": ["optimizer"], "op": [f"{optimizer}_update"], "phase": ["optimizer"],
           "matmul": [False], "flops": [params * OPTIMIZER_FLOPS_PER_PARAM[optimizer]],
           "read_bytes": [update_bytes], "write_bytes": [update_bytes],
           "weight_bytes": [0.0], "op_index": [-1], "param_elems": [0.0],
           "input_ops": as_column([()])}
    keep = m.runs_backward
    # (object columns stay objects: numpy joins the optimizer row's names to them as objects)
    return Columns({name: np.concatenate([fwd[name], np.asarray(bwd[name])[keep],
                                          np.asarray(opt[name])]) for name in fwd})


def trained_params(graph: Graph) -> float:
    """Parameters that train: all of them, or those of the ops a frozen graph leaves free."""
    if not is_frozen(graph):
        return float(graph.params)
    frozen = set(graph.meta[FROZEN])
    return float(sum(op.params for op in graph.ops if op.name not in frozen))


def _input_ops(graph: Graph, op_index: np.ndarray) -> list[tuple[int, ...]]:
    """Per counted op, the op_index of each op whose output it reads."""
    index = {op.name: i for i, op in enumerate(graph.ops)}
    return [tuple(index[t] for t in graph.ops[i].inputs if t in index) for i in op_index]


def gemms_for(graph: Graph, batch: int) -> pd.DataFrame:
    """GEMMs of the forward pass at a batch size: op_index, m, n, k, count (batch folded into
    m or count as `Gemm.batch_in_m` says), conv3x3_h, conv3x3_w, im2col (`counts.Gemm`). Backward
    GEMMs have the same MACs with m, n, k permuted (dX: m x k from m x n by n x k; dW: k x n
    from k x m by m x n)."""
    return _KEPT.get(("gemms", graph, batch), lambda: _gemms_for(graph, batch))


def _gemms_for(graph: Graph, batch: int) -> pd.DataFrame:
    g = gemm_table(graph)
    in_m = g["batch_in_m"].to_numpy()
    return pd.DataFrame({
        "op_index": g["op_index"],
        "m": np.where(in_m, g["m"] * batch, g["m"]),
        "n": g["n"], "k": g["k"],
        "count": np.where(in_m, g["count"], g["count"] * batch),
        "conv3x3_h": g["conv3x3_h"], "conv3x3_w": g["conv3x3_w"], "im2col": g["im2col"],
    })
