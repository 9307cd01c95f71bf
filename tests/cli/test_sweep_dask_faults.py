"""A sweep on a Dask cluster on loopback that loses or hangs a worker (issue 22 item 5): a
worker process killed mid-sweep, a chunk that never returns, every worker lost. The sweep
finishes every time: the rows it could run equal a serial sweep's, the others are failed rows
naming why, and those are not stored, so a resumed sweep runs them again."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from accelsim.cli import main
from accelsim.errors import AccelsimError
from accelsim.explore import dask_run
from accelsim.explore import run as sweep_run
from accelsim.explore.run import sweep
from tests.helpers import dask_faults

distributed = pytest.importorskip("distributed")
LOOPBACK = {"host": "127.0.0.1", "protocol": "tcp", "dashboard_address": None}


def _serial(batches: list[int]) -> pd.DataFrame:
    return sweep("mlp", "a100", batch=batches)


def _rows(df: pd.DataFrame) -> list[dict[str, object]]:
    """The rows as dicts, a missing value as None (a column with a failed row's None has
    another dtype than the serial sweep's)."""
    return [{k: None if pd.api.types.is_scalar(v) and pd.isna(v) else v for k, v in r.items()}
            for r in df.to_dict(orient="records")]


def _stored(path: Path) -> int:
    """How many points the resume store at `path` holds (0 before its tables exist)."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return db.execute("SELECT COUNT(*) FROM points").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_a_worker_process_killed_mid_sweep_loses_no_row(monkeypatch) -> None:
    batches = list(range(1, 25))  # 24 one-point chunks of 0.25 s on 2 worker processes
    serial = _serial(batches)
    monkeypatch.setattr(sweep_run, "run_points", dask_faults.slow_run_points)
    killed = threading.Event()
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  **LOOPBACK) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        pids = client.run(os.getpid)  # worker address -> its process id
        victim = sorted(pids)[0]
        started_s = time.monotonic()

        def kill_while_it_runs_a_chunk() -> None:
            while time.monotonic() - started_s < 30:
                if time.monotonic() - started_s > 1.5 and client.processing().get(victim):
                    os.kill(pids[victim], signal.SIGKILL)
                    killed.set()
                    return
                time.sleep(0.05)

        threading.Thread(target=kill_while_it_runs_a_chunk, daemon=True).start()
        df = sweep("mlp", "a100", batch=batches, scheduler=client)
    assert killed.is_set(), "the worker was not killed during the sweep"
    assert df.attrs["points_unfinished"] == 0
    pd.testing.assert_frame_equal(df, serial)


@pytest.mark.slow
def test_a_chunk_whose_worker_dies_past_dasks_retries_fails_its_points(monkeypatch) -> None:
    import dask

    batches = list(range(1, 13))
    serial = _serial(batches)
    monkeypatch.setattr(sweep_run, "run_points", dask_faults.slow_run_points)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                     **LOOPBACK) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        pids = client.run(os.getpid)
        victim = sorted(pids)[0]
        started_s = time.monotonic()

        def kill_while_it_runs_a_chunk() -> None:
            while time.monotonic() - started_s < 30:
                if time.monotonic() - started_s > 1.0 and client.processing().get(victim):
                    os.kill(pids[victim], signal.SIGKILL)
                    return
                time.sleep(0.05)

        threading.Thread(target=kill_while_it_runs_a_chunk, daemon=True).start()
        df = sweep("mlp", "a100", batch=batches, scheduler=client)
    died = df["error"].notna()
    assert died.sum() >= 1 and df.attrs["points_unfinished"] == died.sum()
    assert df.loc[died, "error"].str.contains("each Dask worker that ran it died").all()
    assert _rows(df[~died]) == _rows(serial[~died])


@pytest.mark.slow
def test_a_hung_chunk_times_out_twice_and_its_point_fails(monkeypatch, tmp_path: Path) -> None:
    batches = list(range(1, 9))  # 8 one-point chunks; batch 5 hangs 6 s
    serial = _serial(batches)
    monkeypatch.setattr(sweep_run, "run_points", dask_faults.hanging_run_points)
    store = tmp_path / "hung.sqlite"
    with distributed.LocalCluster(n_workers=2, processes=False, threads_per_worker=2,
                                  **LOOPBACK) as cluster:
        start_s = time.monotonic()
        df = sweep("mlp", "a100", batch=batches, scheduler=cluster.scheduler_address,
                   point_timeout_s=1.0, resume=store)
        took_s = time.monotonic() - start_s
    assert took_s < 12, took_s  # two 2 s deadlines, checked each second, not the 6 s hang x2
    hung = df["batch"] == dask_faults.HANG_BATCH
    assert df.loc[hung, "error"].iloc[0].startswith("timed out after 2 s on the Dask cluster")
    assert df.loc[hung, "throughput_samples_per_s"].isna().all()
    assert _rows(df[~hung]) == _rows(serial[~hung])
    assert df.attrs["points_unfinished"] == 1 and _stored(store) == len(batches) - 1
    monkeypatch.setattr(sweep_run, "run_points", dask_faults.run_points)
    resumed = sweep("mlp", "a100", batch=batches, resume=store)  # runs the hung point only
    assert resumed.attrs["points_run"] == 1
    pd.testing.assert_frame_equal(resumed, serial)


@pytest.mark.slow
def test_every_worker_lost_fails_the_rest_and_the_sweep_finishes(monkeypatch,
                                                                 tmp_path: Path) -> None:
    batches = list(range(1, 13))  # 12 one-point chunks of 0.25 s on one worker thread
    serial = _serial(batches)
    monkeypatch.setattr(dask_run, "DASK_LOST_S", 1.0)
    monkeypatch.setattr(dask_run, "DASK_POLL_S", 0.2)
    monkeypatch.setattr(sweep_run, "run_points", dask_faults.slow_run_points)
    store = tmp_path / "lost.sqlite"
    with distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=1,
                                  **LOOPBACK) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        def lose_the_worker_after_4_points() -> None:
            deadline_s = time.monotonic() + 30
            while _stored(store) < 4 and time.monotonic() < deadline_s:
                time.sleep(0.02)
            for worker in list(cluster.workers.values()):
                client.sync(worker.close, executor_wait=False)

        threading.Thread(target=lose_the_worker_after_4_points, daemon=True).start()
        df = sweep("mlp", "a100", batch=batches, scheduler=client, resume=store)
    lost = df["error"].notna()
    assert 1 <= lost.sum() <= len(batches) - 4
    assert df.loc[lost, "error"].str.contains("every Dask worker of .* was lost").all()
    assert _rows(df[~lost]) == _rows(serial[~lost])
    assert df.attrs["points_unfinished"] == lost.sum() == len(batches) - _stored(store)
    monkeypatch.setattr(sweep_run, "run_points", dask_faults.run_points)
    resumed = sweep("mlp", "a100", batch=batches, resume=store)
    assert resumed.attrs["points_run"] == lost.sum()
    pd.testing.assert_frame_equal(resumed, serial)


def test_a_point_timeout_is_checked_and_is_for_dask_only() -> None:
    for timeout_s, words in [(0, "above 0"), (-1.0, "above 0"), (float("nan"), "above 0"),
                             ("5", "above 0"), (True, "above 0")]:
        with pytest.raises(AccelsimError, match=words):
            sweep("mlp", "a100", batch=1, scheduler="tcp://127.0.0.1:1",
                  point_timeout_s=timeout_s)
    with pytest.raises(AccelsimError, match="applies to a Dask cluster"):
        sweep("mlp", "a100", batch=1, point_timeout_s=5.0)
    assert dask_run.deadline_s(300.0, 16) == 300.0 * 16 * dask_run.DASK_AHEAD


def test_the_cli_flag(capsys) -> None:
    assert main(["sweep", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"(default {dask_run.DASK_POINT_TIMEOUT_S:g})" in help_text
    for value, words in [("5", "applies to a Dask cluster"), ("0", "x>0"), ("nan", "above 0")]:
        assert main(["sweep", "mlp", "--hw", "a100", "--batch", "1", "--point-timeout", value,
                     *(["--scheduler", "tcp://127.0.0.1:1"] if value == "nan" else [])]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, err
