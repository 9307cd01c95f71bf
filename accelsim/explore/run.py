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
so a killed sweep there can lose the chunks in flight.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pandas as pd
from tqdm import tqdm

from accelsim.devices.precision import fallback_note, fallback_precision
from accelsim.errors import AccelsimError, PrecisionError
from accelsim.explore.grid import Grid, Point, make_grid
from accelsim.explore.store import ResumeStore
from accelsim.numbers import is_int_text, shown
from accelsim.results.summary import ROW_COLUMNS, error_row, flat_row
from accelsim.run import SimulationConfig, run_simulation
from accelsim.sim.knobs import make_config
from accelsim.workload.scenario import Scenario

MAX_WORKERS = 64  # NB: processes on one machine; a larger pool belongs on a Dask cluster
CHUNKS_PER_SLOT = 8  # Dask: chunks per worker thread, enough to balance uneven points
MAX_CHUNK = 16  # Dask: points per chunk at most
DASK_WAIT_S = 60.0  # how long to wait for a Dask cluster to have a worker
DASK_LOST_S = 60.0  # how long a sweep waits with no worker left before it fails
DASK_POLL_S = 1.0  # how often a waiting sweep asks the scheduler for its workers
DASK_IDLE_S = 0.02  # NB: the wait between looks for a finished chunk (a point takes longer)
Chunk = list[tuple[int, dict[str, Any]]]  # (point index, row)
NO_FALLBACK_KEY = "|no-fallback"  # appended to a point's store key under fallback=False


def sweep(workload: str | Scenario, hw: str | Sequence[str], *, workers: int = 1,
          scheduler: Any = None, resume: str | os.PathLike[str] | None = None,
          progress: bool | None = None, fallback: bool = True,
          **knobs: Any) -> pd.DataFrame:
    """The grid of `hw` and `knobs` (a list is an axis, a scalar is fixed), one row per point.

    `workers` > 1 runs points in that many processes; `scheduler` (a Dask address such as
    "tcp://host:8786", or a `distributed.Client`) runs them on that cluster; `resume` (a SQLite
    path) stores each finished point and skips the ones already there; `progress` shows a bar
    on stderr (None: only when stderr is a terminal); `fallback` runs a point on a device that
    lacks the precision asked for at the closest one (False: the point fails). The frame's
    `attrs` say which knobs were swept (`swept`) and how many points were run and how many
    read from the store."""
    if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= MAX_WORKERS:
        raise AccelsimError(f"workers {workers!r}: a number of processes, 1 to {MAX_WORKERS}")
    if scheduler is not None and workers > 1:
        raise AccelsimError("workers and scheduler: choose one (a Dask cluster has its own "
                            "workers)")
    grid = make_grid(workload, hw, knobs)
    points = grid.points()
    if not fallback:  # the stored rows of the two rules differ: not one key
        points = [dataclasses.replace(p, key=p.key + NO_FALLBACK_KEY) for p in points]
    store = ResumeStore(resume) if resume is not None else None
    try:
        done = store.finished([p.key for p in points]) if store else {}
        rows: list[dict[str, Any] | None] = [done.get(p.key) for p in points]
        todo = [p for p in points if p.key not in done]
        _run_into(rows, grid, todo, workers, scheduler, store, progress, fallback)
    finally:
        if store is not None:
            store.close()
    frame = pd.DataFrame(rows, columns=columns(grid))
    frame.attrs.update(swept=grid.swept, points_run=len(todo),
                       points_resumed=len(points) - len(todo),
                       points_damaged=dict(store.damaged) if store is not None else {})
    return frame


def columns(grid: Grid) -> list[str]:
    """The columns of a sweep's frame: the knobs, then the result columns."""
    knobs = grid.knob_columns
    return knobs + [c for c in ROW_COLUMNS if c not in knobs]


def _run_into(rows: list[dict[str, Any] | None], grid: Grid, todo: list[Point], workers: int,
              scheduler: Any, store: ResumeStore | None, progress: bool | None,
              fallback: bool) -> None:
    """Run `todo`, putting each row in `rows` at its point's index and in the store."""
    if not todo:
        return
    model = grid.scenario.model
    keys = {p.index: p.key for p in todo}
    show = sys.stderr.isatty() if progress is None else progress
    with contextlib.ExitStack() as cleanup:
        if scheduler is not None:
            chunks = _on_dask(cleanup, scheduler, grid.workload, model, todo, fallback)
        elif workers > 1:
            chunks = _in_processes(cleanup, workers, grid.workload, model, todo, fallback)
        else:
            chunks = (run_points(grid.workload, model, [p], fallback) for p in todo)
        bar = cleanup.enter_context(_Bar(
            total=len(rows), initial=len(rows) - len(todo), unit="point", desc="sweep",
            disable=not show, file=sys.stderr, dynamic_ncols=True))
        for chunk in chunks:
            for index, row in chunk:
                rows[index] = row
                if store is not None:
                    store.put(keys[index], row)
            bar.update(len(chunk))


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
        result = _failed(str(err), model, point)
    except Exception as err:  # noqa: BLE001 - a bug at one point must not end the sweep
        result = _failed(f"internal error (a bug): {type(err).__name__}: {err}", model, point)
    row: dict[str, Any] = {"hardware": point.hardware, **point.knobs}
    row.update({k: _plain(v) for k, v in result.items() if k not in row})
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


def _failed(message: str, model: str, point: Point) -> dict[str, Any]:
    return error_row(message, workload=model, batch_size=point.knobs.get("batch"),
                     **point.knobs)


def _plain(value: Any) -> Any:
    """Numpy scalars as Python ones: a row reads back from the store exactly as it was."""
    return value.item() if hasattr(value, "item") and not isinstance(value, str) else value


def _chunked(todo: list[Point], slots: int) -> list[list[Point]]:
    size = max(1, min(MAX_CHUNK, len(todo) // (slots * CHUNKS_PER_SLOT)))
    return [todo[i:i + size] for i in range(0, len(todo), size)]


def _in_processes(cleanup: contextlib.ExitStack, workers: int, workload: str | Scenario,
                  model: str, todo: list[Point], fallback: bool) -> Iterator[Chunk]:
    """Chunks of rows from `workers` processes, as they finish (the workers start now)."""
    # NB: fork where there is one (Linux): workers start in milliseconds with this process's
    # imports and caches, and a script needs no `if __name__ == "__main__"` guard; elsewhere
    # the platform's default (spawn: a fresh interpreter per worker).
    method = "fork" if sys.platform.startswith("linux") else None
    context = multiprocessing.get_context(method)
    pool = ProcessPoolExecutor(workers, mp_context=context)
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
    except Exception as err:  # noqa: BLE001 - a worker's failure (Dask: lost, not installed)
        raise AccelsimError(f"a sweep worker failed: {type(err).__name__}: {err}; the points "
                            "finished before it are kept in the resume store, if any") from None


def _on_dask(cleanup: contextlib.ExitStack, scheduler: Any, workload: str | Scenario,
             model: str, todo: list[Point], fallback: bool) -> Iterator[Chunk]:
    """Chunks of rows from a Dask cluster (an address or a `distributed.Client`)."""
    try:
        from distributed import Client
    except ImportError:
        raise AccelsimError("--scheduler needs Dask: pip install 'accelsim[distributed]'") \
            from None
    client = scheduler
    if not hasattr(scheduler, "submit"):
        check_address(scheduler)  # before Client(): a failed one stalls 20 s at exit
        try:
            client = Client(scheduler, timeout="10s", set_as_default=False)
        except (OSError, TimeoutError, ValueError) as err:
            raise AccelsimError(f"Dask scheduler {scheduler}: {err}") from None
        cleanup.callback(client.close)
    try:
        client.wait_for_workers(1, timeout=DASK_WAIT_S)
    except TimeoutError:
        raise AccelsimError(f"Dask scheduler {scheduler}: no worker joined in "
                            f"{DASK_WAIT_S:.0f} s") from None
    slots = sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values())
    futures = [client.submit(run_points, workload, model, chunk, fallback,
                             pure=False)
               for chunk in _chunked(todo, max(1, slots))]
    cleanup.callback(client.cancel, futures)
    return _results(_dask_finished(client, futures, scheduler))


def check_address(scheduler: Any) -> None:
    """A Dask scheduler address Dask can connect to (tcp://HOST:PORT, tls://, or HOST:PORT);
    AccelsimError (one line) for anything else."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import backends

    def bad(why: str) -> AccelsimError:
        return AccelsimError(f"Dask scheduler {shown(scheduler)}: {why}; write an address "
                             "such as tcp://HOST:8786")

    if not isinstance(scheduler, str) or not scheduler.strip():
        raise bad("not an address")
    try:
        scheme, location = parse_address(scheduler)
    except ValueError as err:
        raise bad(str(err)[:100]) from None
    if scheme not in backends:
        raise bad(f"unknown protocol '{scheme[:20]}' (Dask has {', '.join(sorted(backends))})")
    if scheme in ("tcp", "tls"):
        port_text = location.rpartition(":")[2]
        try:
            host, port = parse_host_port(location)
        except (ValueError, TypeError) as err:
            raise bad(str(err)[:100]) from None
        if not host or not is_int_text(port_text) or not 1 <= int(port) <= 65535:
            raise bad("needs a host and a port from 1 to 65535")


def _dask_finished(client: Any, futures: list[Any], scheduler: Any) -> Iterator[Any]:
    """The futures as they finish. A worker lost mid-sweep: Dask runs its points again on the
    others (a point whose workers keep dying fails, KilledWorker); with no worker left for
    DASK_LOST_S, the sweep stops with an error instead of waiting for ever."""
    from distributed import as_completed as dask_completed

    finished = dask_completed(futures, loop=client.loop)
    checked_s = workers_seen_s = time.monotonic()
    while not finished.is_empty():
        if finished.has_ready():
            yield from finished.next_batch(block=False)
            continue
        time.sleep(DASK_IDLE_S)
        now = time.monotonic()
        if now - checked_s < DASK_POLL_S:
            continue
        checked_s = now
        if client.scheduler_info().get("workers"):
            workers_seen_s = now
        elif now - workers_seen_s > DASK_LOST_S:
            raise AccelsimError(f"Dask scheduler {scheduler}: every worker was lost and none "
                                f"joined in {DASK_LOST_S:.0f} s; {finished.count()} chunks of "
                                "points did not finish (the finished ones are kept in the "
                                "resume store, if any)")
