"""CSV text that a spreadsheet reads as data: every CSV accelsim writes from a table goes
through `csv_text`.

    csv_text(frame)   # a name "=HYPERLINK(...)" is written "'=HYPERLINK(...)"

A text cell that begins with = + - @ (or a tab or carriage return) is a formula to Excel,
LibreOffice and Google Sheets (CSV injection); such a cell is written with a leading
apostrophe, which the spreadsheets show as text and hide. Numbers are left as they are (a
negative number is a number), and so is every other cell.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def as_text(value: Any) -> Any:
    """`value`, with an apostrophe before it if it is a string a spreadsheet would run."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(frame: pd.DataFrame, **kw: Any) -> str:
    """`frame.to_csv(index=False, **kw)` with its formula-like text cells made text."""
    text_columns = [c for c in frame.columns
                    if not pd.api.types.is_numeric_dtype(frame[c].dtype)]
    risky = [c for c in text_columns if frame[c].map(lambda v: as_text(v) is not v).any()]
    if risky:
        frame = frame.copy()
        for c in risky:
            frame[c] = frame[c].map(as_text)
    return frame.to_csv(index=False, **kw)
