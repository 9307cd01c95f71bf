"""Flat event records: one per read, preparation, transfer, kernel step, collective, stall or
request. The simulation appends plain tuples (cheap), and `Recorder.frame()` turns them into
one pandas DataFrame that metrics, plots, reports and the Chrome trace all read.

Columns (SI units):
- resource: what was busy or waiting ("storage", "host_cpu", "pcie", "network", "nvlink",
  "accel0", ...); one Chrome-trace track per resource;
- kind: what happened ("read", "prep", "h2d", "compute", "allreduce", "stall_fetch",
  "stall_prep", "stall_transfer", "stall_sync" (waiting for the slowest device's
  gradients), "stall_comm", "request", "batch", ...);
  "batch_read", "batch_prep", "batch_transfer" (training: where one batch waited for and
  sat in each loader stage, on resource "loader<d>"; residence, not busy time);
- start_s, end_s: simulated time;
- step: training step or served batch index (-1 when not tied to one);
- device: accelerator index (-1 for shared resources);
- samples: samples carried; bytes: bytes moved; energy_j: energy spent (0 if not costed);
- detail: free text (file id, request id, phase).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

COLUMNS = ("resource", "kind", "start_s", "end_s", "step", "device", "samples", "bytes",
           "energy_j", "detail")
STALL_KINDS = ("stall_fetch", "stall_prep", "stall_transfer", "stall_sync", "stall_comm")
RESIDENCE_KINDS = ("batch_read", "batch_prep", "batch_transfer")


@dataclass
class Recorder:
    """Collects records during one simulation run. Not thread-safe; one per run."""

    rows: list[tuple] = field(default_factory=list)

    def add(self, resource: str, kind: str, start_s: float, end_s: float, step: int = -1,
            device: int = -1, samples: int = 0, n_bytes: float = 0.0, energy_j: float = 0.0,
            detail: str = "") -> None:
        """Record one interval [start_s, end_s] on `resource`."""
        if end_s < start_s:
            raise ValueError(f"record ends before it starts: {kind} on {resource}")
        self.rows.append((resource, kind, start_s, end_s, step, device, samples, n_bytes,
                          energy_j, detail))

    def frame(self) -> pd.DataFrame:
        """All records as one DataFrame (columns `COLUMNS`), with a `duration_s` column."""
        df = pd.DataFrame(self.rows, columns=list(COLUMNS))
        df["duration_s"] = df["end_s"] - df["start_s"]
        return df
