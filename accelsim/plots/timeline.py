"""Gantt view of the event records (`accelsim.results.records`): one lane per resource, in pipeline
order (storage, network, host CPU, host link, accelerators, device links), one colour per
activity, stalls drawn on the accelerator lanes that waited.

    start_s, end_s = step_window(result.events, steps=4)      # the first 4 steps
    fig = gantt(result.events, start_s, end_s, title="resnet50 on dgx-a100")

Residence records (`batch_read`, ... on the `loader<d>` lanes: where a batch waited, not work)
and DRAM traffic records (bytes, no busy time) are left out.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
from matplotlib.patches import Patch

from accelsim.plots.style import legend_below, new_figure
from accelsim.results.records import RESIDENCE_KINDS

PHASES = ("forward", "backward", "optimizer")
# Activity -> colour. Work in saturated colours, waits (stalls) in light reds.
COLORS: dict[str, str] = {
    "read": "#1f77b4",
    "prep": "#ff7f0e",
    "h2d": "#9467bd",
    "compute": "#2ca02c",
    "compute forward": "#74c476",
    "compute backward": "#238b45",
    "compute optimizer": "#00441b",
    "allreduce": "#8c564b",
    "reducescatter": "#bf812d",
    "allgather": "#35978f",
    "alltoall": "#762a83",
    "batch": "#2ca02c",
    "full batch": "#238b45",
    "partial batch": "#a1d99b",
    "request": "#17becf",
    "stall_fetch": "#fcbba1",
    "stall_prep": "#fb6a4a",
    "stall_transfer": "#cb181d",
    "stall_sync": "#f1b6da",
    "stall_comm": "#e7298a",
    # bounds of layer rows (inference timelines are coloured by bound)
    "memory": "#1f77b4",
    "overhead": "#7f7f7f",
    "power": "#d62728",
}
OTHER_COLOR = "#bcbd22"
# Activities `COLORS` does not name, in legend order: one colour each, not one for all.
UNNAMED_COLORS = (OTHER_COLOR, "#9edae5", "#e377c2", "#aec7e8", "#ffbb78", "#c5b0d5")
SEPARATED = ("batch", "full batch", "partial batch")  # back-to-back records: white edges
_LANE_ORDER = ("storage", "network", "host_cpu", "pcie", "accel")


def activity(events: pd.DataFrame) -> pd.Series:
    """What each record is drawn as: its kind, with accelerator compute split by phase
    (forward, backward, optimizer) when `detail` names one."""
    phase = events["detail"].astype(str)
    split = (events["kind"] == "compute") & phase.isin(PHASES)
    return events["kind"].astype(str).where(~split, "compute " + phase)


def _lane_key(resource: str) -> tuple[int, int, str]:
    """Pipeline order; accelerators by number; unknown resources (device links) last."""
    for rank, prefix in enumerate(_LANE_ORDER):
        if resource.startswith(prefix):
            digits = re.sub(r"\D", "", resource[len(prefix):])
            return rank, int(digits) if digits else -1, resource
    return len(_LANE_ORDER), 0, resource


def drawn(events: pd.DataFrame) -> pd.DataFrame:
    """The records a Gantt shows: work and stalls with a duration, no residence or DRAM rows."""
    keep = (~events["kind"].isin(RESIDENCE_KINDS) & (events["resource"] != "dram")
            & (events["end_s"] > events["start_s"]))
    return events[keep]


def step_window(events: pd.DataFrame, steps: int, first: int = 0) -> tuple[float, float]:
    """(start_s, end_s) spanning steps `first` .. `first + steps - 1` of the accelerators (a
    served batch's index is its step); from time 0 when `first` is 0, so the pipeline filling
    shows. The whole run when the records carry no steps."""
    if events.empty:
        return 0.0, 0.0
    accel = events[events["resource"].astype(str).str.startswith("accel")]
    inside = accel[(accel["step"] >= first) & (accel["step"] < first + steps)]
    if inside.empty:
        return 0.0, float(events["end_s"].max())
    start_s = 0.0 if first == 0 else float(inside["start_s"].min())
    return start_s, float(inside["end_s"].max())


def gantt(events: pd.DataFrame, start_s: float | None = None, end_s: float | None = None,
          color_by: str | None = None, title: str = "", width_in: float = 11.0) -> Any:
    """A Gantt figure of `events` between `start_s` and `end_s` (seconds; default: all).

    Colours follow `activity(events)`, or the column `color_by` (e.g. "bound") when given.
    The time axis is in ms for windows under 2 s, else in s."""
    rows = drawn(events)
    labels = rows[color_by].astype(str) if color_by else activity(rows)
    lo = float(rows["start_s"].min()) if start_s is None and len(rows) else (start_s or 0.0)
    hi = float(rows["end_s"].max()) if end_s is None and len(rows) else (end_s or 1.0)
    inside = (rows["end_s"] > lo) & (rows["start_s"] < hi)
    rows, labels = rows[inside], labels[inside]
    lanes = sorted(rows["resource"].astype(str).unique(), key=_lane_key)
    fig, ax = new_figure(width_in=width_in, height_in=1.3 + 0.3 * max(len(lanes), 1))
    unit, per_s = ("ms", 1e3) if hi - lo < 2.0 else ("s", 1.0)
    lane_y = {lane: i for i, lane in enumerate(lanes)}
    order = sorted(labels.unique(), key=_legend_key)
    handles = []
    unnamed = [w for w in order if w not in COLORS]
    for what in order:
        part = rows[labels == what]
        color = COLORS.get(what) or UNNAMED_COLORS[unnamed.index(what) % len(UNNAMED_COLORS)]
        for lane, grp in part.groupby(part["resource"].astype(str)):
            start = grp["start_s"].clip(lower=lo) * per_s
            width = grp["end_s"].clip(upper=hi) * per_s - start
            # NB: a thin edge in the bar's colour keeps sub-pixel records (an all-reduce of
            # 0.6 ms in a 1.5 s window) visible, at the cost of widening them slightly.
            ax.broken_barh(list(zip(start, width, strict=True)), (lane_y[lane] - 0.4, 0.8),
                           facecolors=color, linewidth=0.5,
                           edgecolors="white" if what in SEPARATED else color)
        handles.append(Patch(color=color, label=what.replace("_", " ")))
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xlim(lo * per_s, hi * per_s)
    ax.set_xlabel(f"Simulated time ({unit})")
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title)
    if handles:
        legend_below(fig, handles, max_ncol=6)
    return fig


def _legend_key(what: str) -> tuple[int, str]:
    """Legend in the order of `COLORS` (pipeline order, stalls last), others after."""
    known = list(COLORS)
    return (known.index(what), what) if what in known else (len(known), what)
