"""The Python API for notebooks and scripts: `simulate`, `compare` and `sweep`.

    >>> import accelsim
    >>> r = accelsim.simulate("resnet50", hw="a100", batch=64, precision="bf16")
    >>> r.fits, r.throughput_samples_per_s > 1000, r.layers.shape[0] > 100
    (True, True, True)
    >>> sorted(r.to_dict())[:3]
    ['average_power_w', 'bottleneck', 'bottleneck_detail']

Every keyword is a knob of `accelsim.sim.knobs.KNOBS` (batch, precision, mode, devices,
prep_workers, steps, rate, ...) or one of the model's input knobs (image_size, seq_len, ...);
a knob that does not apply to the run's mode is an error, never ignored. Bad input raises
`accelsim.errors.AccelsimError` with one line saying what is wrong, a wrong type included (a
number, None or a list where a name is expected); a `pathlib.Path` is taken wherever a path is
(a workload or profile .toml, an ONNX model, a report's `out`).

    >>> simulate(None, hw="a100")
    Traceback (most recent call last):
    ...
    accelsim.errors.AccelsimError: workload: give a zoo model or scenario name, ... not None
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from accelsim.arguments import flag, out_path
from accelsim.arguments import name_or_path as _name_or_path
from accelsim.errors import AccelsimError
from accelsim.results.headline import Headline
from accelsim.results.summary import flat_row, notebook_frame
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config
from accelsim.workload.scenario import Scenario

_HTML_SKIP = ("notes", "error")  # the notes are listed under the table; a Result has no error


def _workload(workload: Any) -> str | Scenario:
    if isinstance(workload, Scenario):
        return workload
    return _name_or_path(workload, "workload", "a zoo model or scenario name, a file path or "
                         "a Scenario")


def _hardware(hw: Any, many: bool) -> str | list[str]:
    """`hw` as a name or path; with `many`, a list or tuple of them too."""
    expected = "a system or device profile name or a .toml path"
    if many and isinstance(hw, list | tuple):
        if not hw:
            raise AccelsimError("hw: give at least one system or device profile")
        return [_name_or_path(h, f"hw[{i}]", expected) for i, h in enumerate(hw)]
    return _name_or_path(hw, "hw", expected + (" (or a list of them)" if many else ""))


@dataclass
class Result:
    """One simulation: `record` (JSON-ready dict, what `accelsim simulate --json` prints) and
    `events` (the flat event DataFrame: one row per read, transfer, kernel, stall, batch)."""

    record: dict[str, Any]
    events: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """A deep copy of the record (safe to modify)."""
        return copy.deepcopy(self.record)

    @property
    def layers(self) -> pd.DataFrame:
        """Per-layer rows (op x phase): flops, bytes, time_s, energy_j, bound, ..."""
        return pd.DataFrame(self.record["layers"])

    @property
    def summary(self) -> dict[str, Any]:
        """The flat row compare and sweep tables are made of (`accelsim.results.summary`)."""
        return flat_row(self.record)

    @property
    def headline(self) -> Headline:
        """The summary figures, typed (`accelsim.results.headline`)."""
        return Headline.of(self.record)

    @property
    def fits(self) -> bool:
        return self.headline.memory.fits

    @property
    def throughput_samples_per_s(self) -> float | None:
        return self.headline.figures.throughput_samples_per_s

    @property
    def latency_s(self) -> float | None:
        return self.headline.figures.latency_s

    @property
    def energy_j_per_sample(self) -> float | None:
        return self.headline.figures.energy_j_per_sample

    @property
    def bottleneck(self) -> str:
        return self.headline.figures.bottleneck

    @property
    def notes(self) -> list[str]:
        return list(self.record.get("notes", []))

    def write_trace(self, path: str | Path) -> Path:
        """Write the events as a Chrome/Perfetto trace (JSON); returns the path."""
        from accelsim.results.trace import write_chrome_trace

        return write_chrome_trace(self.events, out_path(path, "path", "a file path for the "
                                                        "trace"))

    def _repr_html_(self) -> str:
        """A notebook's summary: the one-line repr, then a table of every figure the run has
        (names with their units, as the flat row of `summary`), then the notes."""
        import html

        s = self.summary
        cells = []
        for name, value in s.items():
            if value is None or name in _HTML_SKIP:
                continue
            shown = (f"{value:.4g}" if isinstance(value, float)
                     else f"{value:,}" if isinstance(value, int) and not isinstance(value, bool)
                     else str(value))
            cells.append(f"<tr><th style=\"text-align:left\">{html.escape(name)}</th>"
                         f"<td style=\"text-align:right\">{html.escape(shown)}</td></tr>")
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return (f"<div><p><b>{html.escape(repr(self))}</b></p><table>{''.join(cells)}</table>"
                + (f"<ul>{notes}</ul>" if notes else "") + "</div>")

    def __repr__(self) -> str:
        s = self.summary
        tput = s["throughput_samples_per_s"]
        what = ("does not fit" if not s["fits"]
                else f"{_tokens_text(self.headline)}{tput:,.1f} samples/s, "
                     f"bottleneck {s['bottleneck']}")
        return (f"<Result {s['workload']} {s['mode']} batch {s['batch_size']} {s['precision']} "
                f"on {s['device']}: {what}>")


def _tokens_text(head: Headline) -> str:
    """A decoder's token figures first ("TTFT 35.4 ms, TPOT 23.90 ms, 106 tokens/s; "), as its
    users read them; "" for other runs."""
    from accelsim.results.render import duration_text

    t = head.tokens
    if t is None or t.tokens_per_s is None:
        return ""
    ttft = t.ttft_s if t.ttft_s is not None else t.ttft_p50_s
    tpot = t.tpot_s if t.tpot_s is not None else t.tpot_p50_s
    p50 = " p50" if t.ttft_s is None and t.ttft_p50_s is not None else ""
    parts = ([f"TTFT{p50} {duration_text(ttft, 1)}"] if ttft is not None else []) + (
        [f"TPOT{p50} {duration_text(tpot, 2)}"] if tpot is not None else [])
    return ", ".join(parts + [f"{t.tokens_per_s:,.0f} tokens/s"]) + "; "


def simulate(workload: str | Path | Scenario, hw: str | Path, execute: bool = False,
             **knobs: Any) -> Result:
    """Simulate `workload` (zoo model, scenario name, .toml path or `Scenario`) on `hw` (a
    system or device profile name, or a .toml path), with knobs as keywords. `execute`
    (inference): also run the kernels, as `simulate --execute` (`accelsim.sim.execution`).

    >>> r = simulate("resnet50-train", hw="dgx-a100", steps=20, prep_workers=4)
    >>> r.record["devices"], 0 < r.record["accelerator_utilization"] <= 1
    (8, True)
    >>> simulate("llama2_7b", hw="t4", batch=8).fits
    False
    """
    flag(execute, "execute")
    cfg = make_config(_workload(workload), _hardware(hw, many=False), **knobs)
    if execute:
        from dataclasses import replace

        cfg = replace(cfg, execute=True)
    res = run_simulation(cfg)
    return Result(res.record, res.records)


def compare(workload: str | Path | Scenario, hw: str | Path | Sequence[str | Path],
            all_columns: bool = False, **knobs: Any) -> pd.DataFrame:
    """One row per hardware in `hw` (a list, or names separated by commas) with the same
    knobs: throughput, latency, energy per sample, performance per watt, memory fit,
    bottleneck, and the precision and software each device really used. A device that cannot
    run the precision asked for runs the closest one it can, and its `notes` say so
    (`fallback=False` leaves it out instead); when every device is left out, it raises (as
    the CLI does). See `accelsim.explore.compare.compare`.
    Columns that are None in every row are dropped (`all_columns=True` keeps them, as the
    CLI's --csv does); number columns are numeric, NaN where a figure does not apply.

    >>> df = compare("resnet50", hw="a100,edge-tpu", precision="fp16", batch=8)
    >>> df[["hardware", "precision_requested", "precision"]].values.tolist()
    [['a100', 'fp16', 'fp16'], ['edge-tpu', 'fp16', 'int8']]
    >>> bool(df.loc[0, "throughput_samples_per_s"] > df.loc[1, "throughput_samples_per_s"])
    True
    """
    from accelsim.explore.compare import compare as _compare

    _flags(knobs, all_columns)
    df = _compare(_workload(workload), _hardware(hw, many=True), **knobs)
    if len(df) and df["error"].notna().all():
        raise AccelsimError(f"every one of the {len(df)} devices was left out; the first: "
                            f"{df['hardware'].iloc[0]}: {df['error'].iloc[0]}")
    return notebook_frame(df, all_columns)


def sweep(workload: str | Path | Scenario, hw: str | Path | Sequence[str | Path],
          all_columns: bool = False, **knobs: Any) -> pd.DataFrame:
    """The cartesian grid of every knob given as a list (and of `hw` when it is a list), one
    row per point, the knobs as columns. Keywords `workers` (processes), `scheduler` (a Dask
    address), `resume` (a SQLite file) and `progress` choose how it runs; the rows are the
    same whichever way. A point that fails has its message in `error` (always a column); a
    device that lacks the precision asked for runs the closest one, as in `compare`
    (`fallback=False`: the point fails). Columns that are None in every row are dropped
    (`all_columns=True` keeps them); number columns are numeric, NaN where a figure does not
    apply. When every point fails, it raises the first point's error (as the CLI does). See
    `accelsim.explore.run.sweep`.

    >>> df = sweep("resnet50", hw="t4", batch=[1, 4096], precision="fp16")
    >>> df[["batch", "fits", "largest_batch_that_fits"]].values.tolist()
    [[1, True, 3311], [4096, False, 3311]]
    """
    from accelsim.explore.run import sweep as _sweep

    _flags(knobs, all_columns, "progress")
    if knobs.get("resume") is not None:
        knobs["resume"] = out_path(knobs["resume"], "resume", "a SQLite file path")
    df = _sweep(_workload(workload), _hardware(hw, many=True), **knobs)
    if len(df) and df["error"].notna().all():
        raise AccelsimError(f"all {len(df)} points failed; the first: {df['error'].iloc[0]}")
    return notebook_frame(df, all_columns, keep=("error",))


def _flags(knobs: dict[str, Any], all_columns: Any, *optional: str) -> None:
    """Check `all_columns` and the true-or-false keywords (`fallback`, and `optional` ones,
    which take None) in place: 1 or "no" is not taken for a flag; `fallback` None is unset."""
    flag(all_columns, "all_columns")
    if "fallback" in knobs and knobs["fallback"] is None:
        del knobs["fallback"]
    if "fallback" in knobs:
        flag(knobs["fallback"], "fallback")
    for name in optional:
        flag(knobs.get(name), name, optional=True)


def write_report(workload: str | Path | Scenario, hw: str | Path, out: str | Path | None = None,
                 **knobs: Any) -> Path:
    """Simulate and write one self-contained HTML report (figures embedded, no network) to
    `out` (default `<workload>-<hw>.html` here); returns its path. See `accelsim.report`."""
    from accelsim.report import report

    if out is not None:
        out = out_path(out, "out", "a file path for the HTML page")
    workload, hw = _workload(workload), _hardware(hw, many=False)
    make_config(workload, hw, **knobs)  # bad knobs (a misspelt one set to None too) fail here
    return report(workload, hw, out=out, **knobs)
