"""Quantisation time lands on the quantized rows only: BERT-base at int8 on the calibrated host
(a stack that prices quantisation by its pass table alone, with no `quantize_int8` figure)
stopped with an internal error, as the NaN of the unpriced rows reached every row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from accelsim.devices.cpu.model import cpu_costs
from accelsim.profiles.devices import load_profile
from accelsim.profiles.software import load_stack
from accelsim.workload.work import gemms_for, work_table
from accelsim.workload.zoo import build_model

CALIB = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "calibrate_host"


def test_rows_that_are_not_quantized_cost_what_they_cost_alone():
    profile = load_profile(CALIB / "host-cpu.toml")
    stack = load_stack(CALIB / "numpy-host.toml")
    assert stack.cpu_factor("quantize", "int8") is None  # the case that failed
    graph = build_model("bert_base")
    work, gemms = work_table(graph, 1, "int8"), gemms_for(graph, 1)
    costs = cpu_costs(profile, work, gemms, "int8", stack).to_frame()
    times = costs[["compute_s", "memory_s", "overhead_s"]].to_numpy(dtype=float)
    assert np.isfinite(times).all() and (times >= 0).all()
    adds = work.index[work["op"] == "add"]
    alone = cpu_costs(profile, work.loc[adds], gemms[gemms["op_index"].isin(adds)], "int8",
                      stack).to_frame()
    assert costs.loc[adds, "compute_s"].to_numpy() == pytest.approx(
        alone["compute_s"].to_numpy(), rel=1e-12)
