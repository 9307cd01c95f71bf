"""How GEMMs and op sequences map onto parallel hardware: policies shared by the class models.

- `gemm_quantization`: output tiles of tile_m x tile_n over `units` (SMs, cores) in waves, with
  split-K when there are fewer tiles than units; returns the MACs the hardware spends.
- `row_gemm_factors`: per work row, spent / useful MACs (forward dims; backward dX and dW with
  permuted dims), tile-load bytes per useful MAC, and cache re-read bytes.
- `cache_reread_bytes`: extra off-chip bytes of a GEMM whose operands do not fit the cache.
- `fused_rows`: which rows a compiling engine fuses into their producer.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accelsim.workload.ops import ELEMENTWISE_KINDS, OpKind

FUSABLE_OPS = frozenset({k.value for k in ELEMENTWISE_KINDS}
                        | {OpKind.BATCHNORM.value, OpKind.LAYERNORM.value,
                           OpKind.RMSNORM.value, OpKind.SOFTMAX.value})


def _ceil_div(a: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    return np.ceil(np.asarray(a, dtype=float) / b)


def gemm_quantization(m: np.ndarray, n: np.ndarray, k: np.ndarray, count: np.ndarray,
                      tile_m: float, tile_n: float, units: float,
                      split_k_min_k: float) -> np.ndarray:
    """MACs spent by `count` GEMMs (m x n output, reduction k) tiled tile_m x tile_n, one tile
    per unit at a time, in waves. With fewer tiles than units, K is split (each split at least
    `split_k_min_k` deep) to fill the units.

    >>> float(gemm_quantization(np.array([128]), np.array([128 * 81]), np.array([64]),
    ...                         np.array([1]), 128, 128, 80, 256)[0]) / (128 * 128 * 81 * 64)
    1.975...
    """
    m, n, k, count = (np.asarray(x, dtype=float) for x in (m, n, k, count))
    tiles = _ceil_div(m, tile_m) * _ceil_div(n, tile_n) * count
    # NB: split-K as cuBLAS/cuDNN heuristics do for skinny outputs (wgrad); reduction cost ignored.
    split = np.clip(np.floor(units / np.maximum(tiles, 1.0)), 1.0,
                    np.maximum(np.floor(k / split_k_min_k), 1.0))
    k_split = np.ceil(k / split)
    waves = _ceil_div(tiles * split, units)
    return waves * units * tile_m * tile_n * k_split


def cache_reread_bytes(a_bytes: np.ndarray, b_bytes: np.ndarray,
                       cache_bytes: float) -> np.ndarray:
    """Extra off-chip bytes of a GEMM with operands of a_bytes and b_bytes: none when the smaller
    fits the cache (it stays resident while the larger streams once); otherwise the larger is
    streamed once per cache-sized block of the smaller.
    NB: ignores rasterisation order and the output's share of the cache."""
    a = np.asarray(a_bytes, dtype=float)
    b = np.asarray(b_bytes, dtype=float)
    small, large = np.minimum(a, b), np.maximum(a, b)
    passes = np.maximum(np.ceil(small / max(cache_bytes, 1.0)), 1.0)
    return large * (passes - 1.0)


def row_gemm_factors(work: pd.DataFrame, gemms: pd.DataFrame, width_bytes: float,
                     tile_m: float, tile_n: float, units: float, split_k_min_k: float,
                     cache_bytes: float) -> pd.DataFrame:
    """Per work row (index of `work`): `quantization` (spent / useful MACs, 1 for rows without a
    GEMM), `tile_bytes_per_mac` (on-chip operand loads per useful MAC) and `reread_bytes`."""
    out = pd.DataFrame({"quantization": 1.0, "tile_bytes_per_mac": 0.0, "reread_bytes": 0.0},
                       index=work.index)
    if gemms.empty:
        return out
    m, n, k, c = (gemms[col].to_numpy(dtype=float) for col in ("m", "n", "k", "count"))
    useful = m * n * k * c

    def q(a: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
        return gemm_quantization(a, b, r, c, tile_m, tile_n, units, split_k_min_k)

    # Backward: dX is (m x k) reducing over n, dW is (k x n) reducing over m (gemms_for).
    # NB: for batch-in-count GEMMs dW keeps `count` independent instances (true for bmm, an
    # approximation for weights, whose per-instance gradients are summed).
    per_op = pd.DataFrame({
        "op_index": gemms["op_index"].to_numpy(), "useful": useful, "fwd": q(m, n, k),
        "bwd": q(m, k, n) + q(k, n, m),
        "reread": c * cache_reread_bytes(m * k * width_bytes, k * n * width_bytes, cache_bytes),
    }).groupby("op_index").sum()
    fwd_q = per_op["fwd"] / per_op["useful"]
    bwd_q = per_op["bwd"] / (2 * per_op["useful"])
    idx = work["op_index"]
    has = work["matmul"].to_numpy() & idx.isin(per_op.index).to_numpy()
    backward = (work["phase"] == "backward").to_numpy()
    fq = idx.map(fwd_q).to_numpy(dtype=float)
    bq = idx.map(bwd_q).to_numpy(dtype=float)
    rr = idx.map(per_op["reread"]).to_numpy(dtype=float)
    out["quantization"] = np.where(has, np.where(backward, bq, fq), 1.0)
    out["tile_bytes_per_mac"] = np.where(has, width_bytes * (1 / tile_m + 1 / tile_n), 0.0)
    # NB: an implicit-GEMM conv reads its input, not the im2col matrix, so re-reads are capped
    # at the row's own traffic per extra pass; backward re-reads both GEMMs' operands.
    own = work["read_bytes"].to_numpy(dtype=float)
    out["reread_bytes"] = np.where(has, np.minimum(rr, 4 * own) * np.where(backward, 2.0, 1.0),
                                   0.0)
    return out


def fused_rows(work: pd.DataFrame) -> np.ndarray:
    """Rows a compiling engine fuses into their producer: elementwise and normalisation ops
    that have a producer kernel in the same phase (forward: the kernel before; backward, which
    runs in reverse order: the kernel after). NB: table order stands in for graph edges."""
    fusable = work["op"].isin(FUSABLE_OPS).to_numpy()
    kernel = ((work["flops"] > 0) | (work["read_bytes"] + work["write_bytes"] > 0)).to_numpy()
    phase = work["phase"].to_numpy()
    fused = np.zeros(len(work), dtype=bool)
    for ph, step in (("forward", 1), ("backward", -1)):
        rows = np.flatnonzero(phase == ph)[::step]
        seen_producer = False
        for r in rows:
            if not kernel[r]:
                continue
            if fusable[r] and seen_producer:
                fused[r] = True
            seen_producer = True
    return fused


def kernel_counts(work: pd.DataFrame) -> np.ndarray:
    """Kernels per row: 0 for views (no FLOPs, no bytes), 2 for a backward matmul (dX and dW),
    else 1 (NB: the optimizer as one fused multi-tensor kernel, as NGC's apex optimizers)."""
    kernel = ((work["flops"] > 0) | (work["read_bytes"] + work["write_bytes"] > 0)).to_numpy()
    two = work["matmul"].to_numpy() & (work["phase"] == "backward").to_numpy()
    return np.where(kernel, np.where(two, 2.0, 1.0), 0.0)
