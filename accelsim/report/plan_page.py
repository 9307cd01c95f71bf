"""One self-contained HTML page of a plan (`accelsim plan ... --report FILE`): the answer as
cards (the chosen configuration, its objective, what binds), the question (objective, limits,
what was searched), the best configurations and the front as tables, the plan's figure where
it has one, and why every other configuration was not chosen.

    html = plan_page(plan, "plan resnet50-train", question=[("objective", "cost")],
                     columns=COLUMNS, figure=fig)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelsim.report.cards import Card
from accelsim.report.html import bullets, cards, embed_figure, page, pairs, section, table
from accelsim.results.textfit import figure_cell

Columns = Sequence[tuple[str, str, float | None]]  # (header, row key, scale or None: text)


def _table(rows: list[dict[str, Any]], columns: Columns, table_id: str) -> str:
    numeric = [i for i, (_, _, s) in enumerate(columns) if s is not None]
    return table([h for h, _, _ in columns],
                 [[figure_cell(r.get(k), s) for _, k, s in columns] for r in rows], table_id,
                 numeric=numeric)


def _chosen(plan: Any, columns: Columns, label: str) -> list[Card]:
    """Cards of the best row: its name, its objective figure, what binds it."""
    best = plan.best
    if not best:
        return [Card("answer", "no configuration meets the limits", "", "alert")]
    row = best[0]
    key, up = plan.objectives[plan.objective]
    header = next((h for h, k, _ in columns if k == key), key)
    scale = next((s for _, k, s in columns if k == key), 1.0)
    return [Card("chosen", label.format(**row), f"best of {len(plan.feasible)} within the "
                 "limits"),
            Card(f"{plan.objective} ({'higher' if up else 'lower'} is better)",
                 f"{figure_cell(row[key], scale)} {header}"),
            Card("binds", row["binds"] or "no limit near", "the limit it is nearest",
                 "bottleneck")]


def plan_page(plan: Any, title: str, question: Sequence[tuple[str, Any]], columns: Columns,
              label: str, figure: Any = None, top: int = 5,
              front_title: str = "Front: no other is better at no more rent per hour") -> str:
    """The page (see the module docstring); `label` formats a row's name (str.format over
    its keys), `figure` (a Matplotlib figure, closed here) is embedded where given."""
    rows = len(plan.rows)
    searched = [("configurations", f"{rows:,}"),
                ("simulated", f"{plan.simulated:,} ({plan.simulated / max(rows, 1):.0%})")]
    body = [section("Answer", cards(_chosen(plan, columns, label)), section_id="summary"),
            section("The question", pairs([*question, *searched]), section_id="question")]
    if plan.best:
        body.append(section(f"Best {min(top, len(plan.best))}",
                            _table(plan.best[:top], columns, "best")))
    if plan.front:
        body.append(section(front_title, _table(plan.front, columns, "front")))
    if figure is not None:
        body.append(section("Figure", embed_figure(figure, f"{title}: the plan's figure")))
    body.append(section("Not chosen", bullets(plan.not_chosen() or ["none"])))
    if plan.notes:
        body.append(section("Notes", bullets(plan.notes)))
    return page(title, "".join(body), subtitle=f"{plan.objective} over {rows:,} configurations",
                footer="accelsim plan: every figure re-simulated, nothing measured")
