"""Fresh pages per call: the per-call temporaries of numpy's matmul kernels that the C
allocator maps anew, so that every call faults their pages in again (a term of the CPU class
model, `accelsim.devices.cpu.model`, under a stack that gives its `[allocator]` figures).

    nbytes = fresh_bytes(work, gemms, "int8", quantized, weight_casts=False,
                         mmap_threshold_bytes=32 << 20, page_bytes=4096)
    fault_s = fresh_pages(nbytes, 4096) * stack.fresh_page_s

glibc's malloc serves a request at or above its mmap threshold with a mapping of its own and
unmaps it at free (malloc(3), mallopt(3) M_MMAP_THRESHOLD): the next call's same-sized
temporary is a new mapping, whose pages the kernel zero-fills on first touch (a minor fault
per page, or per huge page where numpy's madvise(MADV_HUGEPAGE) of arrays >= 4 MiB is granted).
The threshold starts at 128 KiB and rises to the size of each freed mapping up to
DEFAULT_MMAP_THRESHOLD_MAX (32 MiB on 64-bit), so in a process that has run a forward pass it
sits at the size of the largest temporary freed so far, at most 32 MiB: the stack's
`mmap_threshold_bytes`. The time per fresh page is measured (`accelsim calibrate`: numpy
arrays above the threshold, written fresh vs written again).
"""

from __future__ import annotations

import math

import numpy as np

from accelsim.devices.cpu.passes import quantized_a_elements, rounded_params
from accelsim.devices.mapping import per_row, row_gemms
from accelsim.formats import get_format
from accelsim.workload.columns import Table

FP32_BYTES = 4.0
FP64_BYTES = 8.0
INT32_BYTES = 4.0
INT8_BYTES = 1.0
# quantize_int8 per operand element: abs (fp32), astype(float64), rint, clip (float64; the
# divide is numpy's in-place temporary elision of astype's result), astype(int8), then
# int8_matmul_acc's astype(int32)
QUANTIZE_TEMPORARIES_BYTES = (FP32_BYTES, FP64_BYTES, FP64_BYTES, FP64_BYTES, INT8_BYTES,
                              INT32_BYTES)
# int8_matmul per output element: the int32 matmul, its astype(int32) copy, astype(float64),
# the rescaled float64 product, astype(float32)
INT8_OUTPUT_TEMPORARIES_BYTES = (INT32_BYTES, INT32_BYTES, FP64_BYTES, FP64_BYTES, FP32_BYTES)


def gemm_temporaries_bytes(m: float, k: float, n: float, precision: str, quantized: bool,
                           weight_casts: bool, a_elements: float | None = None) -> list[float]:
    """The sizes, bytes, of the arrays one (m x k) @ (k x n) call of numpy's kernels allocates
    (`accelsim.kernels.execute.run_op_in_format`): the fp32 output; with `weight_casts` (a
    narrow float format) both operands and the output rounded (a narrow copy, then an fp32
    one: `formats.round_to_format`); `quantized` (int8): both operands quantised
    (`QUANTIZE_TEMPORARIES_BYTES` per element) and the output's int32 and float64 passes.
    `a_elements`: what the left operand's quantisation passes over when it is not m x k (a
    convolution's input, `cpu_passes.quantized_a_elements`: quantised, then im2col'd into an
    int8 m x k copy, which int8_matmul_acc widens to int32).
    NB: the operands themselves (input, weights) are made by the caller, not per call;
    arrays below 256 KiB never reach a threshold and are not listed apart."""
    if quantized:
        a = m * k if a_elements is None else a_elements
        left = ([m * k * b for b in QUANTIZE_TEMPORARIES_BYTES] if a == m * k else
                [a * b for b in QUANTIZE_TEMPORARIES_BYTES[:-1]]
                + [m * k * INT8_BYTES, m * k * INT32_BYTES])
        return (left + [k * n * b for b in QUANTIZE_TEMPORARIES_BYTES]
                + [m * n * b for b in INT8_OUTPUT_TEMPORARIES_BYTES])
    out = [m * n * FP32_BYTES]
    width = get_format(precision).bytes_per_element
    if weight_casts and width < FP32_BYTES:
        out += [e * b for e in (m * k, k * n, m * n) for b in (width, FP32_BYTES)]
    return out


def fresh_pages(nbytes: np.ndarray | float, page_bytes: int) -> np.ndarray:
    """Pages of `nbytes` of fresh mappings (each temporary rounded up to whole pages by
    `fresh_bytes` already; a plain ceiling here)."""
    return np.ceil(np.asarray(nbytes, dtype=float) / page_bytes)


def fresh_bytes(work: Table, gemms: Table, precision: str, quantized: np.ndarray,
                weight_casts: bool, mmap_threshold_bytes: float, page_bytes: int
                ) -> np.ndarray:
    """Per work row, the bytes of the per-call temporaries (`gemm_temporaries_bytes`; a
    narrow-float op's rounded copy of its parameters, `cpu_passes.rounded_params`) at or
    above `mmap_threshold_bytes`, each rounded up to whole pages, times the GEMM's count;
    0 for other rows and backward rows. `quantized`: rows numpy quantises per call
    (`cpu.quantized_rows`). NB: assumes a process in steady state (the dynamic threshold has
    risen to `mmap_threshold_bytes`) and leaves out the heap's trimming (glibc hands the top
    of the heap back above M_TRIM_THRESHOLD, twice the mmap threshold, so temporaries below
    the threshold may also come back fresh, depending on what else the process freed)."""
    g = row_gemms(work, gemms)
    forward = np.asarray(work["phase"]) == "forward"
    rows = np.asarray(g["row"])
    moved = np.zeros(len(g))
    a_elements = quantized_a_elements(g)
    for i, (m, n, k, count) in enumerate(zip(*(g[c] for c in ("m", "n", "k", "count")),
                                             strict=True)):
        if not forward[rows[i]]:
            continue
        sizes = gemm_temporaries_bytes(float(m), float(k), float(n), precision,
                                       bool(quantized[rows[i]]), weight_casts,
                                       float(a_elements[i]))
        moved[i] = float(count) * sum(math.ceil(s / page_bytes) * page_bytes for s in sizes
                                      if s >= mmap_threshold_bytes)
    # a narrow-float op rounds its parameters into a fresh fp32 copy (an embedding's table)
    params = rounded_params(work, precision, weight_casts) * FP32_BYTES
    params = np.where(params >= mmap_threshold_bytes,
                      np.ceil(params / page_bytes) * page_bytes, 0.0)
    return per_row(moved, g["row"], len(work)) + params
