"""Records -> Chrome trace (Trace Event Format), which opens in Perfetto and chrome://tracing.

    write_chrome_trace(result.records, "serve.json")   # one track per resource

Each record becomes one "X" (complete) event with `ts` and `dur` in microseconds on the track
of its resource; "M" (metadata) events name the process and every track. Tracks keep the
order in which resources first appear in the records.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from accelsim.errors import AccelsimError
from accelsim.results.files import write_atomic
from accelsim.results.records import COLUMNS

US_PER_S = 1e6
PID = 1
_ARGS = ("step", "device", "samples", "bytes", "energy_j", "detail")


def _plain(value: Any) -> Any:
    """A JSON-ready scalar (numpy numbers to Python; non-finite floats to None)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def chrome_trace(records: pd.DataFrame, process_name: str = "accelsim") -> dict[str, Any]:
    """The trace as a dict ({"traceEvents": [...], "displayTimeUnit": "ms"})."""
    missing = [c for c in COLUMNS if c not in records]
    if missing:
        raise AccelsimError(f"cannot export a trace: records lack columns {missing}")
    resources = list(dict.fromkeys(records["resource"].astype(str)))
    tid = {name: i + 1 for i, name in enumerate(resources)}
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "args": {"name": process_name}}]
    for name, t in tid.items():
        events.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": t,
                       "args": {"name": name}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": t,
                       "args": {"sort_index": t}})
    start_s = records["start_s"].to_numpy(dtype=float)
    ts_us = (start_s * US_PER_S).tolist()
    dur_us = ((records["end_s"].to_numpy(dtype=float) - start_s) * US_PER_S).tolist()
    args_cols = [records[c].tolist() for c in _ARGS]
    for i, (res, kind) in enumerate(zip(records["resource"].astype(str).tolist(),
                                        records["kind"].astype(str).tolist(), strict=True)):
        args = {c: _plain(col[i]) for c, col in zip(_ARGS, args_cols, strict=True)}
        events.append({"name": kind, "cat": kind, "ph": "X", "ts": ts_us[i], "dur": dur_us[i],
                       "pid": PID, "tid": tid[res], "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(records: pd.DataFrame, path: str | Path,
                       process_name: str = "accelsim") -> Path:
    """Write the Chrome trace of `records` to `path` (JSON); returns the path."""
    path = Path(path)
    trace = chrome_trace(records, process_name)
    text = json.dumps(trace, separators=(",", ":"), allow_nan=False)  # C encoder: fast
    return write_atomic(path, text)
