"""The figure of a training plan (`accelsim.explore.plan_train`): every simulated configuration
that meets the limits as a point of its time to train (hours) against what the run costs (its
rent, or its energy where no price stands behind it), one colour per system, the plan's front
(`TrainPlan.front`: no other row is both sooner and cheaper) joined and labelled with the
limit each front point is nearest, the deadline drawn, the chosen row ringed.

    fig = train_plan_figure(plan, deadline_h=2.0)
    save_figure(fig, "plan.png")
"""

from __future__ import annotations

from typing import Any

from accelsim.plots.style import legend_below, new_figure

LABEL_GAP = 10 ** (1 / 4)  # NB: front labels at least a quarter of a decade apart in time


def _y(plan: Any) -> tuple[str, str, float]:
    """(row key, axis title, scale): the run's rent where every row has one, else its energy."""
    if plan.cost_key == "usd_per_run":
        return "usd_per_run", "Cost of the run ($ rent)", 1.0
    return "energy_j_per_run", "Energy of the run (MJ)", 1e-6


def train_plan_figure(plan: Any, deadline_h: float | None = None) -> Any:
    """The figure (see the module docstring); rows without the y figure are left out."""
    y, title, k = _y(plan)
    rows = [r for r in plan.feasible if r[y] is not None]
    fig, ax = new_figure(width_in=7.0, height_in=4.6)
    for hw in sorted({r["hardware"] for r in rows}):
        mine = [r for r in rows if r["hardware"] == hw]
        ax.scatter([r["time_to_train_s"] / 3600 for r in mine], [r[y] * k for r in mine], s=18,
                   alpha=0.7, label=hw)
    front = plan.front
    if front:
        ax.plot([r["time_to_train_s"] / 3600 for r in front], [r[y] * k for r in front],
                color="black", lw=1.0, label="front")
        xs = [r["time_to_train_s"] / 3600 for r in rows]
        mid = (min(xs) * max(xs)) ** 0.5
        last = 0.0
        for r in front:
            x = r["time_to_train_s"] / 3600
            if x < last * LABEL_GAP:
                continue
            last = x
            text = f"{r['hardware']} b{r['batch']} {r['devices']}x{r['nodes']}" + (
                f" ({r['binds']})" if r["binds"] else "")
            right = x > mid
            ax.annotate(text, (x, r[y] * k), fontsize=7, ha="right" if right else "left",
                        xytext=(-4 if right else 4, 6), textcoords="offset points")
    if deadline_h is not None:
        ax.axvline(deadline_h, color="grey", ls="--", lw=1.0, label="deadline")
    best = plan.best[0] if plan.best and plan.best[0][y] is not None else None
    if best is not None:
        ax.scatter([best["time_to_train_s"] / 3600], [best[y] * k], s=140, facecolors="none",
                   edgecolors="red", linewidths=1.5, label="chosen")
    ax.set_xscale("log")
    ax.set_xlabel("Time to train (hours)")
    ax.set_ylabel(title)
    ax.set_title(f"Training plan: {plan.objective}, {len(rows)} configurations within the "
                 "limits")
    ax.grid(True, which="both", alpha=0.3)
    if rows:
        legend_below(fig, max_ncol=6)
    return fig
