"""Point functions for the Dask fault tests (tests/cli/test_sweep_dask_faults.py): stand-ins
for `accelsim.explore.run.run_points` that are slow or hang. Module-level, so a Dask worker
process unpickles them by name; each calls the real `run_points` for its rows."""

from __future__ import annotations

import time
from typing import Any

from accelsim.explore.run import run_points

SLOW_S = 0.25  # a slow point's extra seconds
HANG_BATCH = 5  # the batch whose point hangs
HANG_S = 6.0  # how long it hangs: past a 1 s point timeout twice (2 s a chunk, x2 tries)


def slow_run_points(workload: Any, model: str, points: list[Any], fallback: bool = True,
                    ) -> Any:
    """`run_points`, SLOW_S seconds a point slower (the same rows)."""
    time.sleep(SLOW_S * len(points))
    return run_points(workload, model, points, fallback)


def hanging_run_points(workload: Any, model: str, points: list[Any], fallback: bool = True,
                       ) -> Any:
    """`run_points`, but a chunk holding the point of batch HANG_BATCH sleeps HANG_S first."""
    if any(p.knobs.get("batch") == HANG_BATCH for p in points):
        time.sleep(HANG_S)
    return run_points(workload, model, points, fallback)
