"""The Python API's DataFrames fit for notebooks (issue 23 item 5): `compare()` and `sweep()`
drop the columns that are None in every row (`all_columns=True` keeps them), number columns
are numeric with NaN for a figure that does not apply, and a `Result` renders as HTML."""

from __future__ import annotations

import html
import math

import pandas as pd

import accelsim
from accelsim.explore.compare import COLUMNS
from accelsim.results.summary import LLM_METRICS, NUMBER_COLUMNS, notebook_frame


def _object_columns_hold_no_numbers(frame: pd.DataFrame) -> None:
    for name in frame.select_dtypes(include=["object"], exclude=["str"]).columns:
        values = frame[name].dropna()
        assert name not in NUMBER_COLUMNS, name
        assert not len(values) or not all(isinstance(v, int | float) and not isinstance(v, bool)
                                          for v in values), name


def test_compare_drops_all_none_columns_and_all_columns_keeps_them() -> None:
    frame = accelsim.compare("resnet50", hw="a100,t4", batch=8)
    assert not any(frame[c].isna().all() for c in frame.columns)
    assert not set(LLM_METRICS) & set(frame.columns)  # a CNN has no token figures
    assert {"throughput_samples_per_s", "latency_s", "fits"} <= set(frame.columns)
    full = accelsim.compare("resnet50", hw="a100,t4", batch=8, all_columns=True)
    assert list(full.columns) == list(COLUMNS)
    _object_columns_hold_no_numbers(full)


def test_sweep_numbers_are_numeric_with_nan_where_missing() -> None:
    frame = accelsim.sweep("resnet50", hw="t4", batch=[1, 4096], precision="fp16")
    tput = frame["throughput_samples_per_s"]
    assert tput.dtype == "float64" and tput.iloc[0] > 0 and math.isnan(tput.iloc[1])
    assert (tput * 2).notna().sum() == 1  # arithmetic works, NaN where it does not fit
    assert frame["fits"].tolist() == [True, False]
    assert "error" in frame.columns and frame["error"].isna().all()  # error always a column
    assert frame.attrs["swept"] == ["batch"]
    _object_columns_hold_no_numbers(frame)
    assert "ttft_s" in accelsim.sweep("resnet50", hw="t4", batch=1, all_columns=True)


def test_notebook_frame_rules() -> None:
    raw = pd.DataFrame({"a": [1, None], "b": [None, None], "c": ["x", None],
                        "d": [True, None], "error": [None, None]})
    out = notebook_frame(raw, keep=("error",))
    assert list(out.columns) == ["a", "c", "d", "error"]
    assert out["a"].dtype == "float64" and math.isnan(out["a"].iloc[1])
    assert out["d"].dtype == object  # a bool column stays as it is
    assert list(notebook_frame(raw, all_columns=True).columns) == list(raw.columns)


def test_result_has_an_html_summary() -> None:
    r = accelsim.simulate("resnet50", hw="tpu-v3", batch=8, precision="fp32")
    page = r._repr_html_()
    assert page.startswith("<div>") and "<table>" in page and page.endswith("</div>")
    assert "&lt;Result resnet50" in page  # the repr, escaped
    assert "throughput_samples_per_s" in page and "ttft_s" not in page  # None left out
    assert f"{r.throughput_samples_per_s:.4g}" in page
    assert r.notes and all(f"<li>{html.escape(n)}</li>" in page for n in r.notes)
