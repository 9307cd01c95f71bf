"""Text helpers shared by `accelsim plan`'s planners (inference, decoder serving, training)."""

from __future__ import annotations

from typing import Any

from accelsim.errors import AccelsimError

Columns = tuple[tuple[str, str, float | None], ...]


def parse_counts(text: str, what: str) -> list[int]:
    """Whole numbers from 1 given as a list or a doubling range (1,2,...,64)."""
    from accelsim.explore.grid import expand_axis

    values = expand_axis(what, text)
    if not values or any(not isinstance(v, int) or v < 1 for v in values):
        raise AccelsimError(f"--{what.replace('_', '-')} {text!r}: whole numbers from 1, e.g. "
                            "1,2,4 or 1,2,...,64")
    return [int(v) for v in values]


def echo_plan_json(plan: Any, top: int) -> None:
    """The plan as one JSON object: its objective, counts, best `top`, front, rows, notes."""
    from accelsim.cli.common import echo_json

    echo_json({"objective": plan.objective, "configurations": len(plan.rows),
               "simulated": plan.simulated, "resumed": plan.resumed, "pruned": plan.pruned,
               "best": plan.best[:top], "front": plan.front, "rows": plan.rows,
               "notes": plan.notes})


def plan_table(rows: list[dict[str, Any]], columns: Columns) -> str:
    """The rows as a text table of `columns` (header, row key, scale or None for text)."""
    from accelsim.results.textfit import figure_cell, text_table

    body = [[figure_cell(r[k], s) for _, k, s in columns] for r in rows]
    numbers = [i for i, (_, _, s) in enumerate(columns) if s is not None]
    return "\n".join(text_table([h for h, _, _ in columns], body, right=numbers, shrink=0))


def not_chosen_lines(plan: Any) -> list[str]:
    """The plan's "Not chosen" section of the terminal text (`Plan.not_chosen`)."""
    return ["", "Not chosen:", *(f"  {line}" for line in plan.not_chosen() or ["none"])]


def closing_lines(plan: Any, wrote: str | None = None) -> list[str]:
    """The end of a plan's terminal text: why the rest were not chosen, its notes, and the
    line saying where its page was written (if one was)."""
    return [*not_chosen_lines(plan), *(f"  note: {n}" for n in plan.notes),
            *([wrote] if wrote else [])]


def names_list(text: str) -> list[str]:
    """Names separated by commas; AccelsimError when there is none."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise AccelsimError(f"{text!r}: give at least one name")
    return names
