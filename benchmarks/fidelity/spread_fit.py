"""The device speed spread (`accelsim.sim.straggler`) against the single-node scaling rows, for
`collective_fidelity.py` (which runs the pipeline and writes one report).

Fit: the spread that turns the pipeline's scaling without it (`no_spread`) into the measured
scaling of a row, (no_spread / measured - 1) / E[max of N standard normals] (the slowest of N
devices runs 1 + spread x E[max] times the nominal step; the 1-device run is unaffected), and
its median over the fit set: robust to the superlinear rows (measured > 1) no model can give.
The value in hw_profiles/efficiency/collectives.toml is the fit on the DGX-2 rows, the only
system with every device count 2, 4, 8 and 16 (so the e_N dependence is constrained), chosen
before seeing the held-out errors. The other folds (fit on one system or model, error on the
rest) are cross-validation: each is re-run through the pipeline with its own fitted spread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from statistics import median

import pandas as pd

from accelsim.profiles.efficiency import load_efficiency
from accelsim.sim.straggler import expected_max

STORED_FOLD = ("system", "dgx-2")
FOLDS = (STORED_FOLD, ("system", "dgx-1"), ("model", "resnet50"), ("model", "bert-large"))


def implied_spread(table: pd.DataFrame) -> pd.Series:
    """Per row, the spread that reproduces its measured scaling (negative if superlinear)."""
    e_max = table["gpus"].map(expected_max)
    return (table["no_spread"] / table["measured"] - 1.0) / e_max


def fit_spread(table: pd.DataFrame, key: str, value: str) -> float:
    """Median implied spread over the rows whose `key` is `value`, floored at 0."""
    return max(float(median(implied_spread(table[table[key] == value]))), 0.0)


def _points(errors: pd.Series) -> str:
    return f"{median(errors.abs()) * 100:.1f}" if len(errors) else "n/a"


def fold_table(table: pd.DataFrame, cases: dict, throughput: Callable[[object], float]
               ) -> pd.DataFrame:
    """One row per fold: its fitted spread, and median |error| in and out of its fit set, from
    the pipeline re-run at that spread."""
    out = []
    for key, value in FOLDS:
        spread = fit_spread(table, key, value)
        pred = [throughput(replace(cases[r.id], spread=spread))
                / (r.gpus * throughput(cases[r.one_gpu_row])) for r in table.itertuples()]
        err = pd.Series(pred, index=table.index) - table["measured"]
        sel = table[key] == value
        out.append({"fit set": f"{key} {value}", "spread": spread, "fit rows": int(sel.sum()),
                    "in-sample": _points(err[sel]), "held-out rows": int((~sel).sum()),
                    "held out": _points(err[~sel])})
    return pd.DataFrame(out)


def leave_one_out(table: pd.DataFrame, cases: dict, throughput: Callable[[object], float],
                  key: str) -> pd.DataFrame:
    """Each row predicted at the spread fitted on the rows of every other `key` value (leave
    one system / model out), pooled: one row per value, and "all" over every row."""
    err = pd.Series(index=table.index, dtype=float)
    spreads = {}
    for value in table[key].unique():
        sel = table[key] == value
        spread = max(float(median(implied_spread(table[~sel]))), 0.0) if (~sel).any() else 0.0
        spreads[value] = spread
        for i, r in zip(table.index[sel], table[sel].itertuples(), strict=True):
            err[i] = (throughput(replace(cases[r.id], spread=spread))
                      / (r.gpus * throughput(cases[r.one_gpu_row]))) - r.measured
    out = [{"held out": f"{key} {v}", "spread fitted on the rest": spreads[v],
            "rows": int((table[key] == v).sum()), "median": _points(err[table[key] == v])}
           for v in spreads]
    out.append({"held out": f"every {key}, pooled", "spread fitted on the rest": float("nan"),
                "rows": len(table), "median": _points(err)})
    return pd.DataFrame(out)


def spread_lines(table: pd.DataFrame, cases: dict, throughput: Callable[[object], float]
                 ) -> list[str]:
    stored = load_efficiency("collectives")["fitted.device_speed_spread.gpu"]
    fitted = fit_spread(table, *STORED_FOLD)
    folds = fold_table(table, cases, throughput)
    out = [f"Stored: `fitted.device_speed_spread.gpu` = {stored} in "
           f"hw_profiles/efficiency/collectives.toml; fitted here on the {STORED_FOLD[0]} "
           f"{STORED_FOLD[1]} rows: {fitted:.4f}.", "",
           "| fit set | fitted spread | fit rows | median abs error in-sample (points) "
           "| held-out rows | median abs error held out (points) |",
           "|---|---|---|---|---|---|"]
    for r in folds.itertuples():
        out.append(f"| {r[1]} | {r.spread:.2%} | {r[3]} | {r[4]} | {r[5]} | {r[6]} |")
    out += ["", "Leave one out (each row predicted at the spread fitted on the rows of the other "
            "systems, or of the other model; held out):", "",
            "| held out | spread fitted on the rest | rows | median abs error (points) |",
            "|---|---|---|---|"]
    for key in ("system", "model"):
        for r in leave_one_out(table, cases, throughput, key).itertuples(index=False):
            spread = "" if r[1] != r[1] else f"{r[1]:.2%}"  # NaN: the pooled row
            out.append(f"| {r[0]} | {spread} | {r[2]} | {r[3]} |")
    return out
