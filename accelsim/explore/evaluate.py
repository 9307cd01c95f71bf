"""How a plan simulates its configurations: in this process or in worker processes, each
record kept in a resume store as soon as it is finished, so that an interrupted plan (killed,
SIGKILL included) picks up where it stopped and a rerun costs nothing.

    ev = Evaluator(workers=2, resume="plan.sqlite")
    record = ev.record("resnet50", "a100", {"mode": "infer", "batch": 8})  # AccelsimError
    outcomes = ev.records([(workload, hw, knobs), ...])   # record dicts or Failure, in order
    results = ev.map(task, items)      # independent searches, one task each, in order
    ev.simulated, ev.resumed           # records run here / read from the store
    ev.close()

A configuration is keyed by what it depends on (`accelsim.explore.grid.point_key`: the
workload, the hardware and the knobs); the store is the sweep's SQLite file format with its
own table (`accelsim.explore.store`, table "records"), so one file can serve a sweep and a
plan. A configuration that raises (it does not fit, a format the device lacks) is not stored:
a resumed plan runs it again (these fail before simulating anything). Workers are the sweep's
(`accelsim.explore.run.worker_pool`: forked where there is fork), and write
the store themselves (SQLite's WAL journal takes one writer at a time).

NB: the key names the workload and hardware, not the contents of their files or the version
of the model: after changing either, start a new file (as for a sweep's store).
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from accelsim.errors import AccelsimError
from accelsim.explore.grid import point_key
from accelsim.explore.run import check_workers, worker_pool
from accelsim.explore.store import ResumeStore
from accelsim.run import run_simulation
from accelsim.sim.knobs import make_config

Request = tuple[str, str, dict[str, Any]]  # (workload, hardware, knobs)
T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True)
class Failure:
    """A configuration that raised `AccelsimError` instead of giving a record."""

    message: str


class Evaluator:
    """Simulates a plan's configurations with `run` (`run(config, detail=False).record`),
    `workers` at a time, reading and keeping records in the store at `resume` (a path, or
    None: no store). The store opens on first use; `close()` closes it."""

    def __init__(self, run: Callable[..., Any] = run_simulation, workers: int = 1,
                 resume: str | os.PathLike[str] | None = None) -> None:
        check_workers(workers)
        if resume is not None and not isinstance(resume, str | os.PathLike):
            raise AccelsimError(f"resume {resume!r}: a path to an SQLite file")
        self.run, self.workers = run, workers
        self.resume = None if resume is None else Path(resume)
        self.simulated = 0  # configurations run by this evaluator (its workers included)
        self.resumed = 0  # records read from the store instead
        self._store: ResumeStore | None = None
        self._pool: ProcessPoolExecutor | None = None
        self._done: dict[str, dict[str, Any]] | None = None

    # ------------------------------------------------------------------ one at a time

    def record(self, workload: str, hardware: str, knobs: dict[str, Any]) -> dict[str, Any]:
        """The record of one configuration: from the store, else simulated (and stored).
        Raises what `make_config` and `run` raise."""
        key = self._key(workload, hardware, knobs)
        if self._pool is not None:
            raise RuntimeError("record() while this evaluator's workers run: use records()")
        done = self._stored()
        if key is not None and key in done:
            self.resumed += 1
            return done[key]
        cfg = make_config(workload, hardware, **knobs)
        self.simulated += 1  # NB: counted when run, as a plan counts what it tried
        record = self.run(cfg, detail=False).record
        if key is not None and self._store is not None:
            self._store.put(key, record)
            done[key] = record
        return record

    def outcome(self, request: Request) -> dict[str, Any] | Failure:
        """`record(*request)`, an `AccelsimError` as a `Failure`."""
        try:
            return self.record(*request)
        except AccelsimError as err:
            return Failure(str(err))

    # ------------------------------------------------------------------ many at once

    def records(self, requests: Sequence[Request]) -> list[dict[str, Any] | Failure]:
        """The outcome of each request, in order; `workers` processes at a time."""
        if self.workers == 1:
            return [self.outcome(r) for r in requests]
        results = self.map(_outcome_task, [(self.spec(), r) for r in requests])
        for _, (simulated, resumed) in results:
            self.simulated += simulated
            self.resumed += resumed
        self._done = None  # the workers stored theirs: read the store again when next asked
        return [outcome for outcome, _ in results]

    def map(self, task: Callable[[T], U], items: Sequence[T]) -> list[U]:
        """`task(item)` for each item, in order: in this process with one worker, else in
        `workers` processes (`task` and the items must pickle: a module-level function)."""
        if self.workers == 1:
            return [task(item) for item in items]
        try:
            pickle.dumps((task, self.run))
        except (pickle.PicklingError, AttributeError, TypeError) as err:
            raise AccelsimError(f"workers {self.workers}: the plan's run function does not "
                                f"pickle ({err}); use one worker") from None
        if self._pool is None:
            self._stored()  # the store made here, so that workers opening it find it made
            self._close_store()  # NB: an open SQLite connection must not cross a fork
            # started once, kept until close(): a plan maps many small waves
            self._pool = worker_pool(self.workers)
        futures = [self._pool.submit(task, item) for item in items]
        try:
            return [f.result() for f in futures]
        except BrokenProcessPool:
            self.close()
            raise AccelsimError("a plan worker process died (out of memory?); the records "
                                "finished before it are kept in the resume store, if "
                                "any") from None

    def spec(self) -> tuple[Any, str | None]:
        """What a worker needs to make its own one-process evaluator (`from_spec`)."""
        return (self.run, None if self.resume is None else str(self.resume))

    def close(self) -> None:
        """Close the store and stop the worker processes (if started)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._close_store()

    def _close_store(self) -> None:
        if self._store is not None:
            self._store.close()
        self._store, self._done = None, None

    # ------------------------------------------------------------------ internals

    def _key(self, workload: Any, hardware: str, knobs: dict[str, Any]) -> str | None:
        if self.resume is None:
            return None
        if not isinstance(workload, str):
            raise AccelsimError("resume: a plan keeps its records by the workload's name; "
                                "give the workload as a name or path, not a Scenario object")
        return point_key(workload, str(hardware), knobs)

    def _stored(self) -> dict[str, dict[str, Any]]:
        if self.resume is None:
            return {}
        if self._store is None:
            self._store = ResumeStore(self.resume, table="records")
        if self._done is None:
            self._done = self._store.finished()
        return self._done


def resumed_notes(plan: Any, resume: str | os.PathLike[str] | None) -> list[str]:
    """The note a plan carries when some of its simulations were read back from `resume`."""
    if not plan.resumed:
        return []
    return [f"{plan.resumed} of the {plan.simulated} simulations read back from the resume "
            f"store {resume} (run before; delete the file to run them again)"]


def from_spec(spec: tuple[Any, str | None]) -> Evaluator:
    """A one-process evaluator from `Evaluator.spec()` (what a worker runs with)."""
    run, resume = spec
    return Evaluator(run, 1, resume)


def _outcome_task(item: tuple[tuple[Any, str | None], Request]
                  ) -> tuple[dict[str, Any] | Failure, tuple[int, int]]:
    spec, request = item
    ev = from_spec(spec)
    try:
        return ev.outcome(request), (ev.simulated, ev.resumed)
    finally:
        ev.close()
