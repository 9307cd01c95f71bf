"""`accelsim plan ... --report FILE`: the plan as one self-contained HTML page
(`accelsim.report.plan_page`), written atomically."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelsim.cli.plan_text import Columns


def write_plan_report(path: str, plan: Any, title: str, question: Sequence[tuple[str, Any]],
                      columns: Columns, label: str, figure: Any = None, top: int = 5,
                      **page: Any) -> str:
    """Write the page to `path` (`page`: `plan_page`'s other keywords); return the line that
    says so."""
    from accelsim.report.plan_page import plan_page
    from accelsim.results.files import write_atomic

    out = write_atomic(path, plan_page(plan, title, question, columns, label, figure, top,
                                            **page))
    return f"  report: {out}"


def limits_given(**limits: Any) -> list[tuple[str, Any]]:
    """The (name, value) pairs of the limits that were given."""
    return [(name.replace("_", " "), value) for name, value in limits.items()
            if value is not None]
