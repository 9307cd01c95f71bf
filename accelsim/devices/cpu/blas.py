"""How a BLAS library spends a GEMM on a CPU (Goto's algorithm, as in OpenBLAS, MKL and BLIS):
the mapping policy of the CPU class model (`accelsim.devices.cpu.model`).

    terms = blas_gemm_terms(work, gemms, width_bytes=4, micro_tile=(4, 16), threads=2,
                            cache_bytes=32 * 2**20, cache_resident_fraction=0.5,
                            onchip_block=(64, 64))
    packed = pack_bytes(work, gemms, width_bytes=4)   # bytes per row, read + written

Goto's algorithm (Goto & van de Geijn 2008; BLIS: Van Zee & van de Geijn 2015) packs blocks of
both operands into contiguous buffers (a pass over each operand that reads and writes it), then
a macro-kernel sweeps an MR x NR register micro-kernel over the packed blocks. Threads split
the loops over M and N (the JC/IC/JR loops), never K (Smith et al. 2014). So:

- compute: the micro-kernel computes whole MR x NR output tiles (NB: an edge tile runs a
  narrower kernel with fewer independent accumulators, latency-bound at about a full tile's
  time, so it is charged as a full tile), in waves of one tile per thread; no split-K.
- packing: each operand is read and written once per call (NB: the re-packing of one operand
  per NC-wide block of the other is ignored; NC is about 4096). A GEMV-shaped GEMM (m or n of
  1) packs nothing: OpenBLAS forwards it to GEMV, which streams the matrix once.
- DRAM: compulsory bytes plus last-level-cache re-reads (`tiling.row_gemm_factors`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from accelsim.devices.mapping import per_row, row_gemms
from accelsim.devices.tiling import row_gemm_factors
from accelsim.workload.columns import Table

PACK_PASSES = 2.0  # a pack reads each element and writes it to the packed buffer
# NB: BLAS threads never split K (Smith et al. 2014): an infinite least split depth.
NO_SPLIT_K = math.inf


def pack_bytes(work: Table, gemms: Table, width_bytes: float) -> np.ndarray:
    """Per work row, the bytes its GEMMs move packing their operands: (m x k + k x n) x width
    x count, read and written (`PACK_PASSES`); 0 for GEMV-shaped GEMMs (m or n of 1) and rows
    without a GEMM.

    >>> import pandas as pd
    >>> work = pd.DataFrame({"matmul": [True], "op_index": [0], "phase": ["forward"]})
    >>> gemms = pd.DataFrame({"op_index": [0], "m": [8], "n": [1024], "k": [1024],
    ...                       "count": [1]})
    >>> float(pack_bytes(work, gemms, 4)[0]) == 2 * 4 * (8 * 1024 + 1024 * 1024)
    True
    """
    g = row_gemms(work, gemms)
    m, n, k, count = (np.asarray(g[c], dtype=float) for c in ("m", "n", "k", "count"))
    gemv = (m <= 1) | (n <= 1)
    moved = np.where(gemv, 0.0, PACK_PASSES * width_bytes * count * (m * k + k * n))
    return per_row(moved, g["row"], len(work))


def blas_gemm_terms(work: Table, gemms: Table, width_bytes: float,
                    micro_tile: tuple[int, int], threads: float, cache_bytes: float | None,
                    cache_resident_fraction: float,
                    onchip_block: tuple[int, int]) -> pd.DataFrame:
    """Per work row: `quantization` (MACs the micro-kernels spend / useful MACs: MR x NR tiles
    in waves over `threads`, no split-K) and `reread_bytes` (as `tiling.row_gemm_factors`),
    and `tile_bytes_per_mac`, the cache bytes per MAC of an `onchip_block` output block (for
    energy). `micro_tile` is (rows along the workload's M, columns along its N). The packing
    pass is `pack_bytes`."""
    tile_m, tile_n = micro_tile
    factors = row_gemm_factors(work, gemms, width_bytes, tile_m, tile_n, threads, NO_SPLIT_K,
                               cache_bytes, cache_resident_fraction)
    has = np.asarray(factors["tile_bytes_per_mac"]) > 0
    block_m, block_n = onchip_block
    return factors.assign(tile_bytes_per_mac=np.where(
        has, width_bytes * (1 / block_m + 1 / block_n), 0.0))
