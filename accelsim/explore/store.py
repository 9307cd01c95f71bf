"""The resume store of a sweep: one SQLite file holding every finished point's row.

    with ResumeStore("sweep.sqlite") as store:
        done = store.finished(keys)          # key -> row, for the keys already stored
        store.put(key, row)                  # committed before it returns
        store.damaged                        # key -> why its stored row was not taken

Each point is committed on its own as soon as it finishes (WAL journal), so a sweep killed at
any moment, SIGKILL included, loses no finished point; rerunning it with the same file skips
them. The file is a cache keyed by point (`accelsim.explore.grid.point_key`), so one file can
serve several sweeps, and a sweep that grows reuses the points it shares with an earlier one.
A stored row that is not one a sweep wrote (JSON `null`, a negative or infinite figure: a
file edited or damaged by hand) is not taken as a result: its point is run again, its row
replaced, and `damaged` says why.

NB: the key names the workload and hardware, not the contents of their files or the version
of the model: after changing either, start a new file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from accelsim.errors import AccelsimError
from accelsim.results.files import check_output_path

SCHEMA_VERSION = 1
_TABLES = """
CREATE TABLE IF NOT EXISTS accelsim_sweep (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points (
    key TEXT PRIMARY KEY,      -- accelsim.explore.grid.point_key
    row TEXT NOT NULL,         -- the point's row, JSON
    pid INTEGER NOT NULL,      -- the process that stored it
    finished_unix_s REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
    key TEXT PRIMARY KEY,      -- a plan's configuration (accelsim.explore.evaluate)
    row TEXT NOT NULL,         -- its result record, JSON
    pid INTEGER NOT NULL,
    finished_unix_s REAL NOT NULL
);
"""
TABLES = ("points", "records")  # a sweep's rows; a plan's records
PARQUET = (".parquet", ".pq")
# Row columns that are figures: a number there is from 0 to MAX_FIGURE (or NaN: not
# applicable). NB: 1e30 is past any figure a run gives (FLOPs of the largest model at the
# largest batch are ~1e25); beyond it a row was edited or damaged.
MAX_FIGURE = 1e30
_FIGURE_ENDS = ("_s", "_per_s", "_j", "_w", "_bytes", "_per_j", "_per_sample", "utilization",
                "mfu", "offered_load", "largest_batch_that_fits")


def _json_object(text: str, what: str) -> tuple[dict | None, str | None]:
    """(the JSON object in `text`, None) or (None, why it is not one)."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError) as err:
        return None, f"not JSON ({str(err)[:80]})"
    if not isinstance(value, dict):
        return None, f"not a {what} but {type(value).__name__ if value is not None else 'null'}"
    return value, None


def record_damage(text: str) -> str | None:
    """Why a stored plan record's JSON `text` is not a record a plan wrote (None: it is one):
    not a JSON object, or no `hardware` section."""
    record, why = _json_object(text, "record")
    if record is None:
        return why
    return None if isinstance(record.get("hardware"), dict) else "no hardware section"


def damage(text: str) -> str | None:
    """Why a stored row's JSON `text` is not a row a sweep wrote (None: it is one): not a
    JSON object (`null`, a list), no hardware, or a figure that is negative or infinite."""
    row, why = _json_object(text, "row")
    if row is None:
        return why
    if not isinstance(row.get("hardware"), str):
        return "no hardware"
    for k, v in row.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            continue
        if (k.endswith(_FIGURE_ENDS) or k.startswith("stall_")) and not (
                v != v or 0 <= v <= MAX_FIGURE):  # NaN: not applicable
            return f"{k} = {v!r}"
    return None


class ResumeStore:
    """An open resume store at `path` (created if missing), holding a sweep's rows (`table`
    "points") or a plan's records ("records"). Not shared between threads."""

    def __init__(self, path: str | os.PathLike[str], table: str = "points") -> None:
        if table not in TABLES:
            raise ValueError(f"table {table!r}: one of {TABLES}")
        self.table = table
        self._damage = damage if table == "points" else record_damage
        self.path = Path(path)
        self.damaged: dict[str, str] = {}  # key -> why its stored row was not taken
        if self.path.suffix.lower() in PARQUET:
            raise AccelsimError(
                f"--resume {self.path}: Parquet is not supported as a resume store (a Parquet "
                "file cannot take one point at a time without being rewritten); use a SQLite "
                "file such as sweep.sqlite, and --csv for the table")
        check_output_path(self.path, "--resume")  # a pipe would hang SQLite's first read
        try:
            self._db = sqlite3.connect(self.path, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            # NB: NORMAL in WAL mode: a commit survives the process being killed; only a power
            # cut may lose the last commits.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._check_schema()
        except sqlite3.Error as err:
            raise AccelsimError(f"--resume {self.path}: not a usable sweep store "
                                f"(SQLite): {err}") from None

    def _check_schema(self) -> None:
        tables = {name for (name,) in self._db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "accelsim_sweep" not in tables:
            raise AccelsimError(f"--resume {self.path}: an SQLite file that is not a sweep "
                                f"store (it has tables {', '.join(sorted(tables))})")
        with self._db:
            self._db.executescript(_TABLES)
            self._db.execute("INSERT OR IGNORE INTO accelsim_sweep VALUES ('schema', ?)",
                             (str(SCHEMA_VERSION),))
        (version,) = self._db.execute(
            "SELECT value FROM accelsim_sweep WHERE name = 'schema'").fetchone()
        if version != str(SCHEMA_VERSION):
            raise AccelsimError(f"--resume {self.path}: a sweep store of schema {version}; "
                                f"this accelsim reads schema {SCHEMA_VERSION}: start a new file")

    def finished(self, keys: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """The stored rows by key: of `keys` only, or all of them."""
        try:
            stored = self._db.execute(f"SELECT key, row FROM {self.table}").fetchall()
        except sqlite3.Error as err:
            raise AccelsimError(f"--resume {self.path}: cannot read: {err}") from None
        wanted = None if keys is None else set(keys)
        rows = {}
        for key, text in stored:
            if wanted is not None and key not in wanted:
                continue
            why = self._damage(text)
            if why is None:
                rows[key] = json.loads(text)
            else:
                self.damaged[key] = why
        return rows

    def put(self, key: str, row: dict[str, Any]) -> None:
        """Store one finished point and commit; a key already stored is left as it is, unless
        its row was damaged (`damaged`): it is replaced."""
        verb = "REPLACE" if key in self.damaged else "IGNORE"
        try:
            with self._db:
                self._db.execute(f"INSERT OR {verb} INTO {self.table} VALUES (?, ?, ?, ?)",
                                 (key, json.dumps(row), os.getpid(), time.time()))
        except sqlite3.Error as err:
            raise AccelsimError(f"--resume {self.path}: cannot store a point: {err}") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ResumeStore:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
