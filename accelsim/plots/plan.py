"""The figure of a plan (`accelsim.explore.plan`): every simulated configuration that meets
the limits as a point of its objective against its rent per hour, one colour per device, the
front joined and labelled with the limit each front point is nearest, the best ringed.

    fig = plan_figure(plan)
    save_figure(fig, "plan.png")
"""

from __future__ import annotations

from typing import Any

from accelsim.plots.style import legend_below, new_figure

_AXIS = {"throughput_samples_per_s": ("Throughput (samples/s)", 1.0),
         "samples_per_usd": ("Samples per dollar", 1.0),
         "samples_per_j": ("Samples per joule", 1.0),
         "usd_per_1000_samples": ("$ per 1,000 samples", 1.0),
         "energy_j_per_sample": ("Energy per sample (mJ)", 1e3),
         "latency_s": ("Latency per batch (ms)", 1e3)}
LABEL_GAP = 10 ** (1 / 3)  # NB: front labels at least a third of a decade apart in $/h


def plan_figure(plan: Any) -> Any:
    """The figure (see the module docstring); configurations with no price are left out of
    it, as they have no $/h (the plan's table lists them)."""
    from accelsim.explore.plan import OBJECTIVES

    key, up = OBJECTIVES[plan.objective]
    title, k = _AXIS[key]
    rows = [r for r in plan.feasible if r["usd_per_hour"] is not None]
    fig, ax = new_figure(width_in=7.0, height_in=4.6)
    for hw in sorted({r["hardware"] for r in rows}):
        mine = [r for r in rows if r["hardware"] == hw]
        ax.scatter([r["usd_per_hour"] for r in mine], [r[key] * k for r in mine], s=18,
                   alpha=0.7, label=hw)
    front = plan.front
    if front:
        ax.plot([r["usd_per_hour"] for r in front], [r[key] * k for r in front], color="black",
                lw=1.0, drawstyle="steps-post" if up else "default", label="front")
        last_x = 0.0
        xs = [r["usd_per_hour"] for r in rows]
        mid_x = (min(xs) * max(xs)) ** 0.5  # the middle of the log axis
        for r in front:  # a label where the last one is a third of a decade away or more
            if r["usd_per_hour"] < last_x * LABEL_GAP:
                continue
            last_x = r["usd_per_hour"]
            text = f"{r['hardware']} {r['precision']} b{r['batch']} x{r['devices']}" + (
                f" ({r['binds']})" if r["binds"] else "")
            right = r["usd_per_hour"] > mid_x  # the label toward the middle: inside the axes
            ax.annotate(text, (r["usd_per_hour"], r[key] * k), fontsize=7,
                        ha="right" if right else "left", xytext=(-4 if right else 4, 6),
                        textcoords="offset points")
    best = plan.best[0] if plan.best and plan.best[0]["usd_per_hour"] is not None else None
    if best is not None:
        ax.scatter([best["usd_per_hour"]], [best[key] * k], s=140, facecolors="none",
                   edgecolors="red", linewidths=1.5, label="chosen")
    ax.set_xscale("log")
    ax.set_xlabel("Rent ($ per hour)")
    ax.set_ylabel(title + (" (higher is better)" if up else " (lower is better)"))
    ax.set_title(f"Plan: {plan.objective}, {len(rows)} configurations within the limits")
    ax.grid(True, which="both", alpha=0.3)
    if rows:
        legend_below(fig, max_ncol=6)
    return fig
