"""Is this host busy with other work while it is calibrated? Judged from what calibration
measures anyway, by a pure function of the samples (so it is tested on injected timings).

    load = assess_load(cores=2, load_1m=1.4, blas_rates=rates, cpu_over_wall=[0.97, 0.5],
                       spreads=[0.02, 0.4])
    load.busy, load.reasons, load.text()

Four signals, each with its threshold (NB: thresholds chosen on this project's shared 2-vCPU
VM, where one other process on one core slows numpy's 2-thread BLAS 10-40x):
- the 1-minute load average before calibration starts, per CPU (`os.getloadavg`);
- BLAS scaling: the in-cache GEMM's rate per thread at every core over its rate on one
  (`peak.sustained_rates`): a core held by another process stalls every thread at each sync;
- CPU time over wall time of single-threaded cases (vector and stream ops): below 1 the process
  waited for a core;
- the spread of each case's repeated timings, (max - least) / least.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

BUSY_LOAD_PER_CPU = 0.5  # NB: other work holding half the CPUs on average, before we start
BUSY_BLAS_SCALING = 0.6  # NB: all-thread GEMM rate per thread below 60% of one thread's
BUSY_CPU_OVER_WALL = 0.85  # NB: a single-threaded case given under 85% of a core
BUSY_SPREAD = 0.15  # NB: repeated timings of a case differing by more than 15% (median)


@dataclass(frozen=True)
class HostLoad:
    """What the signals said (None: not measured) and whether the host was busy (`reasons`)."""

    cores: int
    load_1m: float | None
    blas_scaling: float | None
    cpu_over_wall: float | None
    spread_median: float | None
    spread_worst: float | None
    reasons: tuple[str, ...] = field(default=())

    @property
    def busy(self) -> bool:
        return bool(self.reasons)

    def text(self) -> str:
        """One line: busy or idle, and why."""
        figures = "; ".join(
            f"{name} {fmt.format(v)}" for name, fmt, v in (
                ("load", "{:.2f}", self.load_1m), ("BLAS scaling", "{:.0%}", self.blas_scaling),
                ("CPU/wall", "{:.0%}", self.cpu_over_wall),
                ("spread median", "{:.0%}", self.spread_median)) if v is not None)
        if self.busy:
            return f"busy host ({'; '.join(self.reasons)})"
        return f"idle host ({figures})" if figures else "idle host (no signal measured)"

    def as_dict(self) -> dict[str, Any]:
        return {"busy": self.busy, "reasons": list(self.reasons), "cores": self.cores,
                "load_1m": self.load_1m, "blas_scaling": self.blas_scaling,
                "cpu_over_wall": self.cpu_over_wall, "spread_median": self.spread_median,
                "spread_worst": self.spread_worst}


def load_average_1m() -> float | None:
    """The 1-minute load average (None where the OS has none)."""
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):
        return None


def blas_scaling(rates: dict[str, float], cores: int) -> float | None:
    """The all-core GEMM rate per thread over the one-thread rate (`peak.sustained_rates`
    names; None without both, or on one core)."""
    one, every = rates.get("numpy_1_thread"), rates.get(f"numpy_{cores}_threads")
    if cores < 2 or not one or not every:
        return None
    return float(every / cores / one)


def spread(samples_s: list[float]) -> float:
    """(max - least) / least of one case's repeated times (0 for one sample)."""
    least = min(samples_s)
    return float((max(samples_s) - least) / least) if least > 0 else 0.0


def assess_load(cores: int, load_1m: float | None = None, blas_rates: dict[str, float] | None
                = None, cpu_over_wall: list[float] | None = None,
                spreads: list[float] | None = None) -> HostLoad:
    """Judge the host from the signals given (module docstring; each optional)."""
    scaling = blas_scaling(blas_rates or {}, cores)
    ratio = float(np.median(cpu_over_wall)) if cpu_over_wall else None
    spread_median = float(np.median(spreads)) if spreads else None
    reasons = []
    if load_1m is not None and load_1m / max(cores, 1) > BUSY_LOAD_PER_CPU:
        reasons.append(f"load average {load_1m:.2f} on {cores} CPUs before calibrating")
    if scaling is not None and scaling < BUSY_BLAS_SCALING:
        reasons.append(f"numpy's GEMM on {cores} threads ran at {scaling:.0%} of its "
                       "one-thread rate per thread: another process holds a core")
    if ratio is not None and ratio < BUSY_CPU_OVER_WALL:
        reasons.append(f"single-threaded cases got {ratio:.0%} of a core (CPU time over "
                       "wall time)")
    if spread_median is not None and spread_median > BUSY_SPREAD:
        reasons.append(f"repeated timings of a case differ by {spread_median:.0%} (median)")
    return HostLoad(cores=cores, load_1m=load_1m, blas_scaling=scaling, cpu_over_wall=ratio,
                    spread_median=spread_median,
                    spread_worst=float(max(spreads)) if spreads else None,
                    reasons=tuple(reasons))
