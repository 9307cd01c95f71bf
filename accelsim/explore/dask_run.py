"""A sweep's points on a Dask cluster, in chunks, surviving lost and hung workers.

    chunks = on_dask(cleanup, "tcp://host:8786", workload, model, todo, fallback,
                     point_timeout_s=300.0)   # an iterator of Chunks, as they finish

The points go in chunks of up to MAX_CHUNK (a task costs the scheduler about a millisecond),
at most DASK_AHEAD chunks per worker thread at a time, so a chunk starts soon after it is
submitted and new workers get work as they join. Three faults, three rules:

- a worker lost mid-sweep: Dask runs its chunks again on the others (a chunk whose workers
  keep dying fails: its points are rows with the error);
- a chunk not finished within its deadline (`point_timeout_s` a point, `deadline_s`): it is
  cancelled and submitted once more (Dask may place it on another worker); late again, its
  points are rows with the error "timed out after N s on the Dask cluster ...";
- no worker left for DASK_LOST_S: the points not finished are rows with that error and the
  sweep finishes.

Those rows come as `Unfinished` chunks: the sweep returns them but does not store them in the
resume store, so a resumed sweep runs those points again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from accelsim.errors import AccelsimError
from accelsim.explore import run as _run
from accelsim.explore.grid import Point
from accelsim.numbers import is_int_text, shown
from accelsim.workload.scenario import Scenario

CHUNKS_PER_SLOT = 8  # chunks per worker thread in the whole sweep, enough to balance points
MAX_CHUNK = 16  # points per chunk at most
DASK_AHEAD = 2  # chunks in flight per worker thread: one running, one ready behind it
DASK_TRIES = 2  # a chunk late once is submitted again; late twice, its points fail
# NB: the slowest single runs benchmarks/results/ records take seconds (a 10,000-request
# TP-2 LLM serving run 4.3 s, a whole ImageNet epoch on dgx-a100 1.2 s); 300 s a point is
# ~70x past them, so a chunk that late is hung (or its machine far too loaded), not slow.
DASK_POINT_TIMEOUT_S = 300.0
DASK_WAIT_S = 60.0  # how long to wait for a Dask cluster to have a worker
DASK_LOST_S = 60.0  # how long a sweep waits with no worker left before its points fail
DASK_POLL_S = 1.0  # how often a sweep asks the scheduler for its workers and checks deadlines
DASK_IDLE_S = 0.02  # NB: the wait between looks for a finished chunk (a point takes longer)
NOT_STORED = "not stored: a resumed sweep runs it again"


class Unfinished(list[tuple[int, dict[str, Any]]]):  # a Chunk
    """A chunk of failed rows for points that did not finish on the cluster (timed out, their
    workers lost): returned in the frame, never stored in the resume store."""


def deadline_s(point_timeout_s: float, points: int) -> float:
    """A chunk's deadline, seconds from its submission: `point_timeout_s` for each of its
    `points`, times DASK_AHEAD (NB: it may wait behind one chunk on its worker thread)."""
    return point_timeout_s * points * DASK_AHEAD


def check_timeout(point_timeout_s: Any) -> float:
    """`point_timeout_s` as a float: a finite number of seconds above 0 (AccelsimError)."""
    if isinstance(point_timeout_s, bool) or not isinstance(point_timeout_s, int | float) \
            or not math.isfinite(point_timeout_s) or point_timeout_s <= 0:
        raise AccelsimError(f"point timeout {shown(point_timeout_s)}: a number of seconds "
                            "above 0")
    return float(point_timeout_s)


def chunked(todo: list[Point], slots: int) -> list[list[Point]]:
    """`todo` in chunks of at most MAX_CHUNK points, about CHUNKS_PER_SLOT per worker thread."""
    size = max(1, min(MAX_CHUNK, len(todo) // (slots * CHUNKS_PER_SLOT)))
    return [todo[i:i + size] for i in range(0, len(todo), size)]


def on_dask(cleanup: contextlib.ExitStack, scheduler: Any, workload: str | Scenario,
            model: str, todo: list[Point], fallback: bool,
            point_timeout_s: float = DASK_POINT_TIMEOUT_S) -> Iterator[_run.Chunk]:
    """Chunks of rows from a Dask cluster (an address or a `distributed.Client`), as they
    finish; the points that did not finish come as `Unfinished` chunks."""
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
    run = _DaskSweep(client, scheduler, workload, model, fallback, point_timeout_s)
    cleanup.callback(run.cancel)
    return run.chunks(todo)


@dataclasses.dataclass
class _Task:
    """A chunk in flight: its future, when it was submitted (monotonic s), its try."""

    points: list[Point]
    future: Any
    submitted_s: float
    tries: int


class _DaskSweep:
    """One sweep's chunks on one client: submits them DASK_AHEAD per worker thread, watches
    their deadlines and the workers, yields their rows."""

    def __init__(self, client: Any, scheduler: Any, workload: str | Scenario, model: str,
                 fallback: bool, point_timeout_s: float) -> None:
        self.client, self.scheduler = client, scheduler
        self.workload, self.model, self.fallback = workload, model, fallback
        self.point_timeout_s = point_timeout_s
        self.running: dict[str, _Task] = {}  # future key -> task

    def cancel(self) -> None:
        """Cancel every chunk still in flight (the sweep ended or was interrupted)."""
        if self.running:
            self.client.cancel([t.future for t in self.running.values()])
            self.running.clear()

    def _submit(self, points: list[Point], tries: int, finished: Any) -> None:
        # NB: run_points is looked up at each submission (a test may replace it)
        future = self.client.submit(_run.run_points, self.workload, self.model, points,
                                    self.fallback, pure=False)
        self.running[future.key] = _Task(points, future, time.monotonic(), tries)
        finished.add(future)

    def _failed(self, points: list[Point], why: str) -> Unfinished:
        return Unfinished((p.index, _run.failed_row(why, self.model, p)) for p in points)

    def _slots(self) -> int:
        """Worker threads the cluster has now (0: no worker)."""
        return sum(self.client.nthreads().values())

    def chunks(self, todo: list[Point]) -> Iterator[_run.Chunk]:
        """The chunks' rows as they finish, then the unfinished ones' failed rows."""
        from distributed import as_completed

        try:
            yield from self._chunks(todo, as_completed([], loop=self.client.loop))
        except AccelsimError:
            raise
        except Exception as err:  # noqa: BLE001 - the scheduler lost, a comm error
            raise AccelsimError(f"Dask scheduler {self.scheduler}: {type(err).__name__}: "
                                f"{err}; the points finished before it are kept in the "
                                "resume store, if any") from None

    def _chunks(self, todo: list[Point], finished: Any) -> Iterator[_run.Chunk]:
        slots = self._slots()
        queue = deque(chunked(todo, max(1, slots)))
        checked_s = workers_seen_s = time.monotonic()
        while queue or self.running:
            while queue and len(self.running) < DASK_AHEAD * slots:
                self._submit(queue.popleft(), 1, finished)
            if finished.has_ready():
                for future in finished.next_batch(block=False):
                    task = self.running.pop(future.key, None)
                    if task is not None:  # None: one this sweep cancelled
                        yield self._outcome(task)
            else:
                time.sleep(DASK_IDLE_S)
            now = time.monotonic()
            if now - checked_s < DASK_POLL_S:
                continue
            slots = self._slots()
            if slots:
                workers_seen_s = now
            else:  # NB: a chunk's deadline does not run while the cluster has no worker
                for task in self.running.values():
                    task.submitted_s += now - checked_s
            checked_s = now
            if now - workers_seen_s > DASK_LOST_S:
                yield from self._all_lost(queue)
                return
            yield from self._overdue(now, finished)

    def _outcome(self, task: _Task) -> _run.Chunk:
        """A finished chunk's rows. A task never raises for a point (errors are rows): an
        exception is the worker's, and fails the sweep, except KilledWorker."""
        from distributed import KilledWorker

        try:
            return task.future.result()  # type: ignore[no-any-return]
        except KilledWorker:
            return self._failed(task.points, "not finished: each Dask worker that ran it died "
                                "(KilledWorker: out of memory?); " + NOT_STORED)
        except Exception as err:  # noqa: BLE001 - a worker's failure (not installed, lost)
            raise AccelsimError(f"a sweep worker failed: {type(err).__name__}: {err}; the "
                                "points finished before it are kept in the resume store, if "
                                "any") from None

    def _overdue(self, now: float, finished: Any) -> Iterator[Unfinished]:
        """Cancel each chunk past its deadline: submit it again, or, on its last try, yield
        its points' failed rows."""
        for key, task in list(self.running.items()):
            limit_s = deadline_s(self.point_timeout_s, len(task.points))
            if now - task.submitted_s <= limit_s:
                continue
            del self.running[key]
            # NB: Dask cannot stop a running thread: a hung point keeps its worker thread
            # until it returns, and its result is dropped.
            self.client.cancel([task.future])
            if task.tries < DASK_TRIES:
                self._submit(task.points, task.tries + 1, finished)
            else:
                yield self._failed(task.points, (
                    f"timed out after {limit_s:g} s on the Dask cluster, {task.tries} times "
                    f"({len(task.points)} points in the chunk, {self.point_timeout_s:g} s a "
                    f"point, x{DASK_AHEAD} for the chunk ahead on its worker); " + NOT_STORED))

    def _all_lost(self, queue: deque[list[Point]]) -> Iterator[Unfinished]:
        """Every point not finished, as failed rows: the cluster has had no worker for
        DASK_LOST_S."""
        why = (f"not finished: every Dask worker of {self.scheduler} was lost and none joined "
               f"in {DASK_LOST_S:g} s; " + NOT_STORED)
        left = [t.points for t in self.running.values()] + list(queue)
        self.cancel()
        queue.clear()
        for points in left:
            yield self._failed(points, why)


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
