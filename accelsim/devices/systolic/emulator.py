"""Cycle-stepped functional emulation of one R x C systolic array, for small GEMMs.

Every cycle updates the whole PE grid at once with numpy: operands shift one PE right (and,
for os, down), partial sums shift one PE down. The emulator computes the real product and
counts the cycles it took, numbered from 0 as SCALE-Sim stamps them, so the returned count is
the stamp of the last busy cycle; `accelsim.devices.systolic.model.gemm_cycles` predicts it exactly.

- ws (weight stationary): each fold preloads an R x C weight tile, shifted in from the top one
  row per cycle (R cycles); input rows then enter the left edge skewed (row r one cycle after
  row r - 1), move right, and partial sums move down and leave the bottom row. Partial folds
  are zero-padded, so they take a whole fold's cycles, as SCALE-Sim charges them.
- is (input stationary): ws on the transposed problem, C^T = B^T A^T, the inputs pinned.
- os (output stationary): each PE owns one output; A rows enter the left edge and B columns
  the top edge, both skewed; the outputs are read out in parallel after the fold (NB: drain
  cycles not counted, matching the os formula).

Integer inputs accumulate in int32 (int8 x int8 as on TPU v1), float inputs in float64.

    c, cycles = emulate_gemm(a, b, rows=4, cols=4, dataflow="ws")
"""

from __future__ import annotations

import math

import numpy as np

from accelsim.errors import ShapeError


def _acc_dtype(a: np.ndarray, b: np.ndarray) -> type:
    both_int = np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer)
    return np.int32 if both_int else np.float64


def _tile(x: np.ndarray, r0: int, c0: int, h: int, w: int, acc: type) -> np.ndarray:
    """The (h, w) block of x at (r0, c0), zero-padded where x ends (a partial fold)."""
    block = x[r0 : r0 + h, c0 : c0 + w]
    out = np.zeros((h, w), dtype=acc)
    out[: block.shape[0], : block.shape[1]] = block
    return out


def _ws(a: np.ndarray, b: np.ndarray, rows: int, cols: int) -> tuple[np.ndarray, int]:
    """Weight-stationary emulation of a @ b; returns (product, cycles stepped)."""
    m, k = a.shape
    n = b.shape[1]
    acc = _acc_dtype(a, b)
    out = np.zeros((m, n), dtype=acc)
    r_idx, c_idx = np.arange(rows), np.arange(cols)
    steps = 0
    for k0 in range(0, k, rows):
        a_tile = _tile(a, 0, k0, m, rows, acc)
        for n0 in range(0, n, cols):
            nc = min(cols, n - n0)
            w_tile = _tile(b, k0, n0, rows, cols, acc)
            # Preload: the tile's bottom row enters first and ends R - 1 rows down.
            w_reg = np.zeros((rows, cols), dtype=acc)
            for s in range(rows):
                w_reg = np.vstack([w_tile[rows - 1 - s][None, :], w_reg[:-1]])
                steps += 1
            a_reg = np.zeros((rows, cols), dtype=acc)
            p_reg = np.zeros((rows, cols), dtype=acc)
            part = np.zeros((m, cols), dtype=acc)
            for s in range(m + rows + cols - 2):
                t = s - r_idx  # the input row whose element r enters row r now
                edge = np.where((t >= 0) & (t < m), a_tile[np.clip(t, 0, m - 1), r_idx], 0)
                a_reg = np.hstack([edge[:, None].astype(acc), a_reg[:, :-1]])
                prod = w_reg * a_reg
                p_reg = np.vstack([prod[:1], p_reg[:-1] + prod[1:]])
                t_out = s - (rows - 1) - c_idx  # output row leaving the bottom of column c
                ok = (t_out >= 0) & (t_out < m)
                part[t_out[ok], c_idx[ok]] = p_reg[rows - 1, ok]
                steps += 1
            out[:, n0 : n0 + nc] += part[:, :nc]
    return out, steps


def _os(a: np.ndarray, b: np.ndarray, rows: int, cols: int) -> tuple[np.ndarray, int]:
    """Output-stationary emulation of a @ b; returns (product, cycles stepped)."""
    m, k = a.shape
    n = b.shape[1]
    acc = _acc_dtype(a, b)
    out = np.zeros((m, n), dtype=acc)
    r_idx, c_idx = np.arange(rows), np.arange(cols)
    steps = 0
    for m0 in range(0, m, rows):
        mr = min(rows, m - m0)
        a_tile = _tile(a, m0, 0, rows, k, acc)
        for n0 in range(0, n, cols):
            nc = min(cols, n - n0)
            b_tile = _tile(b, 0, n0, k, cols, acc)
            a_reg = np.zeros((rows, cols), dtype=acc)
            b_reg = np.zeros((rows, cols), dtype=acc)
            psum = np.zeros((rows, cols), dtype=acc)
            for s in range(k + rows + cols - 2):
                ka, kb = s - r_idx, s - c_idx  # reduction index entering row r / column c
                left = np.where((ka >= 0) & (ka < k), a_tile[r_idx, np.clip(ka, 0, k - 1)], 0)
                top = np.where((kb >= 0) & (kb < k), b_tile[np.clip(kb, 0, k - 1), c_idx], 0)
                a_reg = np.hstack([left[:, None].astype(acc), a_reg[:, :-1]])
                b_reg = np.vstack([top[None, :].astype(acc), b_reg[:-1]])
                psum += a_reg * b_reg
                steps += 1
            out[m0 : m0 + mr, n0 : n0 + nc] = psum[:mr, :nc]
    return out, steps


def emulate_gemm(a: np.ndarray, b: np.ndarray, rows: int, cols: int, dataflow: str = "ws"
                 ) -> tuple[np.ndarray, int]:
    """(a @ b, cycles) on an R x C array with dataflow "ws", "is" or "os"; cycles is the
    stamp of the last cycle, counted from 0 (see module docstring)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ShapeError(f"emulate_gemm: cannot multiply {a.shape} by {b.shape}")
    if rows < 1 or cols < 1:
        raise ShapeError(f"emulate_gemm: array {rows} x {cols} must be at least 1 x 1")
    if dataflow == "ws":
        c, steps = _ws(a, b, rows, cols)
    elif dataflow == "is":
        ct, steps = _ws(b.T, a.T, rows, cols)
        c = ct.T
    elif dataflow == "os":
        c, steps = _os(a, b, rows, cols)
    else:
        raise ShapeError(f"emulate_gemm: dataflow '{dataflow}' is not one of ws, is, os")
    return c, steps - 1


def predicted_folds(m: int, n: int, k: int, rows: int, cols: int, dataflow: str) -> int:
    """Folds the emulator walks through (for tests): ceil(S_R / R) * ceil(S_C / C)."""
    sr, sc = {"ws": (k, n), "is": (k, m), "os": (m, n)}[dataflow]
    return math.ceil(sr / rows) * math.ceil(sc / cols)
