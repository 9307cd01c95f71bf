"""Where the built-in data lives: `hw_profiles/` and `workloads/` at the top of the repo,
installed as the data packages `accelsim.hw_profiles` and `accelsim.workloads` (setup.py)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parent.parent


def data_root(folder: str) -> Path:
    """Directory of the built-in data folder `folder` ("hw_profiles" or "workloads")."""
    in_repo = _REPO_ROOT / folder
    if in_repo.is_dir():
        return in_repo
    return Path(str(resources.files(f"accelsim.{folder}")))


def builtin_files(folder: str, pattern: str = "**/*.toml") -> dict[str, Path]:
    """Map name (file stem) -> path for every data file under `folder` matching `pattern`."""
    return {p.stem: p for p in sorted(data_root(folder).glob(pattern))}
