"""Where the built-in data lives: `hw_profiles/` and `workloads/` at the top of the repo,
installed inside the package as `accelsim/hw_profiles` and `accelsim/workloads` (setup.py)."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_root(folder: str) -> Path:
    """Directory of the built-in data folder `folder` ("hw_profiles" or "workloads"): the
    repo's when running from a checkout, else the installed copy inside the package."""
    in_repo = _PACKAGE_DIR.parent / folder
    if in_repo.is_dir() and (_PACKAGE_DIR.parent / "pyproject.toml").is_file():
        return in_repo
    return _PACKAGE_DIR / folder


def builtin_files(folder: str, pattern: str = "**/*.toml") -> dict[str, Path]:
    """Map name (file stem) -> path for every data file under `folder` matching `pattern`."""
    return {p.stem: p for p in sorted(data_root(folder).glob(pattern))}
