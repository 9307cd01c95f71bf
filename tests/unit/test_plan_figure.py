"""The plan figure: every text inside the figure, the chosen point drawn, the front's points
the plan's own."""

from __future__ import annotations

from accelsim.explore.plan import make_plan
from accelsim.plots.plan import plan_figure
from tests.helpers.figure_text import text_outside


def test_plan_figure_holds_its_text():
    plan = make_plan("resnet50", ["h100", "t4", "l4"], [1, 4, 16, 64], ["fp16", "int8"],
                     [1, 2, 4], "throughput", p99_ms=20, knobs={"software": "tensorrt"})
    fig = plan_figure(plan)
    fig.canvas.draw()
    assert text_outside(fig) == []
    ax = fig.axes[0]
    front = [line for line in ax.get_lines() if line.get_label() == "front"][0]
    xs = list(front.get_xdata())
    assert xs == [r["usd_per_hour"] for r in plan.front]
    assert any(c.get_label() == "chosen" for c in ax.collections)
