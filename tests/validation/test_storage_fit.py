"""The storage-class fit (`accelsim.calibrate.storage_fit`): every MLPerf Storage row of the
calibration file names a system described in hw_profiles/storage_systems/, and the fit
recovers the counts that known class costs produce (rows made from the closed form)."""

from __future__ import annotations

import math
from dataclasses import replace

from accelsim.calibrate.storage_fit import (
    class_of,
    fit,
    mlperf_storage_rows,
    row_error,
    system_of,
)
from accelsim.profiles.emulation import load_emulation
from accelsim.profiles.storage_systems import available_storage_systems, load_fs_class
from accelsim.sim.storage_system.sizing import closed_form
from tests.helpers.paths import REFERENCE


def test_every_mlperf_storage_row_has_its_system() -> None:
    rows = mlperf_storage_rows(REFERENCE / "calibration_measurements.csv")
    assert len(rows) == 42
    assert {r.system for r in rows} <= set(available_storage_systems())
    assert {r.submitter for r in rows} == {"DDN", "HPE", "MangoBoost", "Micron"}
    for r in rows:
        assert system_of(r).clients.hosts == r.hosts
        # DLIO's MB/s is MiB/s: the row's throughput is about N accelerators' demand at AU.
        assert r.throughput_bytes_per_s > 0


def test_the_fit_recovers_counts_made_by_known_costs() -> None:
    real = mlperf_storage_rows(REFERENCE / "calibration_measurements.csv")
    micron = [r for r in real if r.submitter == "Micron"][:6]
    truth = replace(load_fs_class("local"), drive_read_efficiency=0.6)
    made = []
    for r in micron:
        n = closed_form(load_emulation(r.accelerator, r.workload),
                        system_of(r, truth))["accelerators"]
        made.append(replace(r, accelerators=max(math.floor(n), 1)))
    fitted = fit(made, {"local": load_fs_class("local")})["local"]
    assert {class_of(r) for r in made} == {"local"}
    for r in made:
        # Inside [n, n + 1) means |log(count / (n + 1/2))| < log((n + 1) / (n + 1/2)).
        assert abs(row_error(r, fitted)) <= math.log((r.accelerators + 1) /
                                                     (r.accelerators + 0.5)) + 0.05
    assert abs(fitted.drive_read_efficiency - 0.6) < 0.1
