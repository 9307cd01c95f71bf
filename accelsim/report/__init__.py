"""Self-contained HTML reports of one simulation: one file, figures embedded, no server and
no network.

    from accelsim.report import report
    report("resnet50-train", "dgx-a100", steps=20)            # ./resnet50-train-dgx-a100.html
    report("resnet50-train", "dgx-a100", out="reports/_generated/r.html", prep_workers=4)

The page (`page`) shows the system and workload, the summary, the bottleneck and what would
relieve it (re-simulated: `relief`), the pipeline timeline (`accelsim.plots.timeline`), the
stall, energy and memory breakdowns and the slowest layers (`accelsim.plots.breakdown`);
a token-level LLM run (inference, serving, a training step) gets `llm_page` instead; `html`
holds the escaped building blocks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelsim.errors import AccelsimError
from accelsim.workload.scenario import Scenario


def default_path(workload: str | Scenario, hw: str) -> Path:
    """`<workload>-<hw>.html` in the current directory (file names reduced to their stems)."""
    name = workload.name if isinstance(workload, Scenario) else Path(str(workload)).stem
    return Path(f"{name}-{Path(hw).stem}.html")


def report(workload: str | Scenario, hw: str, out: str | Path | None = None,
           **knobs: Any) -> Path:
    """Simulate `workload` on `hw` with `knobs` (as `accelsim.simulate` takes them), write the
    HTML report to `out` (default `default_path`) atomically, and return its path. Bad input
    raises `accelsim.errors.AccelsimError`; the file is then not written."""
    from accelsim.report.page import build_page
    from accelsim.results.files import write_atomic

    path = Path(out) if out is not None else default_path(workload, hw)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise AccelsimError(f"cannot write {path}: {err.strerror or err}") from None
    text = build_page(workload, hw, {k: v for k, v in knobs.items() if v is not None})
    return write_atomic(path, text)


__all__ = ["default_path", "report"]
