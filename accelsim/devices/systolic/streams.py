"""Where each operand element of a folded GEMM lies in SCALE-Sim's DRAM fetch order, and when
the array asks for it: the demand patterns the SRAM model (`systolic.sram`) walks.

SCALE-Sim v3 (`compute/systolic_compute_{ws,os,is}.py`) fetches each read operand as one
stream of words and the array demands it fold by fold (column folds outer, row folds inner,
`fold = fc * Fr + fr`, fold i starting at no-stall cycle i x cycles per fold). Three layouts:

    diagonal   blocks of `rows` x `width` words (the last block `last_width` wide) stacked and
               read anti-diagonal by anti-diagonal; a fold streams one block skewed, word
               (t, c) at fold start + `prefix` + t + c.  ws ifmap, os ifmap, is filter (each
               block once per column fold), os filter (each block once per row fold in a row).
    row-major  blocks of `rows` x `width` words read row by row; a fold reads R rows of one
               block, bottom row first, one row per cycle, each left to right.  ws filter,
               is ifmap.

Positions count valid words only (SCALE-Sim's hashed buffer skips padding). The layouts carry
no addresses: every word is taken as its own address, which is SCALE-Sim's operand exactly for
GEMMs and for convolutions whose windows neither overlap nor run past the ifmap. A conv whose
im2col repeats addresses or holds -1 taps has its ifmap walked address by address instead
(`systolic.im2col`, from the shape `counts.Gemm.im2col` gives it).
NB: a GEMM of a conv without that shape (batch past `systolic.im2col.MAX_ELEMS`, dilation,
3-D) keeps the address-free layouts: its copies found only at their own position, its -1 taps
counted as words.

    layout = DiagonalLayout(blocks=3, rows=100, width=32, last_width=8)
    layout.head(1), layout.tail(1)   # first and last position of block 1's words
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Blocks:
    """`blocks` blocks of `rows` x `width` words (the last block `last_width` words wide)."""

    blocks: int
    rows: int
    width: int
    last_width: int

    @property
    def words(self) -> int:
        return self.rows * (self.width * (self.blocks - 1) + self.last_width)

    def width_of(self, block: int) -> int:
        return self.last_width if block == self.blocks - 1 else self.width


@dataclass(frozen=True)
class DiagonalLayout(Blocks):
    """Blocks stacked vertically, fetched anti-diagonal by anti-diagonal, each anti-diagonal
    from its bottom row up (SCALE-Sim's diagonal roll-out)."""

    @cached_property
    def before(self) -> np.ndarray:
        """Valid words on the anti-diagonals before each anti-diagonal d (length D + 1)."""
        total_rows = self.blocks * self.rows
        d = np.arange(total_rows + self.width - 1)
        # columns [0, last_width) are valid on every row, the others on all but the last block
        full = _column_hits(d, 0, self.last_width, total_rows)
        part = _column_hits(d, self.last_width, self.width, (self.blocks - 1) * self.rows)
        return np.concatenate(([0], np.cumsum(full + part)))

    def rank(self, d: int, col: int) -> int:
        """Valid words of anti-diagonal d before column `col` (rows below come first)."""
        lo = max(0, d - self.blocks * self.rows + 1)
        total = max(0, col - lo)
        cut = d - (self.blocks - 1) * self.rows  # columns <= cut reach the last block
        bad = max(0, min(col - 1, cut) - max(lo, self.last_width) + 1)
        return total - bad

    def head(self, block: int) -> int:
        """Position of the block's first word, (block x rows, 0)."""
        return int(self.before[block * self.rows])

    def tail(self, block: int) -> int:
        """Position of the block's last word, its bottom-right one."""
        col = self.width_of(block) - 1
        d = (block + 1) * self.rows - 1 + col
        return int(self.before[d]) + self.rank(d, col)


def _column_hits(d: np.ndarray, c0: int, c1: int, rows: int) -> np.ndarray:
    """Per anti-diagonal d, the columns c in [c0, c1) with a row d - c in [0, rows)."""
    if c1 <= c0 or rows <= 0:
        return np.zeros(len(d), dtype=np.int64)
    hi = np.minimum(c1 - 1, d)
    lo = np.maximum(c0, d - rows + 1)
    return np.maximum(hi - lo + 1, 0)


@dataclass(frozen=True)
class RowMajorLayout(Blocks):
    """Blocks fetched one after another, each row by row."""

    def base(self, block: int) -> int:
        """Position of the block's first word."""
        return self.rows * self.width * block


@dataclass(frozen=True, eq=False)
class Stream:
    """One read operand of one GEMM: its fetch layout and the folds' visits in demand order,
    one entry per visit in `fold` (the fold), `block` (the block it streams, diagonal, or
    reads rows [row0, row1) of bottom-up, row-major); `prefix_cycles`: cycles after a fold's
    start at which a diagonal stream begins."""

    layout: DiagonalLayout | RowMajorLayout
    fold: np.ndarray
    block: np.ndarray
    row0: np.ndarray
    row1: np.ndarray
    prefix_cycles: int = 0


def fold_counts(sr: int, sc: int, rows: int, cols: int) -> tuple[int, int]:
    """(row folds, column folds) of S_R x S_C on an R x C array."""
    return math.ceil(sr / rows), math.ceil(sc / cols)


def _last(total: int, size: int) -> int:
    return total - (math.ceil(total / size) - 1) * size


def _diagonal(blocks: int, block_rows: int, width: int, total_cols: int, fr: int, fc: int,
              revisit: bool, prefix: int) -> Stream:
    """Column folds outer, row folds inner; block = the row fold (each block once per column
    fold) or, `revisit`, the column fold (each block `fr` times in a row)."""
    layout = DiagonalLayout(blocks, block_rows, width, _last(total_cols, width))
    fold = np.arange(fr * fc)
    block = fold // fr if revisit else fold % fr
    zero = np.zeros_like(fold)
    return Stream(layout, fold, block, zero, zero, prefix)


def _row_major(blocks: int, block_rows: int, width: int, total_cols: int, fr: int,
               rows: int) -> Stream:
    """Block = the column fold; each row fold reads the next `rows` rows of it."""
    layout = RowMajorLayout(blocks, block_rows, width, _last(total_cols, width))
    fold = np.arange(blocks * fr)
    row0 = (fold % fr) * rows
    return Stream(layout, fold, fold // fr, row0, np.minimum(row0 + rows, block_rows),
                  rows - 1)


def read_streams(m: int, n: int, k: int, rows: int, cols: int, dataflow: str
                 ) -> tuple[Stream, Stream]:
    """(ifmap, filter) streams of an (m x k) @ (k x n) GEMM, as SCALE-Sim lays them out."""
    if dataflow == "ws":  # S_R = k, S_C = n, T = m
        fr, fc = fold_counts(k, n, rows, cols)
        return (_diagonal(fr, m, rows, k, fr, fc, False, rows),
                _row_major(fc, k, cols, n, fr, rows))
    if dataflow == "os":  # S_R = m, S_C = n, T = k
        fr, fc = fold_counts(m, n, rows, cols)
        return (_diagonal(fr, k, rows, m, fr, fc, False, 0),
                _diagonal(fc, k, cols, n, fr, fc, True, 0))
    fr, fc = fold_counts(k, m, rows, cols)  # is: S_R = k, S_C = m, T = n
    return (_row_major(fc, k, cols, m, fr, rows),
            _diagonal(fr, n, rows, k, fr, fc, False, rows))


def skew_words(lines: int, depth: int, width: int) -> int:
    """Words a skewed depth x width block writes in its first `lines` lines: column c has
    written min(max(lines - c, 0), depth)."""
    full = min(max(lines - depth + 1, 0), width)  # columns done
    end = min(max(lines, 0), width)  # columns started
    part = (end - full) * lines - (full + end - 1) * (end - full) // 2 if end > full else 0
    return full * depth + part


def skew_first_line(n: float, depth: int, width: int) -> int:
    """The first line j (0-based) of a skewed depth x width block by whose end `n` words are
    written (`skew_words(j + 1) >= n`; the last line, depth + width - 2, when n exceeds the
    block). Closed form: its lines write 1, 2, .., a, a, .., a, .., 2, 1 words (a = min(depth,
    width)): a triangle, a run of a-word lines, a triangle."""
    last = depth + width - 2
    if n <= 1:
        return 0
    a, b = min(depth, width), max(depth, width)
    ramp = a * (a + 1) / 2
    if n <= ramp:
        lines = math.ceil((math.sqrt(1 + 8 * n) - 1) / 2)
    elif n <= ramp + (b - a) * a:
        lines = a + math.ceil((n - ramp) / a)
    else:
        left = max(depth * width - n, 0.0)  # words still to write: u (u + 1) / 2 in u lines
        lines = depth + width - 1 - math.floor((math.sqrt(1 + 8 * left) - 1) / 2)
    j = min(max(lines - 1, 0), last)
    # NB: the square roots are floats: step to the exact line (at most a step or two)
    while j > 0 and skew_words(j, depth, width) >= n:
        j -= 1
    while j < last and skew_words(j + 1, depth, width) < n:
        j += 1
    return j

