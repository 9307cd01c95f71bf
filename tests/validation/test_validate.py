"""accelsim validate: the example measurements file predicted as `simulate` predicts them, bad
rows listed (never a crash), a malformed file in one line, and a fit whose calibrated stack
reproduces the fit."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from accelsim.cli import main
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config
from accelsim.validation.measurements import read_measurements
from accelsim.validation.run import fit_rows, predict_rows, write_calibrated
from tests.helpers import paths

EXAMPLE = paths.WORKLOADS / "validate-example.csv"
REFERENCE = paths.REFERENCE / "calibration_measurements.csv"


def test_example_rows_come_from_the_calibration_file() -> None:
    reference = {r["id"]: r for r in csv.DictReader(REFERENCE.open(encoding="utf-8"))}
    for r in csv.DictReader(EXAMPLE.open(encoding="utf-8")):
        assert float(r["value"]) == float(reference[r["id"]]["value"])


def _simulated(row: dict) -> float:
    """The value `accelsim simulate` gives for a row's options (train: the device step)."""
    knobs = {"mode": row["mode"], "batch": int(row["batch"]), "precision": row["precision"],
             "software": row["software"]}
    if row["mode"] == "train":
        knobs["optimizer"] = "momentum"
    rec = run_simulation(make_config(row["model"], row["profile"], **knobs),
                         detail=False).record
    if row["mode"] == "train":
        rec = rec["device_only"]
    return rec["throughput_samples_per_s"] if row["metric"] == "throughput" \
        else rec["latency_s"] * 1e3


@pytest.mark.slow
def test_validate_predicts_the_example_as_simulate_does() -> None:
    rows, rejected = read_measurements(EXAMPLE)
    table, failed = predict_rows(rows)
    assert not failed and len(table) == len(rows) >= 10
    assert [i for i, _ in rejected] == ["DLE-PT-RN50-015"]  # a p99 row: no percentile model
    picks = table.drop_duplicates(["mode", "metric"]).to_dict(orient="records")
    assert {(r["mode"], r["metric"]) for r in picks} >= {("train", "throughput"),
                                                         ("infer", "latency")}
    for r in picks:
        assert r["predicted"] == pytest.approx(_simulated(r), rel=1e-9), r["id"]
    np.testing.assert_allclose(table["error"], table["predicted"] / table["measured"] - 1)


def test_bad_rows_are_listed_with_their_reason(tmp_path: Path,
                                               capsys: pytest.CaptureFixture) -> None:
    head = "id,value,sim_profile,sim_software,sim_model,sim_mode,sim_batch,sim_precision," \
           "sim_metric\n"
    good = "ok,10,dgx-1,pytorch-eager,resnet50,infer,1,fp32,latency\n"
    bad = ("nan,abc,dgx-1,pytorch-eager,resnet50,infer,1,fp32,latency\n"
           "hw,10,nosuch-gpu,pytorch-eager,resnet50,infer,1,fp32,latency\n"
           "batch,10,dgx-1,pytorch-eager,resnet50,infer,0,fp32,latency\n"
           "model,10,dgx-1,pytorch-eager,nosuch-model,infer,1,fp32,latency\n"
           "prec,10,tpu-v1,default,resnet50,infer,1,bf16,latency\n"
           "nobatch,10,dgx-1,pytorch-eager,resnet50,infer,,fp32,latency\n"
           "hugebatch,10,dgx-1,pytorch-eager,resnet50,infer,99999999999999,fp32,latency\n")
    path = tmp_path / "m.csv"
    path.write_text(head + good + bad)
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1 rows predicted" in out and "7 rows not expressed" in out
    for name, reason in (("nan", "'abc'"), ("hw", "nosuch-gpu"), ("batch", ">= 1"),
                         ("model", "nosuch-model"), ("prec", "bf16"), ("nobatch", "empty"),
                         ("hugebatch", "<= 1,048,576")):
        assert any(line.strip().startswith(f"{name}:") and reason in line
                   for line in out.splitlines()), name


@pytest.mark.parametrize("content", ["a,b\n1,2\n", "\x00\xff"])
def test_a_malformed_file_gives_one_line(tmp_path: Path, capsys: pytest.CaptureFixture,
                                         content: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(content.encode("latin-1"))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and "Traceback" not in err


def test_fit_reports_held_out_error_and_its_stack_reproduces_the_fit(tmp_path: Path) -> None:
    rows, _ = read_measurements(EXAMPLE)
    result = fit_rows(rows, folds=4)
    assert result.rows == len(rows) and result.folds == 4
    assert result.held_out["rows"] == len(rows)  # every row predicted once, held out
    assert result.in_sample["median_abs_error"] <= result.held_out["median_abs_error"] + 1e-9
    (path,) = write_calibrated(result, tmp_path, EXAMPLE.name)
    # the calibrated stack, used as any stack file, gives the fit's in-sample error
    table, failed = predict_rows([_with_stack(r, str(path)) for r in rows])
    assert not failed
    median = float(np.median(np.abs(table["error"])))
    assert median == pytest.approx(result.in_sample["median_abs_error"], abs=0.005)


def _with_stack(row, stack: str):  # noqa: ANN001, ANN202
    from dataclasses import replace

    return replace(row, stack=stack)


def test_leave_one_device_out_holds_out_each_device_once() -> None:
    rows, _ = read_measurements(EXAMPLE)
    result = fit_rows(rows, by_device=True)
    assert result.folds == len({r.device for r in rows}) == 2  # a100 and v100
    assert result.held_out["rows"] == len(rows)
