"""A table as named, read-only numpy columns of one length: the hot path's form of the work
table and of a class model's cost rows.

    work = Columns.of(work_frame)      # a DataFrame or a Columns (then itself)
    flops = work["flops"]              # an ndarray, not a Series
    len(work)                          # rows, as for a DataFrame

A DataFrame's column costs some 20-25 us to take (a Series is built each time); an array's
well under 1 us, and a device estimate takes a hundred or more. A class model or a helper
reads columns as arrays (`np.asarray(table[name], dtype=...)` serves a DataFrame too), so
either form may be passed; the estimate's result (`DeviceEstimate.layers`) stays a
DataFrame, built once from these.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd


def as_column(values: Any) -> np.ndarray:
    """`values` as a read-only 1-D array (a sequence of tuples as an object array of tuples)."""
    if isinstance(values, np.ndarray) and values.ndim == 1 and not values.flags.writeable:
        return values  # already one (a column of another table)
    if isinstance(values, pd.Series | pd.Index):
        array = values.to_numpy()
    elif isinstance(values, np.ndarray):
        array = values
    else:
        items = list(values)
        array = np.asarray(items) if not items or not isinstance(items[0], tuple | list) else None
        if array is None or array.ndim != 1:
            array = np.empty(len(items), dtype=object)
            array[:] = items
    if array.ndim != 1:
        raise ValueError(f"a column must be 1-D, not of shape {array.shape}")
    view = array.view()
    view.flags.writeable = False
    return view


class Columns:
    """Named 1-D arrays of one length (`len` = rows; iteration gives the names, in order).
    Immutable: `assign` returns a new table; the arrays are read-only views."""

    __slots__ = ("_data", "_rows")

    def __init__(self, data: Mapping[str, Any]) -> None:
        arrays = {name: as_column(values) for name, values in data.items()}
        lengths = {len(a) for a in arrays.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        self._data = arrays
        self._rows = lengths.pop() if lengths else 0

    def joined(self, columns: Mapping[str, Any]) -> Columns:
        """A new table with `columns` added after these or, where a name is taken, in its
        place."""
        return Columns({**self._data, **columns})

    @classmethod
    def of(cls, table: Columns | pd.DataFrame | Mapping[str, Any]) -> Columns:
        """`table` as Columns: itself if it is one, a DataFrame's columns (its index dropped)."""
        if isinstance(table, Columns):
            return table
        if isinstance(table, pd.DataFrame):
            return cls({name: table[name] for name in table.columns})
        return cls(table)

    def __getitem__(self, name: str) -> np.ndarray:
        return self._data[name]

    def get(self, name: str, default: Any = None) -> Any:
        """The column `name`, or `default` where there is none."""
        return self._data.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return self._rows

    def __repr__(self) -> str:
        return f"Columns({self._rows} rows: {', '.join(self._data)})"

    @property
    def columns(self) -> tuple[str, ...]:
        """The column names, in order."""
        return tuple(self._data)

    def assign(self, **columns: Any) -> Columns:
        """A new table with `columns` added or replaced (a replaced column keeps its place)."""
        return self.joined(columns)

    def take(self, rows: np.ndarray) -> Columns:
        """The rows selected by a boolean mask or an array of positions, in that order."""
        return Columns({name: a[rows] for name, a in self._data.items()})

    def to_frame(self, index: Iterable[Any] | None = None) -> pd.DataFrame:
        """The table as a DataFrame (a default RangeIndex unless `index` is given)."""
        return pd.DataFrame(dict(self._data), index=None if index is None else index)


Table = Columns | pd.DataFrame  # what a class model or helper takes as a table


def is_in(values: np.ndarray, names: frozenset[str] | set[str]) -> np.ndarray:
    """Boolean mask of the entries of an object (string) column that are among `names`
    (`Series.isin` for an array; `np.isin` sorts object arrays, this is one set lookup each)."""
    return np.fromiter((v in names for v in values), dtype=bool, count=len(values))
