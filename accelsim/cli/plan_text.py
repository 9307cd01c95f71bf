"""Text helpers shared by `accelsim plan`'s two planners (inference and decoder serving)."""

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


def plan_table(rows: list[dict[str, Any]], columns: Columns) -> str:
    """The rows as a text table of `columns` (header, row key, scale or None for text)."""
    from accelsim.results.textfit import text_table

    def cell(v: Any, scale: float | None) -> str:
        if v is None:
            return "-"
        if scale is None:
            return str(v)
        x = v * scale
        return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"

    body = [[cell(r[k], s) for _, k, s in columns] for r in rows]
    numbers = [i for i, (_, _, s) in enumerate(columns) if s is not None]
    return "\n".join(text_table([h for h, _, _ in columns], body, right=numbers, shrink=0))
