"""The figure of a decoder's serving plan (`accelsim.explore.plan_llm`): every searched
configuration with a capacity and a price as a point of the rent its replicas cost for the
load ($ per hour, log) against the tokens each of its GPUs serves at capacity, one colour per
system and a marker per stack; those served at their own load are filled, the chosen one
ringed and labelled with its split and what binds.

    fig = serving_plan_figure(plan)
    save_figure(fig, "serve-plan.png")
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt

from accelsim.plots.style import legend_below, new_figure

_MARKERS = ("o", "s", "^", "D", "v", "P")


def serving_plan_figure(plan: Any) -> Any:
    """The figure (see the module docstring); configurations without a capacity or a price
    are left out (the plan's table lists them)."""
    rows = [r for r in plan.rows if r["usd_per_hour"] is not None
            and r["tokens_per_s_per_gpu"] is not None]
    fig, ax = new_figure(width_in=7.0, height_in=4.6)
    stacks = sorted({r["software"] for r in rows})
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, hw in enumerate(sorted({r["hardware"] for r in rows})):
        colour = cycle[i % len(cycle)]
        for sw in stacks:
            marker = _MARKERS[stacks.index(sw) % len(_MARKERS)]
            for served in (True, False):
                mine = [r for r in rows if r["hardware"] == hw and r["software"] == sw
                        and (r["served_rate_per_s"] is not None) == served]
                if mine:
                    ax.scatter([r["usd_per_hour"] for r in mine],
                               [r["tokens_per_s_per_gpu"] for r in mine], s=22, alpha=0.8,
                               marker=marker, edgecolors=colour,
                               facecolors=colour if served else "none",
                               label=f"{hw} {sw}" + ("" if served else " (not served)"))
    best = plan.best[0] if plan.best and plan.best[0]["usd_per_hour"] is not None else None
    if best is not None and best["tokens_per_s_per_gpu"] is not None:
        ax.scatter([best["usd_per_hour"]], [best["tokens_per_s_per_gpu"]], s=160,
                   facecolors="none", edgecolors="red", linewidths=1.5, label="chosen")
        split = f"{best['replicas']} x tp{best['tp']}" + (
            f" pp{best['pp']}" if best["pp"] > 1 else "")
        text = f"{best['hardware']} {best['software']} {split} cap {best['max_batch']}" + (
            f" ({best['binds']})" if best["binds"] else "")
        ax.annotate(text, (best["usd_per_hour"], best["tokens_per_s_per_gpu"]), fontsize=7,
                    xytext=(10, -12), textcoords="offset points", ha="left", va="top")
    xs = [r["usd_per_hour"] for r in rows]
    if xs and max(xs) > 10 * min(xs):  # NB: a log axis only where the rents span a decade
        ax.set_xscale("log")
    ax.margins(x=0.08, y=0.12)
    ax.set_xlabel("Rent of the replicas the load needs ($ per hour)")
    ax.set_ylabel("Output tokens/s per GPU at capacity")
    ax.set_title(f"Serving plan: {plan.objective}, {len(rows)} configurations searched")
    ax.grid(True, which="both", alpha=0.3)
    if rows:
        legend_below(fig, max_ncol=4)
    return fig
