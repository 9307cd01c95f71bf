"""Writing output files so that nothing is ever half-written: into a temporary file beside the
target, flushed to disk, then renamed over it (atomic on POSIX). A crash or a kill leaves the
old file or the new one, never a mix; an existing file is replaced only when the new one is
complete. A symlink at the target is replaced by the file, never written through.

    write_atomic("run.json", text)           # str or bytes
    folder = output_folder(out, "--out")     # created; "" or a path under a file refused
    with atomic_path("fig.png") as tmp: fig.savefig(tmp)   # for writers that take a path
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from accelsim.errors import AccelsimError


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it is renamed to `path`. The
    temporary keeps the target's suffix, so writers that pick a format by it still do."""
    path = Path(path)
    check_output_path(path)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}",
                                        dir=path.parent if str(path.parent) else ".")
    except OSError as err:
        raise AccelsimError(f"cannot write {path}: {err.strerror or err}") from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give what open() would
        os.replace(tmp, path)
    except OSError as err:
        raise AccelsimError(f"cannot write {path}: {err.strerror or err}") from None
    finally:
        tmp.unlink(missing_ok=True)


def check_output_path(path: Path, what: str = "cannot write") -> None:
    """Raise AccelsimError ("<what> <path>: why") when `path` cannot be a file we write: a
    directory, a pipe or device, a name too long, a folder that is missing or not a folder."""
    try:
        info = path.stat()
    except FileNotFoundError:
        info = None
    except OSError as err:  # ENAMETOOLONG, ENOTDIR, ELOOP, EACCES
        raise AccelsimError(f"{what} {_short(path)}: {err.strerror or err}") from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise AccelsimError(f"{what} {_short(path)}: it is a directory")
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise AccelsimError(f"{what} {_short(path)}: not a regular file (a pipe or device)")
    if not path.parent.is_dir():
        raise AccelsimError(f"{what} {_short(path)}: no such folder '{_short(path.parent)}'")


def output_folder(path: str | Path, what: str) -> Path:
    """The folder `path` for output files, created with its parents; AccelsimError ("<what>
    <path>: why", one line) for an empty path (which would be the current folder), a path
    that is a file or lies under one, or a folder that cannot be made."""
    if not str(path).strip():
        raise AccelsimError(f"{what} '': give a folder (an empty path is not the current "
                            "folder)")
    path = Path(path)
    try:
        if path.exists() and not path.is_dir():
            raise AccelsimError(f"{what} {_short(path)}: is a file, not a folder")
        path.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as err:  # ENOTDIR (under a file), EACCES, ENAMETOOLONG, NUL
        raise AccelsimError(f"{what} {_short(path)}: cannot create the folder "
                            f"({getattr(err, 'strerror', None) or err})") from None
    return path


def _short(path: Path) -> str:
    # NB: a name too long for the file system is cut in the message, not in the check.
    return str(path)[:300]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write `data` (text as UTF-8) to `path` atomically; returns the path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return Path(path)
