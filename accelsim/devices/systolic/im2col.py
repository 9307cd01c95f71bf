"""A convolution's ifmap operand as SCALE-Sim v3 reads it, address by address, and the walk of
its read SRAM's window over it (`systolic.sram` uses it for convolutions whose im2col repeats
addresses or holds windows that run past the ifmap).

SCALE-Sim (`compute/operand_matrix.py` `calc_ifmap_elem_addr`) reads a convolution as an
im2col matrix of ifmap addresses: row = output pixel (row-major), column = tap (filter row,
filter column, channel; channel fastest); window (oy, ox) starts at (oy x stride, ox x stride)
and a tap past the ifmap's bottom or right edge is -1 (a window rounded up by SCALE-Sim's
ceil((H - R + stride) / stride)). Its read buffer (`memory/read_buffer.py`) cuts the fetch
stream into sets of ceil(E / 100) words, skipping -1 (`prepare_hashed_buffer`), and finds a
demanded address in ANY set of its active window (`active_buffer_hit`): an address repeated by
overlapping windows is a hit wherever a copy of it lies in the window. A miss slides the window
(`new_prefetch`) until one does.

The walk here is that rule, vectorised (no per-cycle loop): the window keeps, per address, the
latest set it entered in (a window slid past a set no longer holds it); demands are checked in
chunks at a fixed window up to the first miss, which slides the window to the nearest copy of
its address. The operand is built the way SCALE-Sim builds it (fetch order: its prefetch
matrix, anti-diagonals for ws and os; demand order: its demand matrices, skewed), so the
slides and the no-stall cycle of each are SCALE-Sim's (`tests/unit/test_systolic_im2col.py` checks
them against a naive loop over SCALE-Sim's rule). Passes over the operand that repeat (ws and
os stream every block once per column fold) are walked once per distinct starting window.

NB: a padded convolution (the zoo's) is read as SCALE-Sim reads an unpadded ifmap: windows from
the top-left corner, its padding taps past the far edge (-1, not fetched) rather than split
round both edges; exact for SCALE-Sim's topologies, which carry no padding.
NB: an im2col larger than `MAX_ELEMS` words (a large batch, a high-resolution layer) keeps the
address-free model (`systolic.streams`), with its approximations.

    conv = Im2col.of((58, 58, 128, 3, 3, 2, 2, 29, 29), m=841, k=1152)
    walk = conv_walk(conv, stream, fold_cycles=935, dataflow="ws")  # `read_streams()[0]`
    slides, at_cycles, slide_index = walk.walk(set_words=656, sets=..., a=50, b=50)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.devices.systolic.streams import DiagonalLayout, Stream

MAX_ELEMS = 1 << 23  # im2col words held in memory at once (32 MiB as int32 addresses)
_FIRST_CHUNK = 1024  # demands scanned per step after a miss
_REBASE = 1 << 30  # sets counted on before `_Window` renumbers them


@dataclass(frozen=True)
class Im2col:
    """A 2-D convolution's im2col shape (`counts.Gemm.im2col`) over `images` images."""

    ifmap_h: int
    ifmap_w: int
    channels: int
    filter_h: int
    filter_w: int
    stride_h: int
    stride_w: int
    ofmap_h: int
    ofmap_w: int
    images: int = 1

    @classmethod
    def of(cls, shape: tuple[int, ...], m: int, k: int) -> Im2col | None:
        """The im2col of an (m x k) GEMM when it matters: a conv whose windows overlap or run
        past the ifmap (otherwise every address appears once and the address-free model is
        exact); None for other GEMMs and past `MAX_ELEMS`."""
        conv = cls._walked(shape, m, k)
        return conv if conv is not None and m * k <= MAX_ELEMS else None

    @classmethod
    def too_large(cls, shape: tuple[int, ...], m: int, k: int) -> bool:
        """A conv `of` would read by address but for `MAX_ELEMS` (it keeps the address-free
        model: `estimate` names such layers in its notes)."""
        return cls._walked(shape, m, k) is not None and m * k > MAX_ELEMS

    @classmethod
    def _walked(cls, shape: tuple[int, ...], m: int, k: int) -> Im2col | None:
        if len(shape) != 9:
            return None
        h, w, c, r, s, sh, sw, oh, ow = (int(v) for v in shape)
        if oh * ow == 0 or m % (oh * ow) or k != r * s * c:
            return None
        conv = cls(h, w, c, r, s, sh, sw, oh, ow, m // (oh * ow))
        copies = (r > sh and oh > 1) or (s > sw and ow > 1)
        holes = (oh - 1) * sh + r > h or (ow - 1) * sw + s > w
        return conv if copies or holes else None

    @property
    def valid_words(self) -> int:
        """Addresses other than -1 in the im2col matrix (each copy counted)."""
        def rows(size: int, out: int, stride: int, taps: int) -> int:  # windows in, per tap
            return sum(min(out, max(0, -(-(size - t) // stride))) for t in range(taps))

        return (rows(self.ifmap_h, self.ofmap_h, self.stride_h, self.filter_h)
                * rows(self.ifmap_w, self.ofmap_w, self.stride_w, self.filter_w)
                * self.channels * self.images)

    def addresses(self) -> np.ndarray:
        """SCALE-Sim's (m x k) ifmap addresses, -1 where a tap is past the ifmap."""
        plane = self.ifmap_h * self.ifmap_w * self.channels
        kind = np.int32 if plane * self.images < 1 << 31 else np.int64
        pix = np.arange(self.images * self.ofmap_h * self.ofmap_w, dtype=kind)
        img, pix = np.divmod(pix, self.ofmap_h * self.ofmap_w)
        oy, ox = np.divmod(pix, self.ofmap_w)
        iy0, ix0 = oy * self.stride_h, ox * self.stride_w
        tap = np.arange(self.filter_h * self.filter_w * self.channels, dtype=kind)
        ky, rest = np.divmod(tap, self.filter_w * self.channels)
        kx, ch = np.divmod(rest, self.channels)
        base = (iy0 * self.ifmap_w + ix0) * self.channels + img * plane
        addr = base[:, None] + ((ky * self.ifmap_w + kx) * self.channels + ch)[None, :]
        edge = np.flatnonzero((iy0 + self.filter_h > self.ifmap_h)
                              | (ix0 + self.filter_w > self.ifmap_w))  # windows with holes
        outside = (((iy0[edge, None] + ky[None, :]) >= self.ifmap_h)
                   | ((ix0[edge, None] + kx[None, :]) >= self.ifmap_w))
        addr[edge] = np.where(outside, -1, addr[edge])
        return addr


def _skew(blocks: np.ndarray) -> np.ndarray:
    """(blocks, rows + width - 1, width): column c of each block moved down c rows, -1 above
    and below (SCALE-Sim's `skew_matrix`): read row by row, a block's anti-diagonals from the
    bottom row up."""
    n, rows, width = blocks.shape
    out = np.full((n, rows + width - 1, width), -1, dtype=blocks.dtype)
    s0, s1, s2 = out.strides
    np.lib.stride_tricks.as_strided(out, (n, rows, width), (s0, s1, s1 + s2))[...] = blocks
    return out


def _merge_blocks(skewed: np.ndarray, rows: int) -> np.ndarray:
    """The skew of the blocks stacked into one matrix, from each block's skew (`_skew`): a
    block's last width - 1 lines (its columns' tails) fill the gaps of the next block's
    first ones (their heads)."""
    n, lines, width = skewed.shape
    out = np.full((n * rows + width - 1, width), -1, dtype=skewed.dtype)
    out[: n * rows] = skewed[:, :rows].reshape(-1, width)
    tails = skewed[:, rows:]
    out[n * rows:] = tails[-1]
    if width - 1 <= rows:  # each tail lies within the next block's lines
        ends = out[rows: n * rows].reshape(n - 1, rows, width)[:, : width - 1]
        np.maximum(ends, tails[:-1], out=ends)
    else:
        for x in range(n - 1):
            part = out[(x + 1) * rows: (x + 1) * rows + width - 1]
            np.maximum(part, tails[x], out=part)
    return out


@dataclass(frozen=True, eq=False)
class ConvWalk:
    """A conv's ifmap read through its SRAM, laid out as `stream` (`read_streams(...)[0]`),
    fold `fold_cycles` long: the addresses are built only when walked."""

    conv: Im2col
    stream: Stream
    fold_cycles: int
    dataflow: str

    @property
    def valid_words(self) -> int:
        return self.conv.valid_words

    def walk(self, set_words: int, sets: int, a: int, b: int
             ) -> tuple[int, np.ndarray, np.ndarray]:
        """Slides of every pass and the (no-stall cycle, slide number) of each: a window of `a`
        sets, sliding `b`, over `sets` sets of `set_words` valid words (module docstring)."""
        fetch, demand, cycles, passes, pass_cycles = _operand(
            self.conv, self.stream, self.fold_cycles, self.dataflow)
        window = _Window(fetch, set_words, sets, a)
        seen: dict[int, int] = {}
        runs: list[tuple[np.ndarray, np.ndarray]] = []
        while len(runs) < passes and window.start % sets not in seen:
            seen[window.start % sets] = len(runs)
            runs.append(_walk_pass(demand, cycles, window, b))
        loop = seen.get(window.start % sets, len(runs))  # from `loop` on, passes repeat
        which = [p if p < len(runs) else loop + (p - loop) % (len(runs) - loop)
                 for p in range(passes)]
        k_all = np.concatenate([runs[q][1] for q in which])
        at = np.concatenate([runs[q][0] + p * pass_cycles for p, q in enumerate(which)])
        slides = int(k_all.sum())
        return slides, np.repeat(at, k_all).astype(float), np.arange(1, slides + 1, dtype=float)


class _Window:
    """The read SRAM's active window: sets [start, start + a) of the fetch stream, counted on
    without wrapping (set u is set u mod `sets`); `last[x]`: the latest set entered that holds
    address x, so the window holds x iff last[x] >= start."""

    def __init__(self, fetch: np.ndarray, set_words: int, sets: int, a: int) -> None:
        self.fetch, self.set_words, self.sets, self.a = fetch, set_words, sets, a
        self.last = np.full(int(fetch.max()) + 1 if len(fetch) else 1, -1, dtype=np.int32)
        self.set_of = (np.arange(len(fetch)) // set_words).astype(np.int32)
        self.start = 0
        self._enter(0, a)

    def _spans(self, first: int, n_sets: int) -> list[tuple[int, int, int]]:
        """(first position, end position, set counted on of position 0 there) of the words
        of sets [first, first + n_sets), split where the stream wraps."""
        out = []
        while n_sets > 0:
            s = first % self.sets
            take = min(n_sets, self.sets - s)
            end = min((s + take) * self.set_words, len(self.fetch))
            if end > s * self.set_words:
                out.append((s * self.set_words, end, first - s))
            first, n_sets = first + take, n_sets - take
        return out

    def _enter(self, first: int, n_sets: int) -> None:
        for lo, hi, lap in self._spans(first, n_sets):
            self.last[self.fetch[lo:hi]] = self.set_of[lo:hi] + lap

    def holds(self, addr: np.ndarray) -> np.ndarray:
        return self.last[addr] >= self.start

    def slides_to(self, addr: int, b: int) -> int:
        """Slides of `b` sets until the window holds `addr` (SCALE-Sim's `new_prefetch` loop;
        the address is not held now)."""
        if any((self.fetch[lo:hi] == addr).any() for lo, hi, _ in
               self._spans(self.start + self.a, b)):
            return 1
        where = np.flatnonzero(self.fetch == addr) // self.set_words
        dist = int(((where - self.start) % self.sets).min())
        return (dist - self.a) // b + 1

    def slide(self, n_sets: int) -> None:
        """Move the window `n_sets` on: the sets it reaches enter."""
        end = self.start + self.a
        self.start += n_sets
        first = max(end, self.start)
        self._enter(first, self.start + self.a - first)
        if self.start >= _REBASE:  # count sets from a later lap (int32 `last`)
            shift = self.start - self.start % self.sets
            self.start -= shift
            np.maximum(self.last - shift, -1, out=self.last)


def _walk_pass(demand: np.ndarray, cycles: _Cycles, window: _Window, b: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """One pass of demands through `window` (moved as it goes): (no-stall cycle of each miss,
    slides it takes)."""
    n, i, step = len(demand), 0, _FIRST_CHUNK
    ev_cycle: list[int] = []
    ev_k: list[int] = []
    while i < n:
        j = min(n, i + step)
        held = window.holds(demand[i:j])
        x = int(np.argmin(held))
        if held[x]:
            i, step = j, step + step // 2
            continue
        k = window.slides_to(int(demand[i + x]), b)
        window.slide(k * b)
        ev_cycle.append(cycles.of(i + x))
        ev_k.append(k)
        i, step = i + x + 1, max(_FIRST_CHUNK, (x + 1) // 3)
    return np.asarray(ev_cycle, dtype=float), np.asarray(ev_k, dtype=np.int64)


def conv_walk(conv: Im2col, stream: Stream, fold_cycles: int, dataflow: str) -> ConvWalk:
    """The ifmap walk of `conv` laid out as `stream` (`read_streams(...)[0]`)."""
    return ConvWalk(conv, stream, fold_cycles, dataflow)


def _operand(conv: Im2col, stream: Stream, fold_cycles: int, dataflow: str
             ) -> tuple[np.ndarray, np.ndarray, _Cycles, int, int]:
    """(valid addresses in fetch order; one pass of demands: addresses and no-stall cycles,
    in the order SCALE-Sim serves them; passes; cycles between passes). ws reads blocks of R
    im2col columns, os and is blocks of the transposed im2col (R resp. C output pixels);
    diagonal layouts stream every block once per column fold (a pass: one block after
    another), the row-major one (is) reads R rows of a block per fold, once through."""
    layout = stream.layout
    op = conv.addresses() if dataflow == "ws" else conv.addresses().T
    width, blocks, rows = layout.width, layout.blocks, layout.rows
    padded = np.full((rows, blocks * width), -1, dtype=op.dtype)
    padded[:, : op.shape[1]] = op
    stacked = padded.reshape(rows, blocks, width).transpose(1, 0, 2)  # block, row, col
    if isinstance(layout, DiagonalLayout):  # fetched and demanded anti-diagonal-wise
        skewed = _skew(stacked)
        demand = skewed.reshape(-1)
        fetch = _merge_blocks(skewed, rows).reshape(-1)
        line = np.arange(skewed.shape[1], dtype=np.int64) + stream.prefix_cycles
        line_cycles = (np.arange(blocks)[:, None] * fold_cycles + line[None, :]).reshape(-1)
        passes, pass_cycles = len(stream.fold) // blocks, blocks * fold_cycles
    else:
        fetch = stacked.reshape(-1)
        rows_per_fold = stream.prefix_cycles + 1
        span = (stream.row1 - stream.row0).astype(np.int64)
        visit = np.repeat(np.arange(len(span)), span)
        back = np.arange(int(span.sum())) - np.repeat(np.cumsum(span) - span, span)
        row = stream.row1[visit] - 1 - back  # bottom row first
        cyc_rows = stream.fold[visit] * fold_cycles + rows_per_fold - 1 - (row - stream.row0[visit])
        demand = stacked[stream.block[visit], row].reshape(-1)
        line_cycles = cyc_rows
        passes, pass_cycles = 1, 0
    keep = np.flatnonzero(demand >= 0)
    fetch, demand = fetch[fetch >= 0], demand[keep]
    if len(fetch) and int(fetch.max()) >= 4 * len(fetch):  # sparse addresses: number them
        uniq, fetch = np.unique(fetch, return_inverse=True)
        demand = np.searchsorted(uniq, demand)
    return fetch, demand, _Cycles(keep, line_cycles, width), passes, pass_cycles


@dataclass(frozen=True, eq=False)
class _Cycles:
    """No-stall cycle of each kept demand: the line (`width` demands) of the demand matrix
    it was in (`index`: its place there), `line_cycles` each."""

    index: np.ndarray
    line_cycles: np.ndarray
    width: int

    def of(self, q: int) -> int:
        return int(self.line_cycles[self.index[q] // self.width])
