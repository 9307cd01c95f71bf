"""The row loop of `fast` (fast.py): SCALE-Sim's double-buffered scratchpad serving its demand
matrices (memory/double_buffered_scratchpad_mem.py:service_memory_requests), with the rows
where nothing happens served in O(1). Why this is the same computation: fast.py's
docstring. Applied by `fast.patched()` (which also patches the read buffers whose
`_line_index` and `new_prefetch` this loop uses).
"""

from __future__ import annotations

import math
from array import array

import numpy as np
from scalesim.memory.double_buffered_scratchpad_mem import double_buffered_scratchpad
from scalesim.memory.read_buffer import read_buffer
from scalesim.memory.write_buffer import write_buffer

ORIGINAL_SERVICE = double_buffered_scratchpad.service_memory_requests
SETTINGS = {"keep_traces": True}   # set by fast.patched()
_FIRST_BLOCK_ROWS = 64


class _ReadStream:
    """One read buffer serving its demand matrix row by row (read_buffer.service_reads)."""

    def __init__(self, buf: read_buffer, demand: np.ndarray) -> None:
        self.buf, self.demand, self.index = buf, demand, buf._line_index
        self.rows = demand.shape[0]
        self.latency = buf.get_hit_latency()
        self.next_event = 0

    def start(self, cycle: np.float64) -> None:
        """What the first `service_reads` call does before its loop."""
        if not self.buf.active_buf_full_flag:
            self.buf.prefetch_active_buffer(start_cycle=cycle)
        self.next_event = self._next_miss_row(0)

    def _next_miss_row(self, first: int) -> int:
        """First row >= `first` with an address outside the current window (rows if none)."""
        start, end = self.buf.active_buffer_set_limits
        row, block = first, _FIRST_BLOCK_ROWS
        while row < self.rows:
            ids = self.index.ids(self.demand[row:row + block])
            hit = self.index.hits(ids, start, end)
            missed = np.flatnonzero(~hit.all(axis=1))
            if missed.size:
                return row + int(missed[0])
            row += block
            block *= 2
        return self.rows

    def serve_miss_row(self, i: int, cycle: float) -> float:
        """read_buffer.service_reads on row `i`, which has a miss (its non-layout branch)."""
        buf, offset = self.buf, self.latency
        ids = self.index.ids(self.demand[i])
        hit = self.index.hits(ids, *buf.active_buffer_set_limits)
        for j in range(ids.size):   # upstream's loop; `hit` is redone after each prefetch
            while not hit[j]:
                buf.new_prefetch()
                hit[j:] = self.index.hits(ids[j:], *buf.active_buffer_set_limits)
                potential_stall_cycles = buf.last_prefetch_cycle - (cycle + offset)
                offset += potential_stall_cycles     # NB: upstream adds it also when negative
                if potential_stall_cycles > 0:
                    offset += potential_stall_cycles
        self.next_event = self._next_miss_row(i + 1)
        return cycle + offset


class _WriteStream:
    """The ofmap write buffer as counts (write_buffer.service_writes, empty_drain_buf)."""

    def __init__(self, buf: write_buffer, demand: np.ndarray) -> None:
        self.buf, self.demand = buf, demand
        self.words = (demand != -1).sum(axis=1).tolist()
        self.bandwidth = buf.req_gen_bandwidth
        self.drain_below = buf.total_size_elems - buf.drain_buf_size
        self.lines_per_drain = int(math.ceil(buf.drain_buf_size / buf.req_gen_bandwidth))
        self.free = buf.free_space
        self.open_words = 0          # words in the line being filled (write_buffer.line_idx)
        self.lines = 0               # lines in the trace matrix, flushed ones included
        self.short_lines: dict[int, int] = {}   # line id -> words, for lines flushed early
        self.drain_start = buf.drain_buf_start_line_id
        self.drain_end_cycle = buf.drain_end_cycle
        self.num_access = buf.num_access
        self.cycle_chunks: list[np.ndarray] = []

    def _store(self, n: int) -> None:
        """store_to_trace_mat_cache for `n` words."""
        self.free -= n
        filled = self.open_words + n
        self.lines += filled // self.bandwidth
        self.open_words = filled % self.bandwidth

    def _flush(self) -> None:
        """append_to_trace_mat(force=True): the open line joins the trace, padded with -1."""
        if self.open_words:
            self.short_lines[self.lines] = self.open_words
            self.lines += 1
            self.open_words = 0

    def _drain(self, cycle) -> np.float64:
        """write_buffer.empty_drain_buf from `cycle`; the cycle the drain ends."""
        end = min(self.drain_start + self.lines_per_drain, self.lines)
        num_lines = end - self.drain_start
        if num_lines <= 0:
            raise IndexError("drain of an empty trace (SCALE-Sim fails here too)")
        last_words = self.short_lines.get(end - 1, self.bandwidth)
        data_sz_to_drain = num_lines * self.bandwidth - (self.bandwidth - last_words)
        self.num_access += data_sz_to_drain
        cycles = np.asarray(cycle + np.arange(num_lines)).reshape((num_lines, 1))
        serviced = self.buf.backing_buffer.service_writes(np.zeros((num_lines, 1)), cycles)
        self.cycle_chunks.append(serviced)
        self.free += data_sz_to_drain
        self.drain_start = end
        return np.amax(serviced)

    def serve(self, i: int, cycle: float) -> float:
        """write_buffer.service_writes on row `i`: the cycle its writes are done."""
        words = self.words[i]
        if cycle < self.drain_end_cycle:
            if self.free - words > 0:    # no word of the row finds the buffer full
                self._store(words)
                return cycle
        elif self.free - words >= self.drain_below:   # no word of the row starts a drain
            self._store(words)
            return cycle
        current_cycle = cycle
        for _ in range(words):
            self._store(1)
            if current_cycle < self.drain_end_cycle:
                if not self.free > 0:
                    current_cycle = self.drain_end_cycle
            elif self.free < self.drain_below:
                self._flush()
                self.drain_end_cycle = self._drain(current_cycle)
        return current_cycle

    def finish(self, cycle) -> None:
        """write_buffer.empty_all_buffers(cycle), then the buffer's attributes as upstream
        leaves them (trace matrix built from the same words)."""
        self._flush()
        if self.lines:
            while self.drain_start < self.lines:
                self.drain_end_cycle = self._drain(cycle)
                cycle = self.drain_end_cycle + 1
        buf = self.buf
        words = self.demand[self.demand != -1].astype(np.float64)
        lengths = np.full(self.lines, self.bandwidth, dtype=np.int64)
        for line, n in self.short_lines.items():
            lengths[line] = n
        assert lengths.sum() == words.size, "write stream lost words"
        trace = np.ones((self.lines, self.bandwidth)) * -1
        starts = np.cumsum(lengths) - lengths
        rows = np.repeat(np.arange(self.lines), lengths)
        trace[rows, np.arange(words.size) - np.repeat(starts, lengths)] = words
        if self.lines:
            buf.trace_matrix, buf.trace_matrix_empty = trace, False
        buf.trace_matrix_cache, buf.trace_matrix_cache_empty = np.zeros((1, 1)), True
        buf.current_line, buf.line_idx = np.ones((1, 1)) * -1, 0
        buf.free_space, buf.num_access = self.free, self.num_access
        buf.drain_buf_start_line_id, buf.drain_buf_end_line_id = self.drain_start, self.drain_start
        buf.drain_end_cycle = self.drain_end_cycle
        if self.cycle_chunks:
            buf.cycles_vec = np.concatenate(self.cycle_chunks, axis=0)
            buf.trace_valid = True


# --- double_buffered_scratchpad ---------------------------------------------------------------

def service_memory_requests(self: double_buffered_scratchpad, ifmap_demand_mat,
                            filter_demand_mat, ofmap_demand_mat) -> None:
    """Replaces memory/double_buffered_scratchpad_mem.py:service_memory_requests: the same
    row loop (row i issued at cycle i + stalls so far; the stall added is the largest of the
    three buffers'), with rows that hit in both read buffers and neither fill nor drain the
    write buffer served in O(1) (see the module docstring)."""
    covered = (not self.estimate_bandwidth_mode and not self.use_ramulator_trace
               and not self.ifmap_buf.enable_layout_evaluation
               and not self.filter_buf.enable_layout_evaluation
               and hasattr(self.ifmap_buf, "_line_index")
               and hasattr(self.filter_buf, "_line_index")
               and type(self.ofmap_buf) is write_buffer and ofmap_demand_mat.shape[0] > 0
               and not self.ofmap_buf.backing_buffer.ramulator_trace)
    if not covered:
        return ORIGINAL_SERVICE(self, ifmap_demand_mat, filter_demand_mat, ofmap_demand_mat)
    assert self.params_valid_flag, 'Memories not initialized yet'
    rows = ofmap_demand_mat.shape[0]
    self.total_cycles = 0
    self.stall_cycles = 0
    ifmap = _ReadStream(self.ifmap_buf, ifmap_demand_mat)
    filt = _ReadStream(self.filter_buf, filter_demand_mat)
    ofmap = _WriteStream(self.ofmap_buf, ofmap_demand_mat)
    ifmap.start(np.float64(0.0))
    filt.start(np.float64(0.0))
    if_latency, f_latency = ifmap.latency, filt.latency
    if_out, f_out, of_out = array("d"), array("d"), array("d")   # float64, as upstream's
    stall = 0
    for i in range(rows):
        cycle = float(i + stall)
        if i < ifmap.next_event:
            if_cycle = cycle + if_latency
        else:
            if_cycle = ifmap.serve_miss_row(i, cycle)
        if i < filt.next_event:
            f_cycle = cycle + f_latency
        else:
            f_cycle = filt.serve_miss_row(i, cycle)
        of_cycle = ofmap.serve(i, cycle)
        if_out.append(if_cycle)
        f_out.append(f_cycle)
        of_out.append(of_cycle)
        stall += int(max(if_cycle - cycle - if_latency, f_cycle - cycle - f_latency,
                         of_cycle - cycle))
    self.stall_cycles = stall
    of_np = np.frombuffer(of_out, dtype=np.float64).reshape((rows, 1))
    ofmap.finish(of_np[-1])
    if_np = np.frombuffer(if_out, dtype=np.float64).reshape((rows, 1))
    f_np = np.frombuffer(f_out, dtype=np.float64).reshape((rows, 1))
    if SETTINGS["keep_traces"]:
        self._sram_lean = None
        self.ifmap_trace_matrix = np.concatenate((if_np, ifmap_demand_mat), axis=1)
        self.filter_trace_matrix = np.concatenate((f_np, filter_demand_mat), axis=1)
        self.ofmap_trace_matrix = np.concatenate((of_np, ofmap_demand_mat), axis=1)
    else:   # NB: what the SRAM start/stop getters read: cycles and the rows that are used
        self._sram_lean = {name: (cycles[:, 0], np.flatnonzero((demand != -1).any(axis=1)))
                           for name, cycles, demand in (("ifmap", if_np, ifmap_demand_mat),
                                                        ("filter", f_np, filter_demand_mat),
                                                        ("ofmap", of_np, ofmap_demand_mat))}
        self.ifmap_trace_matrix = self.filter_trace_matrix = self.ofmap_trace_matrix = None
    self.total_cycles = int(of_np.max())
    self.traces_valid = True




def _sram_start_stop(name: str):
    """double_buffered_scratchpad.get_<name>_sram_start_stop_cycles: the cycles of the first
    and last demand rows with an address (unchanged if none), from the lean SRAM trace."""
    original = getattr(double_buffered_scratchpad, f"get_{name}_sram_start_stop_cycles")

    def method(self: double_buffered_scratchpad):
        lean = getattr(self, "_sram_lean", None)
        if lean is None:
            return original(self)
        assert self.traces_valid, 'Traces not generated yet'
        cycles, used = lean[name]
        if used.size:
            setattr(self, f"{name}_sram_start_cycle", cycles[used[0]])
            setattr(self, f"{name}_sram_stop_cycle", cycles[used[-1]])
        return getattr(self, f"{name}_sram_start_cycle"), getattr(self, f"{name}_sram_stop_cycle")
    method.__name__ = f"get_{name}_sram_start_stop_cycles"
    return method


SRAM_GETTERS = {f"get_{name}_sram_start_stop_cycles": _sram_start_stop(name)
                for name in ("ifmap", "filter", "ofmap")}
