"""A runtime patch that makes SCALE-Sim 3.0.0's memory simulation fast, with the same results.

Runs inside SCALE-Sim's own Python (see `jobs.py`, `run.py jobs`, which applies it to a job
that says `"fast": true`). `patched()` swaps in the methods below and restores the originals on
exit.

Where SCALE-Sim's time goes (cProfile, resnet50 res3a_branch2a, 32x32 ws, 31.7 s profiled):
`double_buffered_scratchpad.service_memory_requests` calls the ifmap and filter read buffers'
`service_reads` and the ofmap write buffer's `service_writes` once per demand row (103,360
rows), and those loop over every address in Python: `read_buffer.active_buffer_hit` scans up
to ~100 Python sets per address (3.2 M calls, 9.3 s), `write_buffer.store_to_trace_mat_cache`
builds numpy lines element by element (5.1 s), tqdm objects per call (5.5 s). On stall-heavy
layers `read_buffer.new_prefetch` appends each refill to the DRAM trace with `np.concatenate`,
copying the whole trace each time (quadratic in the number of refills).

What replaces it, and why it is the same computation:
- Hits do not depend on time. A read buffer's window (`active_buffer_set_limits`) moves only in
  `new_prefetch`, which runs only on a miss; so between misses every demand row is a hit whose
  serviced cycle is `cycle + hit_latency` and whose stall is 0. The fast loop finds the next
  row with a miss under the current window with vectorised look-ups over blocks of rows, serves
  the rows before it in O(1) each, and runs SCALE-Sim's own per-address loop (with its quirks,
  e.g. `offset += potential_stall_cycles` also when negative) on that row only.
- Membership: SCALE-Sim's hashed buffer puts the k-th valid (not -1) word of the fetch matrix,
  in row-major order, in set k // ceil(total_size_elems / 100) (`prepare_hashed_buffer`); an
  address hits if any of its sets lies in the window [start, end), or, when start >= end, in
  [start, num_lines) or [0, end). `_LineIndex` keeps the sorted (address, set) pairs, so "is
  there a set of this address at or after `start`" is one binary search.
- The write buffer's state is counts (free space, words in the open line, lines in its trace,
  which lines were closed early by a forced flush); a row that neither starts a drain nor
  stalls changes only those counts, so it is served in O(1); other rows run SCALE-Sim's
  per-word loop. Drains (`empty_drain_buf`) and the final flush (`empty_all_buffers`) follow the
  original step by step; its trace matrix is built once at the end from the same words.
- DRAM traces are kept as a list of chunks and concatenated once when read (same rows, same
  order, same dtype as the repeated `np.concatenate`). With `patched(keep_traces=False)` (runs
  that save no traces) only what the reports read is kept: each DRAM trace's first and last
  cycle (min and max of its cycle column, updated per refill) and, per SRAM trace, the
  cycles and which demand rows hold an address (first, last); asking for a trace that was not
  kept raises instead of answering differently.
- NB: upstream's `new_prefetch` writes -1 into `fetch_matrix` through views after the hashed
  buffer was built from it; the index, built at the same moment, sees what the sets saw.
The fold loops that build SCALE-Sim's operand and demand matrices are rewritten by
`fast_compute` (one join instead of a growing `np.concatenate`).
Only the configuration used here is covered (user DRAM bandwidth, no Ramulator trace, no custom
SRAM layout); anything else runs SCALE-Sim's original methods. `tests/validation/test_scalesim.py`
and `equivalence.py` check that reports are byte-identical with and without the patch.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import numpy as np
from scalesim.memory.double_buffered_scratchpad_mem import double_buffered_scratchpad
from scalesim.memory.read_buffer import read_buffer

from benchmarks.scalesim import fast_compute, fast_loop

_ORIGINAL: dict[tuple[type, str], object] = {}
SETTINGS = {"keep_traces": True}


def _plain(buf: read_buffer) -> bool:
    """The read-buffer configuration the patch covers (else the original methods run)."""
    return not buf.enable_layout_evaluation and not buf.use_ramulator_trace


def _orig(cls: type, name: str):
    return _ORIGINAL[(cls, name)]


class _LineIndex:
    """Which hashed-buffer sets hold each address (replaces `read_buffer.hashed_buffer`)."""

    def __init__(self, fetch_matrix: np.ndarray, elems_per_set: int) -> None:
        flat = fetch_matrix.reshape(-1)
        valid = flat[flat != -1]
        set_of_word = np.arange(valid.size, dtype=np.int64) // elems_per_set
        self.num_lines = valid.size // elems_per_set + 1   # prepare_hashed_buffer's line_id + 1
        self.addresses, inverse = np.unique(valid, return_inverse=True)
        self.keys = np.unique(inverse.astype(np.int64) * self.num_lines + set_of_word)
        starts = np.arange(self.addresses.size, dtype=np.int64) * self.num_lines
        self.first = self.keys[np.searchsorted(self.keys, starts)] % self.num_lines

    def ids(self, addresses: np.ndarray) -> np.ndarray:
        """Index of each address in `self.addresses`; -1 for SCALE-Sim's empty slot (-1)."""
        pos = np.searchsorted(self.addresses, addresses)
        found = self.addresses[np.minimum(pos, self.addresses.size - 1)] == addresses
        empty = addresses == -1
        if not (found | empty).all():
            bad = addresses[~(found | empty)].reshape(-1)[0]
            # SCALE-Sim itself would prefetch forever looking for it
            raise ValueError(f"demanded address {bad} is not in the prefetch matrix")
        return np.where(empty, -1, pos)

    def hits(self, ids: np.ndarray, start: int, end: int) -> np.ndarray:
        """Per id: is one of its sets in the window (`read_buffer.active_buffer_hit`)."""
        safe = np.maximum(ids, 0)
        pos = np.searchsorted(self.keys, safe * self.num_lines + start)
        key = self.keys[np.minimum(pos, self.keys.size - 1)]
        at_or_after = (pos < self.keys.size) & (key // self.num_lines == safe)
        if start < end:
            hit = at_or_after & (key % self.num_lines < end)
        else:   # wrapped window [start, num_lines) + [0, end); all sets when start == end
            hit = at_or_after | (self.first[safe] < end)
        return hit | (ids < 0)

    def hit(self, address: float, start: int, end: int) -> bool:
        pos = int(np.searchsorted(self.addresses, address))
        if pos == self.addresses.size or self.addresses[pos] != address:
            return False
        return bool(self.hits(np.array([pos]), start, end)[0])


# --- read_buffer ------------------------------------------------------------------------------

def set_fetch_matrix(self: read_buffer, fetch_matrix_np: np.ndarray) -> None:
    """Replaces memory/read_buffer.py:set_fetch_matrix, whose per-element loop copies the
    operand words row-major into a (ceil(n / bandwidth), bandwidth) matrix of -1s: the same
    copy, as one reshape."""
    if not _plain(self):
        return _orig(read_buffer, "set_fetch_matrix")(self, fetch_matrix_np)
    num_elems = fetch_matrix_np.shape[0] * fetch_matrix_np.shape[1]
    num_lines = int(math.ceil(num_elems / self.req_gen_bandwidth))
    flat = np.ones(num_lines * self.req_gen_bandwidth) * -1
    flat[:num_elems] = np.asarray(fetch_matrix_np).reshape(-1)
    self.fetch_matrix = flat.reshape((num_lines, self.req_gen_bandwidth))
    self.prepare_hashed_buffer()


def prepare_hashed_buffer(self: read_buffer) -> None:
    """Replaces memory/read_buffer.py:prepare_hashed_buffer: the same set numbering and line
    counts, held as a `_LineIndex` instead of a dict of Python sets."""
    if not _plain(self):
        return _orig(read_buffer, "prepare_hashed_buffer")(self)
    elems_per_set = math.ceil(self.total_size_elems / 100)
    self._line_index = _LineIndex(self.fetch_matrix, elems_per_set)
    self._trace_chunks = []
    self.hashed_buffer = {}   # NB: not built; every reader of it is patched
    num_lines = self._line_index.num_lines
    max_active = int(math.ceil(self.active_buf_size / elems_per_set))
    max_prefetch = int(math.ceil(self.prefetch_buf_size / elems_per_set))
    self.num_active_buf_lines = min(num_lines, max_active)
    self.num_prefetch_buf_lines = min(num_lines - self.num_active_buf_lines, max_prefetch)
    self.num_lines = num_lines
    self.hashed_buffer_valid = True


def active_buffer_hit(self: read_buffer, addr: float) -> bool:
    """Replaces memory/read_buffer.py:active_buffer_hit (scan of the window's sets): one
    binary search in `_LineIndex`."""
    if not _plain(self) or not hasattr(self, "_line_index"):
        return _orig(read_buffer, "active_buffer_hit")(self, addr)
    assert self.active_buf_full_flag, 'Active buffer is not ready yet'
    start, end = self.active_buffer_set_limits
    return self._line_index.hit(addr, start, end)


def new_prefetch(self: read_buffer) -> None:
    """Replaces memory/read_buffer.py:new_prefetch, line for line, except: the request cycles
    are filled by one vector operation instead of a loop (same integers), and the refill is
    appended to a list of trace chunks instead of `np.concatenate` onto the whole trace."""
    if not _plain(self):
        return _orig(read_buffer, "new_prefetch")(self)
    assert self.active_buf_full_flag, 'Active buffer is empty'
    active_start, active_end = self.active_buffer_set_limits
    active_start = int((active_start + self.num_prefetch_buf_lines) % self.num_lines)
    active_end = int((active_start + self.num_active_buf_lines) % self.num_lines)
    prefetch_start = active_end
    prefetch_end = int((prefetch_start + self.num_prefetch_buf_lines) % self.num_lines)
    self.active_buffer_set_limits = [active_start, active_end]
    self.prefetch_buffer_set_limits = [prefetch_start, prefetch_end]

    start_idx = self.next_line_prefetch_idx
    num_lines = math.ceil(self.prefetch_buf_size / self.req_gen_bandwidth)
    end_idx = start_idx + num_lines
    requested_data_size = num_lines * self.req_gen_bandwidth
    self.num_access += requested_data_size
    if end_idx > self.fetch_matrix.shape[0]:
        last_idx = self.fetch_matrix.shape[0]
        prefetch_requests = self.fetch_matrix[start_idx:, :]
        new_end_idx = min(end_idx - last_idx, start_idx)
        prefetch_requests = np.concatenate((prefetch_requests, self.fetch_matrix[:new_end_idx, :]))
    else:
        # NB: a view, so the chomps below write -1 into fetch_matrix itself, as upstream does
        prefetch_requests = self.fetch_matrix[start_idx:end_idx, :]
    for i in range(0, self.next_col_prefetch_idx):
        prefetch_requests[0][i] = -1
    if requested_data_size > self.active_buf_size:
        valid_cols = int(self.active_buf_size % self.req_gen_bandwidth)
        row = prefetch_requests.shape[0] - 1
        for col in range(valid_cols, self.req_gen_bandwidth):
            prefetch_requests[row][col] = -1

    cycles_arr = np.zeros((num_lines, 1))
    cycles_arr[:, 0] = self.last_prefetch_cycle + np.arange(num_lines) + 1
    response_cycles_arr = self.backing_buffer.service_reads(
        incoming_cycles_arr=cycles_arr, incoming_requests_arr_np=prefetch_requests)
    self.last_prefetch_cycle = np.amax(response_cycles_arr)
    if SETTINGS["keep_traces"]:
        self._trace_chunks.append(np.column_stack((response_cycles_arr, prefetch_requests)))
    else:   # NB: only what the reports read of the trace: its cycle column's min and max
        low, high = np.amin(response_cycles_arr[:, 0]), np.amax(response_cycles_arr[:, 0])
        self._trace_span = (min(self._trace_span[0], low), max(self._trace_span[1], high))

    if requested_data_size > self.active_buf_size:
        self.next_line_prefetch_idx = num_lines % self.fetch_matrix.shape[0]
    else:
        self.next_line_prefetch_idx = (num_lines + 1) % self.fetch_matrix.shape[0]


def _flush_trace(self: read_buffer) -> None:
    """Join the pending trace chunks (kept whole only when traces are kept)."""
    chunks = getattr(self, "_trace_chunks", None)
    if chunks:
        self.trace_matrix = np.concatenate([self.trace_matrix] + chunks, axis=0)
        chunks.clear()


def prefetch_active_buffer(self: read_buffer, start_cycle):
    """Wraps memory/read_buffer.py:prefetch_active_buffer (it starts the trace anew)."""
    self._trace_chunks = []
    self._lean_trace = not SETTINGS["keep_traces"]
    done = _orig(read_buffer, "prefetch_active_buffer")(self, start_cycle)
    first = self.trace_matrix[:, 0]
    self._trace_span = (np.amin(first), np.amax(first))
    return done


def get_external_access_start_stop_cycles(self: read_buffer):
    """memory/read_buffer.py:get_external_access_start_stop_cycles: min and max of the
    trace's cycle column (tracked as it grows when the trace is lean)."""
    _flush_trace(self)
    if not getattr(self, "_lean_trace", False):
        return _orig(read_buffer, "get_external_access_start_stop_cycles")(self)
    assert self.trace_valid, 'Traces not ready yet'
    return self._trace_span


def _trace_reader(name: str):
    """Wraps a read_buffer trace reader: pending chunks joined first; refused if lean."""
    def method(self: read_buffer, *args):
        if getattr(self, "_lean_trace", False):
            raise RuntimeError(f"read_buffer.{name}: the DRAM trace was not kept "
                               "(fast.patched(keep_traces=False))")
        _flush_trace(self)
        return _orig(read_buffer, name)(self, *args)
    method.__name__ = name
    return method


_PATCHES: dict[type, dict] = {
    read_buffer: {"set_fetch_matrix": set_fetch_matrix,
                  "prepare_hashed_buffer": prepare_hashed_buffer,
                  "active_buffer_hit": active_buffer_hit,
                  "new_prefetch": new_prefetch,
                  "prefetch_active_buffer": prefetch_active_buffer,
                  "get_trace_matrix": _trace_reader("get_trace_matrix"),
                  "get_external_access_start_stop_cycles": get_external_access_start_stop_cycles,
                  "print_trace": _trace_reader("print_trace")},
    double_buffered_scratchpad: {"service_memory_requests":
                                 fast_loop.service_memory_requests,
                                 **fast_loop.SRAM_GETTERS},
}


@contextlib.contextmanager
def patched(keep_traces: bool = True) -> Iterator[None]:
    """SCALE-Sim with the fast methods inside the block, the original ones after it.
    `keep_traces=False` keeps of the SRAM and DRAM traces only what the three reports read
    (for runs that do not save traces, as `jobs.py`'s): same reports, less memory;
    reading a trace that was not kept raises."""
    SETTINGS["keep_traces"] = keep_traces
    fast_loop.SETTINGS = SETTINGS
    if not any(cls in _PATCHES for cls in fast_compute.SITES):
        _PATCHES.update(fast_compute.patches())
    for cls, methods in _PATCHES.items():
        for name in methods:
            _ORIGINAL.setdefault((cls, name), getattr(cls, name))
    try:
        for cls, methods in _PATCHES.items():
            for name, method in methods.items():
                setattr(cls, name, method)
        yield
    finally:
        for cls, methods in _PATCHES.items():
            for name in methods:
                setattr(cls, name, _ORIGINAL[(cls, name)])
