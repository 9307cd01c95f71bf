"""The requests a decoder server sees: drawn (Poisson arrivals, length distributions) or read
from a trace file of (arrival, prompt, output) rows.

    req = draw_requests(10_000, rate_per_s=5.0, prompt=512, output=128, dist="uniform",
                        context=4096, seed=0)
    req = read_requests("trace.csv", context=4096)   # header: arrival_s,prompt_tokens,output_tokens

A trace may also be in Vidur's format (microsoft/vidur, data/processed_traces/*.csv, read by
its trace request generator): `arrived_at,num_prefill_tokens,num_decode_tokens`, the same
three quantities (seconds, prompt tokens, output tokens) under Vidur's names.

Lengths: "fixed" (every request the mean), "uniform" (whole numbers from 1 to 2 x mean - 1,
whose mean is the mean) or "exponential" (rounded up, mean about the mean), clipped to the
model's context (a prompt keeps room for one output token).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

from accelsim.errors import AccelsimError, ConfigError
from accelsim.llm.engine import Requests
from accelsim.numbers import is_float_text, is_int_text, shown
from accelsim.tomlfiles import read_text_file

LENGTH_DISTS = ("fixed", "uniform", "exponential")
TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
# Vidur's name of each of TRACE_COLUMNS.
VIDUR_COLUMNS = {"arrived_at": "arrival_s", "num_prefill_tokens": "prompt_tokens",
                 "num_decode_tokens": "output_tokens"}
MAX_TRACE_ROWS = 10_000_000
# NB: the largest trace file read: 10 million rows of about 50 bytes.
MAX_TRACE_BYTES = 1 << 29
# NB: the latest arrival read, 1e9 s (~30 years): at 1e308 s the run's time spans overflowed
# (energy per token came out infinite).
MAX_ARRIVAL_S = 1e9


def draw_requests(n: int, rate_per_s: float | None, prompt: int, output: int, dist: str,
                  context: int, seed: int) -> Requests:
    """`n` requests: Poisson arrivals at `rate_per_s`, lengths from `dist` around the means.
    `rate_per_s` None: the lengths only (arrivals inf, for closed-loop clients to send), the
    same as at any rate with this seed."""
    if dist not in LENGTH_DISTS:
        raise AccelsimError(f"knob 'length_dist' = {dist!r}: choose one of "
                            f"{', '.join(LENGTH_DISTS)}")
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / (rate_per_s or 1.0), n)  # drawn either way: same lengths
    arrival = np.cumsum(gaps) if rate_per_s is not None else np.full(n, np.inf)

    def lengths(mean: int) -> np.ndarray:
        if dist == "fixed":
            return np.full(n, mean, dtype=int)
        if dist == "uniform":
            return rng.integers(1, 2 * mean, n)
        return np.maximum(np.ceil(rng.exponential(mean, n)), 1).astype(int)

    p = np.minimum(lengths(prompt), context - 1)
    o = np.minimum(lengths(output), context - p)
    return Requests(arrival, p, o)


def read_requests(path: str | Path, context: int) -> Requests:
    """Requests from a CSV trace with the header `TRACE_COLUMNS` (or Vidur's names of them,
    `VIDUR_COLUMNS`), one request per row, in arrival order. Bad rows raise ConfigError
    naming the file, the row's field (as the file names it) and value."""
    text = read_text_file(path, MAX_TRACE_BYTES)
    try:
        table = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as err:
        raise AccelsimError(f"{path}: cannot read the request trace: {err}") from None
    header = [h.strip() for h in table[0]] if table else []
    said = {c: c for c in TRACE_COLUMNS}  # our column -> the file's name of it, for errors
    if sorted(header) == sorted(VIDUR_COLUMNS):
        header = [VIDUR_COLUMNS[h] for h in header]
        said = {ours: theirs for theirs, ours in VIDUR_COLUMNS.items()}
    if not table[1:] or sorted(header) != sorted(TRACE_COLUMNS):
        raise ConfigError(path, "<header>", sorted(header), f"expected the columns "
                          f"{', '.join(TRACE_COLUMNS)} (or Vidur's "
                          f"{', '.join(VIDUR_COLUMNS)}) and at least one row")
    rows = []
    for i, cells in enumerate(table[1:], start=2):  # line numbers: the header is line 1
        if len(cells) != len(header):
            raise ConfigError(path, f"line {i}", ",".join(cells)[:80], f"has {len(cells)} "
                              f"cells; the header has {len(header)}")
        rows.append(dict(zip(header, cells, strict=True)))
    if len(rows) > MAX_TRACE_ROWS:
        raise ConfigError(path, "<rows>", len(rows), f"at most {MAX_TRACE_ROWS:,} requests")
    arrival, prompt, output = [], [], []
    last = 0.0
    for i, row in enumerate(rows, start=2):  # line numbers: the header is line 1
        t = _number(path, i, said["arrival_s"], row["arrival_s"], float)
        if t > MAX_ARRIVAL_S:
            raise ConfigError(str(path), f"line {i} {said['arrival_s']}",
                              row["arrival_s"].strip()[:40],
                              f"at most {MAX_ARRIVAL_S:g} s (a trace of about 30 years)")
        if t < last:
            raise ConfigError(path, f"line {i} {said['arrival_s']}", t, "before the previous "
                              f"row's {last:g} s: rows must be in arrival order")
        p = _number(path, i, said["prompt_tokens"], row["prompt_tokens"], int)
        o = _number(path, i, said["output_tokens"], row["output_tokens"], int)
        if p < 1 or o < 1 or p + o > context:
            raise ConfigError(path, f"line {i} {said['prompt_tokens']}", (p, o),
                              "needs prompt >= 1, output >= 1 and "
                              f"prompt + output <= the context of {context:,}")
        arrival.append(t)
        prompt.append(p)
        output.append(o)
        last = t
    return Requests(np.array(arrival), np.array(prompt), np.array(output))


def _number(path: str | Path, line: int, field: str, text: str | None, kind: type) -> float:
    ok = is_int_text if kind is int else is_float_text
    if text is None or not ok(text):
        raise ConfigError(str(path), f"line {line} {field}", shown(text)[1:-1],
                          f"not {kind.__name__} (ASCII digits, no '_')")
    value = kind(text.strip())
    if not math.isfinite(value) or value < 0:
        raise ConfigError(str(path), f"line {line} {field}", shown(text)[1:-1],
                          "must be finite and >= 0")
    return value
