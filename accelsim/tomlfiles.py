"""Reading data files: a file's text (anything but a readable UTF-8 regular file is a
`DataFileError` naming it), its TOML parsed once per process for each text, and a built-in
data file found by name. The profile readers (`accelsim.profiles`) and the scenario reader
(`accelsim.workload.scenario`) read through here; `accelsim.schema` checks what they read.
"""

from __future__ import annotations

import copy
import stat
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

from accelsim.datafiles import builtin_files
from accelsim.errors import DataFileError, UnknownNameError

# NB: the largest data file accepted; every profile and scenario is a few kB.
MAX_FILE_BYTES = 1 << 20


def read_text_file(path: str | Path) -> str:
    """The UTF-8 text of a regular file. Anything else (missing, a directory, a FIFO or
    device, too long a name, too large, not UTF-8, unreadable) is a ConfigError naming the
    path; a FIFO is rejected before it is opened, so it cannot hang the reader."""
    path = Path(path)

    def bad(problem: str) -> DataFileError:
        # NB: a name too long for the file system is cut in the message, not in the check.
        return DataFileError(str(path)[:300], problem)

    try:
        info = path.stat()
    except FileNotFoundError:
        raise bad("no such file") from None
    except OSError as err:  # ENAMETOOLONG, ELOOP, EACCES, ...
        raise bad(f"cannot be read: {err.strerror or err}") from None
    if stat.S_ISDIR(info.st_mode):
        raise bad("is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise bad("is not a regular file (a pipe, socket or device)")
    if info.st_size > MAX_FILE_BYTES:
        raise bad(f"is {info.st_size:,} bytes; data files are at most {MAX_FILE_BYTES:,}")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise bad(f"is not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise bad(f"cannot be read: {err.strerror or err}") from None


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
    user file by path (a Path, or a string ending in .toml)."""
    if isinstance(name_or_path, Path) or str(name_or_path).endswith(".toml"):
        return Path(name_or_path)
    files = builtin_files("hw_profiles", pattern)
    if name_or_path not in files:
        raise UnknownNameError(what, str(name_or_path), list(files))
    return files[name_or_path]
