"""Run a sweep: every point of the grid, in this process, in N worker processes, or on a Dask
cluster, into one DataFrame with one row per point in grid order, whichever way it ran.

    df = sweep("resnet50", ["a100", "h100"], batch=[1, 2, 4, 8], precision="bf16")
    df = sweep("resnet50-train", "dgx-a100", prep_workers=[2, 4, 8], steps=20, workers=2)
    df = sweep(..., scheduler="tcp://10.0.0.5:8786", resume="sweep.sqlite")

A point on a device that lacks the precision asked for (bf16 on a V100 or T4) runs the
closest format the device has, as `compare` does (`accelsim.devices.precision
.fallback_precision`): its `precision` column keeps the knob as given, `compute_precision`
says what ran and `notes` says why; `fallback=False` records the error instead.

A row is the point's knobs (columns named as the knobs, plus `hardware`) followed by the
result columns of `accelsim.results.summary.ROW_COLUMNS`; where a knob and a result column
share a name (mode, precision, software, devices), the column holds the knob as given. A point
that fails has its message in `error` and None figures; the sweep runs the rest. Workers
start once per sweep, so a point costs a function call, not a process start. Each finished
point is stored in the resume store (if any) as soon as it comes back: from a local worker
point by point; from a Dask cluster in chunks (a task costs the scheduler about a millisecond),
so a killed sweep there can lose the chunks in flight. On a Dask cluster (accelsim/explore
/dask_run.py) a chunk that hangs is cancelled and run once more, then its points fail, and a
cluster left with no worker fails the points not finished; the sweep returns every other row,
and those failed rows are not stored, so a resumed sweep runs them again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pandas as pd
from tqdm import tqdm

from accelsim.arguments import plain_scalar
from accelsim.devices.precision import fallback_note, fallback_precision
from accelsim.errors import AccelsimError, PrecisionError
from accelsim.explore.grid import Grid, Point, make_grid
from accelsim.explore.store import ResumeStore
from accelsim.results.summary import ROW_COLUMNS, error_row, flat_row
from accelsim.run import SimulationConfig, run_simulation
from accelsim.sim.knobs import make_config
from accelsim.workload.scenario import Scenario

MAX_WORKERS = 64  # NB: processes on one machine; a larger pool belongs on a Dask cluster
Chunk = list[tuple[int, dict[str, Any]]]  # (point index, row)
NO_FALLBACK_KEY = "|no-fallback"  # appended to a point's store key under fallback=False


def sweep(workload: str | Scenario, hw: str | Sequence[str], *, workers: int = 1,
          scheduler: Any = None, resume: str | os.PathLike[str] | None = None,
          progress: bool | None = None, fallback: bool = True,
          point_timeout_s: float | None = None, **knobs: Any) -> pd.DataFrame:
    """The grid of `hw` and `knobs` (a list is an axis, a scalar is fixed), one row per point.

    `workers` > 1 runs points in that many processes; `scheduler` (a Dask address such as
    "tcp://host:8786", or a `distributed.Client`) runs them on that cluster; `resume` (a SQLite
    path) stores each finished point and skips the ones already there; `progress` shows a bar
    on stderr (None: only when stderr is a terminal); `fallback` runs a point on a device that
    lacks the precision asked for at the closest one (False: the point fails);
    `point_timeout_s` (Dask only; default `dask_run.DASK_POINT_TIMEOUT_S`) the seconds a
    point is given before its chunk is cancelled and run once more, then failed. The frame's
    `attrs` say which knobs were swept (`swept`), how many points were run and how many read
    from the store, and how many did not finish on the cluster (`points_unfinished`: failed
    rows that are not stored)."""
    check_workers(workers)
    if scheduler is not None and workers > 1:
        raise AccelsimError("workers and scheduler: choose one (a Dask cluster has its own "
                            "workers)")
    if point_timeout_s is not None:
        from accelsim.explore.dask_run import check_timeout

        if scheduler is None:
            raise AccelsimError("a point timeout applies to a Dask cluster (scheduler); "
                                "local points and workers run to the end")
        point_timeout_s = check_timeout(point_timeout_s)
    grid = make_grid(workload, hw, knobs)
    points = grid.points()
    if not fallback:  # the stored rows of the two rules differ: not one key
        points = [dataclasses.replace(p, key=p.key + NO_FALLBACK_KEY) for p in points]
    store = ResumeStore(resume) if resume is not None else None
    try:
        done = store.finished([p.key for p in points]) if store else {}
        rows: list[dict[str, Any] | None] = [done.get(p.key) for p in points]
        todo = [p for p in points if p.key not in done]
        unfinished = _run_into(rows, grid, todo, workers, scheduler, store, progress,
                               fallback, point_timeout_s)
    finally:
        if store is not None:
            store.close()
    frame = pd.DataFrame(rows, columns=columns(grid))
    frame.attrs.update(swept=grid.swept, points_run=len(todo),
                       points_resumed=len(points) - len(todo), points_unfinished=unfinished,
                       points_damaged=dict(store.damaged) if store is not None else {})
    return frame


def columns(grid: Grid) -> list[str]:
    """The columns of a sweep's frame: the knobs, then the result columns."""
    knobs = grid.knob_columns
    return knobs + [c for c in ROW_COLUMNS if c not in knobs]


def _run_into(rows: list[dict[str, Any] | None], grid: Grid, todo: list[Point], workers: int,
              scheduler: Any, store: ResumeStore | None, progress: bool | None,
              fallback: bool, point_timeout_s: float | None) -> int:
    """Run `todo`, putting each row in `rows` at its point's index and in the store (but
    the failed rows of points that did not finish on a cluster); how many those are."""
    if not todo:
        return 0
    model = grid.scenario.model
    keys = {p.index: p.key for p in todo}
    show = sys.stderr.isatty() if progress is None else progress
    with contextlib.ExitStack() as cleanup:
        unfinished = 0
        if scheduler is not None:
            from accelsim.explore import dask_run

            chunks = dask_run.on_dask(cleanup, scheduler, grid.workload, model, todo, fallback,
                                      point_timeout_s or dask_run.DASK_POINT_TIMEOUT_S)
        elif workers > 1:
            chunks = _in_processes(cleanup, workers, grid.workload, model, todo, fallback)
        else:
            chunks = (run_points(grid.workload, model, [p], fallback) for p in todo)
        bar = cleanup.enter_context(_Bar(
            total=len(rows), initial=len(rows) - len(todo), unit="point", desc="sweep",
            disable=not show, file=sys.stderr, dynamic_ncols=True))
        for chunk in chunks:
            kept = type(chunk) is list  # NB: an Unfinished chunk (dask_run) is not stored
            unfinished += 0 if kept else len(chunk)
            for index, row in chunk:
                rows[index] = row
                if store is not None and kept:
                    store.put(keys[index], row)
            bar.update(len(chunk))
    return unfinished


class _Bar(tqdm):
    """A progress bar without tqdm's monitor thread (no thread is left behind to be copied
    into forked workers)."""

    monitor_interval = 0


def run_points(workload: str | Scenario, model: str, points: list[Point],
               fallback: bool = True) -> Chunk:
    """The rows of `points` (what a worker runs): errors are rows, never exceptions."""
    return [(p.index, point_row(workload, model, p, fallback)) for p in points]


def point_row(workload: str | Scenario, model: str, point: Point,
              fallback: bool = True) -> dict[str, Any]:
    """One point's row: its knobs, then the result (at the fallback precision, with its note,
    where the device lacks the one asked for and `fallback`) or the error."""
    try:
        cfg = make_config(workload, point.hardware, **point.knobs)
        result = _result_row(cfg, fallback)
    except AccelsimError as err:
        return failed_row(str(err), model, point)
    except Exception as err:  # noqa: BLE001 - a bug at one point must not end the sweep
        return failed_row(f"internal error (a bug): {type(err).__name__}: {err}", model, point)
    return _row(point, result)


def failed_row(message: str, model: str, point: Point) -> dict[str, Any]:
    """The row of a point that failed with `message`: its knobs, None figures."""
    return _row(point, error_row(message, workload=model, batch_size=point.knobs.get("batch"),
                                 **point.knobs))


def _row(point: Point, result: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"hardware": point.hardware, **point.knobs}
    # numpy scalars as Python ones: a row reads back from the store exactly as it was
    row.update({k: plain_scalar(v) for k, v in result.items() if k not in row})
    return row


def _result_row(cfg: SimulationConfig, fallback: bool) -> dict[str, Any]:
    """The result columns of one point; PrecisionError, without a fallback, propagates."""
    try:
        return flat_row(run_simulation(cfg, detail=False).record)
    except PrecisionError as err:
        requested = cfg.scenario.precision
        ran = fallback_precision(requested, err.runs) if fallback else None
        if ran is None:
            raise
        try:
            row = flat_row(run_simulation(dataclasses.replace(
                cfg, scenario=cfg.scenario.with_overrides(precision=ran)), detail=False).record)
        except AccelsimError as again:
            raise AccelsimError(f"{err}; its fallback {ran} failed too: {again}") from None
        note = fallback_note(err.device, requested, ran, err.runs)
        row["notes"] = "; ".join(n for n in (note, row["notes"]) if n)
        return row


def check_workers(workers: Any) -> int:
    """`workers` when it is a number of local processes, 1 to MAX_WORKERS (AccelsimError)."""
    if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= MAX_WORKERS:
        raise AccelsimError(f"workers {workers!r}: a number of processes, 1 to {MAX_WORKERS}")
    return workers


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of `workers` local processes (they start as tasks are submitted)."""
    # NB: fork where there is one (Linux): workers start in milliseconds with this process's
    # imports and caches, and a script needs no `if __name__ == "__main__"` guard; elsewhere
    # the platform's default (spawn: a fresh interpreter per worker).
    method = "fork" if sys.platform.startswith("linux") else None
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method))


def _in_processes(cleanup: contextlib.ExitStack, workers: int, workload: str | Scenario,
                  model: str, todo: list[Point], fallback: bool) -> Iterator[Chunk]:
    """Chunks of rows from `workers` processes, as they finish (the workers start now)."""
    pool = worker_pool(workers)
    cleanup.callback(pool.shutdown, wait=True, cancel_futures=True)
    # One point per task: each comes back, and is stored, as soon as it is finished (chunks
    # would save about 1% here; measured on 300 mlp points).
    futures = [pool.submit(run_points, workload, model, [point], fallback) for point in todo]
    return _results(as_completed(futures))


def _results(finished: Iterator[Any]) -> Iterator[Chunk]:
    """The results of futures as they finish (`finished`: an as_completed iterator). A task
    never raises for a point (errors are rows): an exception is the worker's."""
    try:
        for future in finished:
            yield future.result()
    except BrokenProcessPool:
        raise AccelsimError("a sweep worker process died (out of memory?); the points finished "
                            "before it are kept in the resume store, if any") from None
    except Exception as err:  # noqa: BLE001 - a worker's failure
        raise AccelsimError(f"a sweep worker failed: {type(err).__name__}: {err}; the points "
                            "finished before it are kept in the resume store, if any") from None
