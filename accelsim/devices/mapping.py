"""What each work row asks of a device, shared by every class model: the GEMMs of a row
(`row_gemms`, the one place the backward dX / dW permutation lives), per-row sums, the split
of a row's bytes into operands, the extra off-chip traffic when operands overflow an on-chip
capacity (`refetch_bytes`), which rows a compiling engine fuses and how many kernels a row
launches, and the energy calls. Each class model keeps only its own mapping (waves of tiles
over SMs or cores in `tiling`, folds of an R x C array, DSP slices at a bit width, an int8 MAC
array) and composes these.

    g = row_gemms(work, gemms)        # one row per GEMM of each matmul work row, `row` = position
    macs = per_row(g["macs"], g["row"], len(work))
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices import energy
from accelsim.profiles.software import FUSION_GROUP_OPS
from accelsim.workload.columns import Columns, Table, is_in

# Partial sums are kept 32 bits wide (int32 for int8 MACs, fp32 for bf16/fp16): an
# architectural convention of the TPU MXU, the DPU and NPU MAC arrays, not a device figure.
ACCUMULATOR_BYTES_PER_ELEMENT = 4
# Share of an on-chip buffer that holds the resident operand when the other half
# double-buffers the streamed tiles: an architectural convention, not a device figure.
DOUBLE_BUFFERED_RESIDENT_FRACTION = 0.5
# The gradient GEMMs of a forward (m x k) @ (k x n) = (m x n), as (m, n, k) in forward dims
# (`gemms_for`): dX (m x k) = dY (m x n) @ W^T (n x k); dW (k x n) = X^T (k x m) @ dY (m x n).
GRADIENT_GEMMS = {"dx": ("m", "k", "n"), "dw": ("k", "n", "m")}
# Op groups a compiler may fuse into their producer kernel (a software stack's `graph.fuses`).
FUSABLE_OPS = FUSION_GROUP_OPS["elementwise"] | FUSION_GROUP_OPS["normalization"]
_DIMS = ("m", "n", "k")


def row_gemms(work: Table, gemms: Table) -> Columns:
    """GEMMs of every matmul row of `work`: columns row (position in `work`), gemm ("forward",
    "dx" or "dw"), m, n, k (output m x n, reduction k), count, macs. Forward rows take the
    forward GEMMs of their op; backward rows the two gradient GEMMs (`GRADIENT_GEMMS`).
    Order: the forward GEMMs, then the dx, then the dw GEMMs, each in row order and, within a
    row, in the order `gemms` lists them. Column im2col: a forward conv GEMM's im2col shape
    (`counts.Gemm.im2col`), () otherwise."""
    return row_gemms_and_sources(work, gemms)[0]


def row_gemms_and_sources(work: Table, gemms: Table) -> tuple[Columns, np.ndarray]:
    """`row_gemms`, and per its row the position in `gemms` of the GEMM it derives from."""
    rows = np.flatnonzero(np.asarray(work["matmul"], dtype=bool))
    ops = np.asarray(work["op_index"])[rows]
    phase = np.asarray(work["phase"])[rows]
    backward = phase == "backward"
    forward = phase == "forward"
    g_op = np.asarray(gemms["op_index"])
    order = np.argsort(g_op, kind="stable")
    lo = np.searchsorted(g_op[order], ops, side="left")
    n_each = np.searchsorted(g_op[order], ops, side="right") - lo
    # Each matmul row joined with every GEMM of its op (an inner join, in row order).
    first = np.repeat(np.cumsum(n_each) - n_each, n_each)
    take = order[np.arange(int(n_each.sum())) - first + np.repeat(lo, n_each)]
    row = np.repeat(rows, n_each)
    dims = {d: np.asarray(gemms[d], dtype=float)[take] for d in _DIMS}
    count = np.asarray(gemms["count"], dtype=float)[take]
    is_fwd, is_bwd = np.repeat(forward, n_each), np.repeat(backward, n_each)
    parts = [(row[is_fwd], "forward", [dims[d][is_fwd] for d in _DIMS], count[is_fwd])]
    parts += [(row[is_bwd], name, [dims[d][is_bwd] for d in perm], count[is_bwd])
              for name, perm in GRADIENT_GEMMS.items()]
    m, n, k = (np.concatenate([p[2][i] for p in parts]) for i in range(3))
    cnt = np.concatenate([p[3] for p in parts])
    # A forward conv's im2col shape (`counts.Gemm.im2col`); gradient GEMMs have none.
    shapes = list(gemms["im2col"]) if "im2col" in gemms else [()] * len(gemms)
    im2col = [shapes[t] for t in take[is_fwd]] + [()] * (len(m) - int(is_fwd.sum()))
    sources = np.concatenate([take[is_fwd], *[take[is_bwd]] * len(GRADIENT_GEMMS)])
    return Columns({
        "row": np.concatenate([p[0] for p in parts]).astype(np.int64),
        "gemm": np.concatenate([np.full(len(p[0]), p[1], dtype=object) for p in parts]),
        "m": m, "n": n, "k": k, "count": cnt, "macs": m * n * k * cnt,
        "im2col": im2col}), sources


def forward_dims(g: Table, mnk: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(m, n, k) of the forward GEMM each row of `row_gemms` derives from (the inverse of
    `GRADIENT_GEMMS`; a forward GEMM's own dims). `mnk`: g's m, n, k as float arrays, where
    the caller has them."""
    dims = dict(zip(_DIMS, mnk, strict=True)) if mnk is not None else {
        d: np.asarray(g[d], dtype=float) for d in _DIMS}
    out = {d: dims[d].copy() for d in _DIMS}
    gemm = np.asarray(g["gemm"])
    for name, perm in GRADIENT_GEMMS.items():
        grad = gemm == name
        for slot, fwd_dim in zip(_DIMS, perm, strict=True):
            out[fwd_dim][grad] = dims[slot][grad]
    return out["m"], out["n"], out["k"]


def per_row(values: pd.Series | np.ndarray, rows: pd.Series | np.ndarray, n_rows: int
            ) -> np.ndarray:
    """Sum `values` into `n_rows` bins by row position."""
    return np.bincount(np.asarray(rows, dtype=np.int64),
                       weights=np.asarray(values, dtype=float), minlength=n_rows)


def mac_weighted(values: pd.Series | np.ndarray, g: Table, n_rows: int,
                 default: float = 1.0) -> np.ndarray:
    """Per work row, the MAC-weighted mean of a per-GEMM quantity (`default` where a row has
    no GEMM). NB: an op with several GEMMs (an LSTM's input and recurrent products) gets one
    blended factor rather than one per GEMM."""
    macs = per_row(g["macs"], g["row"], n_rows)
    weighted = per_row(np.asarray(values, dtype=float) * np.asarray(g["macs"]), g["row"],
                       n_rows)
    return np.where(macs > 0, weighted / np.where(macs > 0, macs, 1.0), default)


def vector_flops(work: Table, macs: np.ndarray) -> np.ndarray:
    """FLOPs of each row not done as GEMM MACs (all of a non-matmul row; a matmul row's softmax,
    gates and bias): they run on the vector / misc unit."""
    return np.maximum(np.asarray(work["flops"], dtype=float) - 2.0 * macs, 0.0)


def operand_bytes(work: Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(activation bytes read, weight bytes, bytes written) of each row: the compulsory DRAM
    traffic, each byte moved once. NB: backward rows read saved activations and output
    gradients as their "activations" and write input and weight gradients."""
    weights = np.asarray(work["weight_bytes"], dtype=float)
    acts = np.maximum(np.asarray(work["read_bytes"], dtype=float) - weights, 0.0)
    return acts, weights, np.asarray(work["write_bytes"], dtype=float)


def refetch_bytes(a_bytes: np.ndarray, b_bytes: np.ndarray, capacity_bytes: float | None,
                  resident_fraction: float) -> np.ndarray:
    """Extra off-chip bytes of a blocked product of two operands of a_bytes and b_bytes on an
    on-chip store of `capacity_bytes`, `resident_fraction` of which holds a block of one
    operand (the rest serves the streamed operand's tiles: 0.5 when they are double-buffered,
    `DOUBLE_BUFFERED_RESIDENT_FRACTION`).

    The smaller operand is blocked: when it fits the resident share it stays on chip while the
    larger streams once (no extra bytes); otherwise it is cut into resident-share blocks and the
    larger is streamed again for every block after the first: larger x (ceil(smaller /
    resident) - 1). When everything fits the store, the smaller fits half of it, so a
    resident share of half or more costs nothing there either.
    None = capacity unpublished: compulsory traffic only (NB: the ideal-reuse bound).
    NB: blocking the smaller operand is the cheaper loop order to first order (it saves the
    larger's one compulsory pass, not the smaller's); rasterisation order and the output's
    share of the store are ignored.

    >>> float(refetch_bytes(np.array([3e6]), np.array([10e6]), 2e6, 0.5)[0])
    20000000.0
    """
    a = np.asarray(a_bytes, dtype=float)
    b = np.asarray(b_bytes, dtype=float)
    if capacity_bytes is None:
        return np.zeros(np.broadcast(a, b).shape)
    small, large = np.minimum(a, b), np.maximum(a, b)
    resident = max(capacity_bytes * resident_fraction, 1.0)
    passes = np.maximum(np.ceil(small / resident), 1.0)
    return large * (passes - 1.0)


def onchip_capacity_bytes(*sizes: int | None) -> float | None:
    """Sum of the published on-chip sizes, None when none is published."""
    present = [s for s in sizes if s is not None]
    return float(sum(present)) if present else None


def _launches_kernel(work: Table) -> np.ndarray:
    """Rows that run a kernel: any FLOPs or bytes (views have neither)."""
    flops = np.asarray(work["flops"], dtype=float)
    moved = (np.asarray(work["read_bytes"], dtype=float)
             + np.asarray(work["write_bytes"], dtype=float))
    return (flops > 0) | (moved > 0)


def fused_rows(work: Table, on_engine: np.ndarray | None = None,
               fusable_ops: frozenset[str] = FUSABLE_OPS) -> np.ndarray:
    """Rows a compiling engine fuses into their producer: elementwise and normalisation ops
    that have a producer kernel in the same phase (forward: the kernel before; backward, which
    runs in reverse order: the kernel after). `on_engine` (default: every row) marks the rows
    the fusing engine runs: a row elsewhere (an NPU's host fallback) is neither fused nor a
    producer to fuse into. `fusable_ops`: the op kinds the engine fuses (default: both groups
    of `FUSION_GROUP_OPS`). NB: table order stands in for graph edges."""
    fusable = is_in(np.asarray(work["op"]), fusable_ops)
    kernel = _launches_kernel(work)
    engine = np.ones(len(work), dtype=bool) if on_engine is None else np.asarray(on_engine)
    phase = np.asarray(work["phase"])
    fused = np.zeros(len(work), dtype=bool)
    for ph, step in (("forward", 1), ("backward", -1)):
        rows = np.flatnonzero(phase == ph)[::step]
        producer_on_engine = False  # the last unfused kernel so far ran on the engine
        for r in rows:
            if not kernel[r]:
                continue
            if fusable[r] and engine[r] and producer_on_engine:
                fused[r] = True
            else:
                producer_on_engine = bool(engine[r])
    return fused


def producer_rows(work: Table, fused: np.ndarray) -> np.ndarray:
    """Position of the kernel each row's work ran in: its own, or for a `fused` row its
    producer's, the nearest unfused kernel before it in the forward phase and after it in the
    backward phase (which runs in reverse), as `fused_rows` decides. A fused row with no such
    kernel (a model's first op) keeps its own position. NB: table order stands in for graph
    edges, as there.

    >>> w = pd.DataFrame({"phase": ["forward"] * 3, "flops": [1.0, 1.0, 1.0],
    ...                   "read_bytes": [0.0] * 3, "write_bytes": [0.0] * 3})
    >>> producer_rows(w, np.array([False, True, True])).tolist()
    [0, 0, 0]
    """
    group = np.arange(len(work))
    fused = np.asarray(fused, dtype=bool)
    if not fused.any():
        return group
    kernel = _launches_kernel(work)
    phase = np.asarray(work["phase"])
    for ph, step in (("forward", 1), ("backward", -1)):
        rows = np.flatnonzero(phase == ph)[::step]
        # the last unfused kernel seen so far, in execution order (-1: none yet)
        seen = np.maximum.accumulate(np.where(kernel[rows] & ~fused[rows],
                                              np.arange(len(rows)), -1)) if len(rows) else rows
        take = fused[rows] & (seen >= 0)
        group[rows[take]] = rows[seen[take]]
    return group


def drain_excess_s(work: Table, fused: np.ndarray, vec_s: np.ndarray,
                   own_s: np.ndarray) -> np.ndarray:
    """Per fused row, its share of the time its kernel's fused work takes beyond the producer
    kernel's own time (`own_s`: roofline plus dispatch): zero while the post-processing unit
    keeps up, shared in proportion to each fused row's vector time when it does not. NB: the
    drain overlaps the producer's whole time, perfectly."""
    group = producer_rows(work, fused)
    n_rows = len(work)
    fused_total_s = np.bincount(group, weights=np.where(fused, vec_s, 0.0), minlength=n_rows)
    excess_s = np.maximum(fused_total_s - np.where(fused, 0.0, own_s), 0.0)[group]
    share = np.divide(vec_s, fused_total_s[group], out=np.zeros(n_rows),
                      where=fused_total_s[group] > 0)
    return np.where(fused, excess_s * share, 0.0)


def kernel_counts(work: Table) -> np.ndarray:
    """Kernels per row: 0 for views (no FLOPs, no bytes), 2 for a backward matmul (dX and dW),
    else 1 (NB: the optimizer as one fused multi-tensor kernel, as NGC's apex optimizers)."""
    two = np.asarray(work["matmul"], dtype=bool) & (np.asarray(work["phase"]) == "backward")
    return np.where(_launches_kernel(work), np.where(two, 2.0, 1.0), 0.0)


def listed_vector_peak(profile: Any, precision: str) -> float | None:
    """The profile's vector (non-matrix) peak at `precision`, else its fp32 one, FLOP/s; None
    when it lists neither (each class model has its own fallback). NB: a precision without a
    listed vector peak is taken to run in fp32 registers."""
    table = profile.compute.vector_peak_flops_per_s
    for key in (precision, "fp32"):
        if key in table:
            return float(table[key])
    return None


def row_energy_j(profile: Any, precision: str, macs: np.ndarray, vec_flops: np.ndarray,
                 dram_bytes: np.ndarray, onchip_bytes: np.ndarray) -> np.ndarray:
    """Dynamic energy per row through `accelsim.devices.energy` (MACs at `precision`, vector
    FLOPs, on-chip and off-chip bytes; the device's on-die scale applied there)."""
    return energy.dynamic_energy_j(profile, precision, 2.0 * macs, vec_flops, dram_bytes,
                                   onchip_bytes)


def link_energy_j(nbytes: np.ndarray, link_kind: str) -> np.ndarray:
    """Energy of bytes over a host link: the package-link figure for an integrated SoC, the
    PCB-link figure otherwise. NB: PCIe/USB PHYs cost more per bit than these research links."""
    table = energy.energy_constants().constants.link_j_per_byte
    key = "package_link" if link_kind == "integrated" else "pcb_link"
    return np.asarray(nbytes, dtype=float) * table[key]
