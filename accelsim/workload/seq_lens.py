"""Sequence lengths of a transformer inference run (`--seq-len-dist`): a file of measured
lengths or a named spread, read once into a picklable `SeqLens`, and the batches they form.

    lens = read_seq_lens("tests/fixtures/squad_lengths.txt")    # one length per line
    lens = read_seq_lens("uniform:64:384")                        # 64..384, evenly spaced
    batches(lens.lengths, 8)                                      # (n_batches, 8) int array

A file holds one whole number per line, or is a CSV whose header names a `seq_len`, `length`,
`num_tokens` or `tokens` column (a tokenizer's output, a trace's prompt lengths); blank lines
and lines starting `#` are skipped. `uniform:MIN:MAX[:N]` is N (default 1,000) lengths spread
evenly from MIN to MAX in a fixed shuffled order, so a run stays a pure function of it.
Batches are formed in the given order (a data loader without length bucketing), the list
repeated to fill the last batch.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import numpy as np

from accelsim.errors import AccelsimError
from accelsim.numbers import is_int_text, shown
from accelsim.physical import MAX_INPUT
from accelsim.tomlfiles import read_text_file

COLUMNS = ("seq_len", "length", "num_tokens", "tokens")
MAX_LENGTHS = 1_000_000  # lengths in one distribution: more is a dataset, not a spread
DEFAULT_SPREAD_N = 1000
SPREAD_SEED = 0


@dataclass(frozen=True)
class SeqLens:
    """Measured or spread sequence lengths (tokens), and where they came from."""

    source: str
    lengths: tuple[int, ...]

    def summary(self) -> dict[str, float | int | str]:
        """Source, count, mean, median, 99th percentile and largest length (tokens)."""
        a = np.asarray(self.lengths, dtype=float)
        return {"source": self.source, "sequences": len(a), "mean": float(a.mean()),
                "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
                "max": int(a.max())}


def _bad(spec: str, problem: str) -> AccelsimError:
    return AccelsimError(f"knob 'seq_len_dist' = {shown(spec)}: {problem}")


def _check(spec: str, values: list[int]) -> tuple[int, ...]:
    if not values:
        raise _bad(spec, "no lengths in it")
    if len(values) > MAX_LENGTHS:
        raise _bad(spec, f"{len(values):,} lengths; at most {MAX_LENGTHS:,}")
    low, high = min(values), max(values)
    if low < 1 or high > MAX_INPUT:
        raise _bad(spec, f"a length of {low if low < 1 else high:,} tokens; lengths run from 1 "
                         f"to {MAX_INPUT:,}")
    return tuple(values)


def _spread(spec: str) -> SeqLens:
    parts = spec.split(":")[1:]
    if len(parts) not in (2, 3) or not all(is_int_text(p) for p in parts):
        raise _bad(spec, "a spread is uniform:MIN:MAX or uniform:MIN:MAX:N (whole numbers)")
    low, high, n = (int(p) for p in (*parts, DEFAULT_SPREAD_N)[:3])
    if not 1 <= low <= high or not 1 <= n <= MAX_LENGTHS:
        raise _bad(spec, f"needs 1 <= MIN <= MAX and 1 <= N <= {MAX_LENGTHS:,}")
    values = np.rint(np.linspace(low, high, n)).astype(int)
    # NB: in a fixed shuffled order (seed 0), as a loader without length bucketing draws a
    # dataset's samples; sorted, each batch would hold neighbours and need no padding
    order = np.random.default_rng(SPREAD_SEED).permutation(n)
    return SeqLens(spec, _check(spec, values[order].tolist()))


def _from_csv(spec: str, text: str) -> list[int]:
    reader = csv.DictReader(io.StringIO(text))
    names = {(n or "").strip().lower(): n for n in reader.fieldnames or []}
    column = next((names[c] for c in COLUMNS if c in names), None)
    if column is None:
        raise _bad(spec, f"a CSV needs a column named one of {', '.join(COLUMNS)}")
    out = []
    for line, row in enumerate(reader, start=2):
        cell = (row.get(column) or "").strip()
        if not is_int_text(cell):
            raise _bad(spec, f"line {line}: {column} {shown(cell)} is not a whole number")
        out.append(int(cell))
    return out


def read_seq_lens(spec: str) -> SeqLens:
    """The lengths `spec` names: `uniform:MIN:MAX[:N]` or a file (see the module docstring).
    Bad input raises `AccelsimError` naming the file, line and value."""
    if spec.startswith("uniform:"):
        return _spread(spec)
    text = read_text_file(spec)
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    if lines and not is_int_text(lines[0]):
        return SeqLens(spec, _check(spec, _from_csv(spec, text)))
    values = []
    for ln in lines:
        if not is_int_text(ln):
            raise _bad(spec, f"{shown(ln)} is not a whole number (one length per line, or a "
                             f"CSV with a {COLUMNS[0]} column)")
        values.append(int(ln))
    return SeqLens(spec, _check(spec, values))


def batches(lengths: tuple[int, ...], batch: int) -> np.ndarray:
    """The lengths as whole batches in their order, (n_batches, batch): the list is repeated
    to fill the last batch (a loader that cycles its data)."""
    a = np.asarray(lengths, dtype=np.int64)
    n = -(-len(a) // batch)
    return np.resize(a, n * batch).reshape(n, batch)


def length_grid(lengths: np.ndarray, points: int = 24) -> list[int]:
    """The lengths to estimate at: the smallest and the largest needed, and multiples of a
    step of 8 tokens or more between them, at most `points` + 2 in all. A length in between
    is interpolated (NB: linear between points at most max/points apart; a GEMM's time is
    linear in tokens and attention's quadratic term varies little over one step)."""
    low, high = int(lengths.min()), int(lengths.max())
    step = 8 * max(1, -(-high // (8 * points)))
    inner = range(step * (low // step + 1), high, step)
    return sorted({low, *inner, high})
