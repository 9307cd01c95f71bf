"""A decoder server's requests (`accelsim.llm.serve.request_times`: one row per request, its
arrival, first and last token and return times, TTFT, TPOT and latency): how TTFT, TPOT and
latency are distributed, and how many requests wait and decode through the run.

    times = request_times(result.events)
    fig = distribution_figure(times, slo_ttft_s=0.5)
    fig = occupancy_figure(times)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from accelsim.plots.style import legend_below, new_figure

PANELS = (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("latency_s", "End-to-end latency"))
WAITING_COLOR, DECODING_COLOR, SLO_COLOR = "#fb6a4a", "#238b45", "#c62828"


def _ms_axis(values_s: np.ndarray) -> tuple[str, float]:
    """ms below 2 s at the top of the range, else s."""
    top = float(np.nanmax(values_s)) if len(values_s) else 0.0
    return ("ms", 1e3) if top < 2.0 else ("s", 1.0)


def distribution_figure(times: pd.DataFrame, slo_ttft_s: float | None = None,
                        slo_tpot_s: float | None = None) -> Any:
    """Empirical CDFs of TTFT, TPOT and latency over the requests, p50 and p99 marked, the SLO
    targets drawn where given. A one-token request has no TPOT (left out of that panel)."""
    fig, axes = new_figure(ncols=3, width_in=3.6, height_in=2.9)
    slo = {"ttft_s": slo_ttft_s, "tpot_s": slo_tpot_s}
    for ax, (col, name) in zip(axes, PANELS, strict=True):
        values = np.sort(times[col].dropna().to_numpy(float))
        unit, per_s = _ms_axis(values)
        share = np.arange(1, len(values) + 1) / max(len(values), 1)
        ax.step(values * per_s, share * 100.0, where="post", color="#1f77b4",
                label="share of requests")
        for q, style in ((50, "--"), (99, ":")):
            if len(values):
                ax.axvline(np.percentile(values, q) * per_s, color="0.3", linestyle=style,
                           linewidth=1.0, label=f"p{q}")
        if slo.get(col) is not None:
            ax.axvline(slo[col] * per_s, color=SLO_COLOR, linewidth=1.2, label="SLO target")
        ax.set_xlabel(f"{name} ({unit})")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Requests at or below (%)")
    fig.suptitle(f"{len(times):,} requests: TTFT, TPOT and latency")
    legend_below(fig, max_ncol=4)
    return fig


def occupancy(times: pd.DataFrame) -> pd.DataFrame:
    """At each arrival, first token and return: how many requests wait for their first token
    (queued or in prefill) and how many decode, from then to the next change."""
    times = times.dropna(subset=["arrival_s", "first_s", "done_s"])  # (a request unserved)
    moves = pd.concat([
        pd.DataFrame({"t_s": times["arrival_s"], "waiting": 1, "decoding": 0}),
        pd.DataFrame({"t_s": times["first_s"], "waiting": -1, "decoding": 1}),
        pd.DataFrame({"t_s": times["done_s"], "waiting": 0, "decoding": -1}),
    ]).sort_values("t_s", kind="stable")
    steps = moves.groupby("t_s", sort=True)[["waiting", "decoding"]].sum().cumsum()
    return steps.reset_index()


def occupancy_figure(times: pd.DataFrame, max_batch: int | None = None) -> Any:
    """Requests waiting for their first token and decoding (the running batch) over the run,
    stacked; the largest running batch the engine allows as a line when given."""
    occ = occupancy(times)
    fig, ax = new_figure(width_in=11.0, height_in=2.8)
    t = occ["t_s"].to_numpy(float)
    decoding, waiting = occ["decoding"].to_numpy(float), occ["waiting"].to_numpy(float)
    ax.fill_between(t, 0, decoding, step="post", color=DECODING_COLOR, linewidth=0,
                    label="decoding (running batch)")
    ax.fill_between(t, decoding, decoding + waiting, step="post", color=WAITING_COLOR,
                    linewidth=0, label="waiting for the first token (queued or in prefill)")
    if max_batch is not None and max_batch <= 1.5 * float(np.max(decoding + waiting, initial=1)):
        ax.axhline(max_batch, color="0.3", linestyle="--", linewidth=1.0,
                   label=f"largest running batch {max_batch:,}")
    ax.set_xlim(float(t.min(initial=0.0)), float(t.max(initial=1.0)))
    ax.set_ylim(0, None)
    ax.set_xlabel("Simulated time (s)")
    ax.set_ylabel("Requests")
    ax.grid(alpha=0.3)
    ax.set_title("Requests in the server through the run")
    legend_below(fig, max_ncol=3)
    return fig
