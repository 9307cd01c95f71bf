"""The real run beside the prediction: time a workload's numpy kernels here, per layer, and put
the device model's forward-pass estimate for the same batch and precision next to it.

    total, per_layer = measure_beside_prediction(graph, 1, "fp32", "calib/host-cpu.toml",
                                                 "calib/numpy-host.toml")
    # total: {"measured_time_s", "predicted_time_s", "relative_error"}; per_layer: a DataFrame

`describe --execute --time` prints it; `benchmarks/fidelity/calibrate_host.py` records it.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any

import pandas as pd

from accelsim.calibrate.peak import numpy_blas_threads
from accelsim.devices.estimate import estimate
from accelsim.kernels.execute import time_graph
from accelsim.profiles.devices import load_profile
from accelsim.profiles.software import DEFAULT
from accelsim.workload.graph import Graph


def predicted_layers_s(graph: Graph, batch: int, precision: str, hw: str,
                       software: str = DEFAULT) -> pd.Series:
    """The device model's forward time per layer (op name -> s) of `graph` on the device
    profile `hw` (a name or a TOML path) under `software` (a name or a stack file)."""
    est = estimate(graph, load_profile(hw), batch, precision, software=software)
    fwd = est.layers[est.layers["phase"] == "forward"]
    return fwd.groupby("name", sort=False)["time_s"].sum()


def measure_beside_prediction(graph: Graph, batch: int, precision: str, hw: str | None = None,
                              software: str = DEFAULT, repeats: int = 1, cpu_time: bool = False
                              ) -> tuple[dict[str, Any], pd.DataFrame]:
    """({measured_time_s, predicted_time_s, relative_error (predicted / measured - 1)},
    per layer: name, measured_time_s, predicted_time_s). The measured time is each op's least
    over `repeats` forward passes, summed (`time_graph`), by the wall clock or with `cpu_time`
    the process's CPU time with numpy's BLAS on one thread (as `accelsim calibrate
    --cpu-time`); without `hw` nothing is predicted (None)."""
    clock = time.process_time if cpu_time else time.perf_counter
    # NB: CPU time is the kernels' time alone only on one thread (as calibrate times by it)
    with numpy_blas_threads(1) if cpu_time else nullcontext():
        times = time_graph(graph, batch, precision, repeats=repeats, clock=clock)
    measured = pd.Series(times, name="measured_time_s")
    frame = measured.rename_axis("name").reset_index()
    total: dict[str, Any] = {"measured_time_s": float(measured.sum()),
                             "predicted_time_s": None, "relative_error": None}
    if hw is not None:
        predicted = predicted_layers_s(graph, batch, precision, hw, software)
        frame["predicted_time_s"] = frame["name"].map(predicted)
        total["predicted_time_s"] = float(predicted.sum())
        total["relative_error"] = total["predicted_time_s"] / total["measured_time_s"] - 1.0
    return total, frame
