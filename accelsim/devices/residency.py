"""On-chip residency of activations: a kernel's input that an earlier kernel of the same pass
wrote, recently enough that it is still in the device's last-level cache (a GPU's L2), is read
from there instead of DRAM.

    hits_bytes = resident_read_bytes(work, dram_bytes, fused, cache_bytes=40e6)

The cache is taken as least-recently-used over the bytes that flow through it: a tensor written
by kernel p is still resident when kernel r reads it if the tensor and everything kernels
p+1 .. r-1 moved through DRAM (their reads, writes and weights) fit in `cache_bytes`
(NB: an LRU stack-distance bound; real replacement, the L2's partitioning on A100 and H100
and prefetching are not modelled, and the whole L2 is taken as usable). Only forward-pass
reads of kernels' own inputs are served (NB: a fused row's extra input, a backward pass's
saved activations and weights stay in DRAM), and writes still go to DRAM (NB: a write-back
cache writes a dead activation's lines back when it evicts them, unless the allocator reuses
the buffer first, which is not modelled). A work table without producers (`input_ops`, the
decoder path of `accelsim.llm`) gets no hits.
"""

from __future__ import annotations

import itertools

import numpy as np

from accelsim.workload.columns import Table


def resident_read_bytes(work: Table, dram_bytes: np.ndarray, fused: np.ndarray,
                        cache_bytes: float) -> np.ndarray:
    """Bytes of each row's DRAM reads the cache serves instead (0 where none), per row."""
    n = len(work)
    if "input_ops" not in work or not cache_bytes > 0 or n == 0:
        return np.zeros(n)
    forward = np.asarray(work["phase"]) == "forward"
    op_index = np.asarray(work["op_index"], dtype=int)
    row_of_op = np.full(max(int(op_index.max()), 0) + 1, -1)
    row_of_op[op_index[forward]] = np.flatnonzero(forward)  # the op's forward row
    inputs = list(work["input_ops"])
    # one (reader row, producer row) pair per input of every row
    reader = np.repeat(np.arange(n), np.fromiter(map(len, inputs), int, n))
    producer = row_of_op[np.fromiter(itertools.chain.from_iterable(inputs), int, len(reader))]
    ok = forward[reader] & ~fused[reader] & (producer >= 0) & (producer < reader)
    reader, producer = reader[ok], producer[ok]
    write = np.asarray(work["write_bytes"], dtype=float)
    through = np.cumsum(np.where(forward, dram_bytes, 0.0))  # DRAM traffic up to each row
    between = through[reader - 1] - through[producer]  # what rows p+1 .. r-1 moved
    hit = write[producer] + between <= cache_bytes
    served = np.bincount(reader[hit], weights=write[producer[hit]], minlength=n)
    activation_read = (np.asarray(work["read_bytes"], dtype=float)
                       - np.asarray(work["weight_bytes"], dtype=float))
    return np.minimum(np.minimum(served, activation_read), dram_bytes)
