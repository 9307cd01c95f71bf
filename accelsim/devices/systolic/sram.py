"""SCALE-Sim v3's memory model of a systolic array, fold by fold: three double-buffered SRAMs
(ifmap, filter, ofmap), one DRAM port per operand, and the cycles the array stalls.

What SCALE-Sim models (`memory/double_buffered_scratchpad_mem.py`, `read_buffer.py`,
`write_buffer.py`), and how it is computed here without stepping cycles:

- A read SRAM of E words keeps a window of `active` = E/2 words of its operand's fetch stream
  (`systolic.streams`; a conv's ifmap by address, `systolic.im2col`), in 100 hashed sets of
  ceil(E / 100) words. Before cycle 0 the first window is prefetched (not counted in the
  layer's cycles). A word the array asks for outside the window slides the window forward by
  the prefetch half (E/2 words) until it holds the word: a word behind the window (a block
  read bottom-up, a fold boundary whose skewed head was passed, a block read again) costs a
  sweep round the whole stream.
- Every slide reads E/2 words from DRAM at `words_per_cycle`: ceil(E / 2 / bw) + 1 cycles,
  back to back from cycle -1 whether or not the array has caught up (SCALE-Sim chains each
  prefetch to the previous one): slide j is ready at -1 + j x that.
- The ofmap SRAM of E words drains E/2 words to DRAM once more than E/2 wait and the last
  drain is done (ceil(E / 2 / bw) cycles each); a write into a full SRAM waits for the
  drain in flight.
- The stalls add up as SCALE-Sim adds them, line by line of the array's schedule
  (`replay_stalls`), which charges a late slide twice its lead and an early one minus its
  slack within a line; each stall delays every later demand alike.

NB: address-free walks place demands inside a fold linearly between set boundaries.
NB: a drain frees whole lines of `words_per_cycle` (SCALE-Sim also counts the padding of the
part line each drain leaves as drained).

    figures = gemm_memory(512, 768, 768, rows=32, cols=32, dataflow="ws",
                          srams=SramSpec(65536, 65536, 65536, 10, 10, 10))
    figures["stall_cycles"], figures["dram_ifmap_reads"]
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from accelsim.devices.systolic.im2col import ConvWalk, Im2col, conv_walk
from accelsim.devices.systolic.model import array_mapping, cycles_per_fold
from accelsim.devices.systolic.streams import (
    DiagonalLayout,
    Stream,
    fold_counts,
    read_streams,
    skew_first_line,
)
from accelsim.errors import AccelsimError
from accelsim.profiles.device_types import SramSpec

ACTIVE_FRACTION = 0.5  # SCALE-Sim's active_buf_frac: half serves the array, half prefetches
HASH_SETS = 100  # SCALE-Sim's read SRAM: 100 hashed sets of ceil(E / 100) words
READ_PORT_LATENCY_CYCLES = 1  # `read_port.latency`
WRITE_PORT_LATENCY_CYCLES = 0  # `write_port.latency`
# NB: the most folds of one GEMM the address walk takes: a few int64 arrays of this length
# each (2^24 folds: ~130 MB apiece); real layers on real arrays fold at most ~10^5 times.
MAX_FOLDS = 1 << 24


@dataclass(frozen=True)
class ReadResult:
    """A read operand over one GEMM: window slides, DRAM words read, the cycle its DRAM reads
    begin (negative: the prefetch before cycle 0) and end, and each slide's number (from 1,
    `slide_index`) and the no-stall cycle the array asks for it (`at_cycles`); a slide takes
    `slide_cycles` of DRAM time."""

    slides: int
    dram_words: float
    dram_first_cycle: float
    dram_last_cycle: float
    at_cycles: np.ndarray
    slide_index: np.ndarray
    slide_cycles: float


def simulate_reads(stream: Stream, words: int, words_per_cycle: float, fold_cycles: int,
                   conv: ConvWalk | None = None) -> ReadResult:
    """Walk one read operand's demands through its SRAM (module docstring); a conv's ifmap
    address by address (`conv`, `systolic.im2col`)."""
    set_words = math.ceil(words / HASH_SETS)
    active = math.ceil(words * ACTIVE_FRACTION)
    half = words - active
    sets = (stream.layout.words if conv is None else conv.valid_words) // set_words + 1
    a = min(math.ceil(active / set_words), sets)
    b = min(math.ceil(half / set_words), sets - a)
    lines = math.ceil(half / words_per_cycle)
    slide_cycles = lines + READ_PORT_LATENCY_CYCLES
    layout = stream.layout
    fetched = layout.blocks * layout.rows * layout.width  # padding included
    first_lines = min(math.ceil(active / words_per_cycle),
                      math.ceil(fetched / words_per_cycle))
    walk = _walk_diagonal if isinstance(layout, DiagonalLayout) else _walk_row_major
    slides, at, index = ((0, np.zeros(0), np.zeros(0)) if b <= 0
                         else walk(stream, set_words, sets, a, b, fold_cycles) if conv is None
                         else conv.walk(set_words, sets, a, b))
    return ReadResult(slides, (first_lines + slides * lines) * words_per_cycle,
                      -float(first_lines), -1.0 + slides * slide_cycles, at, index,
                      float(slide_cycles))


def _miss(s: int, w: int, sets: int, a: int, b: int) -> int:
    """Slides until the window starting at set w (a sets, sliding b) holds set s."""
    d = (s - w) % sets
    return 0 if d < a else (d - a) // b + 1


def _walk_diagonal(stream: Stream, set_words: int, sets: int, a: int, b: int,
                   fold_cycles: int) -> tuple[int, np.ndarray, np.ndarray]:
    """Slides of a diagonal stream and the (cycle, slide index) of each: a fold whose block
    head is outside the window jumps at the fold's start; a block longer than the window then
    slides once per b sets as the skewed stream reaches them."""
    layout = stream.layout
    heads = [layout.head(x) // set_words for x in range(layout.blocks)]
    tails = [layout.tail(x) // set_words for x in range(layout.blocks)]
    w = slides = 0
    ev_visit: list[int] = []
    ev_set: list[int] = []
    ev_index: list[int] = []
    for v, blk in enumerate(stream.block.tolist()):
        hs, ts = heads[blk], tails[blk]
        k = _miss(hs, w, sets, a, b)
        if k:  # the fold's head is outside the window: a jump, all at the fold's start
            slides += k
            w += k * b
            ev_visit += [v] * k
            ev_set += [-1] * k
            ev_index += range(slides - k + 1, slides + 1)
        lin = hs - (hs - w) % sets  # the window's start, in the frame of this block
        if ts >= lin + a:  # the stream runs past the window's end: one slide per b sets
            cnt = (ts - lin - a) // b + 1
            ev_visit += [v] * cnt
            ev_set += range(lin + a, lin + a + cnt * b, b)
            ev_index += range(slides + 1, slides + cnt + 1)
            slides += cnt
            lin += cnt * b
        w = lin % sets
    visit = np.asarray(ev_visit, dtype=np.int64)
    where = np.asarray(ev_set, dtype=np.int64)
    blk = stream.block[visit]
    d = np.searchsorted(layout.before, np.maximum(where, 0) * set_words, side="right") - 1
    span = layout.rows + np.where(blk == layout.blocks - 1, layout.last_width,
                                  layout.width) - 2
    offset = np.where(where < 0, 0, np.clip(d - blk * layout.rows, 0, span))
    at = stream.fold[visit] * fold_cycles + stream.prefix_cycles + offset
    return slides, at.astype(float), np.asarray(ev_index, dtype=float)


def _walk_row_major(stream: Stream, set_words: int, sets: int, a: int, b: int,
                    fold_cycles: int) -> tuple[int, np.ndarray, np.ndarray]:
    """Slides of a row-major stream and the (cycle, slide index) of each miss: a fold reads
    its rows bottom row first, one a cycle, each row's words left to right (so a row's lower
    sets are read before the window slides past them); rows the window holds are skipped."""
    layout = stream.layout
    rows_per_fold = stream.prefix_cycles + 1
    w = slides = 0
    at: list[float] = []
    index: list[int] = []
    for fold, blk, r0, r1 in zip(stream.fold.tolist(), stream.block.tolist(),
                                 stream.row0.tolist(), stream.row1.tolist(), strict=True):
        width = layout.width_of(blk)
        base = layout.base(blk)
        row = r1 - 1
        while row >= r0:
            lo = (base + row * width) // set_words
            hi = (base + (row + 1) * width - 1) // set_words
            d_lo, d_hi = (lo - w) % sets, (hi - w) % sets
            if d_lo <= d_hi < a:  # held, and so is every row below down to the window start
                start = (lo - d_lo) * set_words - base
                row = max(r0, -(-start // width)) - 1
                continue
            cycle = fold * fold_cycles + rows_per_fold - 1 - (row - r0)
            for s in range(lo, hi + 1):
                k = _miss(s, w, sets, a, b)
                if k:
                    slides += k
                    w = (w + k * b) % sets
                    at += [cycle] * k
                    index += range(slides - k + 1, slides + 1)
            row -= 1
    return slides, np.asarray(at, dtype=float), np.asarray(index, dtype=float)


@dataclass(frozen=True, eq=False)
class Writes:
    """The ofmap words of each fold: a skewed block of `depth` x `width` words, column c
    writing its `depth` words on no-stall cycles first + c .. first + c + depth - 1 (so the
    fold writes from `first` to `last` = first + depth + width - 2)."""

    depth: np.ndarray
    width: np.ndarray
    first: np.ndarray

    @cached_property
    def words(self) -> np.ndarray:
        return self.depth * self.width

    @cached_property
    def last(self) -> np.ndarray:
        return self.first + self.depth + self.width - 2

    def cycle_of(self, count: float) -> float:
        """No-stall cycle of the `count`-th word written (1-based)."""
        cum = self._cum
        f = min(bisect.bisect_left(cum, count), len(cum) - 1)
        n = count - (cum[f - 1] if f else 0.0)
        return float(self.first[f] + skew_first_line(n, int(self.depth[f]), int(self.width[f])))

    def next_cycle(self, cycle: float) -> float | None:
        """The first no-stall cycle >= `cycle` at which a word is written (None: none)."""
        f = bisect.bisect_left(self._last, cycle)
        return None if f == len(self._last) else max(cycle, float(self.first[f]))

    @cached_property
    def _cum(self) -> list[float]:
        return np.cumsum(self.words).tolist()

    @cached_property
    def _last(self) -> list[float]:
        return self.last.astype(float).tolist()


def ofmap_writes(m: int, n: int, k: int, rows: int, cols: int, dataflow: str,
                 fold_cycles: int) -> Writes:
    """When each fold writes its outputs (ws, is: every row fold's partial sums; os: each
    output tile once), as SCALE-Sim's ofmap demand matrices place them."""
    sr, sc, t = array_mapping(m, n, k, dataflow)
    fr, fc = fold_counts(sr, sc, rows, cols)
    fold = np.arange(fr * fc)
    used_cols = np.minimum(cols, sc - (fold // fr) * cols)
    start = fold * fold_cycles
    if dataflow == "os":
        used_rows = np.minimum(rows, sr - (fold % fr) * rows)
        return Writes(used_rows, used_cols, start + t - 1 + rows - used_rows)
    return Writes(np.full(len(fold), t), used_cols, start + 2 * rows - 1)


@dataclass(frozen=True)
class DrainResult:
    """The ofmap SRAM's DRAM writes over one GEMM: words, first and last cycle (the final
    drain after the last fold included)."""

    dram_words: float
    dram_first_cycle: float
    dram_last_cycle: float


class _Ofmap:
    """The ofmap SRAM of `replay_stalls`: E words, drains of E/2 words (whole lines of
    `words_per_cycle`) to DRAM, one at a time (`write_buffer.service_writes`)."""

    def __init__(self, writes: Writes, words: int, words_per_cycle: float) -> None:
        self.writes, self.words = writes, words
        self.total = float(np.sum(writes.words))
        self.half = words - math.ceil(words * ACTIVE_FRACTION)
        self.lines = math.ceil(self.half / words_per_cycle)
        self.credit = self.lines * words_per_cycle  # NB: padding of a part line counts freed
        self.credited = 0.0
        self.drain_end = -math.inf
        self.first: float | None = None

    def next_event(self, stall: int) -> tuple[float, bool] | None:
        """(no-stall cycle, True if the write there finds the SRAM full) of the next drain,
        at the stall so far; None when no drain is due before the end."""
        trigger = self.credited + self.half + 1  # more than E/2 words wait
        if trigger > self.total:
            return None
        due = math.ceil(self.writes.cycle_of(trigger))
        if due + stall >= self.drain_end:
            return due, False
        free = self.writes.next_cycle(self.drain_end - stall)
        if self.credited + self.words <= self.total:
            full = math.ceil(self.writes.cycle_of(self.credited + self.words))
            if free is None or full < free:
                return full, True
        return None if free is None else (math.ceil(free), False)

    def drain(self, start: float) -> None:
        self.first = start if self.first is None else self.first
        self.drain_end = start + self.lines - 1 + WRITE_PORT_LATENCY_CYCLES
        self.credited += self.credit


@dataclass(frozen=True, eq=False)
class StallTimeline:
    """The stall accumulated by each no-stall cycle: `stalls[i]` from `cycles[i]` on."""

    cycles: np.ndarray
    stalls: np.ndarray

    def at(self, cycle: float) -> int:
        """Stall cycles accumulated by the end of no-stall cycle `cycle`."""
        return int(self.stalls[bisect.bisect_right(self.cycles, cycle) - 1])


def replay_stalls(reads: tuple[ReadResult, ...], writes: Writes, ofmap_words: int,
                  ofmap_words_per_cycle: float, compute_cycles: int
                  ) -> tuple[int, DrainResult, StallTimeline]:
    """Stall cycles of one GEMM as SCALE-Sim v3 adds them up (`double_buffered_scratchpad_mem.
    service_memory_requests`), event by event in no-stall cycle order, S the stall so far:

    - reads (`read_buffer.service_reads`): each miss of an operand's line at no-stall cycle c
      (slide j, ready at L_j = -1 + j x slide cycles) leads by p = L_j - (c + S + offset) and
      moves the line's offset (from the hit latency) by p, and by p again when p > 0; the line
      stalls by the largest offset - latency of the operands;
    - writes (`write_buffer.service_writes`): a drain starts when more than E/2 words wait and
      the last drain is done; a write that finds the SRAM full waits for the drain in flight.

    Returns (S at the end, the ofmap's DRAM writes, S by no-stall cycle)."""
    at = np.concatenate([r.at_cycles for r in reads])
    which = np.concatenate([np.full(len(r.at_cycles), i) for i, r in enumerate(reads)])
    index = np.concatenate([r.slide_index for r in reads])
    ready = np.concatenate([-1.0 + r.slide_index * r.slide_cycles for r in reads])
    order = np.lexsort((index, which, at))
    at_l, which_l, ready_l = at[order].tolist(), which[order].tolist(), ready[order].tolist()
    ofmap = _Ofmap(writes, ofmap_words, ofmap_words_per_cycle)
    stall, i, n = 0, 0, len(at_l)
    grew: list[tuple[float, int]] = [(-math.inf, 0)]  # (no-stall cycle, stall after it)
    while True:
        event = ofmap.next_event(stall)
        if event is None and i >= n:
            break
        if event is not None and (i >= n or event[0] < at_l[i]):
            cycle, full = event
            if full:  # NB: a line's write stall adds to its read stall (SCALE-Sim: the max)
                stall += max(int(ofmap.drain_end - (cycle + stall)), 0)
                ofmap.drain(ofmap.drain_end)
                grew.append((cycle, stall))
            else:
                ofmap.drain(cycle + stall)
            continue
        cycle, line_stall = at_l[i], 0.0
        while i < n and at_l[i] == cycle:
            operand, offset = which_l[i], float(READ_PORT_LATENCY_CYCLES)
            while i < n and at_l[i] == cycle and which_l[i] == operand:
                p = ready_l[i] - (cycle + stall + offset)
                offset += p + max(p, 0.0)
                i += 1
            line_stall = max(line_stall, offset - READ_PORT_LATENCY_CYCLES)
        if line_stall >= 1:
            stall += int(line_stall)
            grew.append((cycle, stall))
    end = compute_cycles + stall
    flush_lines = math.ceil(max(ofmap.total - ofmap.credited, 0.0) / ofmap_words_per_cycle)
    last = max(ofmap.drain_end, end + flush_lines - 1)
    first = end if ofmap.first is None else ofmap.first
    return stall, DrainResult(ofmap.total, first, last), StallTimeline(
        np.array([c for c, _ in grew]), np.array([x for _, x in grew]))


def fold_cycles(rows: int, cols: int, t: int, dataflow: str) -> int:
    """Cycles of one fold (`systolic.cycles_per_fold`), as an int."""
    return int(cycles_per_fold(rows, cols, t, dataflow))


@lru_cache(maxsize=4096)
def gemm_memory(m: int, n: int, k: int, rows: int, cols: int, dataflow: str,
                srams: SramSpec, im2col: tuple[int, ...] = ()) -> dict[str, float]:
    """SCALE-Sim's figures of one (m x k) @ (k x n) GEMM on an R x C array: compute, stall
    and total cycles (SCALE-Sim's "Total Cycles" = compute + stall), the total with the
    first prefetch and the last drain, SRAM and DRAM words per operand with their first and
    last cycles, and the stall accumulated by each no-stall cycle (`stall_timeline`).
    `im2col`: a conv's shape (`counts.Gemm.im2col`): its ifmap read address by address."""
    sr, sc, t = array_mapping(m, n, k, dataflow)
    fr, fc = fold_counts(sr, sc, rows, cols)
    if fr * fc > MAX_FOLDS:
        raise AccelsimError(f"a {m} x {k} @ {k} x {n} GEMM folds {fr * fc:.3g} times onto the "
                            f"{rows} x {cols} array; the SRAM model walks at most "
                            f"{MAX_FOLDS:,} folds per GEMM")
    per_fold = fold_cycles(rows, cols, t, dataflow)
    # NB: at least T cycles a fold (`model.gemm_cycles`): a 1 x 1 os array's fold is T cycles.
    compute = max(fr * fc * per_fold - 1, fr * fc * int(t))
    ifmap, filt = read_streams(m, n, k, rows, cols, dataflow)
    conv = Im2col.of(im2col, m, k)
    walk = None if conv is None else conv_walk(conv, ifmap, per_fold, dataflow)
    reads = (simulate_reads(ifmap, srams.ifmap_words, srams.ifmap_words_per_cycle, per_fold,
                            walk),
             simulate_reads(filt, srams.filter_words, srams.filter_words_per_cycle, per_fold))
    writes = ofmap_writes(m, n, k, rows, cols, dataflow, per_fold)
    stall, drains, timeline = replay_stalls(reads, writes, srams.ofmap_words,
                                            srams.ofmap_words_per_cycle, compute)
    total = compute + stall
    return {
        "compute_cycles": compute, "stall_cycles": stall, "total_cycles": total,
        "total_cycles_with_prefetch": drains.dram_last_cycle - min(
            reads[0].dram_first_cycle, reads[1].dram_first_cycle),
        "ifmap_slides": reads[0].slides, "filter_slides": reads[1].slides,
        "dram_ifmap_reads": reads[0].dram_words, "dram_filter_reads": reads[1].dram_words,
        "dram_ofmap_writes": drains.dram_words,
        "dram_ifmap_first": reads[0].dram_first_cycle, "dram_ifmap_last": reads[0].dram_last_cycle,
        "dram_filter_first": reads[1].dram_first_cycle,
        "dram_filter_last": reads[1].dram_last_cycle,
        "dram_ofmap_first": drains.dram_first_cycle, "dram_ofmap_last": drains.dram_last_cycle,
        "stall_timeline": timeline,
    }
