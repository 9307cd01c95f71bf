"""Guard of the GPU + software-stack fit (benchmarks/fit_stacks.py): with the factors as loaded
from hw_profiles/, the cost model's median error on the calibration set (the single-GPU rows of
calibration_measurements.csv, accelsim/calibrate/calibration_rows.py) may not grow more than 2
points beyond the value recorded by benchmarks/fidelity/cross_validation.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from accelsim.calibrate.calibration_rows import calibration_rows
from accelsim.devices.estimate import estimate
from accelsim.profiles.devices import load_profile
from accelsim.profiles.hardware import host_clock_hz
from accelsim.profiles.systems import load_system
from accelsim.workload.zoo import build_model
from tests.helpers.paths import BENCHMARKS, REFERENCE

RECORDED = BENCHMARKS / "results" / "cross_validation.json"
SLACK = 0.02  # two points of median |error|


@pytest.mark.slow
def test_calibration_set_error_does_not_grow_beyond_the_recorded_fit() -> None:
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))["in_sample"]["all"]
    rows = calibration_rows(REFERENCE / "calibration_measurements.csv")
    assert len(rows) == recorded["rows"]
    step_s: dict[tuple, float] = {}
    errors = []
    for r in rows:
        if r.case not in step_s:
            knobs = {} if r.seq_len is None else {"seq_len": r.seq_len}
            est = estimate(build_model(r.model, **knobs), load_profile(r.device), r.batch,
                           r.precision, r.mode, r.stack, r.optimizer,
                           host_clock_hz(load_system(r.system)))
            opt_s = est.phase_time_s("optimizer") if r.mode == "train" else 0.0
            step_s[r.case] = est.step_time_s - opt_s + opt_s / r.accumulation_steps
        t = step_s[r.case]
        predicted = t * 1e3 if r.metric == "latency" else r.batch / t
        errors.append(abs(predicted / r.measured - 1.0))
    median = float(np.median(errors))
    assert median <= recorded["median_abs_error"] + SLACK, (
        f"calibration-set median |error| {median:.1%} vs recorded "
        f"{recorded['median_abs_error']:.1%}")
