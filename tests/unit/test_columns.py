"""The work table's array form (`accelsim.workload.columns`) and the class models that read it:
the same numbers from a DataFrame and from its columns, read-only arrays, and a class written
against pandas still given DataFrames."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from accelsim.devices import registry
from accelsim.devices.estimate import estimate
from accelsim.devices.gpu.model import gpu_costs
from accelsim.profiles.devices import load_profile
from accelsim.profiles.software import builtin_stacks
from accelsim.workload.columns import Columns, is_in
from accelsim.workload.work import gemm_columns, gemms_for, work_columns, work_table
from accelsim.workload.zoo import build_model


def test_columns_of_a_frame_hold_its_values_in_order_and_cannot_be_written() -> None:
    frame = pd.DataFrame({"name": ["a", "b", "c"], "flops": [1.0, 2.0, 3.0],
                          "inputs": [(), (0,), (0, 1)]}, index=[7, 8, 9])
    cols = Columns.of(frame)
    assert cols.columns == ("name", "flops", "inputs") and len(cols) == 3
    assert cols["flops"].tolist() == [1.0, 2.0, 3.0]
    assert list(cols["inputs"]) == [(), (0,), (0, 1)]
    with pytest.raises(ValueError, match="read-only"):
        cols["flops"][0] = 5.0
    assert frame["flops"].iloc[0] == 1.0
    back = cols.to_frame()
    assert back["name"].tolist() == ["a", "b", "c"] and back.index.tolist() == [0, 1, 2]
    assert cols.take(np.array([False, True, True]))["name"].tolist() == ["b", "c"]
    assert cols.assign(flops=[4.0, 5.0, 6.0]).columns == cols.columns  # replaced in place


def test_a_table_of_ragged_columns_is_refused() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        Columns({"a": [1, 2], "b": [1, 2, 3]})


def test_is_in_matches_pandas_isin() -> None:
    ops = np.array(["conv2d", "relu", "add", "conv2d", "linear"], dtype=object)
    names = frozenset({"conv2d", "linear"})
    assert is_in(ops, names).tolist() == pd.Series(ops).isin(names).tolist()


def test_the_gpu_model_gives_the_same_costs_from_a_frame_and_from_its_columns() -> None:
    graph, a100 = build_model("resnet18"), load_profile("a100")
    stack = builtin_stacks()["pytorch-eager"]
    for precision in ("fp16", "fp32"):  # fp32: the tf32 rows and Winograd paths too
        from_frame = gpu_costs(a100, work_table(graph, 4, precision, "train"),
                               gemms_for(graph, 4), precision, stack)
        cols = gpu_costs(a100, work_columns(graph, 4, precision, "train"),
                         gemm_columns(graph, 4), precision, stack)
        assert from_frame.columns == cols.columns
        for name in cols:
            assert np.array_equal(from_frame[name], cols[name]), name


def test_a_class_written_against_pandas_is_given_dataframes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[type] = []
    real = registry.get("gpu")

    def pandas_model(profile, work, gemms, precision, software):  # noqa: ANN001, ANN202
        seen.append(type(work))
        seen.append(type(gemms))
        return real.model(profile, work, gemms, precision, software)

    for reads_arrays, kind in ((False, pd.DataFrame), (True, Columns)):
        seen.clear()
        monkeypatch.setitem(registry.CLASSES, "gpu", dataclasses.replace(
            real, model=pandas_model, reads_arrays=reads_arrays))
        estimate(build_model("resnet18"), load_profile("a100"), 2, "fp16")
        assert seen == [kind, kind]
