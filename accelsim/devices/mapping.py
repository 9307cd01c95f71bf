"""Plumbing shared by the systolic (TPU), FPGA and NPU class models: the GEMMs of each work
row, the split of a row's bytes into operands, blocked-tiling DRAM traffic for a given on-chip
capacity, per-row sums and the energy call. Each class model keeps only its own mapping (folds
of an R x C array, DSP slices at a bit width, an int8 MAC array) and composes these.

    g = row_gemms(work, gemms)        # one row per GEMM of each matmul work row, `row` = position
    macs = per_row(g["macs"], g["row"], len(work))
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from accelsim.devices import energy

# Partial sums are kept 32 bits wide (int32 for int8 MACs, fp32 for bf16/fp16): an
# architectural convention of the TPU MXU, the DPU and NPU MAC arrays, not a device figure.
ACCUMULATOR_BYTES_PER_ELEMENT = 4


def row_gemms(work: pd.DataFrame, gemms: pd.DataFrame) -> pd.DataFrame:
    """GEMMs of every matmul row of `work`: columns row (position in `work`), m, n, k, count,
    macs. Forward rows take the forward GEMMs of their op; backward rows the two gradient GEMMs
    (dX: m x k = (m x n)(n x k); dW: k x n = (k x m)(m x n)), as `gemms_for` documents."""
    pos = pd.DataFrame({"row": np.arange(len(work)), "op_index": work["op_index"].to_numpy(),
                        "phase": work["phase"].to_numpy(), "matmul": work["matmul"].to_numpy()})
    merged = pos[pos["matmul"]].merge(gemms, on="op_index", how="inner")
    fwd = merged[merged["phase"] == "forward"]
    bwd = merged[merged["phase"] == "backward"]
    cols = ["row", "m", "n", "k", "count"]
    parts = [fwd[cols],
             bwd[["row", "m", "k", "n", "count"]].set_axis(cols, axis=1),
             bwd[["row", "k", "n", "m", "count"]].set_axis(cols, axis=1)]
    out = pd.concat(parts, ignore_index=True).astype(
        {"row": np.int64, "m": float, "n": float, "k": float, "count": float})
    out["macs"] = out["m"] * out["n"] * out["k"] * out["count"]
    return out


def per_row(values: pd.Series | np.ndarray, rows: pd.Series | np.ndarray, n_rows: int
            ) -> np.ndarray:
    """Sum `values` into `n_rows` bins by row position."""
    return np.bincount(np.asarray(rows, dtype=np.int64),
                       weights=np.asarray(values, dtype=float), minlength=n_rows)


def mac_weighted(values: pd.Series | np.ndarray, g: pd.DataFrame, n_rows: int,
                 default: float = 1.0) -> np.ndarray:
    """Per work row, the MAC-weighted mean of a per-GEMM quantity (`default` where a row has
    no GEMM). NB: an op with several GEMMs (an LSTM's input and recurrent products) gets one
    blended factor rather than one per GEMM."""
    macs = per_row(g["macs"], g["row"], n_rows)
    weighted = per_row(np.asarray(values, dtype=float) * g["macs"].to_numpy(), g["row"], n_rows)
    return np.where(macs > 0, weighted / np.where(macs > 0, macs, 1.0), default)


def vector_flops(work: pd.DataFrame, macs: np.ndarray) -> np.ndarray:
    """FLOPs of each row not done as GEMM MACs (all of a non-matmul row; a matmul row's softmax,
    gates and bias): they run on the vector / misc unit."""
    return np.maximum(work["flops"].to_numpy(dtype=float) - 2.0 * macs, 0.0)


def operand_bytes(work: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(activation bytes read, weight bytes, bytes written) of each row: the compulsory DRAM
    traffic, each byte moved once. NB: backward rows read saved activations and output
    gradients as their "activations" and write input and weight gradients."""
    weights = work["weight_bytes"].to_numpy(dtype=float)
    acts = np.maximum(work["read_bytes"].to_numpy(dtype=float) - weights, 0.0)
    return acts, weights, work["write_bytes"].to_numpy(dtype=float)


def blocked_refetch_bytes(act_bytes: np.ndarray, weight_bytes: np.ndarray,
                          out_bytes: np.ndarray, capacity_bytes: float | None) -> np.ndarray:
    """Extra DRAM bytes of a blocked (tiled) layer on an on-chip buffer of `capacity_bytes`.

    Everything fits: none. Weights fit in half the buffer (the other half double-buffers the
    activation tiles): weights stay resident, activations stream once: none. Activations fit
    in half: they stay, weights stream once: none. Otherwise activations are cut into tiles of
    half the buffer and the weights are read again for every tile after the first.
    None = capacity unpublished: compulsory traffic only (NB: the ideal-reuse bound).
    """
    act_bytes = np.asarray(act_bytes, dtype=float)
    if capacity_bytes is None:
        return np.zeros_like(act_bytes)
    half = capacity_bytes / 2.0
    fits = ((act_bytes + weight_bytes + out_bytes <= capacity_bytes) | (weight_bytes <= half)
            | (act_bytes <= half))
    tiles = np.ceil(act_bytes / half)
    return np.where(fits, 0.0, weight_bytes * np.maximum(tiles - 1.0, 0.0))


def onchip_capacity_bytes(*sizes: int | None) -> float | None:
    """Sum of the published on-chip sizes, None when none is published."""
    present = [s for s in sizes if s is not None]
    return float(sum(present)) if present else None


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
