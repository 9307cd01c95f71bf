"""`accelsim sweep`: the grid, its rows against separate simulations, failures, workers, a
Dask cluster on loopback, the resume store (SIGKILL a running sweep, then resume), figures."""

from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

import accelsim
from accelsim.cli import main
from accelsim.errors import AccelsimError
from accelsim.explore import run as sweep_run
from accelsim.explore.grid import expand_axis, make_grid
from accelsim.explore.run import sweep
from accelsim.explore.store import ResumeStore
from accelsim.results.summary import ROW_COLUMNS
from tests.helpers.paths import ROOT

SMALL = {"batch": [1, 8, 64], "precision": ["fp16", "fp32"]}  # 2 hw x 3 x 2 = 12 points
HW = ["a100", "t4"]


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _same(a: object, b: object) -> bool:
    return (_missing(a) and _missing(b)) or a == b


@pytest.fixture(scope="module")
def serial() -> pd.DataFrame:
    return sweep("mlp", HW, **SMALL)


def test_rows_equal_separate_simulations(serial: pd.DataFrame) -> None:
    assert list(serial.columns[:3]) == ["hardware", "batch", "precision"]
    assert set(ROW_COLUMNS) <= set(serial.columns)
    for _, row in serial.iterrows():
        alone = accelsim.simulate("mlp", hw=row["hardware"], batch=row["batch"],
                                  precision=row["precision"]).summary
        assert alone["batch_size"] == row["batch"]
        for column in ROW_COLUMNS:
            assert _same(row[column], alone[column]), (column, row[column], alone[column])


def test_grid_is_the_product_of_the_axes(serial: pd.DataFrame) -> None:
    assert len(serial) == 2 * 3 * 2
    assert serial[["hardware", "batch", "precision"]].drop_duplicates().shape[0] == 12
    assert serial.iloc[1][["hardware", "batch", "precision"]].tolist() == ["a100", 1, "fp32"]
    assert serial.attrs["swept"] == ["hardware", "batch", "precision"]
    grid = make_grid("resnet50-train", "dgx-a100,dgx-h100",
                     {"batch": range(1, 8), "prep_workers": [1, 2, 4], "steps": 5,
                      "gpudirect": [True, False]})
    points = grid.points()
    assert len(grid) == len(points) == 2 * 7 * 3 * 2
    assert len({p.key for p in points}) == len(points)
    assert all(p.knobs["steps"] == 5 for p in points)
    assert grid.points()[17].key == points[17].key  # keys are stable


def test_python_api_after_the_package_is_imported() -> None:
    import accelsim.explore.grid  # noqa: F401  (a package import must not shadow the function)

    df = accelsim.sweep("mlp", hw="a100", batch=[2, 4], precision="bf16")
    assert df["precision"].tolist() == ["bf16", "bf16"] and df["batch"].tolist() == [2, 4]


def test_a_failing_point_records_its_error_and_the_rest_finish(monkeypatch) -> None:
    df = sweep("mlp", ["a100", "edge-tpu"], precision=["int8", "bf16"], batch=4,
               fallback=False)  # a format the device lacks, kept an error
    failed = df[df["error"].notna()]
    assert failed[["hardware", "precision"]].values.tolist() == [["edge-tpu", "bf16"]]
    assert "bf16" in failed["error"].iloc[0] and _missing(failed["throughput_samples_per_s"]
                                                          .iloc[0])
    assert df["throughput_samples_per_s"].notna().sum() == 3
    real = sweep_run.run_simulation

    def bug_at_batch_2(cfg, **kw):  # a bug (not bad input) at one point
        if cfg.scenario.batch_size == 2:
            raise ZeroDivisionError("boom")
        return real(cfg, **kw)

    monkeypatch.setattr(sweep_run, "run_simulation", bug_at_batch_2)
    df = sweep("mlp", "a100", batch=[1, 2, 3])
    assert df["error"].isna().tolist() == [True, False, True]
    assert df["error"].iloc[1] == "internal error (a bug): ZeroDivisionError: boom"


def test_bad_input_is_one_error_before_anything_runs() -> None:
    for kwargs, words in [({"hw": "a1000"}, "unknown hardware"),
                          ({"hw": "a100", "bacth": [1]}, "unknown knob 'bacth'"),
                          ({"hw": "a100", "batch": []}, "empty list"),
                          ({"hw": "a100", "workers": 0}, "workers"),
                          ({"hw": "a100", "workers": 2, "scheduler": "tcp://x:1"}, "choose one"),
                          ({"hw": "a100", "batch": range(1, 2001), "seq_len": range(1, 1001)},
                           "over the limit")]:
        hw = kwargs.pop("hw")
        with pytest.raises(AccelsimError, match=words):
            sweep("mlp" if "seq_len" not in kwargs else "gpt2", hw, **kwargs)


def test_workers_give_the_same_rows_as_serial(serial: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(sweep("mlp", HW, workers=2, **SMALL), serial)


def test_dask_cluster_on_loopback_gives_the_same_rows(serial: pd.DataFrame) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=2,
                                  host="127.0.0.1", protocol="tcp",
                                  dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        df = sweep("mlp", HW, scheduler=cluster.scheduler_address, **SMALL)
    pd.testing.assert_frame_equal(df, serial)


def test_resume_skips_finished_points(tmp_path: Path, serial: pd.DataFrame,
                                      monkeypatch) -> None:
    store = tmp_path / "s.sqlite"
    first = sweep("mlp", HW, resume=str(store), batch=[1, 8], precision=["fp16", "fp32"])
    assert first.attrs["points_run"] == 8
    calls = []
    real = sweep_run.run_simulation
    monkeypatch.setattr(sweep_run, "run_simulation",
                        lambda cfg, **kw: calls.append(1) or real(cfg, **kw))
    df = sweep("mlp", HW, resume=str(store), **SMALL)  # a grown grid: 4 new points
    assert len(calls) == 4 and df.attrs["points_resumed"] == 8
    pd.testing.assert_frame_equal(df, serial)


def test_resume_store_errors(tmp_path: Path) -> None:
    (tmp_path / "not.sqlite").write_text("hello")
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    for path, words in [(tmp_path / "r.parquet", "Parquet is not supported"),
                        (tmp_path / "not.sqlite", "not a usable sweep store"),
                        (other, "not a sweep store"), (tmp_path, "directory"),
                        (tmp_path / "no" / "dir.sqlite", "no such folder")]:
        with pytest.raises(AccelsimError, match=words):
            ResumeStore(path)


def _stored(path: Path) -> dict[str, tuple[int, float]]:
    if not path.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return {k: (pid, t) for k, pid, t in
                    db.execute("SELECT key, pid, finished_unix_s FROM points")}
    except sqlite3.Error:  # its tables are not made yet
        return {}


@pytest.mark.slow
def test_sigkill_then_resume_loses_and_recomputes_nothing(tmp_path: Path, monkeypatch) -> None:
    store, n_points = tmp_path / "killed.sqlite", 150
    command = [sys.executable, "-m", "accelsim.cli", "sweep", "mlp", "--hw", "a100",
               "--batch", f"1,2,...,{n_points}", "--resume", str(store), "--quiet"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while len(_stored(store)) < 10 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
    before = _stored(store)
    assert 10 <= len(before) < n_points
    calls = []
    real = sweep_run.run_simulation
    monkeypatch.setattr(sweep_run, "run_simulation",
                        lambda cfg, **kw: calls.append(1) or real(cfg, **kw))
    resumed = sweep("mlp", "a100", batch=list(range(1, n_points + 1)), resume=str(store))
    assert len(calls) == n_points - len(before)  # nothing finished is run again
    after = _stored(store)
    assert len(after) == n_points and all(after[k] == v for k, v in before.items())
    monkeypatch.setattr(sweep_run, "run_simulation", real)
    whole = sweep("mlp", "a100", batch=list(range(1, n_points + 1)))
    pd.testing.assert_frame_equal(resumed, whole)


def test_progress_bar_only_when_asked(capsys) -> None:
    sweep("mlp", "a100", batch=[1, 2], progress=True)
    assert "2/2" in capsys.readouterr().err
    sweep("mlp", "a100", batch=[1, 2])  # not a terminal: quiet
    assert capsys.readouterr().err == ""


def test_expand_axis() -> None:
    assert expand_axis("batch", "1,2,4,...,1024") == [2 ** i for i in range(11)]
    assert expand_axis("batch", "8,16,...,40") == [8, 16, 24, 32, 40]
    assert expand_axis("batch", "3, 5,...,10") == [3, 5, 7, 9]
    assert expand_axis("rate", "0.1,0.2,...,0.5") == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert expand_axis("gpudirect", "on,off") == [True, False]
    for text in ("1,...,8", "1,2,4,...", "1,3,4,...,20", "4,2,...,8", "a,b,...,c"):
        with pytest.raises(AccelsimError):
            expand_axis("batch" if text[0] != "a" else "precision", text)


@pytest.mark.slow
def test_cli_table_csv_json_and_plot(tmp_path: Path, capsys) -> None:
    csv, png = tmp_path / "s.csv", tmp_path / "s.png"
    assert main(["sweep", "mlp", "--hw", "a100,t4", "--batch", "1,2,4,...,64",
                 "--precision", "fp16", "--set", "image_size=28,56", "--csv", str(csv),
                 "--plot", str(png), "-q"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:4] == ["hardware", "batch", "image_size", "samples/s"]
    assert len(out.splitlines()) == 1 + 2 * 7 * 2
    table = pd.read_csv(csv)
    api = sweep("mlp", ["a100", "t4"], batch=[1, 2, 4, 8, 16, 32, 64], precision="fp16",
                image_size=[28, 56])
    assert table["throughput_samples_per_s"].tolist() == \
        pytest.approx(api["throughput_samples_per_s"].tolist(), rel=1e-12)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["sweep", "mlp", "--hw", "a100", "--batch", "1,2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["swept"] == ["batch"] and [p["batch"] for p in doc["points"]] == [1, 2]
    assert doc["points"][0]["error"] is None


def test_cli_errors_are_one_line(capsys) -> None:
    for argv, words in [(["--batch", "1,x"], "'x' is not a whole number"),
                        (["--prep-workers", "2,4"], "all 2 points failed"),
                        (["--batch", "1", "--set", "batch=2"], "given twice"),
                        (["--set", "batch"], "KNOB=VALUE"),
                        (["--resume", "r.parquet"], "Parquet")]:
        assert main(["sweep", "mlp", "--hw", "a100", *argv]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, err
    assert main(["sweep", "mlp", "--hw", "a100,edge-tpu", "--precision", "bf16", "-q",
                 "--no-fallback"]) == 0
    assert "1 of 2 points failed" in capsys.readouterr().err


@pytest.mark.slow
def test_plots_pick_panels_and_are_valid_files(tmp_path: Path) -> None:
    from accelsim.plots.sweep import plot_sweep

    train = sweep("resnet50-train", "dgx-a100", devices=[1, 2], prep_workers=[2, 8], steps=3,
                  batch=32)
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text as text, to read it back
        svg = plot_sweep(train, tmp_path / "train.svg")
    text = svg.read_text()
    ET.fromstring(text)  # well-formed
    for words in ("Scaling efficiency", "prep stall", "Accelerators"):
        assert words in text
    names = sweep("mlp", ["a100", "t4"], precision=["fp16", "fp32"], batch=4)
    assert plot_sweep(names, tmp_path / "names.pdf").read_bytes()[:4] == b"%PDF"
    with pytest.raises(AccelsimError, match="every point"):
        plot_sweep(sweep("mlp", "a100", batch=1, steps=3), tmp_path / "x.png")
