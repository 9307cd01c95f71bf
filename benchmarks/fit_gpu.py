"""Fit the [fitted] factors of hw_profiles/efficiency/gpu.toml on a NAMED subset of
calibration_measurements.csv: the V100 ResNet-50 inference rows (`fidelity.in_fit_set`).

Run: python benchmarks/fit_gpu.py [--write]   (--write puts the values into gpu.toml)

Method (numpy only, deterministic): each fit row's cost columns are computed once with every
fitted factor at 1 and no host overhead; the step time for any factor set is then recombined
exactly as gpu.py does (compute / efficiency, memory / bandwidth efficiency, launch gaps, host
overhead not hidden by the kernel), and coordinate descent over fixed grids minimises the sum of
squared log errors. NB: the power cap is left out of the fit (no fit row is power-bound; the
fidelity run checks).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from accelsim.devices.efficiency import load_efficiency
from accelsim.devices.gpu import gpu_costs
from accelsim.devices.profile import load_profile
from accelsim.workload.work import gemms_for, work_table
from accelsim.workload.zoo import build_model

_spec = importlib.util.spec_from_file_location("fidelity", Path(__file__).with_name("fidelity.py"))
fidelity = importlib.util.module_from_spec(_spec)
sys.modules["fidelity"] = fidelity
_spec.loader.exec_module(fidelity)

GPU_TOML = Path(__file__).resolve().parent.parent / "hw_profiles" / "efficiency" / "gpu.toml"
GRIDS = {
    "tensor_core_efficiency": np.round(np.arange(0.30, 1.0001, 0.01), 2),
    "cuda_core_efficiency": np.round(np.arange(0.30, 1.0001, 0.01), 2),
    "dram_bandwidth_efficiency": np.round(np.arange(0.40, 1.0001, 0.01), 2),
    "eager_host_overhead_per_kernel_s": np.round(np.arange(5e-6, 150e-6, 1e-6), 7),
}


def _parts(case: fidelity.Case) -> dict[str, np.ndarray]:
    """Cost columns of one case with unit efficiencies and no host overhead."""
    eff = load_efficiency("gpu")
    saved = dict(eff)
    try:
        for name in GRIDS:
            eff[f"fitted.{name}"] = 1.0
        eff["fitted.eager_host_overhead_per_kernel_s"] = 0.0
        knobs = {} if case.seq_len is None else {"seq_len": case.seq_len}
        graph = build_model(case.model, **knobs)
        work = work_table(graph, case.batch, case.precision, case.mode, case.optimizer)
        costs = gpu_costs(load_profile(case.device), work, gemms_for(graph, case.batch),
                          case.precision, "eager")
    finally:
        eff.update(saved)
    launch_s = eff["assumed.kernel_launch_s"]
    return {"tensor": np.where(costs["unit"] == "tensor_core", costs["compute_s"], 0.0),
            "cuda": np.where(costs["unit"] != "tensor_core", costs["compute_s"], 0.0),
            "memory": costs["memory_s"].to_numpy(), "kernels": costs["kernels"].to_numpy(),
            "launch": costs["kernels"].to_numpy() * launch_s}


def step_time_s(parts: dict[str, np.ndarray], p: dict[str, float]) -> float:
    busy = np.maximum(parts["tensor"] / p["tensor_core_efficiency"]
                      + parts["cuda"] / p["cuda_core_efficiency"],
                      parts["memory"] / p["dram_bandwidth_efficiency"])
    host = parts["kernels"] * p["eager_host_overhead_per_kernel_s"]
    return float(np.sum(busy + parts["launch"] + np.maximum(host - busy, 0.0)))


def fit_rows() -> list[tuple[str, fidelity.Case, float, dict[str, np.ndarray]]]:
    rows = []
    for _, row in pd.read_csv(fidelity.CSV).iterrows():
        if fidelity.in_fit_set(row):
            case = fidelity.case_for(row)
            rows.append((row["id"], case, float(row["value"]), _parts(case)))
    return rows


def loss(rows: list, p: dict[str, float]) -> float:
    total = 0.0
    for _, case, measured, parts in rows:
        t = step_time_s(parts, p)
        pred = t * 1e3 if case.metric == "latency" else case.batch / t
        total += np.log(pred / measured) ** 2
    return total


def fit(rows: list) -> dict[str, float]:
    eff = load_efficiency("gpu")
    # Start at the grid point nearest the current value (so a fit is reproducible from it).
    p = {name: float(grid[np.argmin(np.abs(grid - eff[f"fitted.{name}"]))])
         for name, grid in GRIDS.items()}
    best = loss(rows, p)
    for _ in range(20):
        improved = False
        for name, grid in GRIDS.items():
            for value in grid:
                trial = {**p, name: float(value)}
                err = loss(rows, trial)
                if err < best - 1e-12:
                    best, p, improved = err, trial, True
        if not improved:
            break
    return p


def write_toml(p: dict[str, float]) -> None:
    text = GPU_TOML.read_text(encoding="utf-8")
    for name, value in p.items():
        text = re.sub(rf"(?m)^{name} = .*$", f"{name} = {value:.3g}", text)
    GPU_TOML.write_text(text, encoding="utf-8")


def main(argv: list[str]) -> None:
    rows = fit_rows()
    p = fit(rows)
    print(f"fit set: {fidelity.FIT_SET_NAME}, {len(rows)} rows: "
          f"{', '.join(r[0] for r in rows)}")
    for name, value in p.items():
        print(f"{name} = {value:.3g}")
    errors = []
    for _, case, measured, parts in rows:
        t = step_time_s(parts, p)
        errors.append((t * 1e3 if case.metric == "latency" else case.batch / t) / measured - 1)
    print(f"median abs error on the fit set: {np.median(np.abs(errors)):.1%}, "
          f"worst {max(np.abs(errors)):.1%}")
    if "--write" in argv:
        write_toml(p)
        print(f"wrote {GPU_TOML}")


if __name__ == "__main__":
    main(sys.argv[1:])
