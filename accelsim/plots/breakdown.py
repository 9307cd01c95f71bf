"""Where the time and the energy go: accelerator time by cause, energy by part, the slowest
layers coloured by their bound, device memory by part.

    fig = accelerator_time_figure(accelerator_time(result.events))   # training runs
    fig = share_figure(pd.Series(record["energy_breakdown_j"]).drop("total"), "Energy (J)")
    fig = layers_figure(result.layers, top=15)
    fig = memory_figure(pd.Series({"weights": 1e8, "activations": 3e9}), capacity_bytes=16e9)
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.patches import Patch

from accelsim.plots.style import label, legend_below, new_figure, scale
from accelsim.plots.timeline import COLORS, OTHER_COLOR
from accelsim.results.metrics import STALL_NAMES, compute_s_per_device, run_time_s
from accelsim.results.records import STALL_KINDS

IDLE_COLOR = "#d9d9d9"
PART_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
               "#bcbd22", "#17becf", "#d62728")


def accelerator_time(events: pd.DataFrame) -> pd.DataFrame:
    """Each accelerator's run time split by cause, in seconds: one row per device, columns
    "compute", the stall causes ("fetch", "prep", "transfer", "slowest_device",
    "communication") and "other" (idle with no recorded cause: the run's tail)."""
    run_s = run_time_s(events)
    compute = compute_s_per_device(events)
    stalls = events[events["kind"].isin(STALL_KINDS)]
    lost = stalls.pivot_table(index="device", columns="kind", values="duration_s",
                              aggfunc="sum", fill_value=0.0)
    out = pd.DataFrame({"compute": compute})
    for kind, name in STALL_NAMES.items():
        out[name] = lost[kind] if kind in lost else 0.0
    out = out.fillna(0.0)
    out["other"] = (run_s - out.sum(axis=1)).clip(lower=0.0)
    out.index = [f"accel{int(d)}" for d in out.index]
    return out


def accelerator_time_figure(table: pd.DataFrame, title: str = "") -> Any:
    """Stacked bars, one per accelerator: the share of the run spent computing and stalled by
    each cause (`accelerator_time`)."""
    shares = table.div(table.sum(axis=1).where(lambda s: s > 0, 1.0), axis=0) * 100.0
    colors = {"compute": COLORS["compute"], "other": IDLE_COLOR,
              **{name: COLORS[kind] for kind, name in STALL_NAMES.items()}}
    fig, ax = new_figure(width_in=9.0, height_in=1.2 + 0.28 * len(shares))
    left = pd.Series(0.0, index=shares.index)
    y = range(len(shares))
    for col in shares.columns:
        if not (shares[col] > 0).any():
            continue
        ax.barh(y, shares[col], left=left, color=colors.get(col, OTHER_COLOR),
                label=col if col in ("compute", "other") else f"{col.replace('_', ' ')} stall")
        left += shares[col]
    ax.set_yticks(y, shares.index)
    ax.set_ylim(len(shares) - 0.5, -0.5)
    ax.set_xlim(0, 100)
    ax.set_xlabel("Share of the simulated run (%)")
    ax.set_title(title)
    legend_below(fig, max_ncol=6)
    return fig


def share_figure(values: pd.Series, xlabel: str, title: str = "", unit_scale: float = 1.0
                 ) -> Any:
    """Horizontal bars of `values` (index: part names), largest first, each labelled with its
    share of the total; the axis shows values x `unit_scale` under `xlabel`."""
    values = values[values > 0].sort_values(ascending=False)
    total = float(values.sum())
    fig, ax = new_figure(width_in=8.0, height_in=1.0 + 0.32 * max(len(values), 1))
    y = range(len(values))
    colors = [PART_COLORS[i % len(PART_COLORS)] for i in y]
    ax.barh(y, values * unit_scale, color=colors)
    for i, v in enumerate(values):
        ax.text(v * unit_scale, i, f"  {v / total:.1%}", va="center", fontsize=8)
    ax.set_yticks(y, [str(i).replace("_", " ") for i in values.index])
    ax.set_ylim(len(values) - 0.5, -0.5)
    ax.set_xlim(0, float(values.max()) * unit_scale * 1.15 if total > 0 else 1.0)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    return fig


def top_layers(layers: pd.DataFrame, top: int) -> pd.DataFrame:
    """The `top` slowest layer rows (op x phase), slowest first, with their share of the time."""
    total_s = float(layers["time_s"].sum())
    rows = layers.sort_values("time_s", ascending=False, kind="stable").head(top)
    return rows.assign(share=rows["time_s"] / total_s if total_s > 0 else 0.0)


def layers_figure(layers: pd.DataFrame, top: int = 15, title: str = "") -> Any:
    """Horizontal bars of the `top` slowest layer rows (ms), coloured by bound."""
    rows = top_layers(layers, top)
    fig, ax = new_figure(width_in=9.0, height_in=1.2 + 0.26 * max(len(rows), 1))
    y = range(len(rows))
    colors = [COLORS.get(str(b), OTHER_COLOR) for b in rows["bound"]]
    ax.barh(y, rows["time_s"] * scale("latency_s"), color=colors)
    ax.set_yticks(y, [f"{n} ({p})" for n, p in zip(rows["name"], rows["phase"], strict=True)],
                  fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel(label("latency_s").replace("Latency", "Time per batch"))
    ax.set_title(title)
    bounds = list(dict.fromkeys(str(b) for b in rows["bound"]))
    ax.legend(handles=[Patch(color=COLORS.get(b, OTHER_COLOR), label=f"{b}-bound")
                       for b in bounds], loc="lower right", frameon=False)
    return fig


def memory_figure(parts_bytes: pd.Series, capacity_bytes: float | None, title: str = ""
                  ) -> Any:
    """One stacked bar of device memory by part (GB), with the device's capacity as a line."""
    parts = parts_bytes[parts_bytes > 0]
    fig, ax = new_figure(width_in=8.0, height_in=1.9)
    left = 0.0
    for i, (name, n_bytes) in enumerate(parts.items()):
        ax.barh(0, n_bytes / 1e9, left=left, color=PART_COLORS[i % len(PART_COLORS)],
                label=f"{str(name).replace('_', ' ')} {n_bytes / 1e9:.2f} GB")
        left += n_bytes / 1e9
    if capacity_bytes:
        ax.axvline(capacity_bytes / 1e9, color="black", linestyle="--",
                   label=f"capacity {capacity_bytes / 1e9:.1f} GB")
    ax.set_yticks([])
    ax.set_xlim(0, max(left, (capacity_bytes or 0) / 1e9) * 1.05 or 1.0)
    ax.set_xlabel(label("required_bytes"))
    ax.set_title(title)
    legend_below(fig, max_ncol=5)
    return fig
