"""Where the built-in data lives: `hw_profiles/` and `workloads/` at the top of the repo,
installed inside the package as `accelsim/hw_profiles` and `accelsim/workloads` (setup.py)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


@lru_cache(maxsize=8)  # where the package lives does not move while it runs
def data_root(folder: str) -> Path:
    """Directory of the built-in data folder `folder` ("hw_profiles" or "workloads"): the
    repo's when running from a checkout, else the installed copy inside the package."""
    in_repo = _PACKAGE_DIR.parent / folder
    if in_repo.is_dir() and (_PACKAGE_DIR.parent / "pyproject.toml").is_file():
        return in_repo
    return _PACKAGE_DIR / folder


def builtin_files(folder: str, pattern: str = "**/*.toml") -> dict[str, Path]:
    """Map name (file stem) -> path for every data file under `folder` matching `pattern`.
    Globbed once per process while the folders it covers are unchanged (a file added or
    removed changes its folder's mtime, and the folder is globbed anew)."""
    root = data_root(folder)
    return dict(_globbed(root, pattern, _folder_stamps(root, pattern)))


def _folder_stamps(root: Path, pattern: str) -> tuple[int, ...]:
    """The mtimes (ns) of the folders `pattern` lists files of."""
    base = root.joinpath(*[part for part in pattern.split("/")[:-1] if "*" not in part])
    folders = [base, *(p for p in base.iterdir() if p.is_dir())] if "**" in pattern else [base]
    try:
        return tuple(f.stat().st_mtime_ns for f in folders)
    except OSError:  # NB: a folder that is gone: globbed anew (finding nothing)
        return ()


@lru_cache(maxsize=64)
def _globbed(root: Path, pattern: str, _stamps: tuple[int, ...]) -> tuple[tuple[str, Path], ...]:
    return tuple((p.stem, p) for p in sorted(root.glob(pattern)))
