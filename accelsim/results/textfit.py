"""Terminal text that fits a terminal: lines of at most `WIDTH` columns.

    wrap_lines(["  bottleneck   communication: the gradient all-reduce is not hidden ..."])
    # ["  bottleneck   communication: the gradient all-reduce is not hidden behind ...",
    #  "               backward (11% of accelerator time lost to stalls)"]
    text_table(["name", "peak_tflops"], [["a100", "624.0"]], right={1})
    frame_table(df)          # a DataFrame as such a table, pandas' own number formatting

A summary line ("  label        value") wraps with a hanging indent under its value; a table
puts a long header's unit or last word on a second header line, then, still too wide, splits
into blocks of columns, each repeating the first column (as pandas does, without the
backslashes).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

WIDTH = 100
GAP = "  "
_LABEL = re.compile(r"^( *\S+(?: \S+)* {2,})\S")  # "  all-reduce   " before the value
_NUMBER = re.compile(r"^-?[\d.,]+(e[+-]?\d+)?[kMGTP]?%?$")
_COLUMN = 15  # a summary line's value starts here: "  energy parts " (label, 12, space)


def wrap_line(line: str, width: int = WIDTH) -> list[str]:
    """`line` cut at spaces into lines of at most `width` columns (a word longer than the line
    stays whole), the continuations indented under the value of a "label   value" line, else
    four columns deeper than the line's own indent ("#   " under a "# " comment)."""
    if len(line) <= width:
        return [line]
    if line.startswith("# "):  # a comment header (nccl-tests'): its continuations stay comments
        return textwrap.wrap(line, width, subsequent_indent="#   ", break_long_words=False,
                             break_on_hyphens=False) or [line]
    label = _LABEL.match(line)
    own = len(line) - len(line.lstrip(" "))
    if label and len(label.group(1)) <= width // 3:
        hang = len(label.group(1))
    elif own == 2 and line[_COLUMN - 1] == " " and line[_COLUMN - 2] != " ":
        hang = _COLUMN
    else:
        hang = own + 4
    return textwrap.wrap(line, width, subsequent_indent=" " * hang, break_long_words=False,
                         break_on_hyphens=False) or [line]


def wrap_lines(lines: Iterable[str], width: int = WIDTH) -> list[str]:
    """Every line of `lines` (each may hold newlines) wrapped by `wrap_line`."""
    return [part for text in lines for line in text.split("\n")
            for part in wrap_line(line, width)]


def _two_lines(header: str) -> tuple[str, str]:
    """A header over two lines, split at the space or underscore that makes the wider of
    the two the narrowest ("memory_bandwidth_gb_s" -> "memory", "bandwidth_gb_s")."""
    cuts = [m.start() for m in re.finditer(r"[ _]", header)]
    if not cuts:
        return header, ""
    best = min(cuts, key=lambda c: max(c, len(header) - c - 1))
    return header[:best], header[best + 1:]


def _block(headers: list[tuple[str, str]], rows: list[list[str]], right: set[int],
           cols: list[int], gap: str = GAP) -> list[str]:
    widths = {i: max(len(headers[i][0]), len(headers[i][1]), *(len(r[i]) for r in rows))
              for i in cols}

    def line(values: dict[int, str]) -> str:
        return gap.join(values[i].rjust(widths[i]) if i in right else values[i].ljust(widths[i])
                        for i in cols).rstrip()

    out = [line({i: headers[i][0] for i in cols})]
    if any(headers[i][1] for i in cols):
        out.append(line({i: headers[i][1] for i in cols}))
    out.append(line({i: "-" * widths[i] for i in cols}))
    return out + [line(dict(enumerate(r))) for r in rows]


def _cut(text: str, n: int) -> str:
    """`text` in at most `n` characters, "..." in place of its middle when longer (the tail
    kept longer: "encoder.layer.11.fc1" -> "enc...layer.11.fc1")."""
    if len(text) <= n:
        return text
    head = (n - 3) // 3
    return text[:head] + "..." + text[len(text) - (n - 3 - head):]


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
               right: Iterable[int] = (), width: int = WIDTH, shrink: int | None = None,
               min_shrunk: int = 16) -> list[str]:
    """The rows under their headers, columns two spaces apart, numbers (`right`) right-aligned,
    at most `width` columns where the cells allow: the cells of column `shrink` (names) are
    cut in the middle down to `min_shrunk` characters, long headers go over two lines, then
    the columns split into blocks that each repeat the first column, a blank line between."""
    rows = [[str(c) for c in r] for r in rows]
    right = set(right)
    one = [(h, "") for h in headers]
    every = list(range(len(headers)))
    lines = _block(one, rows, right, every)
    if max(map(len, lines), default=0) <= width:
        return lines
    lines = _block(one, rows, right, every, " ")  # one space apart, as pandas prints
    over = max(map(len, lines), default=0) - width
    if over > 0 and shrink is not None and rows:
        wide = max(len(r[shrink]) for r in rows)
        keep = max(min_shrunk, len(headers[shrink]), wide - over)
        rows = [[_cut(c, keep) if i == shrink else c for i, c in enumerate(r)] for r in rows]
        lines = _block(one, rows, right, every, " ")
    if max(map(len, lines), default=0) <= width:
        return lines
    two = [_two_lines(h) if len(h) > max((len(r[i]) for r in rows), default=0) else (h, "")
           for i, h in enumerate(headers)]
    cols_left = list(range(1, len(headers)))
    blocks: list[list[str]] = []
    while cols_left or not blocks:
        cols = [0]
        while cols_left:
            trial = _block(two, rows, right, cols + [cols_left[0]])
            if len(cols) > 1 and max(map(len, trial)) > width:
                break
            cols.append(cols_left.pop(0))
        blocks.append(_block(two, rows, right, cols))
    return [line for i, b in enumerate(blocks) for line in ([""] if i else []) + b]


def frame_table(frame: Any, width: int = WIDTH) -> list[str]:
    """A DataFrame (no index) by `text_table`: each column's cells as pandas prints them,
    numbers right-aligned, text left-aligned, missing values blank."""
    import pandas as pd

    headers = [str(c) for c in frame.columns]
    cols, right = [], set()
    for i, c in enumerate(frame.columns):
        series = frame[c]
        if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
            right.add(i)
        text = series.to_string(index=False).split("\n") if len(series) else []
        cells = ["" if not ok else t.strip() for t, ok in zip(text, series.notna(), strict=True)]
        if any(cells) and all(_NUMBER.match(c) for c in cells if c):  # "1.23G", "786.94k"
            right.add(i)
        cols.append(cells)
    rows = [list(r) for r in zip(*cols, strict=True)] if cols else []
    return text_table(headers, rows, right, width)


def figure_cell(value: Any, scale: float | None) -> str:
    """One table cell: "-" for None, text as it is (`scale` None), a number times `scale` with
    thousands separators from 1,000, else 4 significant digits."""
    if value is None:
        return "-"
    if scale is None:
        return str(value)
    x = value * scale
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"
