"""Reading data files: a file's bytes or text (anything but a readable regular file within
its size cap, or UTF-8 text, is a `DataFileError` naming it; `read_file_bytes` is the one
reader of every input file), its TOML parsed once per process for each text, and a built-in
data file found by name. The profile readers (`accelsim.profiles`) and the scenario reader
(`accelsim.workload.scenario`) read through here; `accelsim.schema` checks what they read.
"""

from __future__ import annotations

import copy
import os
import stat
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

from accelsim.datafiles import builtin_files
from accelsim.errors import AccelsimError, DataFileError, UnknownNameError
from accelsim.numbers import shown

# NB: the largest data file accepted; every profile and scenario is a few kB.
MAX_FILE_BYTES = 1 << 20
# NB: the largest table of measurements read (validate's CSV, the calibration references):
# 64 MiB, 100x the largest reference file (0.6 MB).
MAX_TABLE_BYTES = 1 << 26


def open_input_file(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> int:
    """A read-only descriptor of the regular file at `path` (symlinks followed) of at most
    `max_bytes`; the caller closes it. Anything else (missing, a directory, a FIFO, socket or
    device such as /dev/zero, too long a name, too large, unreadable) is a DataFileError naming
    the path. A FIFO is refused before it is opened, and the file is opened without blocking
    and checked again by its descriptor, so neither a FIFO nor a file swapped in between can
    hang the reader."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise _bad(path, "no such file") from None
    except (OSError, ValueError) as err:  # ENAMETOOLONG, ELOOP, EACCES, a NUL in the name
        raise _bad(path, f"cannot be read: {getattr(err, 'strerror', None) or err}") from None
    _check_regular(path, info.st_mode, info.st_size, max_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as err:
        raise _bad(path, f"cannot be read: {err.strerror or err}") from None
    try:
        info = os.fstat(fd)
        _check_regular(path, info.st_mode, info.st_size, max_bytes)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file_bytes(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file at `path` (opened by `open_input_file`), at most
    `max_bytes` of them: a file that grows past the cap while read is refused too.

    Every input file is read through here: profiles and scenarios, ONNX models and their
    external data, SCALE-Sim configurations and topologies, request traces, measurement CSVs."""
    fd = open_input_file(path, max_bytes)
    chunks, total = [], 0
    try:
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 24, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as err:
        raise _bad(Path(path), f"cannot be read: {err.strerror or err}") from None
    finally:
        os.close(fd)
    if total > max_bytes:
        raise _bad(Path(path), f"grew past {max_bytes:,} bytes while read")
    return b"".join(chunks)


def read_text_file(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file (read by `read_file_bytes`); text that is not UTF-8
    is a DataFileError naming the path and the byte."""
    data = read_file_bytes(path, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _bad(Path(path), f"is not UTF-8 text (byte {err.start})") from None


def _bad(path: Path, problem: str) -> DataFileError:
    # NB: a name too long for the file system is cut in the message, not in the check.
    return DataFileError(str(path)[:300], problem)


def _check_regular(path: Path, mode: int, size_bytes: int, max_bytes: int) -> None:
    if stat.S_ISDIR(mode):
        raise _bad(path, "is a directory, not a file")
    if not stat.S_ISREG(mode):
        raise _bad(path, "is not a regular file (a pipe, socket or device)")
    if size_bytes > max_bytes:
        what = "data files are" if max_bytes == MAX_FILE_BYTES else "this file is"
        raise _bad(path, f"is {size_bytes:,} bytes; {what} at most {max_bytes:,}")


def read_toml(path: Path) -> dict[str, Any]:
    """Parse `path` (read by `read_text_file`); a malformed file is a ConfigError naming it.
    Parsed once per process for each text (a fresh copy returned), so a sweep re-reading a
    profile at every point pays the parse once and an edited file is read anew."""
    return parse_toml_text(str(path), read_text_file(path))


def parse_toml_text(source: str, text: str) -> dict[str, Any]:
    """`text` (the file `source`) parsed, a fresh copy of the one parse per text."""
    return copy.deepcopy(_parsed_toml(source, text))


@lru_cache(maxsize=512)
def _parsed_toml(source: str, text: str) -> dict[str, Any]:
    # NB: keyed by the file's whole text rather than its mtime: a file rewritten within the
    # file system's timestamp resolution is never served stale, for the cost of reading it.
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DataFileError(source, f"not valid TOML: {exc}") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise DataFileError(source, f"not valid TOML: {exc}") from None
    except RecursionError:
        raise DataFileError(source, "not valid TOML: nested too deeply") from None


def find_profile(name_or_path: str | Path, pattern: str, what: str) -> Path:
    """A built-in profile by name (file stem under hw_profiles/ matching `pattern`) or a
    user file by path (a Path, or a string ending in .toml); another type is an error."""
    if isinstance(name_or_path, os.PathLike) and not isinstance(name_or_path, Path):
        name_or_path = Path(os.fspath(name_or_path))
    if not isinstance(name_or_path, str | Path) or not str(name_or_path).strip():
        got = (repr(name_or_path) if isinstance(name_or_path, str)
               else f"{type(name_or_path).__name__} {shown(name_or_path)}")
        raise AccelsimError(f"{what}: give a name or a .toml path, not {got}")
    if isinstance(name_or_path, Path) or name_or_path.endswith(".toml"):
        return Path(name_or_path)
    files = builtin_files("hw_profiles", pattern)
    if name_or_path not in files:
        raise UnknownNameError(what, str(name_or_path), list(files))
    return files[name_or_path]
