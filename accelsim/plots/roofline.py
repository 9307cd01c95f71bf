"""Roofline figure: every kernel of a workload as a point under each device's roofline, several
devices on one log-log figure, ridge points marked.

    points, not_drawn = roofline_points(result.layers)
    fig = roofline_figure({"a100": layers, ...}, roofs)  # roofs: one row per device
    save_figure(fig, "roofline.png")

`roofs` has one row per device (`accelsim.explore.compare.roofs_frame`): hardware (the key of
its layers), device_name, precision, peak_flops_per_s, bandwidth_bytes_per_s,
ridge_flops_per_byte, compute_roof, memory_roof.

A point is a kernel: achieved FLOP/s = flops / time_s (OP/s for integer formats), arithmetic
intensity = flops / dram_bytes, the *off-chip* bytes the device model charged that kernel
(DRAM or HBM; on a device without DRAM, the host-link bytes it streams), as in Williams,
Waterman & Patterson's roofline. Those are the bytes the bandwidth roof limits; the op's own
operand bytes (`bytes`) would put kernels that reuse on-chip data above the roof.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib
import numpy as np
import pandas as pd

from accelsim.devices.mapping import producer_rows
from accelsim.plots.style import new_figure

TERA = 1e12  # the y axis is in TFLOP/s (TOP/s)
POINT_COLUMNS = ("name", "op", "phase", "flops", "dram_bytes", "time_s", "bound",
                 "fused_rows", "fused_flops", "intensity_flops_per_byte",
                 "achieved_flops_per_s")


def _producers(layers: pd.DataFrame) -> np.ndarray:
    """Row index of the kernel each row's work ran in: its own, or for a row the device fused
    (`unit` "fused") its producer's, as `accelsim.devices.mapping.producer_rows` decides."""
    if "unit" not in layers:
        return np.arange(len(layers))
    work = pd.DataFrame({"phase": layers["phase"], "flops": layers["flops"],
                         "read_bytes": layers["bytes"], "write_bytes": 0.0})
    return producer_rows(work, (layers["unit"] == "fused").to_numpy())


def roofline_points(layers: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """(points, rows not drawn by reason) of one device's layer table (`Result.layers`).

    Fused rows are folded into the kernel that ran them (their FLOPs, off-chip bytes and time
    added to it; `fused_flops` says how many FLOPs came that way). NB: an NPU runs fused
    elementwise work in a post-processing unit beside its MAC array, at no compute time in the
    model, so such a kernel may sit above the compute roof by up to fused_flops / time_s;
    rows run on the host CPU
    (NPU fallback, `unit` "host") are another chip's; kernels without FLOPs or without
    off-chip bytes have no place on log axes. Columns of points: `POINT_COLUMNS`."""
    if layers.empty:
        return pd.DataFrame(columns=list(POINT_COLUMNS)), {}
    skipped: dict[str, int] = {}
    on_host = (layers["unit"] == "host").to_numpy() if "unit" in layers else np.zeros(
        len(layers), dtype=bool)
    if on_host.any():
        skipped["run on the host CPU"] = int(on_host.sum())
    layers = layers[~on_host].reset_index(drop=True)
    group = _producers(layers)
    folded = group != np.arange(len(layers))
    work = layers.assign(kernel=group, fused_rows=folded.astype(int),
                         fused_flops=np.where(folded, layers["flops"], 0.0))
    kernels = work.groupby("kernel", sort=True).agg(
        flops=("flops", "sum"), dram_bytes=("dram_bytes", "sum"), time_s=("time_s", "sum"),
        fused_rows=("fused_rows", "sum"), fused_flops=("fused_flops", "sum"))
    kernels = layers.loc[kernels.index, ["name", "op", "phase", "bound"]].join(kernels)
    no_flops = kernels["flops"] <= 0
    no_bytes = ~no_flops & (kernels["dram_bytes"] <= 0)
    no_time = ~no_flops & ~no_bytes & (kernels["time_s"] <= 0)
    for why, mask in (("data movement only, no FLOPs", no_flops),
                      ("all on chip, no off-chip bytes", no_bytes),
                      ("no time", no_time)):
        if mask.any():
            skipped[why] = int(mask.sum())
    pts = kernels[~(no_flops | no_bytes | no_time)].copy()
    pts["intensity_flops_per_byte"] = pts["flops"] / pts["dram_bytes"]
    pts["achieved_flops_per_s"] = pts["flops"] / pts["time_s"]
    return pts[list(POINT_COLUMNS)].reset_index(drop=True), skipped


def roof_flops_per_s(roof: Mapping[str, Any], intensity_flops_per_byte: Any) -> Any:
    """The roof at an intensity: min(peak, bandwidth x intensity), FLOP/s."""
    return np.minimum(float(roof["peak_flops_per_s"]),
                      float(roof["bandwidth_bytes_per_s"]) * np.asarray(intensity_flops_per_byte))


def _si(x: float, unit: str) -> str:
    for prefix, factor in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= factor:
            return f"{x / factor:,.3g} {prefix}{unit}"
    return f"{x:,.3g} {unit}"


def _legend_label(roof: Mapping[str, Any], n_points: int, skipped: dict[str, int]) -> str:
    ops = "OP/s" if str(roof["precision"]).startswith("int") else "FLOP/s"
    lines = [f"{roof['device_name']}, {roof['precision']}",
             f"peak {_si(roof['peak_flops_per_s'], ops)}, {roof['memory_roof']} "
             f"{_si(roof['bandwidth_bytes_per_s'], 'B/s')}",
             f"ridge {roof['ridge_flops_per_byte']:,.0f} FLOP/B; {n_points} kernels drawn"]
    lines += [f"not drawn: {n} ({why})" for why, n in skipped.items()]
    return "\n".join(lines)


def roofline_figure(layers_by_device: Mapping[str, pd.DataFrame], roofs: pd.DataFrame,
                    title: str = "", not_drawn: Mapping[str, str] | None = None) -> Any:
    """A log-log roofline figure: for each device (its layers keyed by `hardware`, as in
    `roofs`) its roof, its ridge point, and its kernels as points; `not_drawn` (readable name
    -> why) is listed in the legend. Returns the figure."""
    fig, ax = new_figure(width_in=11.0, height_in=6.5)
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    drawn = []
    for i, roof in enumerate(roofs.to_dict(orient="records")):
        pts, skipped = roofline_points(layers_by_device[roof["hardware"]])
        drawn.append((roof, pts, skipped, colours[i % len(colours)]))
    xs = [p["intensity_flops_per_byte"].to_numpy() for _, p, _, _ in drawn]
    xs += [np.array([r["ridge_flops_per_byte"]]) for r, _, _, _ in drawn]
    x_all = np.concatenate(xs) if xs else np.array([1.0])
    x_lo, x_hi = x_all.min() / 3.0, x_all.max() * 3.0
    grid = np.geomspace(x_lo, x_hi, 256)
    for roof, pts, skipped, colour in drawn:
        ax.plot(grid, roof_flops_per_s(roof, grid) / TERA, color=colour, lw=2.2,
                label=_legend_label(roof, len(pts), skipped))
        ax.scatter(pts["intensity_flops_per_byte"], pts["achieved_flops_per_s"] / TERA, s=16,
                   color=colour, alpha=0.55, edgecolors="none")
        ax.plot([roof["ridge_flops_per_byte"]], [roof["peak_flops_per_s"] / TERA], marker="D",
                ms=9, color=colour, mec="black", mew=1.2, ls="none")
    ax.plot([], [], marker="D", ms=8, color="white", mec="black", ls="none",
            label="ridge point (peak / bandwidth)")
    ax.scatter([], [], s=16, color="grey", label="a kernel (fused ops folded into it)")
    for name, why in (not_drawn or {}).items():
        ax.plot([], [], marker="x", color="#b22222", ls="none", label=f"{name}: {why}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_xlabel("Arithmetic intensity (FLOP per off-chip byte)")
    ax.set_ylabel("Attained performance (TFLOP/s; TOP/s for int8)")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title(title or "Kernels on each device's roofline")
    fig.legend(loc="outside right upper", fontsize=8, frameon=False, labelspacing=1.0)
    return fig

