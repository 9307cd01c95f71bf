"""Figures of a sweep (`accelsim.explore.run.sweep`), the panels chosen by what was swept.

    plot_sweep(df, "reports/sweep.png")

- a number knob swept (batch first, else devices, else the first one): throughput, latency
  and energy per sample against it, one line per combination of the other swept knobs (per
  hardware profile at least); batch and devices on a log-2 axis. Points that do not fit in
  memory are crosses on the x axis, and a dotted line marks each profile's largest batch that
  fits when the sweep crosses it;
- devices swept: scaling efficiency, throughput(n) / (n x throughput(n0)), n0 the fewest
  devices of the line (1 when swept from 1);
- training points: the accelerators' stall breakdown as stacked bars, one bar per point;
- decoders at the token level (`tpot_s` known): output tokens/s against time per output token
  along the swept knob, the throughput-latency curve;
- only names swept (hardware, precision, ...): bars, one per point.

Failed points (an `error`) are left out. One legend, below the panels, so no data is covered.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator

from accelsim.errors import AccelsimError
from accelsim.plots.style import LABELS, label, legend_below, new_figure, save_figure, scale
from accelsim.results.summary import ROW_COLUMNS
from accelsim.sim.knobs import KNOBS

METRICS = ("throughput_samples_per_s", "latency_s", "energy_j_per_sample")
LOG2_KNOBS = ("batch", "devices")
X_PREFERENCE = ("batch", "devices")
STALLS = ("stall_fetch", "stall_prep", "stall_transfer", "stall_slowest_device",
          "stall_communication")
STALL_COLORS = ("#f4a582", "#d6604d", "#92c5de", "#f1b6da", "#4393c3", "#b8e186")  # + rest
MAX_BARS = 48  # bars per panel; more are left out (the title says so)
LOG_Y_SPAN = 30.0  # a metric spanning more than this ratio gets a log y axis
LOG_X_SPAN = 8.0  # a number knob spanning more than this ratio gets a log x axis
NEUTRAL = "0.25"  # legend entries of markers drawn in every series' colour
OOM_LABEL, LARGEST_LABEL = "does not fit in memory", "largest batch that fits"


def plot_sweep(df: pd.DataFrame, path: str | Path, swept: list[str] | None = None) -> Path:
    """Draw the panels that fit the knobs swept (`swept`, default `df.attrs["swept"]`, else
    the knob columns with more than one value) and save to `path` (.png, .svg or .pdf).
    A frame of the Python API, whose all-None columns are dropped, draws as the whole one."""
    df = df.reindex(columns=[*df.columns, *(c for c in ROW_COLUMNS if c not in df)])
    ok = _succeeded(df)
    if ok.empty:
        raise AccelsimError("nothing to plot: every point of the sweep failed")
    swept = [s for s in (swept or df.attrs.get("swept") or _swept(df)) if s in df]
    x = _x_knob(ok, swept)
    panels: list[tuple[Any, ...]] = []
    if x is None:
        panels += [("bars", m) for m in METRICS]
    else:
        panels += [("lines", m, x) for m in METRICS]
    if "devices" in swept and _numeric(ok["devices"]):
        panels.append(("scaling",))
    if ok["stall_fetch"].notna().any():
        panels.append(("stalls",))
    if x is not None and "tpot_s" in ok and ok["tpot_s"].notna().any():
        panels.append(("tokens", x))
    ncols = 1 if len(panels) == 1 else 2
    fig, axes = new_figure(ncols=ncols, nrows=math.ceil(len(panels) / ncols), squeeze=False)
    flat = list(axes.flat)
    legend: dict[str, Any] = {}
    for ax, panel in zip(flat, panels, strict=False):
        kind, *args = panel
        if kind == "lines":
            _lines(ax, ok, args[0], args[1], [s for s in swept if s != args[1]], legend)
        elif kind == "bars":
            _bars(ax, ok, args[0], swept)
        elif kind == "tokens":
            _tokens_curve(ax, ok, args[0], [s for s in swept if s != args[0]], legend)
        elif kind == "scaling":
            # The lines' legend serves when their series are the same (devices on x).
            shared = x == "devices"
            _scaling(ax, ok, [s for s in swept if s != "devices"], legend if shared else {})
            if not shared:
                _side_legend(ax)
        else:
            _stalls(ax, ok, swept)
            _side_legend(ax)
    for ax in flat[len(panels):]:
        ax.set_axis_off()
    if legend:  # the series first, then what the markers mean
        names = sorted(legend, key=lambda k: k == OOM_LABEL or k.startswith(LARGEST_LABEL))
        handles = [legend[k] for k in names]
        if len(flat) > len(panels):  # an empty panel holds the legend
            flat[-1].legend(handles, names, loc="center", frameon=False)
        else:
            legend_below(fig, handles, names, max_ncol=4)
    fig.suptitle(_title(df, swept))
    return save_figure(fig, path)


def _succeeded(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["error"].isna()] if "error" in df else df


def _side_legend(ax: Any) -> None:
    """A legend of this panel only, beside it (its colours mean something else)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)


def _swept(df: pd.DataFrame) -> list[str]:
    """The knob columns (those before "workload") with more than one value."""
    knobs = list(df.columns[:df.columns.get_loc("workload")]) if "workload" in df else []
    return [c for c in knobs if df[c].nunique(dropna=False) > 1]


def _numeric(values: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(values)) and not pd.api.types.is_bool_dtype(values)


def _x_knob(ok: pd.DataFrame, swept: list[str]) -> str | None:
    """The knob on the x axis: batch, else devices, else the first swept number knob."""
    numbers = [s for s in swept if s != "hardware" and _numeric(ok[s])]
    preferred = [s for s in X_PREFERENCE if s in numbers]
    return (preferred or numbers or [None])[0]


def _series(ok: pd.DataFrame, keys: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """(legend label, rows) per combination of `keys`, in grid order."""
    if not keys:
        return [(str(ok["hardware"].iloc[0]), ok)]
    groups = ok.groupby(keys, sort=False, dropna=False)
    return [(_point_label(dict(zip(keys, k if isinstance(k, tuple) else (k,), strict=True))),
             rows) for k, rows in groups]


def _point_label(values: dict[str, Any]) -> str:
    """ "a100, bf16, devices 8": names as they are, numbers and flags after their knob."""
    parts = [str(v) if isinstance(v, str) else f"{k.replace('_', ' ')} {v}"
             for k, v in values.items()]
    return ", ".join(parts)


def _lines(ax: Any, ok: pd.DataFrame, metric: str, x: str, keys: list[str],
           legend: dict[str, Any]) -> None:
    """`metric` against knob `x`, one line per series; OOM points and the memory limit."""
    for i, (name, rows) in enumerate(_series(ok, keys)):
        rows = rows.sort_values(x, kind="stable")
        color = f"C{i % 10}"
        fits = rows[rows["fits"].astype(bool)]
        (line,) = ax.plot(fits[x], fits[metric].astype(float) * scale(metric), marker="o",
                          ms=3.5, color=color, label=name)
        legend.setdefault(name, line)
        over = rows[~rows["fits"].astype(bool)]
        if not over.empty:
            ax.plot(over[x], [0.03] * len(over), ls="none", marker="x", ms=7, mew=2,
                    color=color, transform=ax.get_xaxis_transform(), clip_on=False)
            legend.setdefault(OOM_LABEL, Line2D([], [], ls="none", marker="x", ms=7, mew=2,
                                                color=NEUTRAL))
        if x == "batch":
            _largest_batch(ax, rows, name, color, legend)
    _x_axis(ax, ok, x)
    _y_axis(ax, ok[ok["fits"].astype(bool)][metric])
    ax.set_ylabel(_metric_label(ok, metric))
    ax.grid(True, which="major", alpha=0.3)


def _tokens_curve(ax: Any, ok: pd.DataFrame, x: str, keys: list[str],
                  legend: dict[str, Any]) -> None:
    """Decoders at the token level: output tokens/s against time per output token, one line
    per series along the swept knob `x` (the throughput-latency curve of LLM serving)."""
    for i, (name, rows) in enumerate(_series(ok, keys)):
        rows = rows[rows["tpot_s"].notna()].sort_values(x, kind="stable")
        (line,) = ax.plot(rows["tpot_s"].astype(float) * 1e3, rows["tokens_per_s"].astype(float),
                          marker="o", ms=3.5, color=f"C{i % 10}", label=name)
        legend.setdefault(name, line)
    ax.set_xlabel("Time per output token (ms)")
    ax.set_ylabel("Output tokens/s")
    ax.grid(True, which="major", alpha=0.3)


def _largest_batch(ax: Any, rows: pd.DataFrame, name: str, color: str,
                   legend: dict[str, Any]) -> None:
    """A dotted line at the series' largest batch that fits, if the sweep crosses it; the
    legend entry lists the values."""
    largest = rows["largest_batch_that_fits"].dropna()
    if largest.empty or not (rows["batch"].min() <= largest.iloc[0] < rows["batch"].max()):
        return
    ax.axvline(float(largest.iloc[0]), color=color, ls=":", lw=1.3)
    old = next((k for k in legend if k.startswith(LARGEST_LABEL)), None)
    entry = f"{name} {largest.iloc[0]:,.0f}"
    if old is None:
        legend[f"{LARGEST_LABEL}: {entry}"] = Line2D([], [], ls=":", lw=1.3, color=NEUTRAL)
    elif entry not in old:
        legend[f"{old}, {entry}"] = legend.pop(old)


def _metric_label(ok: pd.DataFrame, metric: str) -> str:
    """The metric's label; a training point's latency is its step time."""
    if metric == "latency_s" and (ok["mode"] == "train").all():
        return label(metric).replace("Latency", "Step time")
    return label(metric)


def _x_axis(ax: Any, ok: pd.DataFrame, x: str) -> None:
    """Batch and devices on a log-2 axis; another number knob on a log axis (base 2 for
    counts, 10 otherwise) when it spans more than `LOG_X_SPAN`, else linear."""
    values = sorted(v for v in ok[x].dropna().unique() if v > 0)
    span = values[-1] / values[0] if values else 1.0
    counts = pd.api.types.is_integer_dtype(ok[x])
    if values and (x in LOG2_KNOBS or span > LOG_X_SPAN):
        base = 2 if x in LOG2_KNOBS or counts else 10
        ax.set_xscale("log", base=base)
        if len(values) <= 12:
            ax.set_xticks(values)
        else:
            ax.xaxis.set_major_locator(LogLocator(base=base))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.{0 if v >= 1 else 2}f}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_xlabel(label("batch_size") if x == "batch" else _knob_label(x))


def _knob_label(knob: str) -> str:
    """A knob's axis label: the metric's label where one exists, else its name and help."""
    if knob in LABELS:
        return label(knob)
    help_text = KNOBS[knob].help if knob in KNOBS else "model input"
    return f"{knob.replace('_', ' ')} ({help_text})"


def _y_axis(ax: Any, values: pd.Series) -> None:
    positive = values.dropna().astype(float)
    positive = positive[positive > 0]
    if not positive.empty and positive.max() / positive.min() > LOG_Y_SPAN:
        ax.set_yscale("log")


def _bars(ax: Any, ok: pd.DataFrame, metric: str, swept: list[str]) -> None:
    """One bar per point (names swept only); points that do not fit are labelled so."""
    rows = ok.head(MAX_BARS)
    keys = swept or ["hardware"]
    names = [_point_label(dict(zip(keys, r, strict=True)))
             for r in rows[keys].itertuples(index=False)]
    values = rows[metric].astype(float).fillna(0.0) * scale(metric)
    ax.bar(range(len(rows)), values, color=[f"C{i % 10}" for i in range(len(rows))])
    for i, fits in enumerate(rows["fits"].astype(bool)):
        if not fits:
            ax.text(i, 0, OOM_LABEL, rotation=90, ha="center", va="bottom", fontsize=7)
    _tick_names(ax, names, len(ok))
    ax.set_ylabel(_metric_label(ok, metric))


def _tick_names(ax: Any, names: list[str], total: int) -> None:
    ax.set_xticks(range(len(names)), names, rotation=45 if len(names) > 4 else 0,
                  ha="right" if len(names) > 4 else "center", fontsize=7)
    if total > len(names):
        ax.set_title(f"first {len(names)} of {total} points", fontsize=8)


def _scaling(ax: Any, ok: pd.DataFrame, keys: list[str], legend: dict[str, Any]) -> None:
    """Scaling efficiency against device count, per series, with linear scaling at 100%."""
    bases = set()
    for i, (name, rows) in enumerate(_series(ok, keys)):
        rows = rows[rows["throughput_samples_per_s"].notna()].sort_values("devices")
        if rows.empty:
            continue
        n0, t0 = rows["devices"].iloc[0], rows["throughput_samples_per_s"].iloc[0]
        bases.add(int(n0))
        efficiency = (rows["throughput_samples_per_s"] / rows["devices"]) / (t0 / n0) * 100.0
        (line,) = ax.plot(rows["devices"], efficiency, marker="o", ms=3.5, color=f"C{i % 10}",
                          label=name)
        legend.setdefault(name, line)
    ax.axhline(100.0, color="0.5", lw=1, ls="--")
    _x_axis(ax, ok, "devices")
    base = f"{bases.pop()} device" if len(bases) == 1 else "the fewest devices"
    ax.set_ylabel(f"Scaling efficiency vs {base} (%)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)


def _stalls(ax: Any, ok: pd.DataFrame, swept: list[str]) -> None:
    """Stacked bars per training point: each stall's share of the run, and the rest."""
    rows = ok[ok["stall_fetch"].notna()]
    shown = rows.head(MAX_BARS)
    keys = swept or ["hardware"]
    names = [_point_label(dict(zip(keys, r, strict=True)))
             for r in shown[keys].itertuples(index=False)]
    shares = shown[list(STALLS)].astype(float) * 100.0
    shares["rest"] = (100.0 - shares.sum(axis=1)).clip(lower=0.0)
    bottom = pd.Series(0.0, index=shares.index)
    for column, color in zip(shares.columns, STALL_COLORS, strict=True):
        what = ("computing (or other)" if column == "rest"
                else f"{column.removeprefix('stall_')} stall")
        ax.bar(range(len(shown)), shares[column], bottom=bottom, color=color, width=0.8,
               label=what)
        bottom += shares[column]
    _tick_names(ax, names, len(rows))
    ax.set_ylim(0, 100)
    ax.set_ylabel("Share of accelerator run time (%)")


def _title(df: pd.DataFrame, swept: list[str]) -> str:
    ok = _succeeded(df)
    first = ok.iloc[0]
    what = f"{first['workload']} ({first['mode']})"
    fixed = [c for c in ("precision", "software") if c in df and c not in swept]
    extra = ", ".join(str(first[c]) for c in fixed if isinstance(first[c], str))
    failed = len(df) - len(ok)
    return (f"Sweep of {what}" + (f", {extra}" if extra else "")
            + f": {len(df)} points over {', '.join(swept) or 'nothing'}"
            + (f" ({failed} failed, not shown)" if failed else ""))
