"""GEMM efficiency from shape on a GPU: occupancy, waves of CTA tiles, K depth, and the
convolution algorithm the library's autotuner picks (direct implicit GEMM or Winograd).

    f = gemm_factors(work, gemms, profile, "fp32", "cuda_core", peak_flops_per_s, bw_bytes_per_s)
    compute_s = flops * f["quantization"] / (peak x class efficiency)

- `ctas_per_sm`: CTAs resident per SM, from the tile's shared-memory and register footprint
  against the SM's (profile fields; 1 unless the profile publishes both); it hides pipeline
  fill only: waves of tiles are counted over the SMs.
- pipeline fill: each CTA tile spends `assumed.pipeline_fill_k_steps` main-loop iterations of
  time outside its main loop (prologue: the first stage's loads land before the first MMA;
  epilogue: the accumulator tile is converted and stored); other resident CTAs hide it, so the
  exposed fill is divided by the occupancy. Short-K GEMMs (a 1x1 conv on 64 channels, an
  attention QK^T over a 64-wide head) thus run below the class factor, which is the efficiency
  of a deep, well-shaped GEMM.
- Winograd: for a precision listed in `assumed.winograd_output_tile`, a unit-stride 3x3 conv
  (`counts.Gemm.conv3x3_h/_w`) may run as F(t x t, 3 x 3) (Lavin & Gray 2016): (t+2)^2 batched
  GEMMs of (tiles x C) @ (C x K), tiles = N x ceil(H/t) x ceil(W/t): 9 t^2 / (t+2)^2 fewer
  multiplies (4x for t = 4). Non-fused: the transformed input, filter and output make a DRAM
  round trip each. The row takes whichever of direct and Winograd is faster at peak rates (the
  autotuner of cudnn.benchmark / TF's autotune).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.devices.mapping import (
    ACCUMULATOR_BYTES_PER_ELEMENT,
    per_row,
    row_gemms,
    row_gemms_and_sources,
)
from accelsim.devices.tiling import row_gemm_columns
from accelsim.workload.columns import Columns, Table

WINOGRAD_FILTER = 3  # F(t x t, 3 x 3): input tile t + 3 - 1


def ctas_per_sm(profile: Any, tile_m: float, tile_n: float, tile_k: float, width_bytes: float,
                eff: dict[str, Any]) -> int:
    """CTAs of a tile_m x tile_n x tile_k tile resident on one SM: the fewer that fit its shared
    memory (`assumed.pipeline_stages` stages of A and B tiles) and its register file (fp32
    accumulators x `assumed.register_bytes_per_accumulator_byte`); 1 where the profile does not
    publish both (NB: then no latency hiding between CTAs is assumed)."""
    chip = profile.onchip_memory
    smem = getattr(chip, "shared_mem_per_sm_bytes", None)
    regs = getattr(chip, "register_file_per_sm_bytes", None)
    if smem is None or regs is None:
        return 1
    smem_cta = eff["assumed.pipeline_stages"] * tile_k * (tile_m + tile_n) * width_bytes
    regs_cta = (tile_m * tile_n * ACCUMULATOR_BYTES_PER_ELEMENT
                * eff["assumed.register_bytes_per_accumulator_byte"])
    return max(1, int(min(smem // smem_cta, regs // regs_cta)))


def winograd_gemms(gemms: Table, output_tile: int) -> tuple[Columns, np.ndarray]:
    """(`gemms` with every unit-stride 3x3 conv's GEMM replaced by its F(t x t, 3 x 3) batched
    GEMM, the mask of replaced rows). m = N x ceil(H/t) x ceil(W/t) tiles, k = C, count x
    (t+2)^2. NB: N = m / (H x W): the batch is folded into m (`gemms_for`).

    >>> g = pd.DataFrame({"op_index": [0], "m": [2 * 56 * 56], "n": [64], "k": [9 * 64],
    ...                   "count": [1], "conv3x3_h": [56], "conv3x3_w": [56]})
    >>> w, _ = winograd_gemms(g, 4)
    >>> int(w["m"][0]), int(w["k"][0]), int(w["count"][0])
    (392, 64, 36)
    """
    gemms = Columns.of(gemms)
    none = np.zeros(len(gemms))
    h = np.asarray(gemms.get("conv3x3_h", none), dtype=float)
    w = np.asarray(gemms.get("conv3x3_w", none), dtype=float)
    mask = (h > 0) & (w > 0)
    if not mask.any():
        return gemms, mask
    t = float(output_tile)
    m = np.array(gemms["m"], dtype=float)
    k = np.array(gemms["k"], dtype=float)
    count = np.array(gemms["count"], dtype=float)
    batch = m[mask] / (h[mask] * w[mask])
    m[mask] = batch * np.ceil(h[mask] / t) * np.ceil(w[mask] / t)
    k[mask] = k[mask] / WINOGRAD_FILTER**2
    count[mask] = count[mask] * (t + WINOGRAD_FILTER - 1) ** 2
    return gemms.assign(m=m, k=k, count=count), mask


def transform_bytes(work: Table, wgemms: Table, width_bytes: float
                    ) -> np.ndarray:
    """Per work row, the DRAM bytes of non-fused Winograd's transforms: both operands and the
    result of each batched GEMM in `wgemms` (Winograd GEMMs only) are written by one kernel and
    read by the next. NB: a backward row's dY transform is counted for dX and dW alike."""
    g = row_gemms(work, wgemms)
    return _transform_bytes(g, np.ones(len(g), dtype=bool), width_bytes, len(work))


def _transform_bytes(g: Table, keep: np.ndarray, width_bytes: float, n_rows: int
                     ) -> np.ndarray:
    """`transform_bytes` over the row GEMMs `g` marked in `keep` (in their order, so that the
    sums are those of `row_gemms` of the kept GEMMs alone)."""
    m, n, k, count = (np.asarray(g[c], dtype=float)[keep] for c in ("m", "n", "k", "count"))
    elems = count * (m * k + k * n + m * n)
    return per_row(2.0 * width_bytes * elems, np.asarray(g["row"])[keep], n_rows)


def gemm_factors(work: Table, gemms: Table, profile: Any, precision: str,
                 unit: str, eff: dict[str, Any], width_bytes: float, peak_flops_per_s: float,
                 bandwidth_bytes_per_s: float, rows: Table | None = None
                 ) -> Columns:
    """Per work row: `quantization` (spent MACs at peak / the op's MACs: waves, split-K, pipeline
    fill, Winograd), `tile_bytes_per_mac`, `reread_bytes` (`tiling.row_gemm_factors`),
    `transform_bytes` (Winograd's extra DRAM bytes), `winograd` (the row runs Winograd) and
    `executed_fraction` (multiplies executed / the op's direct count: Winograd's, else 1).
    `rows`: `mapping.row_gemms(work, gemms)`, where the caller has it already."""
    tile_m, tile_n = eff[f"assumed.cta_tile.{precision}"]
    tile_k = eff[f"assumed.cta_tile_k.{precision}"]
    occupancy = ctas_per_sm(profile, tile_m, tile_n, tile_k, width_bytes, eff)
    # Waves are counted over SMs, not over resident-CTA slots: a lone CTA on an SM gets the
    # SM's rate (NB: as if one CTA could saturate it); the other resident CTAs' main loops hide
    # a CTA's fill in proportion to occupancy.
    units = float(profile.compute.sm_count)
    fill_k = tile_k * eff["assumed.pipeline_fill_k_steps"] / occupancy
    # NB: one tile shape per precision, so an n = 64 GEMM wastes half of each 128-wide tile;
    # the libraries' narrower tiles are left out until their L2-to-SM bandwidth cost is (tried
    # without it: the fit took DRAM efficiency to 0.69 and the device-ratio error to 7.6%).
    args = (width_bytes, tile_m, tile_n, units, eff["assumed.split_k_min_k"],
            profile.onchip_memory.l2_cache_bytes, eff["assumed.l2_usable_fraction"], fill_k)
    n = len(work)
    gd = row_gemms(work, gemms) if rows is None else rows
    direct = {**row_gemm_columns(work, gd, *args), "transform_bytes": np.zeros(n),
              "winograd": np.zeros(n, dtype=bool), "executed_fraction": np.ones(n)}
    tile = eff.get(f"assumed.winograd_output_tile.{precision}")
    if tile is None or unit != "cuda_core":
        return Columns(direct)
    wg, mask = winograd_gemms(gemms, int(tile))
    if not mask.any():
        return Columns(direct)
    gw, sources = row_gemms_and_sources(work, wg)
    wino = row_gemm_columns(work, gw, *args, useful=gd)
    extra = _transform_bytes(gw, mask[sources], width_bytes, n)  # the Winograd GEMMs' rows
    flops = np.asarray(work["flops"], dtype=float)
    moved = (np.asarray(work["read_bytes"], dtype=float)
             + np.asarray(work["write_bytes"], dtype=float))

    def time_s(f: dict[str, np.ndarray], more_bytes: np.ndarray) -> np.ndarray:
        return np.maximum(flops * f["quantization"] / peak_flops_per_s,
                          (moved + f["reread_bytes"] + more_bytes) / bandwidth_bytes_per_s)

    # NB: the choice is made at peak rates (efficiency factors 1), the same in the fit; and the
    # transform kernels' traffic overlaps the GEMM in the row's max(compute, memory), as the
    # layout transposes' does, though cuDNN runs them one after the other.
    pick = (extra > 0) & (time_s(wino, extra) < time_s(direct, np.zeros(n)))
    out = dict(direct)
    for col in ("quantization", "tile_bytes_per_mac", "reread_bytes"):
        out[col] = np.where(pick, wino[col], direct[col])
    out["transform_bytes"] = np.where(pick, extra, 0.0)
    out["winograd"] = pick
    wino_macs, direct_macs = per_row(gw["macs"], gw["row"], n), per_row(gd["macs"], gd["row"], n)
    out["executed_fraction"] = np.where(pick, wino_macs / np.where(pick, direct_macs, 1.0), 1.0)
    return Columns(out)
