"""GEMM tiles in waves over parallel units (GPU SMs, CPU cores): the mapping policy of the GPU
and CPU class models, built on the per-row GEMMs and re-fetch model of `mapping`.

- `gemm_quantization`: output tiles of tile_m x tile_n over `units` in waves, with split-K
  when there are fewer tiles than units; returns the MACs the hardware spends.
- `row_gemm_factors`: per work row, spent / useful MACs, tile-load bytes per spent MAC and
  cache re-read bytes (`mapping.refetch_bytes`).
- `row_traffic_bytes`: per work row, DRAM and on-chip bytes from those factors, fused rows
  moving only what their producer did not write.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from accelsim.devices.mapping import (
    GRADIENT_GEMMS,
    forward_dims,
    per_row,
    refetch_bytes,
    row_gemms,
)
from accelsim.workload.columns import Columns, Table


def _ceil_div(a: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    return np.ceil(np.asarray(a, dtype=float) / b)


def gemm_quantization(m: np.ndarray, n: np.ndarray, k: np.ndarray, count: np.ndarray,
                      tile_m: float, tile_n: float, units: float,
                      split_k_min_k: float, fill_k: float = 0.0) -> np.ndarray:
    """MACs spent by `count` GEMMs (m x n output, reduction k) tiled tile_m x tile_n, one tile
    per unit at a time, in waves. With fewer tiles than units, K is split (each split at least
    `split_k_min_k` deep) to fill the units. `fill_k`: the K depth whose time each tile spends
    outside its main loop (pipeline prologue and epilogue), added to every tile's k depth, so
    that short-K GEMMs spend more per useful MAC (0: none).

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
    return waves * units * tile_m * tile_n * (k_split + fill_k)


def row_gemm_factors(work: Table, gemms: Table, width_bytes: float,
                     tile_m: float, tile_n: float, units: float, split_k_min_k: float,
                     cache_bytes: float | None, cache_resident_fraction: float,
                     fill_k: float = 0.0, useful_gemms: Table | None = None
                     ) -> pd.DataFrame:
    """Per work row (index of `work`): `quantization` (spent MACs of the row's GEMMs from
    `mapping.row_gemms`, `gemm_quantization` with `fill_k`, / the useful MACs of the GEMMs
    in `useful_gemms`, default `gemms`; 1 for rows without a GEMM), `tile_bytes_per_mac`
    (on-chip operand loads per spent MAC) and `reread_bytes` (extra DRAM bytes,
    `mapping.refetch_bytes` on a cache of `cache_bytes` with `cache_resident_fraction` holding
    the resident operand). `useful_gemms` lets a row run other GEMMs than its op's (Winograd:
    `gpu.gemm`) while its quantization stays relative to the op's own MAC count."""
    return pd.DataFrame(row_gemm_columns(
        work, row_gemms(work, gemms), width_bytes, tile_m, tile_n, units, split_k_min_k,
        cache_bytes, cache_resident_fraction, fill_k,
        None if useful_gemms is None else row_gemms(work, useful_gemms)),
        index=getattr(work, "index", None))


def row_gemm_columns(work: Table, g: Table, width_bytes: float, tile_m: float,
                     tile_n: float, units: float, split_k_min_k: float,
                     cache_bytes: float | None, cache_resident_fraction: float,
                     fill_k: float = 0.0, useful: Table | None = None
                     ) -> dict[str, np.ndarray]:
    """`row_gemm_factors`' columns as arrays, from the row GEMMs `g` (and `useful`, those of
    `useful_gemms`) of `mapping.row_gemms`, for a caller that has them already."""
    n_rows = len(work)
    m, n, k, count = (np.asarray(g[c], dtype=float) for c in ("m", "n", "k", "count"))
    row = np.asarray(g["row"])
    spent = gemm_quantization(m, n, k, count, tile_m, tile_n, units, split_k_min_k, fill_k)
    spent_row = per_row(spent, row, n_rows)
    u = g if useful is None else useful
    useful_macs = per_row(u["macs"], u["row"], n_rows)
    has = useful_macs > 0
    # NB: each gradient GEMM re-reads what its forward GEMM re-reads (X and W), not what its
    # own operands would: a wgrad kernel keeps its small output stationary and streams X and
    # dY once. For batch-in-count GEMMs dW keeps `count` independent instances (true for bmm,
    # an approximation for weights, whose per-instance gradients are summed).
    m, n, k = forward_dims(g, (m, n, k))
    reread = per_row(count * refetch_bytes(m * k * width_bytes, k * n * width_bytes,
                                           cache_bytes, cache_resident_fraction), row, n_rows)
    # NB: an implicit-GEMM conv reads its input, not the im2col matrix, so re-reads are capped
    # at the row's own traffic per extra pass, for each gradient GEMM of a backward row.
    gemm_kinds = np.where(np.asarray(work["phase"]) == "backward", len(GRADIENT_GEMMS), 1.0)
    cap = 4 * np.asarray(work["read_bytes"], dtype=float) * gemm_kinds
    return {
        "quantization": np.where(has, spent_row / np.where(has, useful_macs, 1.0), 1.0),
        "tile_bytes_per_mac": np.where(has, width_bytes * (1 / tile_m + 1 / tile_n), 0.0),
        "reread_bytes": np.where(has, np.minimum(reread, cap), 0.0),
    }


def row_traffic_bytes(work: Table, factors: Table, fused: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(DRAM bytes, on-chip bytes) per work row. DRAM: compulsory bytes + cache re-reads, or for
    a fused row the inputs its producer did not write (NB: read - write bytes, as its output has
    the producer's output size: a residual, BN parameters). On-chip: GEMM tiles load their
    operands from the cache once per tile; other rows pass it once."""
    matmul = np.asarray(work["matmul"], dtype=bool)
    flops = np.asarray(work["flops"], dtype=float)
    read = np.asarray(work["read_bytes"], dtype=float)
    write = np.asarray(work["write_bytes"], dtype=float)
    dram = np.where(fused, np.maximum(read - write, 0.0),
                    read + write + np.asarray(factors["reread_bytes"]))
    onchip = np.where(matmul, flops / 2 * np.asarray(factors["quantization"])
                      * np.asarray(factors["tile_bytes_per_mac"]), read + write)
    return dram, onchip


def core_costs(work: Table, compute_s: np.ndarray, memory_s: np.ndarray,
               overhead_s: np.ndarray, energy_j: np.ndarray, dram: np.ndarray,
               onchip: np.ndarray, clock_hz: float, unit: np.ndarray,
               kernels: np.ndarray) -> Columns:
    """The class-model result of a core-based device (GPU, CPU), in `core.COST_COLUMNS` plus
    `unit` (where each row ran) and `kernels`; cycles at the device's rated clock."""
    busy_s = np.maximum(compute_s, memory_s)
    return Columns({
        "compute_s": compute_s, "memory_s": memory_s, "overhead_s": overhead_s,
        "dynamic_energy_j": energy_j, "dram_bytes": dram, "onchip_bytes": onchip,
        "cycles": (busy_s + overhead_s) * clock_hz, "unit": unit, "kernels": kernels,
    })
