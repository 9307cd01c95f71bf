"""Device comparison figure: one panel per metric, one bar per device, drawn from the
DataFrame of `accelsim.explore.compare.compare`.

    fig = compare_figure(compare("resnet50", "a100,tpu-v3,edge-tpu", precision="int8"))
    save_figure(fig, "compare.png")

Bars are horizontal so that device names stay readable; each name carries the precision and
software that really ran (a fallback says what was asked for). A device that did not fit or
was left out gets a marked "does not fit" / "left out" in place of its bar, never a silent
gap, and the last panel says why. A panel whose values span more than `LOG_SPAN` is drawn on
a log axis.
"""

from __future__ import annotations

import textwrap
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from accelsim.plots.style import label, new_figure, scale

LOG_SPAN = 100.0  # max / min of a panel's values above which its axis is logarithmic
# (column, panel title); the memory panel is drawn apart (needed vs capacity).
PANELS = (
    ("throughput_samples_per_s", "Throughput (higher is better)"),
    ("latency_s", "Latency (lower is better)"),
    ("energy_j_per_sample", "Energy per sample (lower is better)"),
    ("samples_per_j", "Performance per watt (higher is better)"),
)
LATENCY_MEANING = {"infer": "per batch", "train": "per step", "serve": "mean per request"}
MISSING_COLOUR = "#b22222"


def _isnull(x: Any) -> bool:
    return x is None or (isinstance(x, float) and np.isnan(x))


def device_label(row: dict[str, Any]) -> str:
    """Two lines: the readable device name; the precision and software that ran."""
    ran = row["precision"]
    if not _isnull(row.get("precision_requested")) and row["precision_requested"] != ran:
        ran = f"{ran} (fallback: {row['precision_requested']} asked)"
    elif not _isnull(row.get("compute_precision")) and row["compute_precision"] != ran:
        ran = f"{ran}, matmuls {row['compute_precision']}"
    name = row.get("device_name") or row["device"]
    if not _isnull(row.get("error")):
        return f"{name}\n{ran}, left out"
    software = str(row["software"]).split(" (")[0]
    return f"{name}\n{ran}, {software}"


def _status(row: dict[str, Any]) -> str | None:
    """Why a device has no bars: left out, or does not fit; None when it ran."""
    if not _isnull(row.get("error")):
        return "left out (see notes)"
    if not row["fits"]:
        largest = row.get("largest_batch_that_fits")
        if _isnull(largest):
            return "does not fit"
        return ("does not fit (not even batch 1)" if int(largest) == 0
                else f"does not fit (largest batch {int(largest)})")
    return None


def _fmt(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def _limits(values: np.ndarray) -> tuple[bool, float, float]:
    """(log axis?, low, high) for positive `values`, with room for the value labels."""
    pos = values[np.isfinite(values) & (values > 0)]
    if pos.size == 0:
        return False, 0.0, 1.0
    log = pos.max() / pos.min() > LOG_SPAN
    if log:
        return True, pos.min() / 4.0, pos.max() * 12.0
    return False, 0.0, pos.max() * 1.3


def _set_axis(ax: Any, log: bool, lo: float, hi: float) -> None:
    if log:
        ax.set_xscale("log")
    else:  # few ticks, so that long numbers do not overlap
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.set_xlim(lo, hi)


def _bar_panel(ax: Any, rows: list[dict[str, Any]], column: str, colours: list[str]) -> None:
    values = np.array([np.nan if _isnull(r[column]) else float(r[column]) * scale(column)
                       for r in rows])
    y = np.arange(len(rows))
    log, lo, hi = _limits(values)
    _set_axis(ax, log, lo, hi)
    ok = np.isfinite(values)
    ax.barh(y[ok], values[ok], color=[c for c, k in zip(colours, ok, strict=True) if k],
            height=0.6)
    for yi, v, row in zip(y, values, rows, strict=True):
        if np.isfinite(v):
            ax.text(v * (1.15 if log else 1.0) + (0 if log else 0.01 * hi), yi, _fmt(v),
                    va="center", fontsize=8)
        else:
            _missing(ax, yi, _status(row) or "n/a")


def _missing(ax: Any, y: float, text: str) -> None:
    ax.text(0.02, y, f"✕ {text}", transform=ax.get_yaxis_transform(), va="center",
            fontsize=8, color=MISSING_COLOUR, fontweight="bold")


def _memory_panel(ax: Any, rows: list[dict[str, Any]], colours: list[str]) -> None:
    k = scale("required_bytes")
    need = np.array([np.nan if _isnull(r["required_bytes"]) else r["required_bytes"] * k
                     for r in rows])
    have = np.array([np.nan if _isnull(r["capacity_bytes"]) else r["capacity_bytes"] * k
                     for r in rows])
    y = np.arange(len(rows))
    log, lo, hi = _limits(np.concatenate([need, have]))
    _set_axis(ax, log, lo, hi)
    ok_need, ok_have = np.isfinite(need), np.isfinite(have)
    ax.barh(y[ok_have] + 0.17, have[ok_have], height=0.32, color="white", edgecolor="grey",
            hatch="///", label="capacity")
    ax.barh(y[ok_need] - 0.17, need[ok_need], height=0.32,
            color=[c for c, m in zip(colours, ok_need, strict=True) if m], label="needed")
    for yi, row, n, h in zip(y, rows, need, have, strict=True):
        if not np.isfinite(n):
            _missing(ax, yi, _status(row) or "n/a")
            continue
        verdict = "fits" if row["fits"] else "DOES NOT FIT"
        cap = f" of {_fmt(h)}" if np.isfinite(h) else " (no device DRAM)"
        ax.text(n * 1.15 if log else n + 0.01 * hi, yi - 0.17, f"{_fmt(n)}{cap}: {verdict}",
                va="center", fontsize=8, color="black" if row["fits"] else MISSING_COLOUR)
    ax.set_title("Device memory: needed vs capacity")
    ax.set_xlabel("Device memory, GB (solid: needed; hatched: capacity)")


def _notes_panel(ax: Any, rows: list[dict[str, Any]]) -> None:
    """What the bars do not show: fallbacks, other matmul formats, left-out and unfit devices."""
    ax.axis("off")
    lines = []
    for r in rows:
        name = r.get("device_name") or r["device"]
        said = [n for n in str(r["notes"] or "").split("; ")
                if n.startswith(("ran ", "does not fit")) or " matrix units" in n]
        if not _isnull(r.get("error")):
            said.insert(0, f"left out: {r['error']}")
        lines += [textwrap.fill(f"{name}: {n}", 62, subsequent_indent="    ") for n in said]
    text = "\n".join(lines) if lines else "Every device ran the requested precision."
    ax.text(0.0, 1.0, "Notes\n" + text, va="top", ha="left", fontsize=8,
            transform=ax.transAxes, wrap=True)


def compare_figure(frame: pd.DataFrame, title: str | None = None) -> Any:
    """The comparison figure of a `compare` DataFrame (one row per device); returns it."""
    rows = frame.to_dict(orient="records")
    palette = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    colours = [palette[i % len(palette)] for i in range(len(rows))]
    height_in = max(3.2, 0.55 * len(rows) + 1.6)
    fig, axes = new_figure(ncols=3, nrows=2, width_in=5.2, height_in=height_in, sharey=True)
    flat = list(axes.flat)
    mode = next((r["mode"] for r in rows if not _isnull(r.get("mode"))), "infer")
    for ax, (column, panel_title) in zip(flat, PANELS, strict=False):
        _bar_panel(ax, rows, column, colours)
        ax.set_title(panel_title)
        unit_label = label(column)
        if column == "latency_s":
            unit_label = unit_label.replace(" (", f", {LATENCY_MEANING.get(mode, '')} (")
        ax.set_xlabel(unit_label)
    _memory_panel(flat[4], rows, colours)
    _notes_panel(flat[5], rows)
    flat[0].set_yticks(np.arange(len(rows)), [device_label(r) for r in rows])
    flat[0].invert_yaxis()  # first device on top
    for ax in flat[:5]:
        ax.tick_params(axis="y", labelsize=8)
    for ax in flat[:5]:
        ax.grid(True, axis="x", which="major", alpha=0.3)
    if title is None and rows:
        r = rows[0]
        title = (f"{r['workload']} ({mode}), batch {r['batch_size']} per device, "
                 f"{r['precision_requested']} requested")
    fig.suptitle(title or "")
    return fig

