"""Shared figure pieces: the non-interactive backend, readable labels with units for every
metric column, and saving by extension (PNG, SVG or PDF) without half-written files.

    fig, ax = new_figure()
    ax.set_ylabel(label("throughput_samples_per_s"))    # "Throughput (samples/s)"
    save_figure(fig, "reports/compare.png")
    legend_below(fig, handles, max_ncol=6)   # as many columns as fit inside the figure
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: figures are files

import matplotlib.pyplot as plt  # noqa: E402

from accelsim.errors import AccelsimError  # noqa: E402
from accelsim.results.files import atomic_path  # noqa: E402

FORMATS = (".png", ".svg", ".pdf")
DPI = 150
# Column -> (axis label with unit, scale from the column's SI unit to the label's).
LABELS: dict[str, tuple[str, float]] = {
    "throughput_samples_per_s": ("Throughput (samples/s)", 1.0),
    "latency_s": ("Latency (ms)", 1e3),
    "latency_p50_s": ("p50 latency (ms)", 1e3),
    "latency_p95_s": ("p95 latency (ms)", 1e3),
    "latency_p99_s": ("p99 latency (ms)", 1e3),
    "energy_j_per_sample": ("Energy per sample (mJ)", 1e3),
    "average_power_w": ("Average power (W)", 1.0),
    "samples_per_j": ("Performance per watt (samples/J)", 1.0),
    "required_bytes": ("Device memory needed (GB)", 1e-9),
    "capacity_bytes": ("Device memory (GB)", 1e-9),
    "accelerator_utilization": ("Accelerator utilization (%)", 100.0),
    "batch_size": ("Batch size per accelerator", 1.0),
    "devices": ("Accelerators", 1.0),
    "run_time_s": ("Simulated run time (s)", 1.0),
}


def label(column: str) -> str:
    """The axis label of a metric column, with its unit."""
    return LABELS.get(column, (column.replace("_", " ").capitalize(), 1.0))[0]


def scale(column: str) -> float:
    """Factor from the column's SI value to the unit of `label(column)`."""
    return LABELS.get(column, ("", 1.0))[1]


def new_figure(ncols: int = 1, nrows: int = 1, width_in: float = 6.4,
               height_in: float = 4.0, **kw: Any) -> tuple[Any, Any]:
    """A figure of `nrows` x `ncols` panels, each `width_in` x `height_in` inches."""
    return plt.subplots(nrows, ncols, figsize=(width_in * ncols, height_in * nrows),
                        constrained_layout=True, **kw)


def save_figure(fig: Any, path: str | Path) -> Path:
    """Save `fig` to `path` in the format its extension names, atomically; close it."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        plt.close(fig)
        raise AccelsimError(f"{path}: a figure is written as {', '.join(FORMATS)}, "
                            f"not '{path.suffix or 'no extension'}'")
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=DPI, format=path.suffix.lower().lstrip("."))
    finally:
        plt.close(fig)
    return path


def legend_below(fig: Any, handles: list[Any] | None = None, labels: list[str] | None = None,
                 max_ncol: int = 6, **kw: Any) -> Any:
    """A figure legend below the panels ("outside lower center") in the most columns, up to
    `max_ncol`, whose width lies inside the figure: a legend wider than its figure loses the
    ends of its first and last labels. Returns the legend."""
    if handles is None:
        handles, labels = _figure_handles(fig)
    elif labels is None:
        labels = [h.get_label() for h in handles]
    renderer = fig.canvas.get_renderer()
    kw = {"loc": "outside lower center", "frameon": False, **kw}
    ncol = max(1, min(max_ncol, len(handles)))
    while True:
        legend = fig.legend(handles, labels, ncol=ncol, **kw)
        if ncol == 1 or legend.get_window_extent(renderer).width <= fig.bbox.width:
            return legend
        legend.remove()
        ncol -= 1


def _figure_handles(fig: Any) -> tuple[list[Any], list[str]]:
    """The labelled artists of every panel of `fig`, first label wins (as `fig.legend()`)."""
    seen: dict[str, Any] = {}
    for ax in fig.axes:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(text, handle)
    return list(seen.values()), list(seen)
